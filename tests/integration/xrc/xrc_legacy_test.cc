// The legacy OFED XRC receive-QP API (include/softverbs/xrc_legacy.h) across
// processes: domains shared through one file's inode, registration counting
// across three processes (one exits without unregistering), the QP outliving
// its creator while another process holds it and gone after the last release,
// and the man pages' errors.
#include "softverbs/xrc_legacy.h"

#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

#include "process_helpers.h"

namespace softverbs::it {
namespace {

class XrcLegacyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char path[] = "/tmp/softverbs-xrc-XXXXXX";
    int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    close(fd);
    domain_file_ = path;
  }
  void TearDown() override { unlink(domain_file_.c_str()); }

  // Opens the shared domain file and the domain with oflag, in this process.
  ibv_xrc_domain* OpenDomain(ibv_context* ctx, int oflag, int* fd_out = nullptr) {
    int fd = open(domain_file_.c_str(), O_RDONLY);
    if (fd < 0) return nullptr;
    ibv_xrc_domain* d = ibv_open_xrc_domain(ctx, fd, oflag);
    if (fd_out) {
      *fd_out = fd;
    } else {
      close(fd);
    }
    return d;
  }

  std::string domain_file_;
};

// RESET->INIT with the legacy man page's minimum mask.
int ToInit(ibv_xrc_domain* d, uint32_t qpn) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = 1;
  attr.qp_access_flags = 0;
  return ibv_modify_xrc_rcv_qp(
      d, qpn, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

ibv_qp_state QueryState(ibv_xrc_domain* d, uint32_t qpn, int* err) {
  ibv_qp_attr attr{};
  ibv_xrc_qp_init_attr init{};
  *err = ibv_query_xrc_rcv_qp(d, qpn, &attr, IBV_QP_STATE, &init);
  return attr.qp_state;
}

TEST_F(XrcLegacyTest, DomainOpenFlagsFollowTheManPage) {
  ibv_context* ctx = OpenSoftverbs();
  ASSERT_NE(ctx, nullptr);
  // No domain is bound to the file yet: oflag 0 fails with EAGAIN.
  errno = 0;
  EXPECT_EQ(OpenDomain(ctx, 0), nullptr);
  EXPECT_EQ(errno, EAGAIN);
  ibv_xrc_domain* created = OpenDomain(ctx, O_CREAT | O_EXCL);
  ASSERT_NE(created, nullptr);
  // Now bound: O_EXCL fails with EINVAL (not EEXIST), plain opens attach.
  errno = 0;
  EXPECT_EQ(OpenDomain(ctx, O_CREAT | O_EXCL), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_xrc_domain* attached = OpenDomain(ctx, 0);
  ASSERT_NE(attached, nullptr);
  // fd -1: private domain, O_CREAT only.
  errno = 0;
  EXPECT_EQ(ibv_open_xrc_domain(ctx, -1, 0), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_xrc_domain* priv = ibv_open_xrc_domain(ctx, -1, O_CREAT);
  ASSERT_NE(priv, nullptr);
  // A descriptor that is not open: EBADF.
  errno = 0;
  EXPECT_EQ(ibv_open_xrc_domain(ctx, 987654, O_CREAT), nullptr);
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(ibv_close_xrc_domain(priv), 0);
  EXPECT_EQ(ibv_close_xrc_domain(attached), 0);
  EXPECT_EQ(ibv_close_xrc_domain(created), 0);
  // The last reference went: the binding is gone with it.
  errno = 0;
  EXPECT_EQ(OpenDomain(ctx, 0), nullptr);
  EXPECT_EQ(errno, EAGAIN);
  ibv_close_device(ctx);
}

TEST_F(XrcLegacyTest, RegistrationErrorsAndCloseWhileRegistered) {
  ibv_context* ctx = OpenSoftverbs();
  ASSERT_NE(ctx, nullptr);
  ibv_xrc_domain* d = OpenDomain(ctx, O_CREAT);
  ibv_xrc_domain* other = ibv_open_xrc_domain(ctx, -1, O_CREAT);
  ASSERT_NE(d, nullptr);
  ASSERT_NE(other, nullptr);
  ibv_xrc_qp_init_attr init{};
  init.xrc_domain = d;
  uint32_t qpn = 0;
  ASSERT_EQ(ibv_create_xrc_rcv_qp(&init, &qpn), 0);
  EXPECT_GT(qpn, 1u);
  EXPECT_EQ(ibv_create_xrc_rcv_qp(nullptr, &qpn), EINVAL);
  ibv_xrc_qp_init_attr no_domain{};
  EXPECT_EQ(ibv_create_xrc_rcv_qp(&no_domain, &qpn), EINVAL);

  // Unknown number, a QP of another domain, a QP that is not an XRC receive QP.
  EXPECT_EQ(ibv_reg_xrc_rcv_qp(d, 0xabcdef), EINVAL);
  EXPECT_EQ(ibv_reg_xrc_rcv_qp(other, qpn), EINVAL);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 4, nullptr, nullptr, 0);
  ibv_qp_init_attr rc_attr{};
  rc_attr.send_cq = rc_attr.recv_cq = cq;
  rc_attr.qp_type = IBV_QPT_RC;
  rc_attr.cap.max_send_wr = rc_attr.cap.max_recv_wr = 1;
  rc_attr.cap.max_send_sge = rc_attr.cap.max_recv_sge = 1;
  ibv_qp* rc = ibv_create_qp(pd, &rc_attr);
  ASSERT_NE(rc, nullptr);
  EXPECT_EQ(ibv_reg_xrc_rcv_qp(d, rc->qp_num), EINVAL);
  EXPECT_EQ(ToInit(other, qpn), EINVAL);

  // The creator is registered: closing the domain fails and changes nothing.
  EXPECT_EQ(ibv_close_xrc_domain(d), EBUSY);
  EXPECT_EQ(ToInit(d, qpn), 0);
  int err;
  EXPECT_EQ(QueryState(d, qpn, &err), IBV_QPS_INIT);
  EXPECT_EQ(err, 0);
  // A wrong transition is refused by the state table, the QP stays in INIT.
  ibv_qp_attr rts{};
  rts.qp_state = IBV_QPS_RTS;
  EXPECT_EQ(ibv_modify_xrc_rcv_qp(d, qpn, &rts, IBV_QP_STATE), EINVAL);
  EXPECT_EQ(QueryState(d, qpn, &err), IBV_QPS_INIT);

  EXPECT_EQ(ibv_unreg_xrc_rcv_qp(d, qpn), 0);
  EXPECT_EQ(ibv_unreg_xrc_rcv_qp(d, qpn), EINVAL);  // not registered any more
  // That was the last registration: the QP is gone.
  EXPECT_EQ(ibv_reg_xrc_rcv_qp(d, qpn), EINVAL);
  EXPECT_EQ(ibv_close_xrc_domain(d), 0);
  EXPECT_EQ(ibv_close_xrc_domain(other), 0);
  ibv_destroy_qp(rc);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
}

// Three processes register with one receive QP; one exits without
// unregistering; the QP outlives its creator's registration and dies with
// the last one.
TEST_F(XrcLegacyTest, RegistrationCountingAcrossThreeProcesses) {
  Pipe to_b, to_c, from_b, from_c, to_a, from_a;
  // A: the creator.
  pid_t a = Spawn([&]() {
    ibv_context* ctx = OpenSoftverbs();
    if (!ctx) return 10;
    ibv_xrc_domain* d = OpenDomain(ctx, O_CREAT);
    if (!d) return 11;
    ibv_xrc_qp_init_attr init{};
    init.xrc_domain = d;
    uint32_t qpn;
    if (ibv_create_xrc_rcv_qp(&init, &qpn)) return 12;
    if (ToInit(d, qpn)) return 13;
    from_a.Send(qpn);
    to_a.Receive();  // B and C are registered
    if (ibv_unreg_xrc_rcv_qp(d, qpn)) return 14;
    if (ibv_close_xrc_domain(d)) return 15;
    ibv_close_device(ctx);
    from_a.Send(0);
    return 0;
  });
  const uint32_t qpn = from_a.Receive();
  ASSERT_NE(qpn, UINT32_MAX);
  // B: registers, then outlives everyone.
  pid_t b = Spawn([&]() {
    ibv_context* ctx = OpenSoftverbs();
    ibv_xrc_domain* d = ctx ? OpenDomain(ctx, 0) : nullptr;
    if (!d) return 20;
    if (ibv_reg_xrc_rcv_qp(d, qpn)) return 21;
    if (ibv_reg_xrc_rcv_qp(d, qpn)) return 22;  // twice: still one registration
    from_b.Send(1);
    to_b.Receive();  // A unregistered and C died
    int err;
    if (QueryState(d, qpn, &err) != IBV_QPS_INIT || err) return 23;  // still alive
    if (ibv_unreg_xrc_rcv_qp(d, qpn)) return 24;
    if (ibv_reg_xrc_rcv_qp(d, qpn) != EINVAL) return 25;  // destroyed with the last one
    if (ibv_close_xrc_domain(d)) return 26;
    return 0;
  });
  // C: registers and exits without unregistering or closing anything.
  pid_t c = Spawn([&]() {
    ibv_context* ctx = OpenSoftverbs();
    ibv_xrc_domain* d = ctx ? OpenDomain(ctx, 0) : nullptr;
    if (!d) return 30;
    if (ibv_reg_xrc_rcv_qp(d, qpn)) return 31;
    from_c.Send(1);
    to_c.Receive();
    _exit(0);
  });
  ASSERT_EQ(from_b.Receive(), 1u);
  ASSERT_EQ(from_c.Receive(), 1u);
  to_a.Send(1);
  ASSERT_EQ(from_a.Receive(), 0u);
  EXPECT_EQ(Reap(a), 0);
  to_c.Send(1);
  EXPECT_EQ(Reap(c), 0);
  // C's death is seen by the daemon when its connection closes; give the
  // daemon a moment to process it before B checks the count.
  usleep(200 * 1000);
  to_b.Send(1);
  EXPECT_EQ(Reap(b), 0);
}

}  // namespace
}  // namespace softverbs::it
