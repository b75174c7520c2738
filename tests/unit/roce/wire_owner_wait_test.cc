// Owner waits of the network transport (datapath/wire_qp.h): memory the
// device reaches through its owner's /proc/<pid>/mem that cannot be reached
// for now - as while the owner's registration converts the page
// (owner_memory.h); here an empty page registered with a user-mode-only
// userfaultfd, whose kernel accesses answer EIO until it is let go
// (kernel_held_page.h). The fake host (fake_wire.h) reaches every MR
// through /proc/self/mem.
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "datapath/owner_word_lock.h"
#include "fake_wire.h"
#include "kernel_held_page.h"

namespace softverbs::datapath {
namespace {

using namespace wire_test;

constexpr uint32_t kHeldKey = 0x300;

class WireOwnerWait : public ::testing::Test {
 protected:
  void SetUp() override {
    mem_fd_ = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
    ASSERT_GE(mem_fd_, 0);
    ASSERT_TRUE(area_.ok()) << area_.error();
    held_ = area_.page();
    for (size_t i = 0; i < sizeof(src_); ++i) src_[i] = static_cast<uint8_t>(i * 5 + 1);
    host_.ReachMrsThrough(mem_fd_);
    host_.AddMr(0x100, src_, sizeof(src_));
    host_.AddMr(0x200, dst_, sizeof(dst_));
    host_.AddMr(kHeldKey, area_.area(), area_.area_bytes());
    host_.AddQp(kQpA, kQpB, 100, 500);
    host_.AddQp(kQpB, kQpA, 500, 100);
  }
  void TearDown() override { close(mem_fd_); }
  // The conversion is over: the kernel reaches the page again.
  void Release() { ASSERT_TRUE(area_.Release()); }
  // A WRITE of src_'s first len bytes to va under rkey.
  SendWr Write(uint64_t wr_id, uint64_t va, uint32_t rkey, uint32_t len) {
    SendWr wr = Wr(IBV_WR_RDMA_WRITE, wr_id, src_, len, 0x100);
    wr.remote_addr = va;
    wr.rkey = rkey;
    return wr;
  }
  // The statuses of QP A's send completions so far (taking them).
  std::vector<ibv_wc_status> SendStatuses() {
    std::vector<ibv_wc_status> out;
    for (const Completion& c : host_.SendCompletions(kQpA))
      out.push_back(static_cast<ibv_wc_status>(c.status));
    return out;
  }
  static std::vector<ibv_wc_status> Successes(size_t n) { return {n, IBV_WC_SUCCESS}; }
  uint64_t HeldVa(uint32_t offset) const { return reinterpret_cast<uintptr_t>(held_) + offset; }

  FakeWire host_;
  int mem_fd_ = -1;
  testing::KernelHeldPage area_{1};  // a reachable page (0x5a bytes), then the held one
  uint8_t* held_ = nullptr;
  alignas(8) uint8_t src_[4096];
  alignas(8) uint8_t dst_[4096] = {};
};

TEST_F(WireOwnerWait, AWriteWaitsForThePageAndThenLands) {
  host_.Qp(kQpA).Post(Write(1, HeldVa(64), kHeldKey, 64));
  host_.Deliver();
  EXPECT_EQ(host_.Qp(kQpB).responder_state(), ResponderState::kOwnerWait);
  host_.Advance(OwnerWait::kRetryNs);  // tried again: still out of reach
  host_.Deliver();
  EXPECT_EQ(host_.Qp(kQpB).responder_state(), ResponderState::kOwnerWait);
  EXPECT_TRUE(host_.SendCompletions(kQpA).empty());
  Release();
  host_.Advance(OwnerWait::kRetryNs);
  host_.Deliver();
  EXPECT_EQ(memcmp(held_ + 64, src_, 64), 0);
  EXPECT_EQ(SendStatuses(), Successes(1));
  EXPECT_EQ(host_.Qp(kQpB).responder_state(), ResponderState::kIdle);
  EXPECT_TRUE(host_.errors.empty());
  EXPECT_EQ(host_.Qp(kQpA).counters().retransmitted, 0u);  // no NAK, no timeout
}

TEST_F(WireOwnerWait, WhatArrivesMeanwhileIsDroppedAndSentAgainAfterASequenceNak) {
  host_.Qp(kQpA).Post(Write(1, HeldVa(0), kHeldKey, 32));
  host_.Qp(kQpA).Post(Write(2, reinterpret_cast<uint64_t>(dst_), 0x200, 32));
  host_.Deliver();
  EXPECT_EQ(host_.Qp(kQpB).counters().dropped, 1u);
  EXPECT_EQ(dst_[0], 0);  // the second WRITE did not overtake the first
  Release();
  host_.Advance(OwnerWait::kRetryNs);
  host_.Deliver();
  EXPECT_EQ(host_.Qp(kQpB).counters().naks_sent, 1u);
  EXPECT_EQ(memcmp(held_, src_, 32), 0);
  EXPECT_EQ(memcmp(dst_, src_, 32), 0);
  EXPECT_EQ(SendStatuses(), Successes(2));
  EXPECT_EQ(host_.Qp(kQpA).counters().timeouts, 0u);
}

TEST_F(WireOwnerWait, ASendIntoTheHeldPageIsNotLost) {
  host_.PostRecv(kQpB, 7, held_ + 128, 256, kHeldKey);
  host_.Qp(kQpA).Post(Wr(IBV_WR_SEND, 1, src_, 200, 0x100));
  host_.Deliver();
  EXPECT_TRUE(host_.RecvCompletions(kQpB).empty());
  Release();
  host_.Advance(OwnerWait::kRetryNs);
  host_.Deliver();
  auto recv = host_.RecvCompletions(kQpB);
  ASSERT_EQ(recv.size(), 1u);
  EXPECT_EQ(recv[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(recv[0].byte_len, 200u);
  EXPECT_EQ(memcmp(held_ + 128, src_, 200), 0);
}

TEST_F(WireOwnerWait, AReadGoesOnWhereItStopped) {
  // Three responses of 1 KiB: the first from the reachable page, the
  // others from the held one.
  SendWr wr = Wr(IBV_WR_RDMA_READ, 1, dst_, 3000, 0x200);
  wr.remote_addr = HeldVa(0) - 1024;
  wr.rkey = kHeldKey;
  host_.Qp(kQpA).Post(wr);
  host_.Deliver();
  EXPECT_EQ(host_.Qp(kQpB).responder_state(), ResponderState::kOwnerWait);
  Release();  // the held page reads as zeros now
  host_.Advance(OwnerWait::kRetryNs);
  host_.Deliver();
  EXPECT_EQ(SendStatuses(), Successes(1));
  for (int i = 0; i < 1024; ++i) ASSERT_EQ(dst_[i], 0x5a) << "byte " << i;
  for (int i = 1024; i < 3000; ++i) ASSERT_EQ(dst_[i], 0) << "byte " << i;
  std::vector<uint32_t> responses;  // PSNs of the READ responses, in order
  for (const Packet& p : host_.delivered()) {
    if (IbtaOperationRow(Op(p)).response && Op(p) != IbtaOperation::kAcknowledge) {
      responses.push_back(p.fields.psn);
    }
  }
  EXPECT_EQ(responses, (std::vector<uint32_t>{100, 101, 102}));  // none sent twice
}

TEST_F(WireOwnerWait, AFetchAddOnTheHeldPageIsExecutedOnce) {
  SendWr wr = Wr(IBV_WR_ATOMIC_FETCH_AND_ADD, 1, dst_, 8, 0x200);
  wr.remote_addr = HeldVa(8);
  wr.rkey = kHeldKey;
  wr.compare_add = 5;
  host_.Qp(kQpA).Post(wr);
  host_.Deliver();
  Release();
  host_.Advance(OwnerWait::kRetryNs);
  host_.Deliver();
  EXPECT_EQ(SendStatuses(), Successes(1));
  uint64_t value = 0, orig = 1;
  memcpy(&value, held_ + 8, 8);
  memcpy(&orig, dst_, 8);
  EXPECT_EQ(value, 5u);
  EXPECT_EQ(orig, 0u);
}

// The word an atomic needs is locked by another executor that does not let
// go (a stopped process holding the owner's word lock): the device does not
// wait for it in place (owner_word_lock.h) but keeps the packet.
TEST_F(WireOwnerWait, AFetchAddOnAWordAnotherExecutorHoldsWaitsForIt) {
  alignas(8) static uint64_t word = 40;
  host_.AddMr(0x400, &word, 8);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t holder = static_cast<pid_t>(syscall(SYS_fork));  // raw: the lock's fork handler
  if (holder == 0) {
    OwnerWordLock lock(mem_fd_, reinterpret_cast<uintptr_t>(&word));
    if (!lock.held() || write(ready[1], "h", 1) != 1) _exit(1);
    for (;;) pause();
  }
  ASSERT_GT(holder, 0);
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  close(ready[1]);
  kill(holder, SIGSTOP);
  SendWr wr = Wr(IBV_WR_ATOMIC_FETCH_AND_ADD, 1, dst_, 8, 0x200);
  wr.remote_addr = reinterpret_cast<uintptr_t>(&word);
  wr.rkey = 0x400;
  wr.compare_add = 2;
  host_.Qp(kQpA).Post(wr);
  host_.Deliver();
  EXPECT_EQ(host_.Qp(kQpB).responder_state(), ResponderState::kOwnerWait);
  EXPECT_EQ(word, 40u);
  kill(holder, SIGKILL);  // its lock goes with it
  waitpid(holder, nullptr, 0);
  host_.Advance(OwnerWait::kRetryNs);
  host_.Deliver();
  EXPECT_EQ(SendStatuses(), Successes(1));
  EXPECT_EQ(word, 42u);
  uint64_t orig = 0;
  memcpy(&orig, dst_, 8);
  EXPECT_EQ(orig, 40u);
}

TEST_F(WireOwnerWait, TheRequesterWaitsToReadAPayloadFromTheHeldPage) {
  memset(dst_, 0xee, sizeof(dst_));
  SendWr first = Wr(IBV_WR_RDMA_WRITE, 1, held_ + 16, 48, kHeldKey);  // from the held page
  first.remote_addr = reinterpret_cast<uint64_t>(dst_);
  first.rkey = 0x200;
  host_.Qp(kQpA).Post(first);
  host_.Qp(kQpA).Post(Write(2, reinterpret_cast<uint64_t>(dst_) + 100, 0x200, 8));
  host_.Deliver();
  EXPECT_TRUE(host_.delivered().empty()) << "a packet went before its payload could be read";
  Release();
  host_.Advance(OwnerWait::kRetryNs);
  host_.Deliver();
  EXPECT_EQ(SendStatuses(), Successes(2));
  for (int i = 0; i < 48; ++i) ASSERT_EQ(dst_[i], 0) << "byte " << i;  // the page read as zeros
  EXPECT_EQ(memcmp(dst_ + 100, src_, 8), 0);
}

// A payload that stays out of reach past the settle time fails its WR with a
// local access error, as a READ response that cannot be placed does (the
// old transport sent zeros and the WR succeeded).
TEST_F(WireOwnerWait, APayloadThatNeverBecomesReadableFailsItsWr) {
  memset(dst_, 0xee, sizeof(dst_));
  SendWr first = Wr(IBV_WR_RDMA_WRITE, 1, held_ + 16, 48, kHeldKey);
  first.remote_addr = reinterpret_cast<uint64_t>(dst_);
  first.rkey = 0x200;
  host_.Qp(kQpA).Post(first);
  const uint64_t settle = static_cast<uint64_t>(kOwnerMemorySettleMs) * 1'000'000;
  for (uint64_t waited = 0; waited <= settle; waited += settle / 10) {
    host_.Advance(settle / 10);
    host_.Deliver();
  }
  EXPECT_TRUE(host_.delivered().empty()) << "a packet went without its payload";
  auto sent = host_.SendCompletions(kQpA);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, IBV_WC_LOC_ACCESS_ERR);
  EXPECT_EQ(sent[0].vendor_err, kVendorOwnerGone);
  EXPECT_EQ(host_.errors, std::vector<uint32_t>{kQpA});
  EXPECT_EQ(dst_[0], 0xee);
}

TEST_F(WireOwnerWait, AReadResponseIsPlacedIntoTheHeldPageOnceItCanBe) {
  SendWr wr = Wr(IBV_WR_RDMA_READ, 1, held_ + 256, 512, kHeldKey);
  wr.remote_addr = reinterpret_cast<uint64_t>(src_);
  wr.rkey = 0x100;
  host_.Qp(kQpA).Post(wr);
  host_.Deliver();
  EXPECT_EQ(host_.Qp(kQpA).counters().dropped, 1u);  // the response could not be placed
  Release();
  host_.Advance(AckTimeoutNs(10));  // the READ is asked again
  host_.Deliver();
  EXPECT_EQ(SendStatuses(), Successes(1));
  EXPECT_EQ(memcmp(held_ + 256, src_, 512), 0);
}

// Responses dropped while the requester's own page is converted are asked
// for again without spending retry_cnt (3 here): a long conversion does not
// end the QP in IBV_WC_RETRY_EXC_ERR.
TEST_F(WireOwnerWait, ALongWaitToPlaceAReadDoesNotSpendTheRetryCount) {
  SendWr wr = Wr(IBV_WR_RDMA_READ, 1, held_, 3000, kHeldKey);  // three responses
  wr.remote_addr = reinterpret_cast<uint64_t>(src_);
  wr.rkey = 0x100;
  host_.Qp(kQpA).Post(wr);
  host_.Deliver();
  for (int timeouts = 0; timeouts < 8; ++timeouts) {
    host_.Advance(AckTimeoutNs(10));
    host_.Deliver();
    ASSERT_TRUE(host_.SendCompletions(kQpA).empty()) << "after " << timeouts + 1 << " timeouts";
  }
  EXPECT_GE(host_.Qp(kQpA).counters().owner_waits, 1u);
  Release();
  host_.Advance(AckTimeoutNs(10));
  host_.Deliver();
  EXPECT_EQ(SendStatuses(), Successes(1));
  EXPECT_EQ(memcmp(held_, src_, 3000), 0);
}

TEST_F(WireOwnerWait, ARequesterThatTimesOutMeanwhileIsHeldOffWithAnRnrNak) {
  host_.Qp(kQpA).Post(Write(1, HeldVa(0), kHeldKey, 64));
  host_.Deliver();
  host_.Advance(AckTimeoutNs(10));  // A sends the WRITE again
  host_.Deliver();
  EXPECT_EQ(host_.Qp(kQpB).counters().rnr_naks_sent, 1u);
  EXPECT_EQ(host_.Qp(kQpA).requester_state(), RequesterState::kRnrWait);
  Release();
  host_.Advance(OwnerWait::kRetryNs);
  host_.Deliver();
  host_.Advance(RnrTimerNs(1));
  host_.Deliver();
  EXPECT_EQ(SendStatuses(), Successes(1));
  EXPECT_EQ(memcmp(held_, src_, 64), 0);
}

TEST_F(WireOwnerWait, APageThatNeverComesBackFailsAfterTheSettleTime) {
  host_.Qp(kQpA).Post(Write(1, HeldVa(0), kHeldKey, 64));
  host_.Deliver();
  const auto b_failed = [&] {
    return std::find(host_.errors.begin(), host_.errors.end(), kQpB) != host_.errors.end();
  };
  const uint64_t settle = static_cast<uint64_t>(kOwnerMemorySettleMs) * 1'000'000;
  const uint64_t step = settle / 20;
  for (uint64_t waited = step; waited < settle; waited += step) {
    host_.Advance(step);
    host_.Deliver();
    ASSERT_FALSE(b_failed()) << "gave up after " << waited / 1'000'000 << " ms";
    ASSERT_EQ(host_.Qp(kQpB).responder_state(), ResponderState::kOwnerWait);
  }
  host_.Advance(2 * step);
  host_.Deliver();
  EXPECT_TRUE(b_failed());
  EXPECT_EQ(host_.Qp(kQpB).responder_state(), ResponderState::kError);
  auto sent = host_.SendCompletions(kQpA);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_NE(sent[0].status, IBV_WC_SUCCESS);
  Release();
  for (int i = 0; i < 64; ++i) ASSERT_EQ(held_[i], 0) << "byte " << i;  // nothing was written
}

}  // namespace
}  // namespace softverbs::datapath
