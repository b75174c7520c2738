// mlx5 DC QPs (mlx5dv_create_qp with MLX5DV_QP_INIT_ATTR_MASK_DC), as
// rdma-core v44's libmlx5 and the kernel's mlx5_ib have them: DCIs
// (initiators) and DCTs (targets) are IBV_QPT_DRIVER QPs, a DCT receives
// into its SRQ and needs one, and each takes the state transitions and
// attribute masks mlx5_ib allows it. On one host, a DCI reaches any DCT
// through an AH, the DCT's number and its access key, given per WR with
// mlx5dv_wr_set_dc_addr: SENDs (with and without immediate), RDMA and
// atomics land as on RC, one batch may address several DCTs, and several
// DCIs one DCT. The errors are a ConnectX's: a wrong key goes unanswered
// (retries exhausted), a bad rkey or a WRITE the DCT does not allow fails
// the DCI and not the DCT, no receive with no RNR retries is an RNR error,
// and a WR without a DC address, a legacy ibv_post_send on a DCI or a DC
// address on an RC QP is refused before anything is sent.
#include <endian.h>
#include <string.h>
#include <unistd.h>

#include <chrono>
#include <set>
#include <string>

#include "devx_env.h"

namespace devx_it {
namespace {

constexpr uint64_t kKey = 0x1122334455667788;
constexpr uint64_t kOtherKey = 0x0badc0de0badc0de;
constexpr unsigned kRemoteAll =
    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
constexpr uint64_t kDciSendOps = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                                 IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                                 IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
                                 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
// The buffer (one MR, all remote rights): what is sent at kSend, 64 bytes
// a message; receive slots of kSlot bytes at kRecv; the memory the DCI
// writes, reads and adds to at kRemote; what reads and atomics bring back
// at kLocal.
constexpr uint32_t kSend = 0;
constexpr uint32_t kRecv = 4096;
constexpr uint32_t kSlot = 256;
constexpr uint32_t kRemote = 16384;
constexpr uint32_t kLocal = 24576;
constexpr uint32_t kBufSize = 32768;
constexpr uint8_t kUntouched = 0xaa;

// One completion of `cq`; false after 5 s without one.
bool Poll(ibv_cq* cq, ibv_wc* wc) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (int i = 0; std::chrono::steady_clock::now() < deadline; ++i) {
    const int n = ibv_poll_cq(cq, 1, wc);
    if (n == 1) return true;
    if (n < 0) return false;
    if (i > 1000) usleep(1);
  }
  return false;
}

// True when `cq` stays empty for 50 ms.
bool Quiet(ibv_cq* cq) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
  while (std::chrono::steady_clock::now() < deadline) {
    ibv_wc wc{};
    if (ibv_poll_cq(cq, 1, &wc) != 0) return false;
    usleep(100);
  }
  return true;
}

// A DCT with a CQ and an SRQ of its own: what it receives completes there.
struct Dct {
  ibv_qp* qp = nullptr;
  ibv_cq* cq = nullptr;
  ibv_srq* srq = nullptr;
};

mlx5dv_qp_init_attr DcInit(mlx5dv_dc_type type, uint64_t key = 0) {
  mlx5dv_qp_init_attr dv{};
  dv.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC;
  dv.dc_init_attr.dc_type = type;
  if (type == MLX5DV_DCTYPE_DCT) dv.dc_init_attr.dct_access_key = key;
  return dv;
}

class DcTest : public DevxTest {
 protected:
  void SetUp() override {
    DevxTest::SetUp();
    pd_ = ibv_alloc_pd(ctx_);
    ASSERT_NE(pd_, nullptr);
    dci_cq_ = NewCq();
    dci_srq_ = NewSrq();
    ASSERT_TRUE(dci_cq_ && dci_srq_) << strerror(errno);
    ASSERT_EQ(ibv_query_gid(ctx_, 1, 0, &gid_), 0);
    ibv_ah_attr av{};
    FillAv(&av);
    ah_ = ibv_create_ah(pd_, &av);
    ASSERT_NE(ah_, nullptr) << strerror(errno);
    buf_.assign(kBufSize, 0);
    mr_ = ibv_reg_mr(pd_, buf_.data(), buf_.size(), IBV_ACCESS_LOCAL_WRITE | kRemoteAll);
    ASSERT_NE(mr_, nullptr) << strerror(errno);
  }
  void TearDown() override {
    for (ibv_qp* qp : qps_) ibv_destroy_qp(qp);
    for (ibv_srq* srq : srqs_) ibv_destroy_srq(srq);
    for (ibv_cq* cq : cqs_) ibv_destroy_cq(cq);
    if (ah_) ibv_destroy_ah(ah_);
    if (mr_) ibv_dereg_mr(mr_);
    if (pd_) ibv_dealloc_pd(pd_);
    DevxTest::TearDown();
  }

  ibv_cq* NewCq() {
    ibv_cq* cq = ibv_create_cq(ctx_, 64, nullptr, nullptr, 0);
    if (cq) cqs_.push_back(cq);
    return cq;
  }
  ibv_srq* NewSrq() {
    ibv_srq_init_attr attr{};
    attr.attr.max_wr = 32;
    attr.attr.max_sge = 1;
    ibv_srq* srq = ibv_create_srq(pd_, &attr);
    if (srq) srqs_.push_back(srq);
    return srq;
  }

  // The path to this port: GID 0, global.
  void FillAv(ibv_ah_attr* av) const {
    av->is_global = 1;
    av->grh.dgid = gid_;
    av->grh.sgid_index = 0;
    av->grh.hop_limit = 64;
    av->port_num = 1;
  }

  // A DCI (sending on dci_cq_) as rdma-core's tests make one, with an SRQ.
  ibv_qp_init_attr_ex DciAttr() const {
    ibv_qp_init_attr_ex attr{};
    attr.qp_type = IBV_QPT_DRIVER;
    attr.send_cq = attr.recv_cq = dci_cq_;
    attr.srq = dci_srq_;
    attr.cap.max_send_wr = 64;
    attr.cap.max_send_sge = 1;
    attr.pd = pd_;
    attr.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    attr.send_ops_flags = kDciSendOps;
    return attr;
  }
  ibv_qp_init_attr_ex DctAttr(ibv_cq* cq, ibv_srq* srq) const {
    ibv_qp_init_attr_ex attr{};
    attr.qp_type = IBV_QPT_DRIVER;
    attr.send_cq = attr.recv_cq = cq;
    attr.srq = srq;
    attr.pd = pd_;
    attr.comp_mask = IBV_QP_INIT_ATTR_PD;
    return attr;
  }

  // mlx5dv_create_qp; the QP is destroyed at the end of the test.
  ibv_qp* Create(ibv_qp_init_attr_ex attr, mlx5dv_qp_init_attr dv) {
    errno = 0;
    ibv_qp* qp = mlx5dv_create_qp(ctx_, &attr, &dv);
    if (qp) qps_.push_back(qp);
    return qp;
  }

  // The errno of a creation that must fail (0 if it did not).
  int Refused(ibv_qp_init_attr_ex attr, mlx5dv_qp_init_attr dv) {
    errno = 0;
    ibv_qp* qp = mlx5dv_create_qp(ctx_, &attr, &dv);
    if (qp) {
      ibv_destroy_qp(qp);
      return 0;
    }
    return errno;
  }

  ibv_qp* NewDci() { return Create(DciAttr(), DcInit(MLX5DV_DCTYPE_DCI)); }

  // A DCT of `key` on a new CQ and SRQ, in RESET.
  Dct NewDctInReset(uint64_t key = kKey) {
    Dct d;
    d.cq = NewCq();
    d.srq = NewSrq();
    if (d.cq && d.srq) d.qp = Create(DctAttr(d.cq, d.srq), DcInit(MLX5DV_DCTYPE_DCT, key));
    return d;
  }

  // A DCT of `key` in RTR allowing `access` (no qp when that fails).
  Dct NewDct(unsigned access = kRemoteAll, uint64_t key = kKey) {
    Dct d = NewDctInReset(key);
    if (d.qp && !DctToRtr(d.qp, access)) d.qp = nullptr;
    return d;
  }

  // mlx5_ib's DCT: RESET->INIT with the access flags, INIT->RTR with the
  // RNR timer, the path and the MTU; that is as far as a DCT goes.
  bool DctToRtr(ibv_qp* dct, unsigned access) const {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = access;
    if (ibv_modify_qp(dct, &a,
                      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
      return false;
    }
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.min_rnr_timer = 1;
    a.path_mtu = IBV_MTU_1024;
    FillAv(&a.ah_attr);
    return ibv_modify_qp(dct, &a,
                         IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER | IBV_QP_AV | IBV_QP_PATH_MTU) == 0;
  }

  // mlx5_ib's DCI: RESET->INIT with the port, INIT->RTR with the MTU (no
  // path: each WR has its own), RTR->RTS with the requester's attributes.
  static bool DciToRts(ibv_qp* dci, uint8_t timeout = 14, uint8_t retry_cnt = 7,
                       uint8_t rnr_retry = 7) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    if (ibv_modify_qp(dci, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT)) return false;
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    if (ibv_modify_qp(dci, &a, IBV_QP_STATE | IBV_QP_PATH_MTU)) return false;
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = timeout;
    a.retry_cnt = retry_cnt;
    a.rnr_retry = rnr_retry;
    a.max_rd_atomic = 1;
    return ibv_modify_qp(dci, &a,
                         IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                             IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) == 0;
  }

  // A DCI in RTS (null when creating or connecting it fails).
  ibv_qp* NewDciInRts(uint8_t timeout = 14, uint8_t retry_cnt = 7, uint8_t rnr_retry = 7) {
    ibv_qp* dci = NewDci();
    return dci && DciToRts(dci, timeout, retry_cnt, rnr_retry) ? dci : nullptr;
  }

  static ibv_qp_state State(ibv_qp* qp) {
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    EXPECT_EQ(ibv_query_qp(qp, &attr, IBV_QP_STATE, &init), 0);
    return attr.qp_state;
  }

  uint8_t* At(uint32_t offset) { return buf_.data() + offset; }
  uint64_t Addr(uint32_t offset) { return reinterpret_cast<uintptr_t>(At(offset)); }

  // `msg` (without its NUL) as message `i` at kSend; its offset.
  uint32_t Stage(int i, const std::string& msg) {
    const uint32_t offset = kSend + 64 * i;
    memcpy(At(offset), msg.data(), msg.size());
    return offset;
  }

  // A receive into slot `slot` (its wr_id) on `srq`, the slot filled with
  // kUntouched first.
  bool PostRecv(ibv_srq* srq, uint32_t slot) {
    memset(At(kRecv + kSlot * slot), kUntouched, kSlot);
    ibv_sge sge{Addr(kRecv + kSlot * slot), kSlot, mr_->lkey};
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = slot;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    return ibv_post_srq_recv(srq, &wr, &bad) == 0;
  }

  // One ibv_wr_* batch on `qp`, its WRs signaled, built by build(qx, mx);
  // what ibv_wr_complete returns.
  template <typename Build>
  static int Batch(ibv_qp* qp, Build&& build) {
    ibv_qp_ex* qx = ibv_qp_to_qp_ex(qp);
    mlx5dv_qp_ex* mx = mlx5dv_qp_ex_from_ibv_qp_ex(qx);
    if (qx == nullptr || mx == nullptr) return -1;
    ibv_wr_start(qx);
    qx->wr_flags = IBV_SEND_SIGNALED;
    build(qx, mx);
    return ibv_wr_complete(qx);
  }

  // A SEND of `len` bytes at `offset` from `dci` to `dct` under `key`,
  // alone in its batch.
  int Send(ibv_qp* dci, const Dct& dct, uint32_t offset, uint32_t len, uint64_t wr_id,
           uint64_t key = kKey) {
    return Batch(dci, [&](ibv_qp_ex* qx, mlx5dv_qp_ex* mx) {
      qx->wr_id = wr_id;
      ibv_wr_send(qx);
      mlx5dv_wr_set_dc_addr(mx, ah_, dct.qp->qp_num, key);
      ibv_wr_set_sge(qx, mr_->lkey, Addr(offset), len);
    });
  }

  // The next completion of dci_cq_: a success of `opcode` for WR `wr_id`
  // of `dci`.
  void ExpectSent(ibv_qp* dci, uint64_t wr_id, ibv_wc_opcode opcode = IBV_WC_SEND) {
    ibv_wc wc{};
    ASSERT_TRUE(Poll(dci_cq_, &wc)) << "no completion of WR " << wr_id;
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    EXPECT_EQ(wc.opcode, opcode);
    EXPECT_EQ(wc.wr_id, wr_id);
    EXPECT_EQ(wc.qp_num, dci->qp_num);
  }

  // The next completion of dci_cq_: WR `wr_id` of `dci` failed with
  // `status`.
  void ExpectFailed(ibv_qp* dci, uint64_t wr_id, ibv_wc_status status) {
    ibv_wc wc{};
    ASSERT_TRUE(Poll(dci_cq_, &wc)) << "no completion of WR " << wr_id;
    EXPECT_EQ(wc.status, status) << ibv_wc_status_str(wc.status);
    EXPECT_EQ(wc.wr_id, wr_id);
    EXPECT_EQ(wc.qp_num, dci->qp_num);
  }

  // The next receive of `dct`: `msg` from `dci`, in its slot and nothing
  // past it; the completion in *out.
  void ExpectReceived(const Dct& dct, ibv_qp* dci, const std::string& msg, ibv_wc* out = nullptr) {
    ibv_wc wc{};
    ASSERT_TRUE(Poll(dct.cq, &wc)) << "DCT 0x" << std::hex << dct.qp->qp_num << " received nothing";
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    EXPECT_EQ(wc.opcode, IBV_WC_RECV);
    EXPECT_EQ(wc.qp_num, dct.qp->qp_num);
    EXPECT_EQ(wc.src_qp, dci->qp_num);
    EXPECT_EQ(wc.byte_len, msg.size());
    EXPECT_EQ(wc.wc_flags & IBV_WC_GRH, 0u) << "a DCT's receive has no GRH";
    ASSERT_LT(wc.wr_id, uint64_t{kRecv / kSlot});
    const uint8_t* slot = At(kRecv + kSlot * static_cast<uint32_t>(wc.wr_id));
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(slot), msg.size()), msg);
    for (size_t i = msg.size(); i < kSlot; ++i) {
      ASSERT_EQ(slot[i], kUntouched) << "byte " << i << " of the receive buffer was written";
    }
    if (out) *out = wc;
  }

  size_t QpCount() { return Status()["objects"]["qp"].get<size_t>(); }

  // Takes `qp` out of the fixture's hands (the test destroyed it).
  template <typename T>
  static void Forget(std::vector<T*>& v, T* p) {
    std::erase(v, p);
  }

  ibv_pd* pd_ = nullptr;
  ibv_cq* dci_cq_ = nullptr;
  ibv_srq* dci_srq_ = nullptr;
  ibv_gid gid_{};
  ibv_ah* ah_ = nullptr;
  std::vector<uint8_t> buf_;
  ibv_mr* mr_ = nullptr;
  std::vector<ibv_qp*> qps_;
  std::vector<ibv_srq*> srqs_;
  std::vector<ibv_cq*> cqs_;
};

// A DCI (with every verbs send operation, with an SRQ or without) and a
// DCT are made; both are IBV_QPT_DRIVER QPs, to ibv_query_qp too, start in
// RESET, and the DCI has the ibv_wr_* and mlx5dv_wr_* builders. The DCT's
// number, known from RTR on, is its own.
TEST_F(DcTest, DciAndDctAreDriverQps) {
  ibv_qp* dci = NewDci();
  ASSERT_NE(dci, nullptr) << strerror(errno);
  EXPECT_EQ(dci->qp_type, IBV_QPT_DRIVER);
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(ibv_query_qp(dci, &attr, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(init.qp_type, IBV_QPT_DRIVER);
  EXPECT_EQ(attr.qp_state, IBV_QPS_RESET);
  ibv_qp_ex* qx = ibv_qp_to_qp_ex(dci);
  ASSERT_NE(qx, nullptr);
  EXPECT_NE(mlx5dv_qp_ex_from_ibv_qp_ex(qx), nullptr);

  ibv_qp_init_attr_ex no_srq = DciAttr();
  no_srq.srq = nullptr;
  ibv_qp* plain = Create(no_srq, DcInit(MLX5DV_DCTYPE_DCI));
  ASSERT_NE(plain, nullptr) << strerror(errno);
  EXPECT_EQ(plain->qp_type, IBV_QPT_DRIVER);

  Dct dct = NewDctInReset();
  ASSERT_NE(dct.qp, nullptr) << strerror(errno);
  EXPECT_EQ(dct.qp->qp_type, IBV_QPT_DRIVER);
  EXPECT_EQ(State(dct.qp), IBV_QPS_RESET);
  // libmlx5 learns a DCT's number when it goes to RTR.
  ASSERT_TRUE(DctToRtr(dct.qp, kRemoteAll));
  EXPECT_NE(dct.qp->qp_num, 0u);
  EXPECT_NE(dct.qp->qp_num, dci->qp_num);
  EXPECT_NE(dct.qp->qp_num, plain->qp_num);
}

// What libmlx5 refuses of a DC QP, leaving no QP behind: a DCT without an
// SRQ or with send operations (EINVAL), DCI streams beyond the device's
// dci_streams_caps (EINVAL) or within them (EOPNOTSUPP: softverbs has
// none), a dc_type that is neither DCI nor DCT (EINVAL).
TEST_F(DcTest, CreationRefusesWhatDcDoesNotAllow) {
  ibv_cq* cq = NewCq();
  ibv_srq* srq = NewSrq();
  ASSERT_TRUE(cq && srq);
  const size_t before = QpCount();
  const mlx5dv_qp_init_attr dct = DcInit(MLX5DV_DCTYPE_DCT, kKey);
  EXPECT_EQ(Refused(DctAttr(cq, nullptr), dct), EINVAL);
  ibv_qp_init_attr_ex with_ops = DctAttr(cq, srq);
  with_ops.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  with_ops.send_ops_flags = IBV_QP_EX_WITH_SEND;
  EXPECT_EQ(Refused(with_ops, dct), EINVAL);

  mlx5dv_context caps{};
  caps.comp_mask = MLX5DV_CONTEXT_MASK_DCI_STREAMS;
  ASSERT_EQ(mlx5dv_query_device(ctx_, &caps), 0);
  const mlx5dv_dci_streams_caps& most = caps.dci_streams_caps;
  mlx5dv_qp_init_attr streams = DcInit(MLX5DV_DCTYPE_DCI);
  streams.comp_mask |= MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS;
  streams.dc_init_attr.dci_streams = {most.max_log_num_concurent, most.max_log_num_errored};
  EXPECT_EQ(Refused(DciAttr(), streams), EOPNOTSUPP);
  streams.dc_init_attr.dci_streams.log_num_concurent = most.max_log_num_concurent + 1;
  EXPECT_EQ(Refused(DciAttr(), streams), EINVAL);
  streams.dc_init_attr.dci_streams = {most.max_log_num_concurent,
                                      static_cast<uint8_t>(most.max_log_num_errored + 1)};
  EXPECT_EQ(Refused(DciAttr(), streams), EINVAL);

  for (unsigned type : {0u, 3u}) {
    mlx5dv_qp_init_attr odd = DcInit(MLX5DV_DCTYPE_DCI);
    odd.dc_init_attr.dc_type = static_cast<mlx5dv_dc_type>(type);
    EXPECT_EQ(Refused(DciAttr(), odd), EINVAL) << "dc_type " << type;
  }
  EXPECT_EQ(QpCount(), before);
}

// A DCT holds its SRQ: ibv_destroy_srq is EBUSY while the DCT lives and
// succeeds once it is gone.
TEST_F(DcTest, TheDctHoldsItsSrq) {
  Dct dct = NewDctInReset();
  ASSERT_NE(dct.qp, nullptr) << strerror(errno);
  EXPECT_EQ(ibv_destroy_srq(dct.srq), EBUSY);
  ASSERT_EQ(ibv_destroy_qp(dct.qp), 0);
  Forget(qps_, dct.qp);
  EXPECT_EQ(ibv_destroy_srq(dct.srq), 0);
  Forget(srqs_, dct.srq);
}

// A DCI's transitions take mlx5_ib's masks: no access flags into INIT, the
// MTU into RTR, the requester's attributes into RTS; it has no SQD but
// goes to ERR and RESET (and up again). A refused modify leaves its state.
TEST_F(DcTest, DciModifyTakesMlx5ibMasks) {
  ibv_qp* dci = NewDci();
  ASSERT_NE(dci, nullptr) << strerror(errno);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  EXPECT_EQ(
      ibv_modify_qp(dci, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
      EINVAL);
  EXPECT_EQ(State(dci), IBV_QPS_RESET);
  ASSERT_EQ(ibv_modify_qp(dci, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT), 0);
  EXPECT_EQ(State(dci), IBV_QPS_INIT);

  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  EXPECT_EQ(ibv_modify_qp(dci, &a, IBV_QP_STATE), EINVAL);
  EXPECT_EQ(State(dci), IBV_QPS_INIT);
  ASSERT_EQ(ibv_modify_qp(dci, &a, IBV_QP_STATE | IBV_QP_PATH_MTU), 0);
  EXPECT_EQ(State(dci), IBV_QPS_RTR);

  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  ASSERT_EQ(ibv_modify_qp(dci, &a,
                          IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                              IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC),
            0);
  EXPECT_EQ(State(dci), IBV_QPS_RTS);

  a = {};
  a.qp_state = IBV_QPS_SQD;
  EXPECT_EQ(ibv_modify_qp(dci, &a, IBV_QP_STATE), EINVAL);
  EXPECT_EQ(State(dci), IBV_QPS_RTS);
  a.qp_state = IBV_QPS_ERR;
  EXPECT_EQ(ibv_modify_qp(dci, &a, IBV_QP_STATE), 0);
  EXPECT_EQ(State(dci), IBV_QPS_ERR);
  a.qp_state = IBV_QPS_RESET;
  EXPECT_EQ(ibv_modify_qp(dci, &a, IBV_QP_STATE), 0);
  EXPECT_EQ(State(dci), IBV_QPS_RESET);
  EXPECT_TRUE(DciToRts(dci));
  EXPECT_EQ(State(dci), IBV_QPS_RTS);

  ibv_qp* early = NewDci();  // ERR straight from INIT
  ASSERT_NE(early, nullptr) << strerror(errno);
  a = {};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  ASSERT_EQ(ibv_modify_qp(early, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT), 0);
  a = {};
  a.qp_state = IBV_QPS_ERR;
  EXPECT_EQ(ibv_modify_qp(early, &a, IBV_QP_STATE), 0);
  EXPECT_EQ(State(early), IBV_QPS_ERR);
}

// A DCT goes RESET->INIT with exactly the port, P_Key and access flags,
// INIT->RTR with the RNR timer, the path and the MTU, and no further: RTS
// and ERR are refused and it stays in RTR.
TEST_F(DcTest, DctModifyTakesMlx5ibMasks) {
  Dct dct = NewDctInReset();
  ASSERT_NE(dct.qp, nullptr) << strerror(errno);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = kRemoteAll;
  EXPECT_EQ(ibv_modify_qp(dct.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT), EINVAL);
  EXPECT_EQ(State(dct.qp), IBV_QPS_RESET);
  ASSERT_EQ(ibv_modify_qp(dct.qp, &a,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
            0);
  EXPECT_EQ(State(dct.qp), IBV_QPS_INIT);

  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.min_rnr_timer = 1;
  a.path_mtu = IBV_MTU_1024;
  FillAv(&a.ah_attr);
  ASSERT_EQ(
      ibv_modify_qp(dct.qp, &a, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER | IBV_QP_AV | IBV_QP_PATH_MTU),
      0);
  EXPECT_EQ(State(dct.qp), IBV_QPS_RTR);

  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  EXPECT_EQ(ibv_modify_qp(dct.qp, &a,
                          IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                              IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC),
            EINVAL);
  EXPECT_EQ(State(dct.qp), IBV_QPS_RTR);
  a = {};
  a.qp_state = IBV_QPS_ERR;
  EXPECT_EQ(ibv_modify_qp(dct.qp, &a, IBV_QP_STATE), EINVAL);
  EXPECT_EQ(State(dct.qp), IBV_QPS_RTR);
}

// A SEND from a DCI completes on the DCT's CQ, from the DCT's SRQ: the
// DCT's number, the DCI's as the source, just the payload (no GRH, unlike
// UD). The DCI completes IBV_WC_SEND and receives nothing itself.
TEST_F(DcTest, SendLandsInTheDctsSrqWithoutAGrh) {
  Dct dct = NewDct();
  ibv_qp* dci = NewDciInRts();
  ASSERT_TRUE(dct.qp && dci) << strerror(errno);
  ASSERT_TRUE(PostRecv(dct.srq, 3));
  std::string msg = "one hundred bytes through a DC target: ";
  msg.resize(100, '.');
  ASSERT_EQ(Send(dci, dct, Stage(0, msg), msg.size(), 42), 0);
  ASSERT_NO_FATAL_FAILURE(ExpectSent(dci, 42));
  ibv_wc wc{};
  ASSERT_NO_FATAL_FAILURE(ExpectReceived(dct, dci, msg, &wc));
  EXPECT_EQ(wc.wr_id, 3u);
  EXPECT_TRUE(Quiet(dci_cq_));
  EXPECT_TRUE(Quiet(dct.cq));
}

// SEND_WITH_IMM: the receive says IBV_WC_WITH_IMM and carries the
// immediate as sent.
TEST_F(DcTest, SendWithImmCarriesTheImmediate) {
  Dct dct = NewDct();
  ibv_qp* dci = NewDciInRts();
  ASSERT_TRUE(dct.qp && dci) << strerror(errno);
  ASSERT_TRUE(PostRecv(dct.srq, 0));
  const std::string msg = "with an immediate";
  const uint32_t offset = Stage(0, msg);
  const __be32 imm = htobe32(0x12345678);
  ASSERT_EQ(Batch(dci,
                  [&](ibv_qp_ex* qx, mlx5dv_qp_ex* mx) {
                    qx->wr_id = 7;
                    ibv_wr_send_imm(qx, imm);
                    mlx5dv_wr_set_dc_addr(mx, ah_, dct.qp->qp_num, kKey);
                    ibv_wr_set_sge(qx, mr_->lkey, Addr(offset), msg.size());
                  }),
            0);
  ASSERT_NO_FATAL_FAILURE(ExpectSent(dci, 7));
  ibv_wc wc{};
  ASSERT_NO_FATAL_FAILURE(ExpectReceived(dct, dci, msg, &wc));
  EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(wc.imm_data, imm);
}

// Through a DCT allowing them, in one batch: an RDMA WRITE lands, a READ
// brings the bytes back, FETCH_AND_ADD and CMP_AND_SWP (one that swaps,
// one that does not) return the old values and leave the new ones. The
// DCT's CQ sees none of it.
TEST_F(DcTest, RdmaAndAtomicsReachTheDctsMemory) {
  Dct dct = NewDct(kRemoteAll);
  ibv_qp* dci = NewDciInRts();
  ASSERT_TRUE(dct.qp && dci) << strerror(errno);
  const std::string written = "written through a DCT";
  const std::string to_read = "read through a DCT";
  const uint32_t write_src = Stage(0, written);
  memcpy(At(kRemote + 256), to_read.data(), to_read.size());
  const uint64_t counter = 40, swapped = 7;
  memcpy(At(kRemote + 1024), &counter, 8);
  memcpy(At(kRemote + 1032), &swapped, 8);
  const uint32_t rkey = mr_->rkey, lkey = mr_->lkey;
  const uint32_t dctn = dct.qp->qp_num;
  ASSERT_EQ(Batch(dci,
                  [&](ibv_qp_ex* qx, mlx5dv_qp_ex* mx) {
                    qx->wr_id = 1;
                    ibv_wr_rdma_write(qx, rkey, Addr(kRemote));
                    mlx5dv_wr_set_dc_addr(mx, ah_, dctn, kKey);
                    ibv_wr_set_sge(qx, lkey, Addr(write_src), written.size());
                    qx->wr_id = 2;
                    ibv_wr_rdma_read(qx, rkey, Addr(kRemote + 256));
                    mlx5dv_wr_set_dc_addr(mx, ah_, dctn, kKey);
                    ibv_wr_set_sge(qx, lkey, Addr(kLocal + 256), to_read.size());
                    qx->wr_id = 3;
                    ibv_wr_atomic_fetch_add(qx, rkey, Addr(kRemote + 1024), 5);
                    mlx5dv_wr_set_dc_addr(mx, ah_, dctn, kKey);
                    ibv_wr_set_sge(qx, lkey, Addr(kLocal + 1024), 8);
                    qx->wr_id = 4;
                    ibv_wr_atomic_cmp_swp(qx, rkey, Addr(kRemote + 1032), 7, 9);
                    mlx5dv_wr_set_dc_addr(mx, ah_, dctn, kKey);
                    ibv_wr_set_sge(qx, lkey, Addr(kLocal + 1032), 8);
                    qx->wr_id = 5;
                    ibv_wr_atomic_cmp_swp(qx, rkey, Addr(kRemote + 1032), 7, 11);
                    mlx5dv_wr_set_dc_addr(mx, ah_, dctn, kKey);
                    ibv_wr_set_sge(qx, lkey, Addr(kLocal + 1040), 8);
                  }),
            0);
  const ibv_wc_opcode opcodes[] = {IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ, IBV_WC_FETCH_ADD,
                                   IBV_WC_COMP_SWAP, IBV_WC_COMP_SWAP};
  for (uint64_t id = 1; id <= 5; ++id) {
    ASSERT_NO_FATAL_FAILURE(ExpectSent(dci, id, opcodes[id - 1]));
  }
  EXPECT_EQ(std::string(reinterpret_cast<char*>(At(kRemote)), written.size()), written);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(At(kLocal + 256)), to_read.size()), to_read);
  uint64_t fetched = 0, now = 0, first_old = 0, second_old = 0, swap_now = 0;
  memcpy(&fetched, At(kLocal + 1024), 8);
  memcpy(&now, At(kRemote + 1024), 8);
  memcpy(&first_old, At(kLocal + 1032), 8);
  memcpy(&second_old, At(kLocal + 1040), 8);
  memcpy(&swap_now, At(kRemote + 1032), 8);
  EXPECT_EQ(fetched, 40u);
  EXPECT_EQ(now, 45u);
  EXPECT_EQ(first_old, 7u);
  EXPECT_EQ(second_old, 9u);  // compared with 7: not swapped
  EXPECT_EQ(swap_now, 9u);
  EXPECT_TRUE(Quiet(dct.cq));
}

// One batch of a DCI, two SENDs, each with its own DC address (and key):
// each DCT receives its own message and only that.
TEST_F(DcTest, OneBatchAddressesTwoDcts) {
  Dct a = NewDct(kRemoteAll, kKey);
  Dct b = NewDct(kRemoteAll, kOtherKey);
  ibv_qp* dci = NewDciInRts();
  ASSERT_TRUE(a.qp && b.qp && dci) << strerror(errno);
  ASSERT_TRUE(PostRecv(a.srq, 0));
  ASSERT_TRUE(PostRecv(b.srq, 1));
  const std::string to_a = "for the first DCT", to_b = "and this for the second";
  const uint32_t off_a = Stage(0, to_a), off_b = Stage(1, to_b);
  ASSERT_EQ(Batch(dci,
                  [&](ibv_qp_ex* qx, mlx5dv_qp_ex* mx) {
                    qx->wr_id = 1;
                    ibv_wr_send(qx);
                    mlx5dv_wr_set_dc_addr(mx, ah_, a.qp->qp_num, kKey);
                    ibv_wr_set_sge(qx, mr_->lkey, Addr(off_a), to_a.size());
                    qx->wr_id = 2;
                    ibv_wr_send(qx);
                    mlx5dv_wr_set_dc_addr(mx, ah_, b.qp->qp_num, kOtherKey);
                    ibv_wr_set_sge(qx, mr_->lkey, Addr(off_b), to_b.size());
                  }),
            0);
  ASSERT_NO_FATAL_FAILURE(ExpectSent(dci, 1));
  ASSERT_NO_FATAL_FAILURE(ExpectSent(dci, 2));
  ASSERT_NO_FATAL_FAILURE(ExpectReceived(a, dci, to_a));
  ASSERT_NO_FATAL_FAILURE(ExpectReceived(b, dci, to_b));
  EXPECT_TRUE(Quiet(a.cq));
  EXPECT_TRUE(Quiet(b.cq));
}

// Two DCIs send to one DCT: it receives both, each with its sender as the
// source QP and that sender's bytes.
TEST_F(DcTest, TwoDcisShareOneDct) {
  Dct dct = NewDct();
  ibv_qp* first = NewDciInRts();
  ibv_qp* second = NewDciInRts();
  ASSERT_TRUE(dct.qp && first && second) << strerror(errno);
  ASSERT_TRUE(PostRecv(dct.srq, 0));
  ASSERT_TRUE(PostRecv(dct.srq, 1));
  const std::string msgs[] = {"from the first DCI", "from the second DCI, longer"};
  ASSERT_EQ(Send(first, dct, Stage(0, msgs[0]), msgs[0].size(), 1), 0);
  ASSERT_EQ(Send(second, dct, Stage(1, msgs[1]), msgs[1].size(), 2), 0);
  std::set<uint32_t> senders;
  for (int i = 0; i < 2; ++i) {
    ibv_wc wc{};
    ASSERT_TRUE(Poll(dct.cq, &wc)) << "receive " << i;
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    EXPECT_EQ(wc.qp_num, dct.qp->qp_num);
    ASSERT_TRUE(wc.src_qp == first->qp_num || wc.src_qp == second->qp_num) << wc.src_qp;
    const std::string& msg = msgs[wc.src_qp == first->qp_num ? 0 : 1];
    EXPECT_EQ(wc.byte_len, msg.size());
    ASSERT_LT(wc.wr_id, 2u);
    EXPECT_EQ(
        std::string(reinterpret_cast<char*>(At(kRecv + kSlot * static_cast<uint32_t>(wc.wr_id))),
                    msg.size()),
        msg);
    senders.insert(wc.src_qp);
  }
  EXPECT_EQ(senders, (std::set<uint32_t>{first->qp_num, second->qp_num}));
  std::set<uint32_t> completed;
  for (int i = 0; i < 2; ++i) {
    ibv_wc wc{};
    ASSERT_TRUE(Poll(dci_cq_, &wc)) << "send completion " << i;
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    completed.insert(wc.qp_num);
  }
  EXPECT_EQ(completed, senders);
}

// A SEND under the wrong DC key goes unanswered: the DCI (short timeout,
// one retry) completes it with IBV_WC_RETRY_EXC_ERR and goes to ERR; the
// DCT received nothing and still receives from another DCI.
TEST_F(DcTest, AWrongDcKeyExhaustsTheDcisRetries) {
  Dct dct = NewDct();
  ibv_qp* wrong = NewDciInRts(/*timeout=*/1, /*retry_cnt=*/1);
  ibv_qp* right = NewDciInRts();
  ASSERT_TRUE(dct.qp && wrong && right) << strerror(errno);
  ASSERT_TRUE(PostRecv(dct.srq, 0));
  ASSERT_EQ(Send(wrong, dct, Stage(0, "wrong key"), 9, 1, kKey ^ 1), 0);
  ASSERT_NO_FATAL_FAILURE(ExpectFailed(wrong, 1, IBV_WC_RETRY_EXC_ERR));
  EXPECT_EQ(State(wrong), IBV_QPS_ERR);
  EXPECT_TRUE(Quiet(dct.cq));
  EXPECT_EQ(State(dct.qp), IBV_QPS_RTR);

  const std::string msg = "right key";
  ASSERT_EQ(Send(right, dct, Stage(1, msg), msg.size(), 2), 0);
  ASSERT_NO_FATAL_FAILURE(ExpectSent(right, 2));
  ASSERT_NO_FATAL_FAILURE(ExpectReceived(dct, right, msg));
}

// An RDMA WRITE with an rkey that is no MR's: IBV_WC_REM_ACCESS_ERR, the DCI
// in ERR, nothing written; the DCT stays in RTR and serves another DCI.
TEST_F(DcTest, ABadRkeyFailsTheDciNotTheDct) {
  Dct dct = NewDct(kRemoteAll);
  ibv_qp* bad = NewDciInRts();
  ibv_qp* good = NewDciInRts();
  ASSERT_TRUE(dct.qp && bad && good) << strerror(errno);
  memset(At(kRemote), 0, 64);
  const uint32_t offset = Stage(0, "not to be written");
  ASSERT_EQ(Batch(bad,
                  [&](ibv_qp_ex* qx, mlx5dv_qp_ex* mx) {
                    qx->wr_id = 1;
                    // Another generation of the MR's key: stale.
                    ibv_wr_rdma_write(qx, mr_->rkey ^ 1, Addr(kRemote));
                    mlx5dv_wr_set_dc_addr(mx, ah_, dct.qp->qp_num, kKey);
                    ibv_wr_set_sge(qx, mr_->lkey, Addr(offset), 17);
                  }),
            0);
  ASSERT_NO_FATAL_FAILURE(ExpectFailed(bad, 1, IBV_WC_REM_ACCESS_ERR));
  EXPECT_EQ(State(bad), IBV_QPS_ERR);
  EXPECT_EQ(State(dct.qp), IBV_QPS_RTR);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(At(kRemote)), 17), std::string(17, '\0'));

  ASSERT_TRUE(PostRecv(dct.srq, 0));
  const std::string msg = "after the bad rkey";
  ASSERT_EQ(Send(good, dct, Stage(1, msg), msg.size(), 2), 0);
  ASSERT_NO_FATAL_FAILURE(ExpectSent(good, 2));
  ASSERT_NO_FATAL_FAILURE(ExpectReceived(dct, good, msg));
}

// An RDMA WRITE to a DCT whose access flags do not allow it:
// IBV_WC_REM_INV_REQ_ERR at the DCI, which goes to ERR; nothing written.
TEST_F(DcTest, AWriteTheDctDoesNotAllowIsAnInvalidRequest) {
  Dct dct = NewDct(IBV_ACCESS_REMOTE_READ);
  ibv_qp* dci = NewDciInRts();
  ASSERT_TRUE(dct.qp && dci) << strerror(errno);
  memset(At(kRemote), 0, 64);
  const uint32_t offset = Stage(0, "not to be written");
  ASSERT_EQ(Batch(dci,
                  [&](ibv_qp_ex* qx, mlx5dv_qp_ex* mx) {
                    qx->wr_id = 1;
                    ibv_wr_rdma_write(qx, mr_->rkey, Addr(kRemote));
                    mlx5dv_wr_set_dc_addr(mx, ah_, dct.qp->qp_num, kKey);
                    ibv_wr_set_sge(qx, mr_->lkey, Addr(offset), 17);
                  }),
            0);
  ASSERT_NO_FATAL_FAILURE(ExpectFailed(dci, 1, IBV_WC_REM_INV_REQ_ERR));
  EXPECT_EQ(State(dci), IBV_QPS_ERR);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(At(kRemote)), 17), std::string(17, '\0'));
}

// A SEND to a DCT whose SRQ has no receive, from a DCI with rnr_retry 0:
// IBV_WC_RNR_RETRY_EXC_ERR, and the DCT completes nothing.
TEST_F(DcTest, NoReceiveAndNoRnrRetryIsAnRnrError) {
  Dct dct = NewDct();
  ibv_qp* dci = NewDciInRts(/*timeout=*/14, /*retry_cnt=*/7, /*rnr_retry=*/0);
  ASSERT_TRUE(dct.qp && dci) << strerror(errno);
  ASSERT_EQ(Send(dci, dct, Stage(0, "nobody listens"), 14, 1), 0);
  ASSERT_NO_FATAL_FAILURE(ExpectFailed(dci, 1, IBV_WC_RNR_RETRY_EXC_ERR));
  EXPECT_EQ(State(dci), IBV_QPS_ERR);
  EXPECT_TRUE(Quiet(dct.cq));
}

// A WR on a DCI without mlx5dv_wr_set_dc_addr fails its batch at
// ibv_wr_complete (EINVAL): nothing is sent and nothing completes. The next
// batch, addressed, is the only message the DCT receives.
TEST_F(DcTest, AWrWithoutADcAddressFailsItsBatch) {
  Dct dct = NewDct();
  ibv_qp* dci = NewDciInRts();
  ASSERT_TRUE(dct.qp && dci) << strerror(errno);
  ASSERT_TRUE(PostRecv(dct.srq, 0));
  ASSERT_TRUE(PostRecv(dct.srq, 1));
  const uint32_t lost = Stage(0, "nowhere to go");
  EXPECT_EQ(Batch(dci,
                  [&](ibv_qp_ex* qx, mlx5dv_qp_ex*) {
                    qx->wr_id = 1;
                    ibv_wr_send(qx);
                    ibv_wr_set_sge(qx, mr_->lkey, Addr(lost), 13);
                  }),
            EINVAL);
  EXPECT_TRUE(Quiet(dci_cq_));
  EXPECT_TRUE(Quiet(dct.cq));
  EXPECT_EQ(State(dci), IBV_QPS_RTS);

  const std::string msg = "addressed this time";
  ASSERT_EQ(Send(dci, dct, Stage(1, msg), msg.size(), 2), 0);
  ASSERT_NO_FATAL_FAILURE(ExpectSent(dci, 2));
  ASSERT_NO_FATAL_FAILURE(ExpectReceived(dct, dci, msg));
  EXPECT_TRUE(Quiet(dci_cq_));
  EXPECT_TRUE(Quiet(dct.cq));
}

// The legacy ibv_post_send has no DC address: on a DCI it is EINVAL, the
// WR handed back as bad_wr, and nothing is sent.
TEST_F(DcTest, PostSendOnADciIsRefused) {
  Dct dct = NewDct();
  ibv_qp* dci = NewDciInRts();
  ASSERT_TRUE(dct.qp && dci) << strerror(errno);
  ASSERT_TRUE(PostRecv(dct.srq, 0));
  ibv_sge sge{Addr(Stage(0, "legacy")), 6, mr_->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = 1;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  EXPECT_EQ(ibv_post_send(dci, &wr, &bad), EINVAL);
  EXPECT_EQ(bad, &wr);
  EXPECT_TRUE(Quiet(dci_cq_));
  EXPECT_TRUE(Quiet(dct.cq));
}

// mlx5dv_wr_set_dc_addr on an RC QP (mlx5dv_create_qp without DC) fails
// the batch: ibv_wr_complete is not 0 (EOPNOTSUPP or EINVAL), the RC peer
// receives nothing and neither side completes anything.
TEST_F(DcTest, ADcAddressOnAnRcQpFailsItsBatch) {
  ibv_cq* a_cq = NewCq();
  ibv_cq* b_cq = NewCq();
  ASSERT_TRUE(a_cq && b_cq);
  const auto rc_attr = [&](ibv_cq* cq) {
    ibv_qp_init_attr_ex attr{};
    attr.qp_type = IBV_QPT_RC;
    attr.send_cq = attr.recv_cq = cq;
    attr.cap = {16, 16, 1, 1, 0};
    attr.pd = pd_;
    attr.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    attr.send_ops_flags = IBV_QP_EX_WITH_SEND;
    return attr;
  };
  ibv_qp* a = Create(rc_attr(a_cq), mlx5dv_qp_init_attr{});
  ibv_qp* b = Create(rc_attr(b_cq), mlx5dv_qp_init_attr{});
  Dct dct = NewDct();
  ASSERT_TRUE(a && b && dct.qp) << strerror(errno);
  ASSERT_TRUE(ConnectVerbsRc(ctx_, a, b->qp_num));
  ASSERT_TRUE(ConnectVerbsRc(ctx_, b, a->qp_num));
  memset(At(kRecv), kUntouched, kSlot);
  ibv_sge rsge{Addr(kRecv), kSlot, mr_->lkey};
  ibv_recv_wr rwr{}, *rbad = nullptr;
  rwr.sg_list = &rsge;
  rwr.num_sge = 1;
  ASSERT_EQ(ibv_post_recv(b, &rwr, &rbad), 0);
  ASSERT_TRUE(PostRecv(dct.srq, 1));

  const uint32_t offset = Stage(0, "not a DCI");
  const int err = Batch(a, [&](ibv_qp_ex* qx, mlx5dv_qp_ex* mx) {
    qx->wr_id = 1;
    ibv_wr_send(qx);
    mlx5dv_wr_set_dc_addr(mx, ah_, dct.qp->qp_num, kKey);
    ibv_wr_set_sge(qx, mr_->lkey, Addr(offset), 9);
  });
  EXPECT_NE(err, 0);
  EXPECT_TRUE(err == EOPNOTSUPP || err == EINVAL) << strerror(err);
  EXPECT_TRUE(Quiet(a_cq));
  EXPECT_TRUE(Quiet(b_cq));
  EXPECT_TRUE(Quiet(dct.cq));
  EXPECT_EQ(At(kRecv)[0], kUntouched);
}

}  // namespace
}  // namespace devx_it
