// XRC domains (modern API): the oflags rules of ibv_open_xrcd(3), sharing by
// inode, EBUSY while an SRQ or QP holds the domain.
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "test_env.h"

namespace softverbs::it {
namespace {

class XrcdTest : public ContextTest {
 protected:
  void SetUp() override {
    ContextTest::SetUp();
    char path[] = "/tmp/softverbs-it-xrcd-XXXXXX";
    fd_ = mkstemp(path);
    ASSERT_GE(fd_, 0);
    unlink(path);
  }
  void TearDown() override {
    if (fd_ >= 0) close(fd_);
    ContextTest::TearDown();
  }
  ibv_xrcd* Open(int fd, int oflags) {
    ibv_xrcd_init_attr a{};
    a.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
    a.fd = fd;
    a.oflags = oflags;
    return ibv_open_xrcd(ctx_, &a);
  }
  void ExpectOpenFails(int fd, int oflags, int err) {
    size_t before = MyObjectCount("xrcd");
    errno = 0;
    ibv_xrcd* x = Open(fd, oflags);
    EXPECT_EQ(x, nullptr) << "fd " << fd << " oflags " << oflags;
    EXPECT_EQ(errno, err);
    if (x) ibv_close_xrcd(x);
    EXPECT_EQ(MyObjectCount("xrcd"), before);
  }
  int fd_ = -1;
};

TEST_F(XrcdTest, OflagsRules) {
  ExpectOpenFails(fd_, 0, EAGAIN);  // nothing bound to the inode, no O_CREAT
  ibv_xrcd* a = Open(fd_, O_CREAT | O_EXCL);
  ASSERT_NE(a, nullptr) << strerror(errno);
  ExpectOpenFails(fd_, O_CREAT | O_EXCL, EINVAL);  // already bound (not EEXIST)
  ibv_xrcd* b = Open(fd_, 0);
  ASSERT_NE(b, nullptr) << "attach to the bound domain";
  EXPECT_EQ(MyObjectCount("xrcd"), 2u);
  EXPECT_EQ(ibv_close_xrcd(b), 0);
  EXPECT_EQ(ibv_close_xrcd(a), 0);
  ExpectOpenFails(fd_, 0, EAGAIN);  // the last close unbound the inode
  ExpectOpenFails(12345, O_CREAT, EBADF);
}

TEST_F(XrcdTest, CompMaskRules) {
  ibv_xrcd_init_attr a{};
  a.comp_mask = IBV_XRCD_INIT_ATTR_FD;  // OFLAGS missing
  a.fd = -1;
  errno = 0;
  EXPECT_EQ(ibv_open_xrcd(ctx_, &a), nullptr);
  EXPECT_EQ(errno, EINVAL);
  a.comp_mask = IBV_XRCD_INIT_ATTR_RESERVED;
  errno = 0;
  EXPECT_EQ(ibv_open_xrcd(ctx_, &a), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  EXPECT_EQ(MyObjectCount("xrcd"), 0u);
}

TEST_F(XrcdTest, CloseIsBusyWhileAnSrqOrQpHoldsTheDomain) {
  ibv_xrcd* x = Open(-1, O_CREAT);
  ASSERT_NE(x, nullptr);
  ibv_srq_init_attr_ex sa{};
  sa.attr = {8, 1, 0};
  sa.comp_mask =
      IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  sa.srq_type = IBV_SRQT_XRC;
  sa.pd = pd_;
  sa.xrcd = x;
  sa.cq = cq_;
  ibv_srq* srq = ibv_create_srq_ex(ctx_, &sa);
  ASSERT_NE(srq, nullptr) << strerror(errno);
  uint32_t srqn = 0;
  EXPECT_EQ(ibv_get_srq_num(srq, &srqn), 0);
  ibv_qp_init_attr_ex qa{};
  qa.qp_type = IBV_QPT_XRC_RECV;
  qa.comp_mask = IBV_QP_INIT_ATTR_XRCD;
  qa.xrcd = x;
  ibv_qp* qp = ibv_create_qp_ex(ctx_, &qa);
  ASSERT_NE(qp, nullptr) << strerror(errno);
  EXPECT_EQ(ibv_close_xrcd(x), EBUSY);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_close_xrcd(x), EBUSY) << "the SRQ still holds it";
  EXPECT_EQ(ibv_destroy_cq(cq_), EBUSY) << "the XRC SRQ completes on this CQ";
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
  EXPECT_EQ(ibv_close_xrcd(x), 0);
  EXPECT_EQ(MyObjectCount("xrcd"), 0u);
}

// The kernel's per-handle rule: a context's open of a domain cannot be closed
// while XRC objects created through *that* handle exist; objects created
// through another handle of the same domain (another context or process) do
// not hold it. Two contexts of this process are two handles, as two
// processes would be.
TEST_F(XrcdTest, CloseIsBusyOnlyForObjectsOfThisHandle) {
  ibv_context* other = OpenDevice();
  ASSERT_NE(other, nullptr);
  ibv_pd* other_pd = ibv_alloc_pd(other);
  ibv_cq* other_cq = ibv_create_cq(other, 8, nullptr, nullptr, 0);
  ASSERT_NE(other_pd, nullptr);
  ASSERT_NE(other_cq, nullptr);
  ibv_xrcd* mine = Open(fd_, O_CREAT);
  ASSERT_NE(mine, nullptr) << strerror(errno);
  ibv_xrcd_init_attr oa{};
  oa.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  oa.fd = fd_;
  oa.oflags = 0;
  ibv_xrcd* theirs = ibv_open_xrcd(other, &oa);
  ASSERT_NE(theirs, nullptr) << strerror(errno);

  // An XRC SRQ through the other handle does not hold mine.
  ibv_srq_init_attr_ex sa{};
  sa.attr = {8, 1, 0};
  sa.comp_mask =
      IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  sa.srq_type = IBV_SRQT_XRC;
  sa.pd = other_pd;
  sa.xrcd = theirs;
  sa.cq = other_cq;
  ibv_srq* their_srq = ibv_create_srq_ex(other, &sa);
  ASSERT_NE(their_srq, nullptr) << strerror(errno);
  // An XRC_RECV QP through my handle, opened again through theirs.
  ibv_qp_init_attr_ex qa{};
  qa.qp_type = IBV_QPT_XRC_RECV;
  qa.comp_mask = IBV_QP_INIT_ATTR_XRCD;
  qa.xrcd = mine;
  ibv_qp* my_qp = ibv_create_qp_ex(ctx_, &qa);
  ASSERT_NE(my_qp, nullptr) << strerror(errno);
  ibv_qp_open_attr open{};
  open.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
  open.qp_num = my_qp->qp_num;
  open.xrcd = theirs;
  open.qp_type = IBV_QPT_XRC_RECV;
  ibv_qp* their_open = ibv_open_qp(other, &open);
  ASSERT_NE(their_open, nullptr) << strerror(errno);

  EXPECT_EQ(ibv_close_xrcd(mine), EBUSY) << "my XRC_RECV QP was created through it";
  EXPECT_EQ(ibv_close_xrcd(theirs), EBUSY) << "their SRQ and open QP handle";
  EXPECT_EQ(ibv_destroy_qp(my_qp), 0);  // the QP lives on through their handle
  EXPECT_EQ(ibv_close_xrcd(mine), 0) << "their SRQ and QP handle must not hold my handle";
  EXPECT_EQ(ibv_close_xrcd(theirs), EBUSY);
  EXPECT_EQ(ibv_destroy_srq(their_srq), 0);
  EXPECT_EQ(ibv_close_xrcd(theirs), EBUSY) << "the opened QP handle still holds it";
  EXPECT_EQ(ibv_destroy_qp(their_open), 0);
  EXPECT_EQ(ibv_close_xrcd(theirs), 0);
  // The last handle is gone: the inode is no longer bound.
  ExpectOpenFails(fd_, 0, EAGAIN);

  EXPECT_EQ(ibv_destroy_cq(other_cq), 0);
  EXPECT_EQ(ibv_dealloc_pd(other_pd), 0);
  EXPECT_EQ(ibv_close_device(other), 0);
}

}  // namespace
}  // namespace softverbs::it
