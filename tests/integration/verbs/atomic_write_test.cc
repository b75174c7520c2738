// IBV_WR_ATOMIC_WRITE (ibv_wr_atomic_write): 8 bytes stored at once at an
// 8-byte aligned remote address of an MR with remote write access; the
// IBV_WC_ATOMIC_WRITE completion; the responder's errors for a misaligned
// address or an rkey without remote write.
#include <errno.h>
#include <string.h>

#include "test_env.h"

namespace softverbs::it {
namespace {

class AtomicWriteTest : public ContextTest {
 protected:
  void SetUp() override {
    ContextTest::SetUp();
    ibv_qp_init_attr_ex init{};
    init.send_cq = init.recv_cq = cq_;
    init.qp_type = IBV_QPT_RC;
    init.cap = {8, 8, 1, 1, 0};
    init.pd = pd_;
    init.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    init.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE;
    a_ = ibv_create_qp_ex(ctx_, &init);
    ASSERT_NE(a_, nullptr) << "IBV_QP_EX_WITH_ATOMIC_WRITE: " << strerror(errno);
    b_ = ibv_create_qp_ex(ctx_, &init);
    ASSERT_NE(b_, nullptr);
    ASSERT_TRUE(ConnectRc(ctx_, a_, b_->qp_num));
    ASSERT_TRUE(ConnectRc(ctx_, b_, a_->qp_num));
    target_ = ibv_reg_mr(pd_, buf_, sizeof(buf_), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    read_only_ = ibv_reg_mr(pd_, buf_, sizeof(buf_), IBV_ACCESS_REMOTE_READ);
    ASSERT_TRUE(target_ && read_only_);
  }
  void TearDown() override {
    if (target_) ibv_dereg_mr(target_);
    if (read_only_) ibv_dereg_mr(read_only_);
    if (a_) ibv_destroy_qp(a_);
    if (b_) ibv_destroy_qp(b_);
    ContextTest::TearDown();
  }
  ibv_wc AtomicWrite(uint32_t rkey, uint64_t addr, uint64_t value) {
    ibv_qp_ex* qx = ibv_qp_to_qp_ex(a_);
    ibv_wr_start(qx);
    qx->wr_id = 1;
    qx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_atomic_write(qx, rkey, addr, &value);
    EXPECT_EQ(ibv_wr_complete(qx), 0);
    ibv_wc wc{};
    wc.status = IBV_WC_GENERAL_ERR;
    EXPECT_EQ(PollOne(cq_, &wc), 1);
    return wc;
  }
  alignas(64) uint8_t buf_[4096] = {};
  ibv_mr *target_ = nullptr, *read_only_ = nullptr;
  ibv_qp *a_ = nullptr, *b_ = nullptr;
};

TEST_F(AtomicWriteTest, StoresEightBytes) {
  const uint64_t value = 0x1122334455667788ull;
  ibv_wc wc = AtomicWrite(target_->rkey, reinterpret_cast<uintptr_t>(buf_ + 64), value);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.opcode, IBV_WC_ATOMIC_WRITE);
  uint64_t got;
  memcpy(&got, buf_ + 64, 8);
  EXPECT_EQ(got, value);
}

TEST_F(AtomicWriteTest, MisalignedAddressIsRemoteInvalidRequest) {
  ibv_wc wc = AtomicWrite(target_->rkey, reinterpret_cast<uintptr_t>(buf_ + 4), 1);
  EXPECT_EQ(wc.status, IBV_WC_REM_INV_REQ_ERR) << ibv_wc_status_str(wc.status);
}

TEST_F(AtomicWriteTest, RkeyWithoutRemoteWriteIsRemoteAccessError) {
  ibv_wc wc = AtomicWrite(read_only_->rkey, reinterpret_cast<uintptr_t>(buf_ + 64), 1);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
}

}  // namespace
}  // namespace softverbs::it
