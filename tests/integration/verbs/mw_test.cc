// Memory windows: type 1 (ibv_alloc_mw, ibv_bind_mw) and type 2
// (IBV_WR_BIND_MW, ibv_wr_bind_mw), IBV_WR_LOCAL_INV, IBV_WR_SEND_WITH_INV
// (IBV_WC_WITH_INV and wc.invalidated_rkey), the window's own rights and
// bounds, and the errors hardware gives: IBV_WC_MW_BIND_ERR for a bind the
// IBA refuses, IBV_WC_REM_ACCESS_ERR for an access through an invalid,
// stale, invalidated or out-of-bounds window key, EINVAL for ibv_dereg_mr of
// an MR with a bound window.
#include <errno.h>
#include <string.h>

#include "test_env.h"

namespace softverbs::it {
namespace {

class MwTest : public ContextTest {
 protected:
  void SetUp() override {
    ContextTest::SetUp();
    a_ = MakeQp();
    b_ = MakeQp();
    ASSERT_TRUE(a_ && b_);
    ASSERT_TRUE(ConnectRc(ctx_, a_, b_->qp_num));
    ASSERT_TRUE(ConnectRc(ctx_, b_, a_->qp_num));
    // The window's side: local write and MW_BIND only - remote rights come
    // from the window.
    mr_ = ibv_reg_mr(pd_, buf_, sizeof(buf_), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
    src_ = ibv_reg_mr(pd_, src_buf_, sizeof(src_buf_), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_TRUE(mr_ && src_);
    memset(src_buf_, 0x5a, sizeof(src_buf_));
  }
  void TearDown() override {
    for (ibv_mw* mw : mws_) ibv_dealloc_mw(mw);
    if (mr_) ibv_dereg_mr(mr_);
    if (src_) ibv_dereg_mr(src_);
    for (ibv_qp* qp : {a_, b_, c_}) {
      if (qp) ibv_destroy_qp(qp);
    }
    ContextTest::TearDown();
  }
  ibv_qp* MakeQp() {
    ibv_qp_init_attr_ex init{};
    init.send_cq = init.recv_cq = cq_;
    init.qp_type = IBV_QPT_RC;
    init.cap = {8, 8, 1, 1, 0};
    init.pd = pd_;
    init.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    init.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_BIND_MW |
                          IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV;
    return ibv_create_qp_ex(ctx_, &init);
  }
  ibv_mw* AllocMw(ibv_mw_type type) {
    ibv_mw* mw = ibv_alloc_mw(pd_, type);
    EXPECT_NE(mw, nullptr) << strerror(errno);
    if (mw) mws_.push_back(mw);
    return mw;
  }
  void Forget(ibv_mw* mw) { std::erase(mws_, mw); }
  ibv_mw_bind_info Range(uint64_t offset, uint64_t length, unsigned access) {
    return {mr_, reinterpret_cast<uintptr_t>(buf_) + offset, length, access};
  }
  // Binds a type 1 window on b_ (the side that owns buf_); returns the
  // bind's completion.
  ibv_wc BindType1(ibv_mw* mw, const ibv_mw_bind_info& info) {
    ibv_mw_bind bind{};
    bind.wr_id = 11;
    bind.send_flags = IBV_SEND_SIGNALED;
    bind.bind_info = info;
    EXPECT_EQ(ibv_bind_mw(b_, mw, &bind), 0);
    return Poll();
  }
  // Binds a type 2 window to b_ with IBV_WR_BIND_MW under `rkey`.
  ibv_wc BindType2(ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info& info) {
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = 12;
    wr.opcode = IBV_WR_BIND_MW;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.bind_mw.mw = mw;
    wr.bind_mw.rkey = rkey;
    wr.bind_mw.bind_info = info;
    EXPECT_EQ(ibv_post_send(b_, &wr, &bad), 0);
    return Poll();
  }
  // An RDMA WRITE (or READ) of `len` bytes from `from` to buf_ + offset
  // through rkey.
  ibv_wc Rdma(ibv_qp* from, ibv_wr_opcode op, uint32_t rkey, uint64_t offset, uint32_t len) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(src_buf_), len, src_->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = 13;
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(buf_) + offset;
    wr.wr.rdma.rkey = rkey;
    EXPECT_EQ(ibv_post_send(from, &wr, &bad), 0);
    return Poll();
  }
  ibv_wc Poll() {
    ibv_wc wc{};
    wc.status = IBV_WC_GENERAL_ERR;
    EXPECT_EQ(PollOne(cq_, &wc), 1);
    return wc;
  }
  ibv_qp_state StateOf(ibv_qp* qp) {
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    EXPECT_EQ(ibv_query_qp(qp, &attr, IBV_QP_STATE, &init), 0);
    return attr.qp_state;
  }

  alignas(64) uint8_t buf_[8192] = {};
  alignas(64) uint8_t src_buf_[4096] = {};
  ibv_mr *mr_ = nullptr, *src_ = nullptr;
  ibv_qp *a_ = nullptr, *b_ = nullptr, *c_ = nullptr;
  std::vector<ibv_mw*> mws_;
};

#define EXPECT_WC(wc, want)                                                                      \
  EXPECT_EQ((wc).status, want) << ibv_wc_status_str((wc).status) << " vendor_err 0x" << std::hex \
                               << (wc).vendor_err

TEST_F(MwTest, DeviceAdvertisesBothTypes) {
  ibv_device_attr attr{};
  ASSERT_EQ(ibv_query_device(ctx_, &attr), 0);
  EXPECT_GT(attr.max_mw, 0);
  EXPECT_TRUE(attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW);
  EXPECT_TRUE(attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
}

TEST_F(MwTest, AllocRejectsAnUnknownType) {
  errno = 0;
  EXPECT_EQ(ibv_alloc_mw(pd_, static_cast<ibv_mw_type>(3)), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

TEST_F(MwTest, Type1WindowServesWritesInsideItsRangeOnly) {
  ibv_mw* mw = AllocMw(IBV_MW_TYPE_1);
  ASSERT_NE(mw, nullptr);
  const uint32_t before = mw->rkey;
  ibv_wc wc = BindType1(mw, Range(1024, 2048, IBV_ACCESS_REMOTE_WRITE));
  EXPECT_WC(wc, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_BIND_MW);
  EXPECT_EQ(wc.wr_id, 11u);
  EXPECT_EQ(mw->rkey, ibv_inc_rkey(before)) << "ibv_bind_mw gives the window a new key";

  wc = Rdma(a_, IBV_WR_RDMA_WRITE, mw->rkey, 1024, 2048);
  EXPECT_WC(wc, IBV_WC_SUCCESS);
  EXPECT_EQ(buf_[1024], 0x5a);
  EXPECT_EQ(buf_[1024 + 2047], 0x5a);
  EXPECT_EQ(buf_[1023], 0);
  // One byte past the window: the responder refuses, both QPs end in ERR.
  wc = Rdma(a_, IBV_WR_RDMA_WRITE, mw->rkey, 1025, 2048);
  EXPECT_WC(wc, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(StateOf(b_), IBV_QPS_ERR);
}

TEST_F(MwTest, WindowRightsAreTheWindowsNotTheMrs) {
  ibv_mw* mw = AllocMw(IBV_MW_TYPE_1);
  ASSERT_NE(mw, nullptr);
  // LOCAL_WRITE means nothing for a window and is accepted (rdma-core's
  // test_mr binds with it).
  ASSERT_EQ(BindType1(mw, Range(0, 4096, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE)).status,
            IBV_WC_SUCCESS);
  // The window grants write only: a READ through it is refused.
  ibv_wc wc = Rdma(a_, IBV_WR_RDMA_READ, mw->rkey, 0, 64);
  EXPECT_WC(wc, IBV_WC_REM_ACCESS_ERR);
}

TEST_F(MwTest, AnOldKeyOfARebindWindowIsRefused) {
  ibv_mw* mw = AllocMw(IBV_MW_TYPE_1);
  ASSERT_NE(mw, nullptr);
  ASSERT_EQ(BindType1(mw, Range(0, 4096, IBV_ACCESS_REMOTE_WRITE)).status, IBV_WC_SUCCESS);
  const uint32_t old_key = mw->rkey;
  ASSERT_EQ(BindType1(mw, Range(0, 4096, IBV_ACCESS_REMOTE_WRITE)).status, IBV_WC_SUCCESS);
  EXPECT_NE(mw->rkey, old_key);
  ibv_wc wc = Rdma(a_, IBV_WR_RDMA_WRITE, old_key, 0, 64);
  EXPECT_WC(wc, IBV_WC_REM_ACCESS_ERR);
}

TEST_F(MwTest, Type1BindOfLengthZeroInvalidates) {
  ibv_mw* mw = AllocMw(IBV_MW_TYPE_1);
  ASSERT_NE(mw, nullptr);
  ASSERT_EQ(BindType1(mw, Range(0, 4096, IBV_ACCESS_REMOTE_WRITE)).status, IBV_WC_SUCCESS);
  ASSERT_EQ(Rdma(a_, IBV_WR_RDMA_WRITE, mw->rkey, 0, 64).status, IBV_WC_SUCCESS);
  ASSERT_EQ(BindType1(mw, Range(0, 0, 0)).status, IBV_WC_SUCCESS);
  ibv_wc wc = Rdma(a_, IBV_WR_RDMA_WRITE, mw->rkey, 0, 64);
  EXPECT_WC(wc, IBV_WC_REM_ACCESS_ERR);
}

TEST_F(MwTest, Type2WindowWorksUntilLocalInvalidate) {
  ibv_mw* mw = AllocMw(IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  const uint32_t rkey = ibv_inc_rkey(mw->rkey);
  ibv_wc wc = BindType2(mw, rkey, Range(0, 4096, IBV_ACCESS_REMOTE_WRITE));
  EXPECT_WC(wc, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_BIND_MW);
  EXPECT_WC(Rdma(a_, IBV_WR_RDMA_WRITE, rkey, 0, 4096), IBV_WC_SUCCESS);
  EXPECT_EQ(buf_[4095], 0x5a);
  // A bound type 2 window is not bound again before it is invalidated.
  EXPECT_WC(BindType2(mw, ibv_inc_rkey(rkey), Range(0, 64, IBV_ACCESS_REMOTE_WRITE)),
            IBV_WC_MW_BIND_ERR);
}

TEST_F(MwTest, LocalInvalidateEndsAType2Window) {
  ibv_mw* mw = AllocMw(IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  const uint32_t rkey = ibv_inc_rkey(mw->rkey);
  ASSERT_EQ(BindType2(mw, rkey, Range(0, 4096, IBV_ACCESS_REMOTE_WRITE)).status, IBV_WC_SUCCESS);
  // ibv_wr_local_inv on the window's QP.
  ibv_qp_ex* qx = ibv_qp_to_qp_ex(b_);
  ibv_wr_start(qx);
  qx->wr_id = 14;
  qx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_local_inv(qx, rkey);
  ASSERT_EQ(ibv_wr_complete(qx), 0);
  ibv_wc wc = Poll();
  EXPECT_WC(wc, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_LOCAL_INV);
  EXPECT_WC(Rdma(a_, IBV_WR_RDMA_WRITE, rkey, 0, 64), IBV_WC_REM_ACCESS_ERR);
}

TEST_F(MwTest, SendWithInvalidateEndsTheWindowAndTellsTheReceiver) {
  ibv_mw* mw = AllocMw(IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  const uint32_t rkey = ibv_inc_rkey(mw->rkey);
  ASSERT_EQ(BindType2(mw, rkey, Range(0, 4096, IBV_ACCESS_REMOTE_WRITE)).status, IBV_WC_SUCCESS);
  ibv_sge rsge{reinterpret_cast<uintptr_t>(buf_ + 4096), 64, mr_->lkey};
  ibv_recv_wr rwr{}, *rbad = nullptr;
  rwr.wr_id = 21;
  rwr.sg_list = &rsge;
  rwr.num_sge = 1;
  ASSERT_EQ(ibv_post_recv(b_, &rwr, &rbad), 0);
  ibv_sge sge{reinterpret_cast<uintptr_t>(src_buf_), 16, src_->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = 22;
  wr.opcode = IBV_WR_SEND_WITH_INV;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.invalidate_rkey = rkey;
  ASSERT_EQ(ibv_post_send(a_, &wr, &bad), 0);
  ibv_wc first = Poll(), second = Poll();
  const ibv_wc& recv = first.wr_id == 21 ? first : second;
  const ibv_wc& send = first.wr_id == 21 ? second : first;
  EXPECT_WC(send, IBV_WC_SUCCESS);
  EXPECT_EQ(send.opcode, IBV_WC_SEND);
  EXPECT_WC(recv, IBV_WC_SUCCESS);
  EXPECT_EQ(recv.opcode, IBV_WC_RECV);
  EXPECT_TRUE(recv.wc_flags & IBV_WC_WITH_INV);
  EXPECT_EQ(recv.invalidated_rkey, rkey);
  EXPECT_EQ(recv.byte_len, 16u);
  EXPECT_WC(Rdma(a_, IBV_WR_RDMA_WRITE, rkey, 0, 64), IBV_WC_REM_ACCESS_ERR);
}

TEST_F(MwTest, SendWithInvalidateOfAnMrKeyIsAnInvalidRequest) {
  ibv_sge rsge{reinterpret_cast<uintptr_t>(buf_), 64, mr_->lkey};
  ibv_recv_wr rwr{}, *rbad = nullptr;
  rwr.wr_id = 21;
  rwr.sg_list = &rsge;
  rwr.num_sge = 1;
  ASSERT_EQ(ibv_post_recv(b_, &rwr, &rbad), 0);
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = 22;
  wr.opcode = IBV_WR_SEND_WITH_INV;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.invalidate_rkey = mr_->rkey;
  ASSERT_EQ(ibv_post_send(a_, &wr, &bad), 0);
  ibv_wc first = Poll(), second = Poll();
  const ibv_wc& send = first.wr_id == 22 ? first : second;
  EXPECT_WC(send, IBV_WC_REM_INV_REQ_ERR);
  EXPECT_EQ(StateOf(b_), IBV_QPS_ERR);
}

TEST_F(MwTest, Type2WindowServesOnlyItsQp) {
  c_ = MakeQp();
  ibv_qp* d = MakeQp();
  ASSERT_TRUE(c_ && d);
  ASSERT_TRUE(ConnectRc(ctx_, c_, d->qp_num));
  ASSERT_TRUE(ConnectRc(ctx_, d, c_->qp_num));
  ibv_mw* mw = AllocMw(IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  const uint32_t rkey = ibv_inc_rkey(mw->rkey);
  ASSERT_EQ(BindType2(mw, rkey, Range(0, 4096, IBV_ACCESS_REMOTE_WRITE)).status, IBV_WC_SUCCESS);
  // Bound to b_: a write arriving on d (from c_) is refused.
  EXPECT_WC(Rdma(c_, IBV_WR_RDMA_WRITE, rkey, 0, 64), IBV_WC_REM_ACCESS_ERR);
  ibv_destroy_qp(d);
}

TEST_F(MwTest, BindOnAnMrWithoutMwBindFails) {
  ibv_mr* plain = ibv_reg_mr(pd_, buf_, 4096, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(plain, nullptr);
  ibv_mw* mw = AllocMw(IBV_MW_TYPE_1);
  ASSERT_NE(mw, nullptr);
  ibv_mw_bind_info info{plain, reinterpret_cast<uintptr_t>(buf_), 4096, IBV_ACCESS_REMOTE_WRITE};
  ibv_wc wc = BindType1(mw, info);
  EXPECT_WC(wc, IBV_WC_MW_BIND_ERR);
  EXPECT_EQ(StateOf(b_), IBV_QPS_ERR);
  EXPECT_EQ(ibv_dereg_mr(plain), 0);
}

TEST_F(MwTest, BindBeyondTheMrFails) {
  ibv_mw* mw = AllocMw(IBV_MW_TYPE_1);
  ASSERT_NE(mw, nullptr);
  EXPECT_WC(BindType1(mw, Range(4096, sizeof(buf_), IBV_ACCESS_REMOTE_WRITE)), IBV_WC_MW_BIND_ERR);
}

TEST_F(MwTest, RemoteWriteWindowOnAnMrWithoutLocalWriteFails) {
  ibv_mr* ro = ibv_reg_mr(pd_, buf_, 4096, IBV_ACCESS_MW_BIND);
  ASSERT_NE(ro, nullptr);
  ibv_mw* mw = AllocMw(IBV_MW_TYPE_1);
  ASSERT_NE(mw, nullptr);
  ibv_mw_bind_info info{ro, reinterpret_cast<uintptr_t>(buf_), 4096, IBV_ACCESS_REMOTE_WRITE};
  EXPECT_WC(BindType1(mw, info), IBV_WC_MW_BIND_ERR);
  EXPECT_EQ(ibv_dereg_mr(ro), 0);
}

TEST_F(MwTest, LocalInvalidateOfAnMrKeyFails) {
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = 15;
  wr.opcode = IBV_WR_LOCAL_INV;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.invalidate_rkey = mr_->rkey;
  ASSERT_EQ(ibv_post_send(b_, &wr, &bad), 0);
  ibv_wc wc = Poll();
  EXPECT_WC(wc, IBV_WC_LOC_QP_OP_ERR);
  EXPECT_EQ(wc.opcode, IBV_WC_LOCAL_INV);
}

TEST_F(MwTest, LocalInvalidateOfAType1WindowFails) {
  ibv_mw* mw = AllocMw(IBV_MW_TYPE_1);
  ASSERT_NE(mw, nullptr);
  ASSERT_EQ(BindType1(mw, Range(0, 4096, IBV_ACCESS_REMOTE_WRITE)).status, IBV_WC_SUCCESS);
  ibv_send_wr wr{}, *bad = nullptr;
  wr.opcode = IBV_WR_LOCAL_INV;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.invalidate_rkey = mw->rkey;
  ASSERT_EQ(ibv_post_send(b_, &wr, &bad), 0);
  EXPECT_WC(Poll(), IBV_WC_LOC_QP_OP_ERR);
}

TEST_F(MwTest, PostingTheWrongTypeIsEinval) {
  ibv_mw* t1 = AllocMw(IBV_MW_TYPE_1);
  ibv_mw* t2 = AllocMw(IBV_MW_TYPE_2);
  ASSERT_TRUE(t1 && t2);
  ibv_send_wr wr{}, *bad = nullptr;
  wr.opcode = IBV_WR_BIND_MW;
  wr.bind_mw.mw = t1;
  wr.bind_mw.bind_info = Range(0, 64, IBV_ACCESS_REMOTE_WRITE);
  EXPECT_EQ(ibv_post_send(b_, &wr, &bad), EINVAL);
  EXPECT_EQ(bad, &wr);
  ibv_mw_bind bind{};
  bind.bind_info = Range(0, 64, IBV_ACCESS_REMOTE_WRITE);
  EXPECT_EQ(ibv_bind_mw(b_, t2, &bind), EINVAL);
}

TEST_F(MwTest, AnMrWithABoundWindowIsNotDeregistered) {
  ibv_mw* mw = AllocMw(IBV_MW_TYPE_1);
  ASSERT_NE(mw, nullptr);
  ASSERT_EQ(BindType1(mw, Range(0, 4096, IBV_ACCESS_REMOTE_WRITE)).status, IBV_WC_SUCCESS);
  EXPECT_EQ(ibv_dereg_mr(mr_), EINVAL);
  // The MR still works, through the window too.
  EXPECT_WC(Rdma(a_, IBV_WR_RDMA_WRITE, mw->rkey, 0, 64), IBV_WC_SUCCESS);
  // A PD with a window is busy.
  EXPECT_EQ(ibv_dealloc_pd(pd_), EBUSY);
  ASSERT_EQ(ibv_dealloc_mw(mw), 0);
  Forget(mw);
  EXPECT_EQ(ibv_dereg_mr(mr_), 0);
  mr_ = nullptr;
}

TEST_F(MwTest, DeallocatedWindowKeyIsRefused) {
  ibv_mw* mw = AllocMw(IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  const uint32_t rkey = ibv_inc_rkey(mw->rkey);
  ASSERT_EQ(BindType2(mw, rkey, Range(0, 4096, IBV_ACCESS_REMOTE_WRITE)).status, IBV_WC_SUCCESS);
  ASSERT_EQ(ibv_dealloc_mw(mw), 0);
  Forget(mw);
  EXPECT_WC(Rdma(a_, IBV_WR_RDMA_WRITE, rkey, 0, 64), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(MyObjectCount("mw"), 0u);
}

}  // namespace
}  // namespace softverbs::it
