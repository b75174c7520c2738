// Atomics on a word that is not on a whole page of its MR (a counter in a
// small heap allocation, registered alone): peers reach it through the
// owner's /proc/<pid>/mem, not through shared memory, so their atomic is a
// read-modify-write there. softverbs advertises IBV_ATOMIC_HCA: atomics of
// the device are atomic among themselves, whoever issues them. Two peer
// processes and the owner itself (through a loopback QP pair) each add 1
// kOps times to the same counter at the same time; every fetched value must
// come once and the counter must end at their sum (docs/datapath.md,
// "Registered memory": the owner's word lock). Without the lock, updates
// were lost at once.
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "peer_process.h"
#include "test_env.h"

namespace softverbs::it {
namespace {

constexpr int kOps = 5000;

// Adds 1 to [target] kOps times, one atomic at a time; the fetched values
// into *fetched. False on the first failure.
bool FetchAddMany(ibv_qp* qp, ibv_cq* cq, ibv_mr* result, uint64_t* slot, const RemoteMr& target,
                  std::vector<uint64_t>* fetched) {
  for (int i = 0; i < kOps; ++i) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(slot), 8, result->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.atomic.remote_addr = target.addr;
    wr.wr.atomic.rkey = target.rkey;
    wr.wr.atomic.compare_add = 1;
    if (ibv_post_send(qp, &wr, &bad) != 0) return false;
    ibv_wc wc{};
    if (PollOne(cq, &wc) != 1 || wc.status != IBV_WC_SUCCESS) return false;
    fetched->push_back(*slot);
  }
  return true;
}

// Allows atomics on an RC QP that ConnectRc brought to RTS.
bool AllowAtomics(ibv_qp* qp) {
  ibv_qp_attr a{};
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  return ibv_modify_qp(qp, &a, IBV_QP_ACCESS_FLAGS) == 0;
}

// A peer: connects, waits for the start, adds, sends its fetched values up.
[[noreturn]] void RunPeer(int up, int down) {
  RemoteMr target{};
  const PeerSide side = StartPeerSide(up, down, &target);
  char go = 0;
  if (write(up, "r", 1) != 1 || !ReadAll(down, &go, 1)) _exit(13);
  std::vector<uint64_t> fetched;
  if (!FetchAddMany(side.qp, side.cq, side.mr, side.word, target, &fetched)) _exit(14);
  const size_t bytes = fetched.size() * sizeof(uint64_t);
  if (write(up, fetched.data(), bytes) != static_cast<ssize_t>(bytes)) _exit(15);
  _exit(0);
}

struct Peer {
  pid_t pid = -1;
  int up = -1;    // read end: the peer's messages
  int down = -1;  // write end: ours
};

TEST(PartialPageAtomics, TwoPeersAndTheOwnerAddWithoutLosingAnUpdate) {
  Peer peers[2];
  for (Peer& p : peers) {
    int up[2], down[2];
    ASSERT_EQ(pipe(up), 0);
    ASSERT_EQ(pipe(down), 0);
    p.pid = fork();
    ASSERT_GE(p.pid, 0);
    if (p.pid == 0) RunPeer(up[1], down[0]);
    close(up[1]);
    close(down[0]);
    p.up = up[0];
    p.down = down[1];
  }
  ibv_context* ctx = OpenDevice();
  ASSERT_NE(ctx, nullptr);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  // The counter: 8 bytes of the heap, registered alone, so no whole page of
  // the MR (and peers reach it through our /proc/self/mem).
  auto* counter = new uint64_t[1]();
  ibv_mr* mr = ibv_reg_mr(pd, counter, 8,
                          IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                              IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
  ASSERT_NE(mr, nullptr) << strerror(errno);
  EXPECT_FALSE(PageIsBacked(counter));
  std::vector<ibv_qp*> targets;
  for (Peer& p : peers) {
    ibv_qp* qp = RcQp(pd, cq);
    ASSERT_NE(qp, nullptr);
    targets.push_back(qp);
    uint32_t peer_qpn = 0;
    ASSERT_TRUE(ReadAll(p.up, &peer_qpn, 4)) << "a peer could not start";
    ASSERT_TRUE(ConnectRc(ctx, qp, peer_qpn));
    ASSERT_TRUE(AllowAtomics(qp));
    const RemoteMr target{qp->qp_num, mr->rkey, reinterpret_cast<uintptr_t>(counter)};
    ASSERT_EQ(write(p.down, &target, sizeof(target)), static_cast<ssize_t>(sizeof(target)));
    char ready = 0;
    ASSERT_TRUE(ReadAll(p.up, &ready, 1)) << "a peer could not connect";
  }
  // The owner's own adds go through a loopback pair of its own QPs.
  ibv_cq* own_cq = ibv_create_cq(ctx, 8, nullptr, nullptr, 0);
  ibv_qp* own_requester = RcQp(pd, own_cq);
  ibv_qp* own_target = RcQp(pd, cq);
  ASSERT_NE(own_requester, nullptr);
  ASSERT_NE(own_target, nullptr);
  ASSERT_TRUE(ConnectRc(ctx, own_requester, own_target->qp_num));
  ASSERT_TRUE(ConnectRc(ctx, own_target, own_requester->qp_num));
  ASSERT_TRUE(AllowAtomics(own_target));
  auto* own_slot = new uint64_t[1]();
  ibv_mr* own_result = ibv_reg_mr(pd, own_slot, 8, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(own_result, nullptr);

  for (Peer& p : peers) ASSERT_EQ(write(p.down, "g", 1), 1);
  std::vector<uint64_t> fetched;
  const RemoteMr own{own_target->qp_num, mr->rkey, reinterpret_cast<uintptr_t>(counter)};
  EXPECT_TRUE(FetchAddMany(own_requester, own_cq, own_result, own_slot, own, &fetched));
  for (Peer& p : peers) {
    std::vector<uint64_t> theirs(kOps);
    EXPECT_TRUE(ReadAll(p.up, theirs.data(), theirs.size() * sizeof(uint64_t)))
        << "a peer's adds failed";
    fetched.insert(fetched.end(), theirs.begin(), theirs.end());
    int status = 0;
    EXPECT_EQ(waitpid(p.pid, &status, 0), p.pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "peer status " << status;
  }
  const uint64_t total = 3 * kOps;
  EXPECT_EQ(*counter, total) << "updates lost: " << total - *counter;
  std::sort(fetched.begin(), fetched.end());
  size_t repeated = 0;
  for (size_t i = 1; i < fetched.size(); ++i) repeated += fetched[i] == fetched[i - 1];
  EXPECT_EQ(repeated, 0u) << "values fetched more than once (one add overwrote another)";

  ibv_destroy_qp(own_requester);
  ibv_destroy_qp(own_target);
  for (ibv_qp* qp : targets) ibv_destroy_qp(qp);
  ibv_dereg_mr(own_result);
  ibv_dereg_mr(mr);
  ibv_destroy_cq(own_cq);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
}

}  // namespace
}  // namespace softverbs::it
