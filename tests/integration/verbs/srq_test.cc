// Shared receive queues: create/modify/query/destroy, limits, EBUSY while a
// QP uses one.
#include <errno.h>
#include <string.h>

#include "test_env.h"

namespace softverbs::it {
namespace {

class SrqTest : public ContextTest {
 protected:
  void SetUp() override {
    ContextTest::SetUp();
    ASSERT_EQ(ibv_query_device(ctx_, &dev_), 0);
  }
  ibv_srq* Create(uint32_t max_wr, uint32_t max_sge, uint32_t limit = 0) {
    ibv_srq_init_attr init{};
    init.attr = {max_wr, max_sge, limit};
    return ibv_create_srq(pd_, &init);
  }
  void ExpectCreateFails(uint32_t max_wr, uint32_t max_sge, uint32_t limit, int err) {
    size_t before = MyObjectCount("srq");
    errno = 0;
    ibv_srq* srq = Create(max_wr, max_sge, limit);
    EXPECT_EQ(srq, nullptr) << max_wr << "/" << max_sge << "/" << limit;
    EXPECT_EQ(errno, err);
    if (srq) ibv_destroy_srq(srq);
    EXPECT_EQ(MyObjectCount("srq"), before);
  }
  ibv_device_attr dev_{};
};

TEST_F(SrqTest, CreateQueryDestroy) {
  ibv_srq_init_attr init{};
  init.srq_context = this;
  init.attr = {100, 3, 0};
  ibv_srq* srq = ibv_create_srq(pd_, &init);
  ASSERT_NE(srq, nullptr) << strerror(errno);
  EXPECT_GE(init.attr.max_wr, 100u);
  EXPECT_GE(init.attr.max_sge, 3u);
  EXPECT_EQ(srq->srq_context, this);
  EXPECT_EQ(srq->pd, pd_);
  ibv_srq_attr q{};
  ASSERT_EQ(ibv_query_srq(srq, &q), 0);
  EXPECT_EQ(q.max_wr, init.attr.max_wr);
  EXPECT_EQ(q.max_sge, init.attr.max_sge);
  EXPECT_EQ(MyObjectCount("srq"), 1u);
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
  EXPECT_EQ(MyObjectCount("srq"), 0u);
}

TEST_F(SrqTest, LimitsAreEnforced) {
  ibv_srq* srq = Create(dev_.max_srq_wr, dev_.max_srq_sge);
  ASSERT_NE(srq, nullptr) << "the advertised limits must work";
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
  ExpectCreateFails(dev_.max_srq_wr + 1, 1, 0, EINVAL);
  ExpectCreateFails(1, dev_.max_srq_sge + 1, 0, EINVAL);
}

// max_wr 0 is not an error on mlx5 (the kernel and libmlx5 round it up to a
// one-WQE queue; rdma-core's SrqInitAttr() asks for it); only rxe refuses it.
TEST_F(SrqTest, ZeroMaxWrGetsAOneWqeQueue) {
  ibv_srq_init_attr init{};
  init.attr = {0, 1, 0};
  ibv_srq* srq = ibv_create_srq(pd_, &init);
  ASSERT_NE(srq, nullptr) << strerror(errno);
  EXPECT_GE(init.attr.max_wr, 1u);
  ibv_sge sge{0, 0, 0};
  ibv_recv_wr wr{}, *bad = nullptr;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  for (uint32_t i = 0; i < init.attr.max_wr; ++i) EXPECT_EQ(ibv_post_srq_recv(srq, &wr, &bad), 0);
  EXPECT_EQ(ibv_post_srq_recv(srq, &wr, &bad), ENOMEM) << "the queue holds max_wr WQEs";
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
}

TEST_F(SrqTest, CreateSrqExBasicAndBadCompMask) {
  ibv_srq_init_attr_ex init{};
  init.attr = {16, 1, 0};
  init.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE;
  init.srq_type = IBV_SRQT_BASIC;
  init.pd = pd_;
  ibv_srq* srq = ibv_create_srq_ex(ctx_, &init);
  ASSERT_NE(srq, nullptr) << strerror(errno);
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
  init.comp_mask = IBV_SRQ_INIT_ATTR_PD | (1u << 10);
  errno = 0;
  EXPECT_EQ(ibv_create_srq_ex(ctx_, &init), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(MyObjectCount("srq"), 0u);
}

TEST_F(SrqTest, ModifyArmsLimitAndResizes) {
  ibv_srq* srq = Create(64, 1);
  ASSERT_NE(srq, nullptr);
  ibv_srq_attr a{};
  a.srq_limit = 10;
  ASSERT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT), 0);
  ibv_srq_attr q{};
  ASSERT_EQ(ibv_query_srq(srq, &q), 0);
  EXPECT_EQ(q.srq_limit, 10u);
  a.max_wr = 32;
  ASSERT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_MAX_WR), 0);
  ASSERT_EQ(ibv_query_srq(srq, &q), 0);
  EXPECT_GE(q.max_wr, 32u);
  EXPECT_EQ(q.srq_limit, 10u);
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
}

TEST_F(SrqTest, GrowingWorksWhenSrqResizeIsAdvertised) {
  ibv_srq* srq = Create(64, 1);
  ASSERT_NE(srq, nullptr);
  ibv_srq_attr a{};
  a.max_wr = 128;
  int rc = ibv_modify_srq(srq, &a, IBV_SRQ_MAX_WR);
  if (dev_.device_cap_flags & IBV_DEVICE_SRQ_RESIZE) {
    EXPECT_EQ(rc, 0) << "IBV_DEVICE_SRQ_RESIZE is advertised";
    ibv_srq_attr q{};
    ASSERT_EQ(ibv_query_srq(srq, &q), 0);
    EXPECT_GE(q.max_wr, 128u);
  } else {
    EXPECT_NE(rc, 0);
  }
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
}

TEST_F(SrqTest, ShrinkingBelowTheArmedLimitIsEinval) {
  ibv_srq* srq = Create(64, 1, 50);
  ASSERT_NE(srq, nullptr);
  ibv_srq_attr a{};
  a.max_wr = 16;  // below the armed srq_limit 50
  EXPECT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_MAX_WR), EINVAL);
  ibv_srq_attr q{};
  ASSERT_EQ(ibv_query_srq(srq, &q), 0);
  EXPECT_EQ(q.max_wr, 64u);
  EXPECT_EQ(q.srq_limit, 50u);
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
}

TEST_F(SrqTest, BadModifyFailsAndChangesNothing) {
  ibv_srq* srq = Create(64, 1, 5);
  ASSERT_NE(srq, nullptr);
  ibv_srq_attr before{};
  ASSERT_EQ(ibv_query_srq(srq, &before), 0);
  ibv_srq_attr a{};
  a.srq_limit = before.max_wr + 1;  // limit above the queue size
  EXPECT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT), EINVAL);
  a.max_wr = dev_.max_srq_wr + 1;
  a.srq_limit = 1;
  EXPECT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT), EINVAL);
  EXPECT_EQ(ibv_modify_srq(srq, &a, 1 << 5), EINVAL) << "unknown attr_mask bit";
  ibv_srq_attr after{};
  ASSERT_EQ(ibv_query_srq(srq, &after), 0);
  EXPECT_EQ(after.max_wr, before.max_wr);
  EXPECT_EQ(after.srq_limit, before.srq_limit);
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
}

TEST_F(SrqTest, DestroyIsBusyWhileAQpUsesIt) {
  ibv_srq* srq = Create(16, 1);
  ASSERT_NE(srq, nullptr);
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = cq_;
  init.srq = srq;
  init.cap = {1, 0, 1, 0, 0};
  init.qp_type = IBV_QPT_RC;
  ibv_qp* qp = ibv_create_qp(pd_, &init);
  ASSERT_NE(qp, nullptr) << strerror(errno);
  EXPECT_EQ(qp->srq, srq);
  EXPECT_EQ(ibv_destroy_srq(srq), EBUSY);
  EXPECT_EQ(MyObjectCount("srq"), 1u);
  ibv_srq_attr q{};
  EXPECT_EQ(ibv_query_srq(srq, &q), 0) << "the SRQ still works";
  EXPECT_EQ(ibv_dealloc_pd(pd_), EBUSY) << "the SRQ and QP hold the PD";
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
}

}  // namespace
}  // namespace softverbs::it
