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
// Across processes (a forked child with a context of its own, talking to
// this process through pipes) it is the same: a DCT in one process serves
// another's DCI (SEND, WRITE and READ); a process that dies takes its DCT
// with it, as a NIC drops a dead process's objects, so a DCI addressing it
// is left unanswered (retries exhausted), while a dead process's DCI leaves
// the DCT it reached serving the others.
#include <endian.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
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

// Reads `len` bytes of `fd`, all within `timeout_ms`; false on a timeout,
// an EOF (the writer died) or an error.
bool ReadWithin(int fd, void* buf, size_t len, int timeout_ms = 5000) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto* p = static_cast<uint8_t*>(buf);
  while (len > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd pfd{fd, POLLIN, 0};
    const int ready = poll(&pfd, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    const ssize_t n = read(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

// A forked child running body(up, down), which _exits with what body
// returns: `up` carries what it tells this process, `down` what this
// process tells it. The child opens a context of its own (a context does
// not cross fork) and touches none of this process's objects. It is killed
// and reaped if the test ends before Reap.
class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    for (int fd : {up_[0], up_[1], down_[0], down_[1]}) {
      if (fd >= 0) close(fd);
    }
  }

  template <typename Body>
  bool Start(Body&& body) {
    signal(SIGPIPE, SIG_IGN);  // writing to a dead child's pipe is EPIPE, not death
    if (pipe2(up_, O_CLOEXEC) != 0 || pipe2(down_, O_CLOEXEC) != 0) return false;
    pid_ = fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      close(up_[0]);
      close(down_[1]);
      _exit(body(up_[1], down_[0]));
    }
    close(up_[1]);  // so that a child that dies is an EOF
    close(down_[0]);
    up_[1] = down_[0] = -1;
    return true;
  }

  pid_t pid() const { return pid_; }
  bool Read(void* buf, size_t len, int timeout_ms = 5000) const {
    return ReadWithin(up_[0], buf, len, timeout_ms);
  }
  bool Write(const void* buf, size_t len) const {
    return write(down_[1], buf, len) == static_cast<ssize_t>(len);
  }

  // How the child ended ("exit 0", "exit 21", "signal 9"), waiting 10 s at
  // most for it ("killed: still running after 10 s" then).
  std::string Reap() {
    if (reaped_) return how_;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    int status = 0;
    pid_t got = 0;
    while ((got = waitpid(pid_, &status, WNOHANG)) == 0 &&
           std::chrono::steady_clock::now() < deadline) {
      usleep(1000);
    }
    if (got == 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      how_ = "killed: still running after 10 s";
    } else if (got != pid_) {
      how_ = std::string("waitpid: ") + strerror(errno);
    } else if (WIFEXITED(status)) {
      how_ = "exit " + std::to_string(WEXITSTATUS(status));
    } else {
      how_ = "signal " + std::to_string(WTERMSIG(status));
    }
    reaped_ = true;
    return how_;
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::string how_;
  int up_[2] = {-1, -1};
  int down_[2] = {-1, -1};
};

// In a child: says on stderr which step failed; `code` is its exit code.
int ChildFailed(int code, const std::string& what) {
  fprintf(stderr, "dc_test child %d, exit %d: %s\n", getpid(), code, what.c_str());
  return code;
}

// Waits (5 s at most) until `softverbs status` lists no client of process
// `pid`: the device released all it held. The device learns of a process's
// exit asynchronously, after waitpid may have returned.
bool DeviceReleased(pid_t pid) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    const nlohmann::json status = Status();
    if (status.is_object() && status.contains("clients") && ClientOf(status, pid).is_null()) {
      return true;
    }
    usleep(10000);
  }
  return false;
}

// What a child serving a DCT tells its parent: the DCT's number and its
// MR (laid out as the fixture's buffer, kRemote and all).
struct DctOffer {
  uint32_t dctn = 0;
  uint32_t rkey = 0;
  uint64_t addr = 0;
};

// A child's DCT and what it needs, in the child's own context; its MR
// covers `mem` (kBufSize bytes).
struct DctProcess {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_srq* srq = nullptr;
  uint8_t* mem = nullptr;
  ibv_mr* mr = nullptr;
  ibv_qp* dct = nullptr;
  DctOffer Offer() const { return {dct->qp_num, mr->rkey, reinterpret_cast<uintptr_t>(mem)}; }
};

constexpr unsigned kDctProcessAccess = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
// What the DCI of one process sends and writes to another's DCT, and what
// it reads back from there (at kRemote + 256).
constexpr char kAcrossSend[] = "a SEND to a DCT in another process";
constexpr char kAcrossWrite[] = "written into another process";
constexpr char kAcrossRead[] = "read back from another process";
constexpr char kFromADyingDci[] = "from a DCI whose process is about to die";

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

  // A DCI's mlx5 view (mlx5dv_init_obj of the DCI, its CQ and the AH), and
  // what was posted and consumed through it.
  struct DciView {
    mlx5dv_qp qp{};
    mlx5dv_cq cq{};
    mlx5dv_ah ah{};
    uint32_t posted = 0;  // basic blocks
    uint32_t cqes = 0;    // consumed
  };
  bool InitView(ibv_qp* dci, DciView* v) {
    mlx5dv_obj obj{};
    obj.qp.in = dci;
    obj.qp.out = &v->qp;
    obj.cq.in = dci_cq_;
    obj.cq.out = &v->cq;
    obj.ah.in = ah_;
    obj.ah.out = &v->ah;
    return mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ | MLX5DV_OBJ_AH) == 0 &&
           v->qp.sq.buf && v->qp.dbrec && v->cq.buf && v->ah.av;
  }
  // Writes a DC WQE into v and rings it: ctrl (on `stream`), datagram (the
  // AH's vector, DCT `dctn`, `key`), [raddr for a WRITE], one data segment
  // of `len` bytes at `offset` by `lkey`.
  void PostDcWqe(DciView& v, ibv_qp* dci, uint8_t opcode, uint32_t dctn, uint64_t key,
                 uint16_t stream, uint32_t lkey, uint32_t offset, uint32_t len,
                 uint64_t raddr = 0) {
    const bool write = opcode == MLX5_OPCODE_RDMA_WRITE;
    uint8_t* wqe = static_cast<uint8_t*>(v.qp.sq.buf) + (v.posted % v.qp.sq.wqe_cnt) * 64;
    memset(wqe, 0, 128);
    auto* ctrl = reinterpret_cast<mlx5_wqe_ctrl_seg*>(wqe);
    mlx5dv_set_ctrl_seg(ctrl, static_cast<uint16_t>(v.posted / 2), opcode, 0, dci->qp_num,
                        MLX5_WQE_CTRL_CQ_UPDATE, write ? 6 : 5, 0, 0);
    ctrl->dci_stream_channel_id = htobe16(stream);
    auto* av = reinterpret_cast<mlx5_wqe_av*>(wqe + 16);
    memcpy(av, v.ah.av, sizeof(*av));
    av->dqp_dct = htobe32(dctn | MLX5_EXTENDED_UD_AV);
    av->key.dc_key = htobe64(key);
    uint8_t* next = wqe + 64;
    if (write) {
      auto* r = reinterpret_cast<mlx5_wqe_raddr_seg*>(next);
      r->raddr = htobe64(raddr);
      r->rkey = htobe32(mr_->rkey);
      next += 16;
    }
    mlx5dv_set_data_seg(reinterpret_cast<mlx5_wqe_data_seg*>(next), len, lkey, Addr(offset));
    v.posted += 2;
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&v.qp.dbrec[MLX5_SND_DBR], htobe32(v.posted & 0xffff), __ATOMIC_RELEASE);
  }
  // The next CQE of v's CQ, its consumer index moved past it (nullptr when
  // none came).
  static mlx5_cqe64* NextCqe(DciView& v) {
    mlx5_cqe64* cqe = WaitCqe(v.cq, v.cqes);
    if (cqe != nullptr) v.cq.dbrec[0] = htobe32(++v.cqes & 0xffffff);
    return cqe;
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
    return SendTo(dci, dct.qp->qp_num, offset, len, wr_id, key);
  }
  // The same to DCT number `dctn` (of this process or not).
  int SendTo(ibv_qp* dci, uint32_t dctn, uint32_t offset, uint32_t len, uint64_t wr_id,
             uint64_t key = kKey) {
    return Batch(dci, [&](ibv_qp_ex* qx, mlx5dv_qp_ex* mx) {
      qx->wr_id = wr_id;
      ibv_wr_send(qx);
      mlx5dv_wr_set_dc_addr(mx, ah_, dctn, key);
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
    ExpectReceived(dct, dci->qp_num, msg, out);
  }
  // The same from DCI number `src_qp` (of this process or not).
  void ExpectReceived(const Dct& dct, uint32_t src_qp, const std::string& msg,
                      ibv_wc* out = nullptr) {
    ibv_wc wc{};
    ASSERT_TRUE(Poll(dct.cq, &wc)) << "DCT 0x" << std::hex << dct.qp->qp_num << " received nothing";
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    EXPECT_EQ(wc.opcode, IBV_WC_RECV);
    EXPECT_EQ(wc.qp_num, dct.qp->qp_num);
    EXPECT_EQ(wc.src_qp, src_qp);
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

  // In a child: a DCT in RTR allowing kDctProcessAccess, on a context, PD,
  // CQ, SRQ and MR (over fresh memory) of the child's own, one receive
  // posted (slot 0, filled with kUntouched) and kAcrossRead at kRemote +
  // 256. 0, or the exit code of the step that failed.
  int MakeDctProcess(DctProcess* p) const {
    p->ctx = OpenDevx();
    if (p->ctx == nullptr) return ChildFailed(10, std::string("open: ") + strerror(errno));
    p->pd = ibv_alloc_pd(p->ctx);
    p->cq = p->pd ? ibv_create_cq(p->ctx, 64, nullptr, nullptr, 0) : nullptr;
    ibv_srq_init_attr srq_attr{};
    srq_attr.attr.max_wr = 32;
    srq_attr.attr.max_sge = 1;
    p->srq = p->cq ? ibv_create_srq(p->pd, &srq_attr) : nullptr;
    if (p->srq == nullptr) return ChildFailed(11, std::string("PD/CQ/SRQ: ") + strerror(errno));
    void* mem = mmap(nullptr, kBufSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return ChildFailed(12, std::string("mmap: ") + strerror(errno));
    p->mem = static_cast<uint8_t*>(mem);
    p->mr = ibv_reg_mr(p->pd, p->mem, kBufSize, IBV_ACCESS_LOCAL_WRITE | kDctProcessAccess);
    if (p->mr == nullptr) return ChildFailed(13, std::string("ibv_reg_mr: ") + strerror(errno));
    ibv_qp_init_attr_ex attr{};
    attr.qp_type = IBV_QPT_DRIVER;
    attr.send_cq = attr.recv_cq = p->cq;
    attr.srq = p->srq;
    attr.pd = p->pd;
    attr.comp_mask = IBV_QP_INIT_ATTR_PD;
    mlx5dv_qp_init_attr dv = DcInit(MLX5DV_DCTYPE_DCT, kKey);
    p->dct = mlx5dv_create_qp(p->ctx, &attr, &dv);
    if (p->dct == nullptr) return ChildFailed(14, std::string("DCT: ") + strerror(errno));
    if (!DctToRtr(p->dct, kDctProcessAccess)) {
      return ChildFailed(15, std::string("DCT to RTR: ") + strerror(errno));
    }
    memcpy(p->mem + kRemote + 256, kAcrossRead, sizeof(kAcrossRead) - 1);
    memset(p->mem + kRecv, kUntouched, kSlot);
    ibv_sge sge{reinterpret_cast<uintptr_t>(p->mem + kRecv), kSlot, p->mr->lkey};
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = 0;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    if (ibv_post_srq_recv(p->srq, &wr, &bad) != 0) return ChildFailed(16, "ibv_post_srq_recv");
    return 0;
  }

  // The child of ADctInAnotherProcessServesThisProcesssDci: offers its DCT
  // (up), learns the parent's DCI (down), checks the SEND it receives,
  // then, told (down) that the parent's WRITE and READ completed, what was
  // written; destroys it all and says 'k' (up).
  int ServeADct(int up, int down) const {
    DctProcess p;
    if (int failed = MakeDctProcess(&p)) return failed;
    const DctOffer offer = p.Offer();
    if (write(up, &offer, sizeof(offer)) != sizeof(offer)) return ChildFailed(20, "offering");
    uint32_t dci = 0;
    if (!ReadWithin(down, &dci, 4)) return ChildFailed(21, "no DCI number from the parent");
    ibv_wc wc{};
    if (!Poll(p.cq, &wc)) return ChildFailed(22, "the DCT received nothing");
    const std::string msg = kAcrossSend;
    if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV || wc.wr_id != 0) {
      return ChildFailed(23, std::string("receive: ") + ibv_wc_status_str(wc.status) + ", opcode " +
                                 std::to_string(wc.opcode) + ", wr_id " + std::to_string(wc.wr_id));
    }
    if (wc.qp_num != p.dct->qp_num || wc.src_qp != dci) {
      return ChildFailed(24, "receive: qp_num " + std::to_string(wc.qp_num) + " (DCT " +
                                 std::to_string(p.dct->qp_num) + "), src_qp " +
                                 std::to_string(wc.src_qp) + " (DCI " + std::to_string(dci) + ")");
    }
    if (wc.byte_len != msg.size() || memcmp(p.mem + kRecv, msg.data(), msg.size()) != 0 ||
        p.mem[kRecv + msg.size()] != kUntouched) {
      return ChildFailed(25, "received " + std::to_string(wc.byte_len) + " bytes: " +
                                 std::string(reinterpret_cast<char*>(p.mem + kRecv), msg.size()));
    }
    char done = 0;
    if (!ReadWithin(down, &done, 1)) return ChildFailed(26, "the parent never said done");
    const std::string written = kAcrossWrite;
    if (memcmp(p.mem + kRemote, written.data(), written.size()) != 0 ||
        p.mem[kRemote + written.size()] != 0) {
      return ChildFailed(
          27, "written: " + std::string(reinterpret_cast<char*>(p.mem + kRemote), written.size()));
    }
    if (!Quiet(p.cq)) return ChildFailed(28, "the DCT completed more than the SEND");
    if (ibv_destroy_qp(p.dct) || ibv_dereg_mr(p.mr) || ibv_destroy_srq(p.srq) ||
        ibv_destroy_cq(p.cq) || ibv_dealloc_pd(p.pd) || ibv_close_device(p.ctx)) {
      return ChildFailed(29, "teardown");
    }
    if (write(up, "k", 1) != 1) return ChildFailed(30, "reporting");
    return 0;
  }

  // The child of ADctWhoseProcessDiedLeavesTheDciUnanswered: offers its
  // DCT (a receive posted) and, told to (down), exits without destroying
  // anything.
  int OfferADctAndDie(int up, int down) const {
    DctProcess p;
    if (int failed = MakeDctProcess(&p)) return failed;
    const DctOffer offer = p.Offer();
    if (write(up, &offer, sizeof(offer)) != sizeof(offer)) return ChildFailed(20, "offering");
    char die = 0;
    if (!ReadWithin(down, &die, 1)) return ChildFailed(21, "the parent never said die");
    return 0;  // _exit: the device releases what the process held
  }

  // The child of ADciInAProcessThatDiesLeavesTheDctServing: learns the
  // parent's DCT (down), tells its DCI's number (up), sends kFromADyingDci
  // there, and once that completed exits without destroying anything.
  int SendFromADciAndDie(int up, int down) const {
    uint32_t dctn = 0;
    if (!ReadWithin(down, &dctn, 4)) return ChildFailed(20, "no DCT number from the parent");
    ibv_context* ctx = OpenDevx();
    if (ctx == nullptr) return ChildFailed(10, std::string("open: ") + strerror(errno));
    ibv_pd* pd = ibv_alloc_pd(ctx);
    ibv_cq* cq = pd ? ibv_create_cq(ctx, 8, nullptr, nullptr, 0) : nullptr;
    ibv_ah_attr av{};
    FillAv(&av);
    ibv_ah* ah = cq ? ibv_create_ah(pd, &av) : nullptr;
    if (ah == nullptr) return ChildFailed(11, std::string("PD/CQ/AH: ") + strerror(errno));
    void* mem = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return ChildFailed(12, std::string("mmap: ") + strerror(errno));
    memcpy(mem, kFromADyingDci, sizeof(kFromADyingDci) - 1);
    ibv_mr* mr = ibv_reg_mr(pd, mem, 4096, IBV_ACCESS_LOCAL_WRITE);
    if (mr == nullptr) return ChildFailed(13, std::string("ibv_reg_mr: ") + strerror(errno));
    ibv_qp_init_attr_ex attr{};
    attr.qp_type = IBV_QPT_DRIVER;
    attr.send_cq = attr.recv_cq = cq;
    attr.cap.max_send_wr = 8;
    attr.cap.max_send_sge = 1;
    attr.pd = pd;
    attr.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    attr.send_ops_flags = IBV_QP_EX_WITH_SEND;
    mlx5dv_qp_init_attr dv = DcInit(MLX5DV_DCTYPE_DCI);
    ibv_qp* dci = mlx5dv_create_qp(ctx, &attr, &dv);
    if (dci == nullptr) return ChildFailed(14, std::string("DCI: ") + strerror(errno));
    if (!DciToRts(dci)) return ChildFailed(15, std::string("DCI to RTS: ") + strerror(errno));
    if (write(up, &dci->qp_num, 4) != 4) return ChildFailed(21, "telling the DCI's number");
    const int err = Batch(dci, [&](ibv_qp_ex* qx, mlx5dv_qp_ex* mx) {
      qx->wr_id = 1;
      ibv_wr_send(qx);
      mlx5dv_wr_set_dc_addr(mx, ah, dctn, kKey);
      ibv_wr_set_sge(qx, mr->lkey, reinterpret_cast<uintptr_t>(mem), sizeof(kFromADyingDci) - 1);
    });
    if (err != 0) return ChildFailed(22, std::string("ibv_wr_complete: ") + strerror(err));
    ibv_wc wc{};
    if (!Poll(cq, &wc)) return ChildFailed(23, "the SEND never completed");
    if (wc.status != IBV_WC_SUCCESS || wc.wr_id != 1) {
      return ChildFailed(24, std::string("SEND: ") + ibv_wc_status_str(wc.status));
    }
    return 0;  // _exit: the device releases what the process held
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
// dci_streams_caps (EINVAL; within them the DCI is made), a dc_type that
// is neither DCI nor DCT (EINVAL).
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
  EXPECT_GT(most.max_log_num_errored, 0u);
  EXPECT_EQ(Refused(DciAttr(), streams), 0);
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

// A DCI given a default path at INIT->RTR (UCX's dc_mlx5 passes one, with
// the port and SL only, or with a GID elsewhere) still takes each WR's own
// path: its SEND to a DCT of this host arrives.
TEST_F(DcTest, ADciWithADefaultPathSendsWhereEachWrSays) {
  Dct dct = NewDct();
  ASSERT_TRUE(dct.qp) << strerror(errno);
  ASSERT_TRUE(PostRecv(dct.srq, 0));
  ASSERT_TRUE(PostRecv(dct.srq, 1));
  for (bool elsewhere : {false, true}) {
    ibv_qp* dci = NewDci();
    ASSERT_NE(dci, nullptr) << strerror(errno);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    ASSERT_EQ(ibv_modify_qp(dci, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT), 0);
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.ah_attr.port_num = 1;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.hop_limit = 64;
    if (elsewhere) {
      // ::ffff:198.51.100.77, an address of no host here (TEST-NET-2).
      const uint8_t gid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 51, 100, 77};
      memcpy(a.ah_attr.grh.dgid.raw, gid, 16);
    }
    ASSERT_EQ(ibv_modify_qp(dci, &a, IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_AV), 0)
        << strerror(errno);
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
    const std::string msg = elsewhere ? "default path elsewhere" : "default path, no GID";
    ASSERT_EQ(Send(dci, dct, Stage(0, msg), msg.size(), 7), 0);
    ASSERT_NO_FATAL_FAILURE(ExpectSent(dci, 7));
    ASSERT_NO_FATAL_FAILURE(ExpectReceived(dct, dci, msg));
  }
}

// mlx5dv_init_obj on a DCI and an AH: mlx5 WQEs written on the DCI's send
// queue, their datagram segment the AH's address vector with the DCT's
// number and access key (as UCX's dc_mlx5 builds them), run as the DCI's
// verbs WRs do - a SEND lands in the DCT's SRQ, an RDMA WRITE in its
// memory - and complete as mlx5 CQEs on the DCI's CQ; a WQE with another
// key is unanswered (retries exhausted: an error CQE).
TEST_F(DcTest, Mlx5WqesOnADciReachTheDctTheyName) {
  Dct dct = NewDct();
  ibv_qp* dci = NewDciInRts(2, 1);
  ASSERT_TRUE(dct.qp && dci) << strerror(errno);
  ASSERT_TRUE(PostRecv(dct.srq, 0));
  DciView v;
  ASSERT_TRUE(InitView(dci, &v));
  EXPECT_EQ(memcmp(v.ah.av->rgid, gid_.raw, 16), 0) << "the AH's destination GID";
  const auto post = [&](uint8_t opcode, uint32_t offset, uint32_t len, uint64_t key,
                        uint64_t raddr = 0) {
    PostDcWqe(v, dci, opcode, dct.qp->qp_num, key, 0, mr_->lkey, offset, len, raddr);
  };
  const auto next_cqe = [&] { return NextCqe(v); };

  const std::string msg = "an mlx5 DC SEND";
  post(MLX5_OPCODE_SEND, Stage(0, msg), msg.size(), kKey);
  mlx5_cqe64* sent = next_cqe();
  ASSERT_NE(sent, nullptr);
  EXPECT_EQ(mlx5dv_get_cqe_opcode(sent), MLX5_CQE_REQ);
  ASSERT_NO_FATAL_FAILURE(ExpectReceived(dct, dci, msg));

  const std::string written = "an mlx5 DC WRITE";
  memset(At(kRemote), 0, 64);
  post(MLX5_OPCODE_RDMA_WRITE, Stage(1, written), written.size(), kKey, Addr(kRemote));
  mlx5_cqe64* wrote = next_cqe();
  ASSERT_NE(wrote, nullptr);
  EXPECT_EQ(mlx5dv_get_cqe_opcode(wrote), MLX5_CQE_REQ);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(At(kRemote)), written.size()), written);

  post(MLX5_OPCODE_SEND, Stage(2, "wrong key"), 9, kKey ^ 1);
  mlx5_cqe64* unanswered = next_cqe();
  ASSERT_NE(unanswered, nullptr);
  ASSERT_EQ(mlx5dv_get_cqe_opcode(unanswered), MLX5_CQE_REQ_ERR);
  EXPECT_EQ(reinterpret_cast<mlx5_err_cqe*>(unanswered)->syndrome,
            MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR);
  EXPECT_TRUE(Quiet(dct.cq));
}

// A DCI created with MLX5DV_QP_EX_WITH_MEMCPY copies between two ranges of
// its PD without naming a DCT (libmlx5 gives DCIs mlx5dv_wr_memcpy too),
// completing as MLX5DV_WC_MEMCPY.
TEST_F(DcTest, ADciCopiesByDmaMemcpyWithoutADct) {
  mlx5dv_qp_init_attr dv = DcInit(MLX5DV_DCTYPE_DCI);
  dv.comp_mask |= MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS;
  dv.send_ops_flags = MLX5DV_QP_EX_WITH_MEMCPY;
  ibv_qp* dci = Create(DciAttr(), dv);
  ASSERT_NE(dci, nullptr) << strerror(errno);
  ASSERT_TRUE(DciToRts(dci, 14, 7, 7));
  const std::string msg = "copied by the DCI's DMA engine";
  const uint32_t from = Stage(0, msg);
  memset(At(kLocal), kUntouched, 128);
  ibv_qp_ex* qx = ibv_qp_to_qp_ex(dci);
  ibv_wr_start(qx);
  qx->wr_id = 77;
  qx->wr_flags = IBV_SEND_SIGNALED;
  mlx5dv_wr_memcpy(mlx5dv_qp_ex_from_ibv_qp_ex(qx), mr_->lkey, Addr(kLocal), mr_->lkey, Addr(from),
                   msg.size());
  ASSERT_EQ(ibv_wr_complete(qx), 0);
  ibv_wc wc{};
  ASSERT_TRUE(Poll(dci_cq_, &wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.wr_id, 77u);
  EXPECT_EQ(wc.opcode, static_cast<ibv_wc_opcode>(MLX5DV_WC_MEMCPY));
  EXPECT_EQ(std::string(reinterpret_cast<char*>(At(kLocal)), msg.size()), msg);
  EXPECT_EQ(*At(kLocal + static_cast<uint32_t>(msg.size())), kUntouched);
  EXPECT_EQ(State(dci), IBV_QPS_RTS);
}

// DCI streams (mlx5dv_dci_stream_id_reset(3)): a WR's error puts its
// stream in error and leaves the DCI in RTS; that stream's next WRs are
// flushed while the others go on; resetting the stream (not another one:
// EINVAL) lets it send again. The error that makes 2^log_num_errored
// streams errored moves the DCI to ERR; RESET forgets the streams' errors.
TEST_F(DcTest, DciStreamsKeepAnErrorInItsStream) {
  Dct dct = NewDct();
  mlx5dv_qp_init_attr dv = DcInit(MLX5DV_DCTYPE_DCI);
  dv.comp_mask |= MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS;
  dv.dc_init_attr.dci_streams = {/*log_num_concurent=*/2, /*log_num_errored=*/1};
  ibv_qp* dci = Create(DciAttr(), dv);
  ibv_qp* plain = NewDciInRts();
  ASSERT_TRUE(dct.qp && dci && plain) << strerror(errno);
  ASSERT_TRUE(DciToRts(dci));
  const std::string msg = "on a stream";
  const uint32_t offset = Stage(0, msg);
  uint32_t slot = 0;
  // A SEND on `stream`; a bad lkey makes it fail locally.
  const auto send = [&](uint16_t stream, uint64_t wr_id, bool bad_lkey = false) {
    return Batch(dci, [&](ibv_qp_ex* qx, mlx5dv_qp_ex* mx) {
      qx->wr_id = wr_id;
      ibv_wr_send(qx);
      mlx5dv_wr_set_dc_addr_stream(mx, ah_, dct.qp->qp_num, kKey, stream);
      ibv_wr_set_sge(qx, bad_lkey ? mr_->lkey + 0x100 : mr_->lkey, Addr(offset), msg.size());
    });
  };
  const auto delivered = [&](uint16_t stream, uint64_t wr_id) {
    ASSERT_TRUE(PostRecv(dct.srq, slot));
    ASSERT_EQ(send(stream, wr_id), 0);
    ASSERT_NO_FATAL_FAILURE(ExpectSent(dci, wr_id));
    ibv_wc wc{};
    ASSERT_NO_FATAL_FAILURE(ExpectReceived(dct, dci, msg, &wc));
    EXPECT_EQ(wc.wr_id, slot++);
  };

  ASSERT_EQ(send(1, 10, /*bad_lkey=*/true), 0);
  ASSERT_NO_FATAL_FAILURE(ExpectFailed(dci, 10, IBV_WC_LOC_PROT_ERR));
  EXPECT_EQ(State(dci), IBV_QPS_RTS);
  ASSERT_EQ(send(1, 11), 0);  // stream 1 is in error: flushed, not sent
  ASSERT_NO_FATAL_FAILURE(ExpectFailed(dci, 11, IBV_WC_WR_FLUSH_ERR));
  EXPECT_TRUE(Quiet(dct.cq));
  ASSERT_NO_FATAL_FAILURE(delivered(2, 12));                // other streams go on
  EXPECT_EQ(mlx5dv_dci_stream_id_reset(dci, 2), EINVAL);    // not in error
  EXPECT_EQ(mlx5dv_dci_stream_id_reset(plain, 1), EINVAL);  // a DCI without streams
  EXPECT_EQ(mlx5dv_dci_stream_id_reset(dci, 1), 0);
  EXPECT_EQ(mlx5dv_dci_stream_id_reset(dci, 1), EINVAL);
  ASSERT_NO_FATAL_FAILURE(delivered(1, 13));

  // 2^1 streams in error: the second error moves the DCI to ERR.
  ASSERT_EQ(send(3, 14, true), 0);
  ASSERT_NO_FATAL_FAILURE(ExpectFailed(dci, 14, IBV_WC_LOC_PROT_ERR));
  EXPECT_EQ(State(dci), IBV_QPS_RTS);
  ASSERT_EQ(send(4, 15, true), 0);
  ASSERT_NO_FATAL_FAILURE(ExpectFailed(dci, 15, IBV_WC_LOC_PROT_ERR));
  EXPECT_EQ(State(dci), IBV_QPS_ERR);
  ASSERT_EQ(send(2, 16), 0);
  ASSERT_NO_FATAL_FAILURE(ExpectFailed(dci, 16, IBV_WC_WR_FLUSH_ERR));
  EXPECT_EQ(mlx5dv_dci_stream_id_reset(dci, 3), EOPNOTSUPP);  // not in RTS, as libmlx5

  ibv_qp_attr reset{};
  reset.qp_state = IBV_QPS_RESET;
  ASSERT_EQ(ibv_modify_qp(dci, &reset, IBV_QP_STATE), 0);
  ASSERT_TRUE(DciToRts(dci));
  ASSERT_NO_FATAL_FAILURE(delivered(3, 17));
  EXPECT_EQ(mlx5dv_dci_stream_id_reset(dci, 4), EINVAL);  // RESET forgot it
  EXPECT_TRUE(Quiet(dci_cq_));
}

// The same streams for mlx5 WQEs written into a DCI's mlx5 view: the
// control segment's dci_stream_channel_id names the stream; a WQE's error
// stays in its stream (an error CQE, the DCI in RTS), the stream's next WQE
// is flushed while another stream's goes, and the verbs reset applies.
TEST_F(DcTest, Mlx5WqesOnADciWithStreamsKeepAnErrorInItsStream) {
  Dct dct = NewDct();
  mlx5dv_qp_init_attr dv = DcInit(MLX5DV_DCTYPE_DCI);
  dv.comp_mask |= MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS;
  dv.dc_init_attr.dci_streams = {/*log_num_concurent=*/1, /*log_num_errored=*/2};
  ibv_qp* dci = Create(DciAttr(), dv);
  ASSERT_TRUE(dct.qp && dci) << strerror(errno);
  ASSERT_TRUE(DciToRts(dci));
  DciView v;
  ASSERT_TRUE(InitView(dci, &v));
  const std::string msg = "a streamed mlx5 SEND";
  const uint32_t offset = Stage(0, msg);
  const auto post = [&](uint16_t stream, bool bad_lkey) {
    PostDcWqe(v, dci, MLX5_OPCODE_SEND, dct.qp->qp_num, kKey, stream,
              bad_lkey ? mr_->lkey + 0x100 : mr_->lkey, offset, msg.size());
  };
  // The syndrome of the next CQE (0 for a success); -1 when none came.
  const auto next = [&]() -> int {
    mlx5_cqe64* cqe = NextCqe(v);
    if (cqe == nullptr) return -1;
    return mlx5dv_get_cqe_opcode(cqe) == MLX5_CQE_REQ_ERR
               ? reinterpret_cast<mlx5_err_cqe*>(cqe)->syndrome
               : 0;
  };

  post(3, /*bad_lkey=*/true);
  EXPECT_EQ(next(), MLX5_CQE_SYNDROME_LOCAL_PROT_ERR);
  EXPECT_EQ(State(dci), IBV_QPS_RTS);
  post(3, false);
  EXPECT_EQ(next(), MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
  EXPECT_TRUE(Quiet(dct.cq));
  ASSERT_TRUE(PostRecv(dct.srq, 0));
  post(4, false);
  EXPECT_EQ(next(), 0);
  ASSERT_NO_FATAL_FAILURE(ExpectReceived(dct, dci, msg));
  EXPECT_EQ(mlx5dv_dci_stream_id_reset(dci, 3), 0);
  ASSERT_TRUE(PostRecv(dct.srq, 1));
  post(3, false);
  EXPECT_EQ(next(), 0);
  ASSERT_NO_FATAL_FAILURE(ExpectReceived(dct, dci, msg));
  EXPECT_EQ(State(dci), IBV_QPS_RTS);
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

// A DCT in another process (a forked child, its own context, PD, SRQ and
// MR) serves this process's DCI as one of its own: the SEND lands in the
// child's SRQ with the child's DCT as qp_num and this DCI as src_qp, the
// WRITE lands in the child's memory and the READ brings the child's bytes
// back. The child checks its side and says so, and exits 0.
TEST_F(DcTest, ADctInAnotherProcessServesThisProcesssDci) {
  ChildProcess child;
  ASSERT_TRUE(child.Start([this](int up, int down) { return ServeADct(up, down); }))
      << strerror(errno);
  DctOffer dct;
  ASSERT_TRUE(child.Read(&dct, sizeof(dct))) << "no DCT from the child, child: " << child.Reap();
  ibv_qp* dci = NewDciInRts();
  ASSERT_NE(dci, nullptr) << strerror(errno);
  ASSERT_TRUE(child.Write(&dci->qp_num, 4)) << "child: " << child.Reap();

  const std::string to_send = kAcrossSend, to_write = kAcrossWrite, to_read = kAcrossRead;
  const uint32_t send_src = Stage(0, to_send), write_src = Stage(1, to_write);
  memset(At(kLocal), kUntouched, 64);
  const uint32_t lkey = mr_->lkey;
  ASSERT_EQ(Batch(dci,
                  [&](ibv_qp_ex* qx, mlx5dv_qp_ex* mx) {
                    qx->wr_id = 1;
                    ibv_wr_send(qx);
                    mlx5dv_wr_set_dc_addr(mx, ah_, dct.dctn, kKey);
                    ibv_wr_set_sge(qx, lkey, Addr(send_src), to_send.size());
                    qx->wr_id = 2;
                    ibv_wr_rdma_write(qx, dct.rkey, dct.addr + kRemote);
                    mlx5dv_wr_set_dc_addr(mx, ah_, dct.dctn, kKey);
                    ibv_wr_set_sge(qx, lkey, Addr(write_src), to_write.size());
                    qx->wr_id = 3;
                    ibv_wr_rdma_read(qx, dct.rkey, dct.addr + kRemote + 256);
                    mlx5dv_wr_set_dc_addr(mx, ah_, dct.dctn, kKey);
                    ibv_wr_set_sge(qx, lkey, Addr(kLocal), to_read.size());
                  }),
            0);
  ASSERT_NO_FATAL_FAILURE(ExpectSent(dci, 1, IBV_WC_SEND));
  ASSERT_NO_FATAL_FAILURE(ExpectSent(dci, 2, IBV_WC_RDMA_WRITE));
  ASSERT_NO_FATAL_FAILURE(ExpectSent(dci, 3, IBV_WC_RDMA_READ));
  EXPECT_EQ(std::string(reinterpret_cast<char*>(At(kLocal)), to_read.size()), to_read);
  EXPECT_EQ(At(kLocal)[to_read.size()], kUntouched);
  EXPECT_TRUE(Quiet(dci_cq_));

  ASSERT_TRUE(child.Write("d", 1)) << "child: " << child.Reap();
  char verdict = 0;
  EXPECT_TRUE(child.Read(&verdict, 1, 15000)) << "no verdict from the child";
  EXPECT_EQ(verdict, 'k');
  EXPECT_EQ(child.Reap(), "exit 0");
}

// A child makes a DCT (a receive posted), which a DCI of this process
// reaches, and dies without destroying it; the device releases it with the
// rest of the child's objects (its client leaves `softverbs status`, one
// QP fewer). The next SEND of the same DCI to that DCT number goes
// unanswered: the DCI (short timeout, one retry) completes it with
// IBV_WC_RETRY_EXC_ERR and goes to ERR, as to a DCT a NIC dropped.
TEST_F(DcTest, ADctWhoseProcessDiedLeavesTheDciUnanswered) {
  // Made before the child dies: no QP made after the release may take the
  // dead DCT's number.
  ibv_qp* dci = NewDciInRts(/*timeout=*/2, /*retry_cnt=*/1);
  ASSERT_NE(dci, nullptr) << strerror(errno);
  ChildProcess child;
  ASSERT_TRUE(child.Start([this](int up, int down) { return OfferADctAndDie(up, down); }))
      << strerror(errno);
  DctOffer dct;
  ASSERT_TRUE(child.Read(&dct, sizeof(dct))) << "no DCT from the child, child: " << child.Reap();
  const nlohmann::json alive = ClientOf(Status(), child.pid());
  ASSERT_TRUE(alive.is_object()) << "softverbs status lists no client of the child";
  bool listed = false;
  for (const auto& qp : alive["qp"]) listed |= qp.value("qpn", 0u) == dct.dctn;
  EXPECT_TRUE(listed) << "the child's DCT is not among its QPs: " << alive["qp"].dump();
  const size_t qps = QpCount();
  ASSERT_EQ(SendTo(dci, dct.dctn, Stage(0, "to a live DCT"), 13, 1), 0);
  ASSERT_NO_FATAL_FAILURE(ExpectSent(dci, 1));

  ASSERT_TRUE(child.Write("x", 1)) << "child: " << child.Reap();
  ASSERT_EQ(child.Reap(), "exit 0");
  ASSERT_TRUE(DeviceReleased(child.pid())) << "the dead child is still a client after 5 s";
  EXPECT_EQ(QpCount(), qps - 1);

  ASSERT_EQ(SendTo(dci, dct.dctn, Stage(1, "to a dead DCT"), 13, 2), 0);
  ASSERT_NO_FATAL_FAILURE(ExpectFailed(dci, 2, IBV_WC_RETRY_EXC_ERR));
  EXPECT_EQ(State(dci), IBV_QPS_ERR);
  EXPECT_TRUE(Quiet(dci_cq_));
}

// A child's DCI sends to this process's DCT and the child dies without
// destroying it: the receive stays, from the child's DCI number, and once
// the device released the child the DCT is still in RTR and receives from
// a DCI of this process.
TEST_F(DcTest, ADciInAProcessThatDiesLeavesTheDctServing) {
  Dct dct = NewDct();
  ASSERT_NE(dct.qp, nullptr) << strerror(errno);
  ASSERT_TRUE(PostRecv(dct.srq, 0));
  ASSERT_TRUE(PostRecv(dct.srq, 1));
  ChildProcess child;
  ASSERT_TRUE(child.Start([this](int up, int down) { return SendFromADciAndDie(up, down); }))
      << strerror(errno);
  ASSERT_TRUE(child.Write(&dct.qp->qp_num, 4)) << "child: " << child.Reap();
  uint32_t child_dci = 0;
  ASSERT_TRUE(child.Read(&child_dci, 4)) << "no DCI from the child, child: " << child.Reap();
  ASSERT_EQ(child.Reap(), "exit 0");
  ASSERT_NO_FATAL_FAILURE(ExpectReceived(dct, child_dci, kFromADyingDci));

  ASSERT_TRUE(DeviceReleased(child.pid())) << "the dead child is still a client after 5 s";
  EXPECT_EQ(State(dct.qp), IBV_QPS_RTR);
  EXPECT_TRUE(Quiet(dct.cq));
  ibv_qp* dci = NewDciInRts();
  ASSERT_NE(dci, nullptr) << strerror(errno);
  const std::string msg = "after the other process died";
  ASSERT_EQ(Send(dci, dct, Stage(0, msg), msg.size(), 2), 0);
  ASSERT_NO_FATAL_FAILURE(ExpectSent(dci, 2));
  ASSERT_NO_FATAL_FAILURE(ExpectReceived(dct, dci, msg));
  EXPECT_EQ(State(dct.qp), IBV_QPS_RTR);
}

}  // namespace
}  // namespace devx_it
