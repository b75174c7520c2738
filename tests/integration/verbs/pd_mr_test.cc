// Protection domains and memory regions: EBUSY while in use, the access-flag
// rules, keys, unmapped memory, length limits, rereg. Every rejection is
// checked for its errno and for leaving the daemon's objects as they were.
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <vector>

#include "test_env.h"

namespace softverbs::it {
namespace {

class PdMrTest : public ContextTest {
 protected:
  std::vector<char> buf_ = std::vector<char>(1 << 16);

  // reg_mr must fail with `err` and register nothing.
  void ExpectRegFails(void* addr, size_t len, int access, int err) {
    size_t before = MyObjectCount("mr");
    errno = 0;
    ibv_mr* mr = ibv_reg_mr(pd_, addr, len, access);
    EXPECT_EQ(mr, nullptr);
    EXPECT_EQ(errno, err) << "access 0x" << std::hex << access << " len " << std::dec << len;
    if (mr) ibv_dereg_mr(mr);
    EXPECT_EQ(MyObjectCount("mr"), before);
  }
};

TEST_F(PdMrTest, AllocDeallocPd) {
  size_t before = MyObjectCount("pd");
  ibv_pd* pd = ibv_alloc_pd(ctx_);
  ASSERT_NE(pd, nullptr);
  EXPECT_EQ(pd->context, ctx_);
  EXPECT_EQ(MyObjectCount("pd"), before + 1);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
  EXPECT_EQ(MyObjectCount("pd"), before);
}

TEST_F(PdMrTest, DeallocPdIsBusyWhileAnMrUsesIt) {
  ibv_pd* pd = ibv_alloc_pd(ctx_);
  ASSERT_NE(pd, nullptr);
  ibv_mr* mr = ibv_reg_mr(pd, buf_.data(), buf_.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr) << strerror(errno);
  EXPECT_EQ(ibv_dealloc_pd(pd), EBUSY);
  EXPECT_EQ(MyObjectCount("pd"), 2u) << "the PD is still there";
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

TEST_F(PdMrTest, DeallocPdIsBusyWhileAQpUsesIt) {
  ibv_pd* pd = ibv_alloc_pd(ctx_);
  ASSERT_NE(pd, nullptr);
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = cq_;
  init.cap = {1, 1, 1, 1, 0};
  init.qp_type = IBV_QPT_RC;
  ibv_qp* qp = ibv_create_qp(pd, &init);
  ASSERT_NE(qp, nullptr) << strerror(errno);
  EXPECT_EQ(ibv_dealloc_pd(pd), EBUSY);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

TEST_F(PdMrTest, RegMrGivesDistinctKeysAndFields) {
  ibv_mr* a = ibv_reg_mr(pd_, buf_.data(), 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ibv_mr* b = ibv_reg_mr(pd_, buf_.data() + 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_TRUE(a && b) << strerror(errno);
  EXPECT_EQ(a->addr, buf_.data());
  EXPECT_EQ(a->length, 4096u);
  EXPECT_EQ(a->pd, pd_);
  EXPECT_EQ(a->context, ctx_);
  EXPECT_NE(a->lkey, a->rkey);
  EXPECT_NE(a->lkey, b->lkey);
  EXPECT_NE(a->rkey, b->rkey);
  EXPECT_EQ(MyObjectCount("mr"), 2u);
  EXPECT_EQ(ibv_dereg_mr(a), 0);
  EXPECT_EQ(ibv_dereg_mr(b), 0);
  EXPECT_EQ(MyObjectCount("mr"), 0u);
}

TEST_F(PdMrTest, RegMrIova2) {
  ibv_mr* mr = ibv_reg_mr_iova2(pd_, buf_.data(), 8192, 0x100000, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr) << strerror(errno);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
}

TEST_F(PdMrTest, RemoteWriteOrAtomicWithoutLocalWriteIsEinval) {
  ExpectRegFails(buf_.data(), 4096, IBV_ACCESS_REMOTE_WRITE, EINVAL);
  ExpectRegFails(buf_.data(), 4096, IBV_ACCESS_REMOTE_ATOMIC, EINVAL);
  ExpectRegFails(buf_.data(), 4096, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, EINVAL);
  // Remote read alone is fine.
  ibv_mr* mr = ibv_reg_mr(pd_, buf_.data(), 4096, IBV_ACCESS_REMOTE_READ);
  ASSERT_NE(mr, nullptr);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
}

TEST_F(PdMrTest, UnmappedMemoryIsEfault) {
  long page = sysconf(_SC_PAGESIZE);
  void* p = mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  ASSERT_EQ(munmap(static_cast<char*>(p) + 2 * page, 2 * page), 0);
  ExpectRegFails(p, 4 * page, IBV_ACCESS_LOCAL_WRITE, EFAULT);
  ExpectRegFails(static_cast<char*>(p) + 2 * page, page, IBV_ACCESS_LOCAL_WRITE, EFAULT);
  munmap(p, 2 * page);
}

TEST_F(PdMrTest, ZeroLengthIsEinval) {
  ExpectRegFails(buf_.data(), 0, IBV_ACCESS_LOCAL_WRITE, EINVAL);
}

TEST_F(PdMrTest, LengthAboveMaxMrSizeIsEinval) {
  ibv_device_attr attr{};
  ASSERT_EQ(ibv_query_device(ctx_, &attr), 0);
  // Reserve (not commit) address space one byte longer than max_mr_size so
  // the range is mapped and only the size is wrong.
  size_t len = attr.max_mr_size + 1;
  void* p = mmap(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) GTEST_SKIP() << "cannot reserve " << len << " bytes of address space";
  // In a child: a registration that touches the range could kill or stall
  // the process, which must not take the other tests with it.
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    alarm(5);
    errno = 0;
    ibv_mr* mr = ibv_reg_mr(pd_, p, len, IBV_ACCESS_LOCAL_WRITE);
    _exit(mr ? 100 : errno);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  munmap(p, len);
  // Killed by the alarm: the registration touched the range (it built the
  // backing copy before checking max_mr_size).
  ASSERT_TRUE(WIFEXITED(status)) << "the client died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), EINVAL) << "100 means the MR was registered";
  EXPECT_EQ(MyObjectCount("mr"), 0u);
}

TEST_F(PdMrTest, UnknownAccessBitIsEinval) {
  ExpectRegFails(buf_.data(), 4096, IBV_ACCESS_LOCAL_WRITE | (1 << 19), EINVAL);
}

TEST_F(PdMrTest, NullPdIsEinval) {
  errno = 0;
  EXPECT_EQ(ibv_reg_mr(nullptr, buf_.data(), 4096, 0), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

TEST_F(PdMrTest, PdOfAnotherContextIsRejected) {
  ibv_context* other = OpenDevice();
  ASSERT_NE(other, nullptr);
  ibv_pd* foreign = ibv_alloc_pd(other);
  ASSERT_NE(foreign, nullptr);
  // A QP on this context's CQ but the other context's PD.
  ibv_qp_init_attr_ex init{};
  init.qp_type = IBV_QPT_RC;
  init.comp_mask = IBV_QP_INIT_ATTR_PD;
  init.pd = foreign;
  init.send_cq = init.recv_cq = cq_;
  init.cap = {1, 1, 1, 1, 0};
  errno = 0;
  EXPECT_EQ(ibv_create_qp_ex(ctx_, &init), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(MyObjectCount("qp"), 0u);
  EXPECT_EQ(ibv_dealloc_pd(foreign), 0);
  EXPECT_EQ(ibv_close_device(other), 0);
}

TEST_F(PdMrTest, ReregChangesAccessAndKeys) {
  ibv_mr* mr = ibv_reg_mr(pd_, buf_.data(), 4096, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  const uint32_t old_lkey = mr->lkey, old_rkey = mr->rkey;
  // An access change keeps the keys (mlx5 UMR, rxe; rdma-core's
  // test_mr_rereg_access relies on it).
  ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE),
            0);
  EXPECT_EQ(mr->lkey, old_lkey);
  EXPECT_EQ(mr->rkey, old_rkey);
  // A new translation gets new keys: the old rkey must stop working.
  ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, buf_.data() + 8192, 8192, 0),
            0);
  EXPECT_EQ(mr->addr, buf_.data() + 8192);
  EXPECT_EQ(mr->length, 8192u);
  EXPECT_NE(mr->rkey, old_rkey) << "the old rkey must stop working";
  const uint32_t translated_rkey = mr->rkey;
  // A PD change keeps them too.
  ibv_pd* pd2 = ibv_alloc_pd(ctx_);
  ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd2, nullptr, 0, 0), 0);
  EXPECT_EQ(mr->pd, pd2);
  EXPECT_EQ(mr->rkey, translated_rkey);
  EXPECT_EQ(ibv_dealloc_pd(pd2), EBUSY);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd2), 0);
}

TEST_F(PdMrTest, ReregWithBadAccessFailsAndChangesNothing) {
  ibv_mr* mr = ibv_reg_mr(pd_, buf_.data(), 4096, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  ibv_mr saved = *mr;
  int rc =
      ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, IBV_ACCESS_REMOTE_WRITE);
  EXPECT_NE(rc, 0);
  EXPECT_EQ(mr->lkey, saved.lkey);
  EXPECT_EQ(mr->rkey, saved.rkey);
  auto mine = MyClients();
  ASSERT_EQ(mine.size(), 1u);
  ASSERT_EQ(mine[0]["mr"].size(), 1u);
  EXPECT_EQ(mine[0]["mr"][0]["access"].get<int>(), IBV_ACCESS_LOCAL_WRITE);
  EXPECT_EQ(mine[0]["mr"][0]["lkey"].get<uint32_t>(), saved.lkey);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
}

// ibv_rereg_mr(3): failure is a negative enum ibv_rereg_mr_err_code with
// errno set; with the old MR still valid, IBV_REREG_MR_ERR_INPUT or _CMD.
TEST_F(PdMrTest, ReregFailureFollowsTheErrCodeConvention) {
  ibv_mr* mr = ibv_reg_mr(pd_, buf_.data(), 4096, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  errno = 0;
  int rc =
      ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, IBV_ACCESS_REMOTE_WRITE);
  int err = errno;
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  // The device rejects the command: ERR_CMD, the command's errno.
  EXPECT_EQ(rc, IBV_REREG_MR_ERR_CMD);
  EXPECT_EQ(err, EINVAL);
}

// Arguments libibverbs rejects before the command: ERR_INPUT with EINVAL;
// a translation to unmapped memory fails in the command (EFAULT). The MR
// keeps working either way.
TEST_F(PdMrTest, ReregInputErrorsAreErrInput) {
  ibv_mr* mr = ibv_reg_mr(pd_, buf_.data(), 4096, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  const ibv_mr saved = *mr;
  struct Case {
    int flags;
    void* addr;
    size_t length;
  } cases[] = {
      {1 << 4, nullptr, 0},                               // unknown flag
      {IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, 4096},   // no address
      {IBV_REREG_MR_CHANGE_TRANSLATION, buf_.data(), 0},  // no length
      {IBV_REREG_MR_CHANGE_ACCESS, buf_.data(), 4096},    // address without translation
  };
  for (const Case& c : cases) {
    errno = 0;
    EXPECT_EQ(ibv_rereg_mr(mr, c.flags, nullptr, c.addr, c.length, IBV_ACCESS_LOCAL_WRITE),
              IBV_REREG_MR_ERR_INPUT)
        << "flags " << c.flags;
    EXPECT_EQ(errno, EINVAL);
  }
  errno = 0;
  EXPECT_EQ(ibv_rereg_mr(mr, 0, nullptr, nullptr, 0, 0), IBV_REREG_MR_ERR_CMD) << "no flag";
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, nullptr, nullptr, 0, 0), IBV_REREG_MR_ERR_CMD);
  EXPECT_EQ(errno, EINVAL);
  long page = sysconf(_SC_PAGESIZE);
  void* p = mmap(nullptr, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  errno = 0;
  EXPECT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, p, page, 0),
            IBV_REREG_MR_ERR_CMD);
  EXPECT_EQ(errno, EFAULT);
  munmap(p, page);
  EXPECT_EQ(mr->addr, saved.addr);
  EXPECT_EQ(mr->length, saved.length);
  EXPECT_EQ(mr->lkey, saved.lkey);
  EXPECT_EQ(mr->rkey, saved.rkey);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
}

// The kernel refuses to pin memory the access flags cannot use: PROT_NONE
// pages, and read-only pages for a writable MR. Registration must not fault.
TEST_F(PdMrTest, InaccessibleMemoryIsEfault) {
  long page = sysconf(_SC_PAGESIZE);
  void* none = mmap(nullptr, 2 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(none, MAP_FAILED);
  ExpectRegFails(none, 2 * page, 0, EFAULT);
  void* ro = mmap(nullptr, 2 * page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(ro, MAP_FAILED);
  ExpectRegFails(ro, 2 * page, IBV_ACCESS_LOCAL_WRITE, EFAULT);
  ibv_mr* mr = ibv_reg_mr(pd_, ro, 2 * page, IBV_ACCESS_REMOTE_READ);
  ASSERT_NE(mr, nullptr) << "read-only memory registers for reads: " << strerror(errno);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  munmap(none, 2 * page);
  munmap(ro, 2 * page);
}

// A large registration of untouched memory costs neither a full copy nor
// the memory: only pages holding data are copied into the shared backing.
TEST_F(PdMrTest, LargeUntouchedRegistrationIsCheap) {
  const size_t len = size_t{1} << 30;  // 1 GiB, never touched
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) GTEST_SKIP() << "cannot map 1 GiB";
  static_cast<char*>(p)[12345] = 42;  // one page with data must survive
  timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  ibv_mr* mr = ibv_reg_mr(pd_, p, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  ASSERT_NE(mr, nullptr) << strerror(errno);
  double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
  // Copying 1 GiB takes several hundred ms here; skipping it a few ms.
  EXPECT_LT(ms, 150.0) << "registering 1 GiB of untouched memory took " << ms << " ms";
  EXPECT_EQ(static_cast<char*>(p)[12345], 42);
  EXPECT_EQ(static_cast<char*>(p)[len - 1], 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  munmap(p, len);
}

// Registration keeps converted ranges converted (docs/datapath.md,
// "Registered memory"): registering a range again reuses its backing, but a
// range the application unmapped and mapped anew is new memory and must be
// converted anew. A peer's RDMA write (from a second context, which reaches
// the MR through the backing, not through the owner's address) must land in
// the memory the application sees, every time.
TEST_F(PdMrTest, ReregistrationReachesTheApplicationsCurrentMemory) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t len = 4 * page;
  ibv_context* peer = OpenDevice();
  ASSERT_NE(peer, nullptr);
  ibv_pd* peer_pd = ibv_alloc_pd(peer);
  ibv_cq* peer_cq = ibv_create_cq(peer, 4, nullptr, nullptr, 0);
  ASSERT_TRUE(peer_pd && peer_cq);
  ibv_qp_init_attr init{};
  init.qp_type = IBV_QPT_RC;
  init.cap = {4, 4, 1, 1, 0};
  init.send_cq = init.recv_cq = cq_;
  ibv_qp* target = ibv_create_qp(pd_, &init);
  init.send_cq = init.recv_cq = peer_cq;
  ibv_qp* initiator = ibv_create_qp(peer_pd, &init);
  ASSERT_TRUE(target && initiator);
  ASSERT_TRUE(ConnectRc(ctx_, target, initiator->qp_num));
  ASSERT_TRUE(ConnectRc(peer, initiator, target->qp_num));
  std::vector<char> src(len);
  ibv_mr* src_mr = ibv_reg_mr(peer_pd, src.data(), len, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(src_mr, nullptr);

  char* p = static_cast<char*>(
      mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(p, MAP_FAILED);
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  // Registers [p + offset, +length), writes `c` into all of it from the
  // peer, checks the application sees it, deregisters.
  auto write_through_new_mr = [&](size_t offset, size_t length, char c) {
    SCOPED_TRACE(std::string("round '") + c + "'");
    ibv_mr* mr = ibv_reg_mr(pd_, p + offset, length, access);
    ASSERT_NE(mr, nullptr) << strerror(errno);
    memset(src.data(), c, length);
    ibv_sge sge{reinterpret_cast<uintptr_t>(src.data()), static_cast<uint32_t>(length),
                src_mr->lkey};
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(p + offset);
    wr.wr.rdma.rkey = mr->rkey;
    ASSERT_EQ(ibv_post_send(initiator, &wr, &bad), 0);
    ibv_wc wc{};
    ASSERT_EQ(PollOne(peer_cq, &wc), 1);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    EXPECT_EQ(p[offset], c);
    EXPECT_EQ(p[offset + length - 1], c);
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
  };
  memset(p, 'a', len);
  write_through_new_mr(0, len, 'b');          // converted
  write_through_new_mr(0, len, 'c');          // the idle backing, reused
  write_through_new_mr(page, 2 * page, 'd');  // inside it
  EXPECT_EQ(p[0], 'c');
  // The application replaces the memory at the same addresses.
  ASSERT_EQ(mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0),
            p);
  memset(p, 'e', len);
  write_through_new_mr(0, len, 'f');
  // Part of it replaced again, then a larger range over the rest.
  ASSERT_EQ(
      mmap(p + page, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0),
      p + page);
  memset(p + page, 'g', page);
  write_through_new_mr(0, 3 * page, 'h');
  EXPECT_EQ(p[3 * page], 'f');  // not in that MR: untouched

  EXPECT_EQ(ibv_dereg_mr(src_mr), 0);
  EXPECT_EQ(ibv_destroy_qp(initiator), 0);
  EXPECT_EQ(ibv_destroy_qp(target), 0);
  EXPECT_EQ(ibv_destroy_cq(peer_cq), 0);
  EXPECT_EQ(ibv_dealloc_pd(peer_pd), 0);
  EXPECT_EQ(ibv_close_device(peer), 0);
  munmap(p, len);
}

}  // namespace
}  // namespace softverbs::it

namespace softverbs::it {
namespace {

// Thread and parent domains: a parent domain stands for its PD (a QP and an
// MR on it work) and holds its PD and thread domain; objects on it hold it.
TEST_F(PdMrTest, ParentDomainRules) {
  ibv_td_init_attr td_attr{};
  td_attr.comp_mask = 1;
  errno = 0;
  EXPECT_EQ(ibv_alloc_td(ctx_, &td_attr), nullptr);
  EXPECT_EQ(errno, EINVAL) << "unknown comp_mask";
  td_attr.comp_mask = 0;
  ibv_td* td = ibv_alloc_td(ctx_, &td_attr);
  ASSERT_NE(td, nullptr) << strerror(errno);

  ibv_parent_domain_init_attr pa{};
  errno = 0;
  EXPECT_EQ(ibv_alloc_parent_domain(ctx_, &pa), nullptr);
  EXPECT_EQ(errno, EINVAL) << "no PD";
  pa.pd = pd_;
  pa.td = td;
  pa.comp_mask = 1u << 5;
  errno = 0;
  EXPECT_EQ(ibv_alloc_parent_domain(ctx_, &pa), nullptr);
  EXPECT_EQ(errno, EINVAL) << "unknown comp_mask";
  pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  ibv_pd* parent = ibv_alloc_parent_domain(ctx_, &pa);
  ASSERT_NE(parent, nullptr) << strerror(errno);
  EXPECT_EQ(ibv_dealloc_td(td), EBUSY) << "the parent domain holds it";

  // A CQ on the parent domain; a plain PD is refused there.
  ibv_cq_init_attr_ex ca{};
  ca.cqe = 8;
  ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
  ca.parent_domain = pd_;
  errno = 0;
  EXPECT_EQ(ibv_create_cq_ex(ctx_, &ca), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ca.parent_domain = parent;
  ibv_cq_ex* cq = ibv_create_cq_ex(ctx_, &ca);
  ASSERT_NE(cq, nullptr) << strerror(errno);
  // A QP and an MR on it, as on its PD.
  ibv_qp_init_attr qa{};
  qa.send_cq = ibv_cq_ex_to_cq(cq);
  qa.recv_cq = ibv_cq_ex_to_cq(cq);
  qa.qp_type = IBV_QPT_RC;
  qa.cap = {4, 4, 1, 1, 0};
  ibv_qp* qp = ibv_create_qp(parent, &qa);
  ASSERT_NE(qp, nullptr) << strerror(errno);
  EXPECT_EQ(qp->pd, parent);
  char buf[64];
  ibv_mr* mr = ibv_reg_mr(parent, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr) << strerror(errno);

  EXPECT_EQ(ibv_dealloc_pd(pd_), EBUSY) << "a parent domain is built on it";
  EXPECT_EQ(ibv_dealloc_pd(parent), EBUSY) << "a QP and a CQ are on it";
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_dealloc_pd(parent), EBUSY) << "the CQ is still on it";
  EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
  EXPECT_EQ(ibv_dealloc_pd(parent), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dealloc_td(td), 0);
}

}  // namespace
}  // namespace softverbs::it

namespace softverbs::it {
namespace {

// A range registered and deregistered stays converted (the registration
// cache) but must not be shared with a forked child: the child's writes to
// it (a heap buffer's neighbours, the allocator's own metadata) stay in the
// child, as fork promises for private memory.
TEST_F(PdMrTest, ForkAfterDeregGivesTheChildPrivateMemory) {
  const size_t len = 16 * 4096;
  void* mem = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* bytes = static_cast<uint8_t*>(mem);
  memset(bytes, 'p', len);
  ibv_mr* mr = ibv_reg_mr(pd_, mem, len, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr) << strerror(errno);
  ASSERT_EQ(ibv_dereg_mr(mr), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    memset(bytes, 'c', len);
    _exit(bytes[len - 1] == 'c' ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  for (size_t i = 0; i < len; i += 4096) {
    ASSERT_EQ(bytes[i], 'p') << "the child's write reached the parent at offset " << i;
  }
  munmap(mem, len);
}

// A live MR's pages across fork (no ibv_fork_init): the child gets a private
// copy of what the parent had (as the kernel copies pinned pages), its writes
// stay in the child, and the parent's later writes do not reach the child.
TEST_F(PdMrTest, ForkWithALiveMrGivesTheChildACopy) {
  const size_t len = 16 * 4096;
  void* mem = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* bytes = static_cast<uint8_t*>(mem);
  memset(bytes, 'p', len);
  ibv_mr* mr = ibv_reg_mr(pd_, mem, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ASSERT_NE(mr, nullptr) << strerror(errno);
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    char c;
    if (read(go[0], &c, 1) != 1) _exit(3);  // the parent has written 'P' meanwhile
    if (bytes[0] != 'p') _exit(1);          // the parent's write reached the child
    memset(bytes, 'c', len);
    _exit(0);
  }
  memset(bytes, 'P', len);
  ASSERT_EQ(write(go[1], "g", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the parent's write after fork reached the child";
  for (size_t i = 0; i < len; i += 4096) {
    ASSERT_EQ(bytes[i], 'P') << "the child's write reached the parent at offset " << i;
  }
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  munmap(mem, len);
  close(go[0]);
  close(go[1]);
}

}  // namespace
}  // namespace softverbs::it
