// qperf's rc_rdma_write_poll_lat in two processes on one device: each side
// RDMA WRITEs its whole buffer into the other's and polls its own buffer's
// first and last byte for the other side's mark, then writes its own next
// mark into both and writes the buffer back. A NIC places a message in
// address order, so a side that saw the last byte has the whole message and
// no byte of it changes after. softverbs placed with libc's memcpy, which
// may store the first byte again after the last: the receiver's new mark
// was undone and qperf's ping-pong crawled at 3-30 rounds a second at every
// size of a page or more (datapath/placement_order.h, docs/datapath.md
// "Placement order").
//
// Per case: the size; the buffer page-aligned (backed pages, which the peer
// maps) or at offset 100 in its page (the partial first page goes through
// the owner's /proc/<pid>/mem); `ends` (only the two marks change, as in
// qperf) or `whole` (every byte carries the round's mark and is checked once
// the last byte shows it). A round that does not arrive within 2 s, or
// arrives torn, fails the case.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>

#include "peer_process.h"
#include "test_env.h"

namespace softverbs::it {
namespace {

constexpr int kRounds = 2000;
constexpr auto kStall = std::chrono::seconds(2);

struct Case {
  size_t size;
  size_t offset;  // of the buffer in its first page
  bool whole;     // every byte carries the mark (else the first and last)
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.size << " bytes at page offset " << c.offset << (c.whole ? ", whole" : ", ends");
}

// One side: its buffer registered for remote write, an RC QP on its CQ.
struct Side {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  uint8_t* page = nullptr;
  uint8_t* buf = nullptr;
  ibv_mr* mr = nullptr;
};

bool MakeSide(const Case& c, Side* s) {
  s->ctx = OpenDevice();
  s->pd = s->ctx ? ibv_alloc_pd(s->ctx) : nullptr;
  s->cq = s->pd ? ibv_create_cq(s->ctx, 16, nullptr, nullptr, 0) : nullptr;
  s->qp = s->cq ? RcQp(s->pd, s->cq) : nullptr;
  s->page = static_cast<uint8_t*>(aligned_alloc(4096, (c.offset + c.size + 4095) / 4096 * 4096));
  if (!s->qp || !s->page) return false;
  s->buf = s->page + c.offset;
  memset(s->buf, 0, c.size);
  s->mr = ibv_reg_mr(s->pd, s->buf, c.size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  return s->mr != nullptr;
}

// Writes the side's whole buffer into the peer's and waits for its
// completion. "" or what failed.
std::string Send(const Side& s, const RemoteMr& peer, size_t size) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(s.buf), static_cast<uint32_t>(size), s.mr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = peer.addr;
  wr.wr.rdma.rkey = peer.rkey;
  if (ibv_post_send(s.qp, &wr, &bad) != 0) return "ibv_post_send failed";
  ibv_wc wc{};
  if (PollOne(s.cq, &wc) != 1) return "no completion for the WRITE";
  if (wc.status != IBV_WC_SUCCESS) return std::string("WRITE: ") + ibv_wc_status_str(wc.status);
  return "";
}

// The ping-pong of one side (the first sends round 0). "" or what failed.
std::string PingPong(const Side& s, const RemoteMr& peer, const Case& c, bool first) {
  const uint8_t self = first ? 0x80 : 0, other = first ? 0 : 0x80;
  volatile uint8_t* mine = s.buf;
  const auto send = [&](int round) {
    const uint8_t mark = self | (round & 0x7f);
    if (c.whole) {
      memset(s.buf, mark, c.size);
    } else {
      mine[0] = mark;
      mine[c.size - 1] = mark;
    }
    return Send(s, peer, c.size);
  };
  std::string failed = first ? send(0) : "";
  for (int round = 0; round < kRounds && failed.empty(); ++round) {
    const uint8_t want = other | (round & 0x7f);
    const auto since = std::chrono::steady_clock::now();
    while (!(mine[0] == want && mine[c.size - 1] == want)) {
      if (std::chrono::steady_clock::now() - since > kStall) {
        char what[128];
        snprintf(what, sizeof(what),
                 "round %d never arrived: want 0x%02x, first 0x%02x, last 0x%02x", round, want,
                 mine[0], mine[c.size - 1]);
        return what;
      }
    }
    for (size_t i = 0; c.whole && i < c.size; ++i) {
      if (mine[i] != want) {
        return "round " + std::to_string(round) + " arrived torn at byte " + std::to_string(i);
      }
    }
    if (!first) {
      failed = send(round);
    } else if (round + 1 < kRounds) {
      failed = send(round + 1);
    }
  }
  return failed;
}

// Both sides' setup and the exchange of addresses; "" or what failed.
std::string Connect(const Case& c, Side* s, int in, int out, RemoteMr* peer) {
  if (!MakeSide(c, s)) return "setup failed";
  const RemoteMr me{s->qp->qp_num, s->mr->rkey, reinterpret_cast<uintptr_t>(s->buf)};
  if (write(out, &me, sizeof(me)) != sizeof(me) || !ReadAll(in, peer, sizeof(*peer))) {
    return "address exchange failed";
  }
  if (!ConnectRc(s->ctx, s->qp, peer->qpn)) return "ConnectRc failed";
  char ready = 1, peer_ready = 0;  // both in RTS before the first WRITE
  if (write(out, &ready, 1) != 1 || !ReadAll(in, &peer_ready, 1)) return "sync failed";
  return "";
}

class WritePollTest : public ::testing::TestWithParam<Case> {};

TEST_P(WritePollTest, EveryRoundArrivesWholeAndNoLateStoreUndoesTheReceiversMarks) {
  const Case c = GetParam();
  int to_second[2], to_first[2];
  ASSERT_EQ(pipe(to_second), 0);
  ASSERT_EQ(pipe(to_first), 0);
  fflush(nullptr);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // the second side: fails by its exit status, says why on stderr
    Side s;
    RemoteMr peer{};
    std::string failed = Connect(c, &s, to_second[0], to_first[1], &peer);
    if (failed.empty()) failed = PingPong(s, peer, c, false);
    if (!failed.empty()) fprintf(stderr, "second side: %s\n", failed.c_str());
    char done = 0;  // stay until the first side is done with our buffer
    if (write(to_first[1], &done, 1) != 1 || !ReadAll(to_second[0], &done, 1)) _exit(3);
    _exit(failed.empty() ? 0 : 1);
  }
  Side s;
  RemoteMr peer{};
  std::string failed = Connect(c, &s, to_first[0], to_second[1], &peer);
  if (failed.empty()) failed = PingPong(s, peer, c, true);
  char done = 0;
  EXPECT_TRUE(ReadAll(to_first[0], &done, 1) && write(to_second[1], &done, 1) == 1);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_EQ(failed, "") << "first side";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the second side failed (stderr)";
  for (int fd : {to_second[0], to_second[1], to_first[0], to_first[1]}) close(fd);
  if (s.qp) ibv_destroy_qp(s.qp);
  if (s.mr) ibv_dereg_mr(s.mr);
  if (s.cq) ibv_destroy_cq(s.cq);
  if (s.pd) ibv_dealloc_pd(s.pd);
  if (s.ctx) ibv_close_device(s.ctx);
  free(s.page);
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return std::to_string(info.param.size) + "B_offset" + std::to_string(info.param.offset) +
         (info.param.whole ? "_whole" : "_ends");
}

INSTANTIATE_TEST_SUITE_P(Sizes, WritePollTest,
                         ::testing::Values(Case{8, 0, false}, Case{8, 100, true},
                                           Case{100, 0, true}, Case{100, 100, false},
                                           Case{4096, 0, false}, Case{4096, 0, true},
                                           Case{4096, 100, false}, Case{8192, 0, false},
                                           Case{65536, 0, false}, Case{65536, 0, true},
                                           Case{65536, 100, true}),
                         CaseName);

}  // namespace
}  // namespace softverbs::it
