// mlx5dv_reserved_qpn_alloc(3) / mlx5dv_reserved_qpn_dealloc(3): a reserved
// number comes from the device's QP number space and no QP gets it while a
// context holds it; only the context that holds a number frees it (EINVAL
// for any other number, twice, or from another context); and the device
// frees the numbers of a process that dies, as it frees its QPs.
#include <sys/wait.h>
#include <unistd.h>

#include <set>

#include "devx_env.h"

namespace devx_it {
namespace {

class ReservedQpnTest : public DevxTest {
 protected:
  void SetUp() override {
    DevxTest::SetUp();
    pd_ = ibv_alloc_pd(ctx_);
    ASSERT_NE(pd_, nullptr);
    cq_ = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
    ASSERT_NE(cq_, nullptr);
  }
  void TearDown() override {
    for (ibv_qp* qp : qps_) ibv_destroy_qp(qp);
    if (cq_) ibv_destroy_cq(cq_);
    if (pd_) ibv_dealloc_pd(pd_);
    DevxTest::TearDown();
  }
  ibv_qp* CreateRc() {
    ibv_qp_init_attr attr{};
    attr.send_cq = attr.recv_cq = cq_;
    attr.qp_type = IBV_QPT_RC;
    attr.cap.max_send_wr = attr.cap.max_recv_wr = 1;
    attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
    ibv_qp* qp = ibv_create_qp(pd_, &attr);
    if (qp) qps_.push_back(qp);
    return qp;
  }
  static size_t ReservedCount() { return Status()["objects"]["reserved_qpn"].get<size_t>(); }

  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  std::vector<ibv_qp*> qps_;
};

TEST_F(ReservedQpnTest, ReservedNumbersAreDistinctAndNoQpGetsOne) {
  std::set<uint32_t> reserved;
  std::set<uint32_t> qp_numbers;
  for (int i = 0; i < 300; ++i) {
    uint32_t qpn = 0;
    ASSERT_EQ(mlx5dv_reserved_qpn_alloc(ctx_, &qpn), 0) << strerror(errno);
    EXPECT_NE(qpn, 0u);
    EXPECT_LE(qpn, 0xffffffu);
    EXPECT_TRUE(reserved.insert(qpn).second) << "reserved twice: 0x" << std::hex << qpn;
    if (i % 6 == 0) {
      ibv_qp* qp = CreateRc();
      ASSERT_NE(qp, nullptr) << strerror(errno);
      qp_numbers.insert(qp->qp_num);
    }
  }
  EXPECT_EQ(ReservedCount(), 300u);
  for (uint32_t qpn : qp_numbers) EXPECT_EQ(reserved.count(qpn), 0u) << "QP got 0x" << qpn;
  for (uint32_t qpn : reserved) EXPECT_EQ(mlx5dv_reserved_qpn_dealloc(ctx_, qpn), 0) << qpn;
  EXPECT_EQ(ReservedCount(), 0u);
}

TEST_F(ReservedQpnTest, OnlyTheHolderFreesANumberAndOnlyOnce) {
  uint32_t qpn = 0;
  ASSERT_EQ(mlx5dv_reserved_qpn_alloc(ctx_, &qpn), 0);
  ibv_qp* qp = CreateRc();
  ASSERT_NE(qp, nullptr);
  // Not reserved: a number next to it, a QP's number.
  EXPECT_EQ(mlx5dv_reserved_qpn_dealloc(ctx_, qpn - 1), EINVAL);
  EXPECT_EQ(mlx5dv_reserved_qpn_dealloc(ctx_, qp->qp_num), EINVAL);
  // Another context of the same process does not hold it.
  ibv_context* other = OpenDevx(false);
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(mlx5dv_reserved_qpn_dealloc(other, qpn), EINVAL);
  ibv_close_device(other);
  EXPECT_EQ(ReservedCount(), 1u);
  EXPECT_EQ(mlx5dv_reserved_qpn_dealloc(ctx_, qpn), 0);
  EXPECT_EQ(mlx5dv_reserved_qpn_dealloc(ctx_, qpn), EINVAL);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ReservedCount(), 0u);
}

TEST_F(ReservedQpnTest, NullArgumentsAreEinval) {
  EXPECT_EQ(mlx5dv_reserved_qpn_alloc(ctx_, nullptr), EINVAL);
  uint32_t qpn = 0;
  EXPECT_EQ(mlx5dv_reserved_qpn_alloc(nullptr, &qpn), EINVAL);
  EXPECT_EQ(mlx5dv_reserved_qpn_dealloc(nullptr, 0x11), EINVAL);
  EXPECT_EQ(ReservedCount(), 0u);
}

TEST_F(ReservedQpnTest, ADeadProcesssNumbersAreFreed) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ibv_context* ctx = OpenDevx(false);
    uint32_t qpn = 0;
    int ok = ctx != nullptr;
    for (int i = 0; ok && i < 5; ++i) ok = mlx5dv_reserved_qpn_alloc(ctx, &qpn) == 0;
    _exit(ok ? 0 : 1);  // no dealloc, no close: the device frees them
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // The device learns of the exit when the connection closes.
  size_t left = ReservedCount();
  for (int i = 0; i < 200 && left != 0; ++i) {
    usleep(10000);
    left = ReservedCount();
  }
  EXPECT_EQ(left, 0u);
}

}  // namespace
}  // namespace devx_it
