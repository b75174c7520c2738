// A registration that converts pages a peer is writing through another MR.
// Bytes of an MR that are not on a whole page of it (here a 64-byte MR in
// the middle of a page) are reached by peers through the owner's
// /proc/<pid>/mem. When the owner then registers a range that holds that
// page whole, the conversion copies the page into a memfd and maps the
// memfd over it (docs/datapath.md, "Registered memory"); meanwhile the
// first MR stays registered and a peer may be writing it. On a NIC, a
// registration never disturbs another MR's traffic: every write succeeds
// and the last one is what the memory holds.
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "peer_process.h"
#include "test_env.h"

namespace softverbs::it {
namespace {

constexpr int kRounds = 30;
constexpr size_t kRange = 256 * 1024;  // what the second registration converts
constexpr int kMaxWrites = 200000;     // a bound on each round's writes

// What the peer reports of a round.
struct RoundResult {
  uint64_t last_written;  // the value of the last write that completed
  int32_t failed_status;  // -1: every write completed; else its ibv_wc_status
  int32_t writes;
};

// The peer: for each round, takes a target, writes 1, 2, 3, ... into its
// 8 bytes (one write at a time, each polled) until the owner says stop,
// and reports. Its first write of a round is announced, so that the owner
// registers while writes go on.
[[noreturn]] void RunPeer(int up, int down) {
  RemoteMr target{};
  const PeerSide side = StartPeerSide(up, down, &target);
  uint64_t* value = side.word;
  if (fcntl(down, F_SETFL, O_NONBLOCK) != 0) _exit(13);
  uint64_t next = 1;
  for (int round = 0; round < kRounds; ++round) {
    char c = 0;
    while (read(down, &target, sizeof(target)) != sizeof(target)) {
      if (errno != EAGAIN) _exit(14);
      usleep(100);
    }
    RoundResult r{0, -1, 0};
    while (r.writes < kMaxWrites && read(down, &c, 1) != 1) {
      *value = next;
      ibv_sge sge{reinterpret_cast<uintptr_t>(value), 8, side.mr->lkey};
      ibv_send_wr wr{}, *bad = nullptr;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.opcode = IBV_WR_RDMA_WRITE;
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.wr.rdma.remote_addr = target.addr;
      wr.wr.rdma.rkey = target.rkey;
      if (ibv_post_send(side.qp, &wr, &bad) != 0) _exit(15);
      ibv_wc wc{};
      if (PollOne(side.cq, &wc) != 1) _exit(16);
      if (wc.status != IBV_WC_SUCCESS) {
        r.failed_status = wc.status;
        break;
      }
      r.last_written = next++;
      if (r.writes++ == 0 && write(up, "w", 1) != 1) _exit(17);
    }
    if (r.writes == 0 && write(up, "w", 1) != 1) _exit(17);
    if (write(up, &r, sizeof(r)) != sizeof(r)) _exit(18);
    if (r.failed_status != -1) _exit(0);  // the QP is in error now
  }
  _exit(0);
}

TEST(RegistrationUnderAccess, WritesThroughAPartialPageGoOnWhileItsPageIsConverted) {
  int up[2], down[2];
  ASSERT_EQ(pipe(up), 0);
  ASSERT_EQ(pipe(down), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) RunPeer(up[1], down[0]);
  close(up[1]);
  close(down[0]);

  ibv_context* ctx = OpenDevice();
  ASSERT_NE(ctx, nullptr);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 8, nullptr, nullptr, 0);
  ibv_qp* qp = RcQp(pd, cq);
  ASSERT_NE(qp, nullptr);
  uint32_t peer_qpn = 0;
  ASSERT_TRUE(ReadAll(up[0], &peer_qpn, 4)) << "the peer could not start";
  ASSERT_TRUE(ConnectRc(ctx, qp, peer_qpn));
  const RemoteMr hello{qp->qp_num, 0, 0};
  ASSERT_EQ(write(down[1], &hello, sizeof(hello)), static_cast<ssize_t>(sizeof(hello)));

  int rounds_with_writes_across = 0;
  for (int round = 0; round < kRounds; ++round) {
    // Fresh pages each round, touched: the second registration converts them.
    auto* range = static_cast<uint8_t*>(
        mmap(nullptr, kRange, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(range, MAP_FAILED);
    memset(range, 0, kRange);
    uint8_t* word = range + 2048;
    ibv_mr* small = ibv_reg_mr(pd, word - 32, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    ASSERT_NE(small, nullptr) << strerror(errno);
    ASSERT_FALSE(PageIsBacked(word));
    const RemoteMr target{qp->qp_num, small->rkey, reinterpret_cast<uintptr_t>(word)};
    ASSERT_EQ(write(down[1], &target, sizeof(target)), static_cast<ssize_t>(sizeof(target)));
    char started = 0;
    ASSERT_TRUE(ReadAll(up[0], &started, 1));
    // The peer is writing now (its values pass by): register in the middle.
    const auto seen = [&] {
      return __atomic_load_n(reinterpret_cast<uint64_t*>(word), __ATOMIC_ACQUIRE);
    };
    const uint64_t first = seen();
    for (int spin = 0; spin < 100000000 && seen() < first + 2; ++spin) {
    }
    const uint64_t before = seen();
    ibv_mr* whole = ibv_reg_mr(pd, range, kRange, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(whole, nullptr) << strerror(errno);
    EXPECT_TRUE(PageIsBacked(word));
    ASSERT_EQ(write(down[1], "s", 1), 1);
    RoundResult r{};
    ASSERT_TRUE(ReadAll(up[0], &r, sizeof(r)));
    EXPECT_EQ(r.failed_status, -1)
        << "round " << round << ": write " << r.writes + 1 << " failed with "
        << ibv_wc_status_str(static_cast<ibv_wc_status>(r.failed_status));
    uint64_t held = 0;
    memcpy(&held, word, 8);
    EXPECT_EQ(held, r.last_written) << "round " << round << ": the last completed write is lost";
    rounds_with_writes_across += r.last_written > before;
    ASSERT_EQ(ibv_dereg_mr(whole), 0);
    ASSERT_EQ(ibv_dereg_mr(small), 0);
    munmap(range, kRange);
    if (r.failed_status != -1) break;
  }
  // In most rounds the peer went on writing after the registration began
  // (it writes until told to stop; a round it spent descheduled does not).
  EXPECT_GT(rounds_with_writes_across, kRounds / 2);
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "peer status " << status;
  ibv_destroy_qp(qp);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
}

}  // namespace
}  // namespace softverbs::it
