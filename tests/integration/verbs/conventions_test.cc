// How verbs answer, beyond what they do: the outputs rdma-core's libibverbs
// sets, also on failure, which programs read (errno after a verb that
// returns the errno value, the first error of an ibv_wr_* batch, the
// cached QP state, a port attribute zeroed before the port is looked at).
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <functional>
#include <vector>

#include "test_env.h"

namespace softverbs::it {
namespace {

class ConventionsTest : public ContextTest {
 protected:
  ibv_qp* MakeQp(ibv_qp_type type, bool ex = false) {
    ibv_qp_init_attr_ex a{};
    a.send_cq = cq_;
    a.recv_cq = cq_;
    a.qp_type = type;
    a.cap = {8, 8, 1, 1, 0};
    a.comp_mask = IBV_QP_INIT_ATTR_PD;
    a.pd = pd_;
    if (ex) {
      a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
      a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE;
    }
    return ibv_create_qp_ex(ctx_, &a);
  }
};

// Under rdma-core a verb that returns the errno value leaves it in errno as
// well (the kernel refused its command: the failed write or ioctl set it),
// and programs print strerror(errno). Refusals found by the library and by
// the device alike.
TEST_F(ConventionsTest, RefusedVerbsLeaveTheirErrnoInErrno) {
  ibv_qp* rc = MakeQp(IBV_QPT_RC);
  ASSERT_NE(rc, nullptr);
  ibv_srq_init_attr sa{};
  sa.attr = {16, 1, 0};
  ibv_srq* srq = ibv_create_srq(pd_, &sa);
  ASSERT_NE(srq, nullptr);
  ibv_port_attr port{};
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTS;  // RESET -> RTS: the device refuses it
  ibv_srq_attr srq_attr{};
  srq_attr.srq_limit = 1000;  // above max_wr
  ibv_gid mgid{};
  mgid.raw[0] = 0xff;
  struct Case {
    const char* verb;
    int expected;
    std::function<int()> call;
  } cases[] = {
      {"ibv_modify_qp", EINVAL, [&] { return ibv_modify_qp(rc, &attr, IBV_QP_STATE); }},
      {"ibv_dealloc_pd (in use)", EBUSY, [&] { return ibv_dealloc_pd(pd_); }},
      {"ibv_destroy_cq (in use)", EBUSY, [&] { return ibv_destroy_cq(cq_); }},
      {"ibv_resize_cq (0 entries)", EINVAL, [&] { return ibv_resize_cq(cq_, 0); }},
      {"ibv_modify_srq (limit above max_wr)", EINVAL,
       [&] { return ibv_modify_srq(srq, &srq_attr, IBV_SRQ_LIMIT); }},
      {"ibv_attach_mcast (RC QP)", EINVAL, [&] { return ibv_attach_mcast(rc, &mgid, 0); }},
      {"ibv_query_port (port 2)", EINVAL, [&] { return ibv_query_port(ctx_, 2, &port); }},
  };
  for (const Case& c : cases) {
    errno = 0;
    EXPECT_EQ(c.call(), c.expected) << c.verb;
    EXPECT_EQ(errno, c.expected) << c.verb;
  }
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
  EXPECT_EQ(ibv_destroy_qp(rc), 0);
}

// ibv_wr_complete reports the batch's first error (libmlx5 keeps the first),
// not the last.
TEST_F(ConventionsTest, WrCompleteReportsTheFirstError) {
  ibv_qp* qp = MakeQp(IBV_QPT_RC, true);
  ASSERT_NE(qp, nullptr);
  ibv_qp_ex* qpx = ibv_qp_to_qp_ex(qp);
  ASSERT_NE(qpx, nullptr);
  ibv_wr_start(qpx);
  ibv_wr_send(qpx);
  std::vector<ibv_sge> sges(64, ibv_sge{0, 0, 0});
  ibv_wr_set_sge_list(qpx, sges.size(), sges.data());  // EINVAL: above max_send_sge
  ibv_wr_send_tso(qpx, nullptr, 0, 0);                 // EOPNOTSUPP: never advertised
  EXPECT_EQ(ibv_wr_complete(qpx), EINVAL);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
}

// ibv_query_qp updates the QP's cached state (ibv_qp::state) only when
// IBV_QP_STATE was asked for, as libibverbs does.
TEST_F(ConventionsTest, QueryQpCachesTheStateOnlyWhenAskedFor) {
  ibv_qp* qp = MakeQp(IBV_QPT_RC);
  ASSERT_NE(qp, nullptr);
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  qp->state = IBV_QPS_SQD;  // what a program that cached something else sees
  ASSERT_EQ(ibv_query_qp(qp, &attr, IBV_QP_CAP, &init), 0);
  EXPECT_EQ(qp->state, IBV_QPS_SQD);
  ASSERT_EQ(ibv_query_qp(qp, &attr, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(qp->state, IBV_QPS_RESET);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
}

// libibverbs zeroes a full-size port attribute before the provider looks at
// the port: a refused port leaves zeros, not the caller's bytes.
TEST_F(ConventionsTest, QueryPortZeroesTheAttributeEvenForABadPort) {
  ibv_port_attr attr;
  memset(&attr, 0xab, sizeof(attr));
  EXPECT_EQ(ibv_query_port(ctx_, 2, &attr), EINVAL);
  const auto* bytes = reinterpret_cast<const unsigned char*>(&attr);
  for (size_t i = 0; i < sizeof(attr); ++i) ASSERT_EQ(bytes[i], 0) << "byte " << i;
}

// A negative count polls nothing: 0, as libmlx5's and rxe's loops give.
TEST_F(ConventionsTest, PollCqWithANegativeCountPollsNothing) {
  ibv_wc wc{};
  EXPECT_EQ(ibv_poll_cq(cq_, -1, &wc), 0);
}

// The kernel's reg_mr command refuses an iova whose offset in its page is
// not the address's (EINVAL); the same offset is fine.
TEST_F(ConventionsTest, RegMrIovaNeedsTheAddressesOffsetInItsPage) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* mem = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  char* buf = static_cast<char*>(mem) + 100;
  errno = 0;
  EXPECT_EQ(ibv_reg_mr_iova(pd_, buf, page, 0x10000, IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(MyObjectCount("mr"), 0u);
  ibv_mr* mr = ibv_reg_mr_iova(pd_, buf, page, 0x10000 + 100, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr) << strerror(errno);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  munmap(mem, 2 * page);
}

}  // namespace
}  // namespace softverbs::it
