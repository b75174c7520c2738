// A non-dumpable process (prctl(PR_SET_DUMPABLE, 0)) cannot open its own
// /proc/self/mem (issue 10, point 6): its whole-page MRs work (the shared
// backing needs no /proc/self/mem) - a peer's RDMA WRITE and READ reach
// them - and what would need /proc/self/mem (partial pages, on-demand MRs)
// fails at ibv_reg_mr with EPERM, explained, instead of later in silence.
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "peer_process.h"
#include "test_env.h"

namespace softverbs::it {
namespace {

// The non-dumpable target: registers a whole-page MR, checks the rules, and
// waits until the peer has written and read it.
[[noreturn]] void RunTarget(int up, int down) {
  if (prctl(PR_SET_DUMPABLE, 0) != 0) _exit(20);
  ibv_context* ctx = OpenDevice();
  ibv_pd* pd = ctx ? ibv_alloc_pd(ctx) : nullptr;
  ibv_cq* cq = pd ? ibv_create_cq(ctx, 4, nullptr, nullptr, 0) : nullptr;
  ibv_qp* qp = cq ? RcQp(pd, cq) : nullptr;
  void* mem = mmap(nullptr, 2 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (!qp || mem == MAP_FAILED) _exit(21);
  memset(mem, 'n', 2 * 4096);
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  // Partial pages and on-demand MRs need /proc/self/mem: refused.
  errno = 0;
  if (ibv_reg_mr(pd, static_cast<char*>(mem) + 100, 500, access) != nullptr || errno != EPERM) {
    _exit(22);
  }
  errno = 0;
  if (ibv_reg_mr(pd, mem, 4096, access | IBV_ACCESS_ON_DEMAND) != nullptr || errno != EPERM) {
    _exit(23);
  }
  ibv_mr* mr = ibv_reg_mr(pd, mem, 2 * 4096, access);
  if (!mr) _exit(24);
  uint32_t peer_qpn = 0;
  if (!ReadAll(down, &peer_qpn, 4) || !ConnectRc(ctx, qp, peer_qpn)) _exit(25);
  const RemoteMr me{qp->qp_num, mr->rkey, reinterpret_cast<uintptr_t>(mem)};
  if (write(up, &me, sizeof(me)) != sizeof(me)) _exit(26);
  char done = 0;
  if (!ReadAll(down, &done, 1)) _exit(27);
  // The peer wrote "peer" at offset 4096.
  _exit(memcmp(static_cast<char*>(mem) + 4096, "peer", 4) == 0 ? 0 : 28);
}

TEST(NonDumpable, WholePageMrsWorkAndTheRestFailsAtRegistration) {
  int up[2], down[2];
  ASSERT_EQ(pipe(up), 0);
  ASSERT_EQ(pipe(down), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) RunTarget(up[1], down[0]);
  close(up[1]);  // so a child that dies early is seen as EOF
  close(down[0]);
  ibv_context* ctx = OpenDevice();
  ASSERT_NE(ctx, nullptr);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 4, nullptr, nullptr, 0);
  ibv_qp* qp = RcQp(pd, cq);
  ASSERT_NE(qp, nullptr);
  static char buf[4096];
  ibv_mr* mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  ASSERT_EQ(write(down[1], &qp->qp_num, 4), 4);
  RemoteMr target{};
  if (!ReadAll(up[0], &target, sizeof(target))) {
    int early = 0;
    waitpid(child, &early, 0);
    FAIL() << "the target failed early with exit code "
           << (WIFEXITED(early) ? WEXITSTATUS(early) : -WTERMSIG(early)) << " (see RunTarget)";
  }
  ASSERT_TRUE(ConnectRc(ctx, qp, target.qpn));
  auto run = [&](ibv_wr_opcode op, uint64_t raddr, uint32_t len) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf), len, mr->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = target.rkey;
    EXPECT_EQ(ibv_post_send(qp, &wr, &bad), 0);
    ibv_wc wc{};
    wc.status = IBV_WC_GENERAL_ERR;
    EXPECT_EQ(PollOne(cq, &wc), 1);
    return wc.status;
  };
  // READ the target's first bytes, then WRITE "peer" at offset 4096.
  EXPECT_EQ(run(IBV_WR_RDMA_READ, target.addr, 16), IBV_WC_SUCCESS);
  EXPECT_EQ(buf[0], 'n');
  EXPECT_EQ(buf[15], 'n');
  memcpy(buf, "peer", 4);
  EXPECT_EQ(run(IBV_WR_RDMA_WRITE, target.addr + 4096, 4), IBV_WC_SUCCESS);
  ASSERT_EQ(write(down[1], "d", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "20-28: the target's check that failed (RunTarget)";
  ibv_dereg_mr(mr);
  ibv_destroy_qp(qp);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
}

}  // namespace
}  // namespace softverbs::it
