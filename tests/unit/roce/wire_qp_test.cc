// The network transport's state machines (datapath/wire_qp.h) with a fake
// host (fake_wire.h): two RC QPs, packets delivered, dropped or duplicated
// one by one by the test, the clock the test's.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "fake_wire.h"

namespace softverbs::datapath {
namespace {

using namespace wire_test;

class WireQpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (size_t i = 0; i < sizeof(src_); ++i) src_[i] = static_cast<uint8_t>(i * 7 + 3);
    host_.AddMr(0x100, src_, sizeof(src_));
    host_.AddMr(0x200, dst_, sizeof(dst_));
    host_.AddQp(kQpA, kQpB, 100, 500);
    host_.AddQp(kQpB, kQpA, 500, 100);
  }
  // A READ by QP A of src_'s first len bytes into dst_.
  void PostRead(uint32_t len) {
    SendWr wr = Wr(IBV_WR_RDMA_READ, 1, dst_, len, 0x200);
    wr.remote_addr = reinterpret_cast<uint64_t>(src_);
    wr.rkey = 0x100;
    host_.Qp(kQpA).Post(wr);
  }
  // READ request nth (of total on the wire) asked for src_ from byte on,
  // with PSN psn: a request again from the first missing response.
  void ExpectReadRequest(size_t nth, size_t total, uint32_t psn, uint32_t byte, uint32_t len) {
    const auto requests = ReadRequests(host_.delivered());
    ASSERT_EQ(requests.size(), total);
    EXPECT_EQ(requests[nth]->fields.psn, psn);
    EXPECT_EQ(requests[nth]->fields.va, reinterpret_cast<uint64_t>(src_) + byte);
    EXPECT_EQ(requests[nth]->fields.dma_len, len - byte);
  }
  // That READ completed, once, successfully, with the bytes in place.
  void ExpectReadDone(uint32_t len) {
    auto sent = host_.SendCompletions(kQpA);
    ASSERT_EQ(sent.size(), 1u);
    EXPECT_EQ(sent[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(memcmp(dst_, src_, len), 0);
  }
  FakeWire host_;
  alignas(8) uint8_t src_[8192];
  alignas(8) uint8_t dst_[8192] = {};
};

TEST_F(WireQpTest, SendIsCutByMtuPlacedAndAcknowledged) {
  host_.PostRecv(kQpB, 77, dst_, 4096, 0x200);
  host_.Qp(kQpA).Post(Wr(IBV_WR_SEND, 1, src_, 3000, 0x100));
  host_.Deliver();
  const auto& d = host_.delivered();
  ASSERT_EQ(d.size(), 4u);  // FIRST, MIDDLE, LAST, ACK
  EXPECT_EQ(Op(d[0]), IbtaOperation::kSendFirst);
  EXPECT_EQ(Op(d[1]), IbtaOperation::kSendMiddle);
  EXPECT_EQ(Op(d[2]), IbtaOperation::kSendLast);
  EXPECT_EQ(d[0].fields.psn, 100u);
  EXPECT_EQ(d[2].fields.psn, 102u);
  EXPECT_TRUE(d[2].fields.ack_req);
  EXPECT_EQ(Op(d[3]), IbtaOperation::kAcknowledge);
  EXPECT_EQ(d[3].fields.psn, 102u);
  auto recv = host_.RecvCompletions(kQpB);
  ASSERT_EQ(recv.size(), 1u);
  EXPECT_EQ(recv[0].wr_id, 77u);
  EXPECT_EQ(recv[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(recv[0].byte_len, 3000u);
  EXPECT_EQ(recv[0].src_qp, kQpA);
  EXPECT_EQ(memcmp(dst_, src_, 3000), 0);
  auto sent = host_.SendCompletions(kQpA);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(host_.Qp(kQpA).requester_state(), RequesterState::kIdle);
}

TEST_F(WireQpTest, AGapIsNakedOnceAndSentAgainFromThere) {
  host_.PostRecv(kQpB, 77, dst_, 4096, 0x200);
  host_.Qp(kQpA).Post(Wr(IBV_WR_SEND, 1, src_, 4000, 0x100));  // 4 packets
  bool dropped = false;
  host_.Deliver([&](const Packet& p) {
    if (!dropped && Op(p) == IbtaOperation::kSendMiddle) return !(dropped = true);
    return true;
  });
  EXPECT_EQ(host_.Qp(kQpB).counters().naks_sent, 1u);        // one NAK for the gap
  EXPECT_EQ(host_.Qp(kQpB).counters().sequence_errors, 2u);  // the two packets after it
  EXPECT_EQ(host_.Qp(kQpA).counters().retransmitted, 3u);    // MIDDLE, MIDDLE, LAST again
  auto recv = host_.RecvCompletions(kQpB);
  ASSERT_EQ(recv.size(), 1u);
  EXPECT_EQ(recv[0].byte_len, 4000u);
  EXPECT_EQ(memcmp(dst_, src_, 4000), 0);
  EXPECT_EQ(host_.SendCompletions(kQpA).size(), 1u);
}

// A NIC reads a WR's SGEs for each packet it sends, resends too: the
// local MR deregistered while the WR is in flight fails the WR with a local
// protection error (the old transport sent the resent packets without their
// payload, and the WR succeeded).
TEST_F(WireQpTest, AResendFromAnMrDeregisteredInFlightFailsTheWrWithALocalProtectionError) {
  host_.PostRecv(kQpB, 77, dst_, 4096, 0x200);
  host_.Qp(kQpA).Post(Wr(IBV_WR_SEND, 1, src_, 4000, 0x100));  // 4 packets
  SendWr write = Wr(IBV_WR_RDMA_WRITE, 2, src_, 64, 0x100);
  write.remote_addr = reinterpret_cast<uint64_t>(dst_ + 6000);
  write.rkey = 0x200;
  host_.Qp(kQpA).Post(write);
  bool dropped = false;
  size_t requests_after = 0;
  host_.Deliver([&](const Packet& p) {
    if (!dropped && Op(p) == IbtaOperation::kSendMiddle) {
      host_.RemoveMr(0x100);  // the application deregisters it meanwhile
      return !(dropped = true);
    }
    if (dropped && p.fields.dest_qp == kQpB) requests_after++;
    return true;
  });
  // The three packets after the lost one (MIDDLE, LAST, the WRITE) were on
  // the wire before it; nothing was sent again once the NAK asked for it.
  EXPECT_EQ(requests_after, 3u);
  EXPECT_EQ(host_.Qp(kQpA).counters().retransmitted, 0u);
  auto sent = host_.SendCompletions(kQpA);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].wr_id, 1u);
  EXPECT_EQ(sent[0].status, IBV_WC_LOC_PROT_ERR);
  EXPECT_EQ(sent[0].vendor_err, kVendorBadLkey);
  EXPECT_EQ(sent[1].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(host_.errors, std::vector<uint32_t>{kQpA});
  EXPECT_EQ(host_.completions_before_error, std::vector<uint64_t>{0});
  EXPECT_TRUE(host_.RecvCompletions(kQpB).empty());  // the message never ended
}

// The same for a message longer than the send window: its packets past the
// window are built once ACKs open it, after the MR is gone.
TEST_F(WireQpTest, PacketsPastTheWindowOfAnMrDeregisteredMeanwhileFailTheWr) {
  constexpr uint32_t kPackets = 260;  // the window is 256 packets of 1,024 bytes
  std::vector<uint8_t> from(kPackets * 1024, 0x5a), to(kPackets * 1024, 0);
  host_.AddMr(0x300, from.data(), from.size());
  host_.AddMr(0x400, to.data(), to.size());
  SendWr write = Wr(IBV_WR_RDMA_WRITE, 1, from.data(), static_cast<uint32_t>(from.size()), 0x300);
  write.remote_addr = reinterpret_cast<uint64_t>(to.data());
  write.rkey = 0x400;
  host_.Qp(kQpA).Post(write);
  host_.RemoveMr(0x300);  // deregistered with the first 256 packets on the wire
  host_.Deliver();
  size_t requests = 0;
  for (const Packet& p : host_.delivered()) requests += p.fields.dest_qp == kQpB ? 1 : 0;
  EXPECT_EQ(requests, 256u);
  auto sent = host_.SendCompletions(kQpA);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, IBV_WC_LOC_PROT_ERR);
  EXPECT_EQ(sent[0].vendor_err, kVendorBadLkey);
  EXPECT_EQ(host_.errors, std::vector<uint32_t>{kQpA});
  EXPECT_EQ(std::count(to.begin(), to.end(), 0x5a), 256 * 1024);  // what went before
}

// IBA 1.5 ATOMIC WRITE on the wire, as rxe sends it: one request with a
// RETH (8 bytes) and the 8 bytes, stored at once at the responder and
// answered by a READ RESPONSE ONLY without payload. Until session 27 the
// transport had no packet for it and failed the WR (IBV_WC_LOC_QP_OP_ERR).
SendWr AtomicWrite(uint64_t wr_id, uint8_t* from, uint8_t* to, uint32_t rkey) {
  SendWr wr = Wr(IBV_WR_ATOMIC_WRITE, wr_id, from, 8, 0x100);
  wr.remote_addr = reinterpret_cast<uint64_t>(to);
  wr.rkey = rkey;
  return wr;
}

TEST_F(WireQpTest, AnAtomicWriteStoresItsEightBytesAndIsAnsweredByAnEmptyReadResponse) {
  host_.Qp(kQpA).Post(AtomicWrite(1, src_, dst_ + 16, 0x200));
  host_.PostRecv(kQpB, 77, dst_ + 1024, 64, 0x200);
  host_.Qp(kQpA).Post(Wr(IBV_WR_SEND, 2, src_, 8, 0x100));
  host_.Deliver();
  const auto& d = host_.delivered();
  ASSERT_GE(d.size(), 2u);
  EXPECT_EQ(Op(d[0]), IbtaOperation::kAtomicWrite);
  EXPECT_EQ(d[0].fields.opcode, 0x1d);  // rxe's IB_OPCODE_RC_ATOMIC_WRITE
  EXPECT_EQ(d[0].fields.va, reinterpret_cast<uint64_t>(dst_ + 16));
  EXPECT_EQ(d[0].fields.rkey, 0x200u);
  EXPECT_EQ(d[0].fields.dma_len, 8u);
  ASSERT_EQ(d[0].payload.size(), 8u);
  EXPECT_EQ(memcmp(d[0].payload.data(), src_, 8), 0);
  const auto answer = std::find_if(d.begin(), d.end(), [](const Packet& p) {
    return Op(p) == IbtaOperation::kReadResponseOnly;
  });
  ASSERT_NE(answer, d.end());
  EXPECT_EQ(answer->fields.psn, d[0].fields.psn);
  EXPECT_TRUE(answer->payload.empty());
  EXPECT_EQ(memcmp(dst_ + 16, src_, 8), 0);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(dst_[i], 0) << i;  // nothing else written
  for (int i = 24; i < 1024; ++i) EXPECT_EQ(dst_[i], 0) << i;
  auto sent = host_.SendCompletions(kQpA);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].wr_id, 1u);
  EXPECT_EQ(sent[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(sent[0].opcode, IBV_WC_ATOMIC_WRITE);
  EXPECT_EQ(sent[1].status, IBV_WC_SUCCESS);
  EXPECT_EQ(host_.RecvCompletions(kQpB).size(), 1u);
}

// Its answer lost, the requester asks again after the ACK timeout; the
// responder replays the answer and does not store again (the application
// wrote the word meanwhile: its value stays).
TEST_F(WireQpTest, ADuplicatedAtomicWriteIsAnsweredAgainNotStoredAgain) {
  host_.Qp(kQpA).Post(AtomicWrite(1, src_, dst_ + 8, 0x200));
  host_.Deliver([](const Packet& p) { return Op(p) != IbtaOperation::kReadResponseOnly; });
  EXPECT_TRUE(host_.SendCompletions(kQpA).empty());
  ASSERT_EQ(memcmp(dst_ + 8, src_, 8), 0);
  memset(dst_ + 8, 0xee, 8);  // written by the responder's application since
  host_.Advance(AckTimeoutNs(10));
  host_.Deliver();
  EXPECT_EQ(host_.Qp(kQpB).counters().duplicates, 1u);
  for (int i = 8; i < 16; ++i) EXPECT_EQ(dst_[i], 0xee) << i;
  auto sent = host_.SendCompletions(kQpA);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(sent[0].opcode, IBV_WC_ATOMIC_WRITE);
}

// rxe's checks: an address not 8-byte aligned is an invalid request
// (IBV_WC_REM_INV_REQ_ERR), an rkey without remote write a remote access
// error; nothing is stored either way.
TEST_F(WireQpTest, AMisalignedAtomicWriteIsAnInvalidRequest) {
  host_.Qp(kQpA).Post(AtomicWrite(1, src_, dst_ + 4, 0x200));
  host_.Deliver();
  auto sent = host_.SendCompletions(kQpA);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, IBV_WC_REM_INV_REQ_ERR);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(dst_[i], 0) << i;
}

TEST_F(WireQpTest, AnAtomicWriteThroughAnRkeyWithoutRemoteWriteIsARemoteAccessError) {
  alignas(8) uint8_t read_only[64] = {};
  host_.AddMr(0x300, read_only, sizeof(read_only), IBV_ACCESS_REMOTE_READ);
  host_.Qp(kQpA).Post(AtomicWrite(1, src_, read_only, 0x300));
  host_.Deliver();
  auto sent = host_.SendCompletions(kQpA);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, IBV_WC_REM_ACCESS_ERR);
  for (uint8_t b : read_only) EXPECT_EQ(b, 0);
}

// The first message a QP in RTR gets raises IBV_EVENT_COMM_EST, once, as on
// one host (shm_responder.cc) and on hardware; the network transport did
// not raise it before session 26 (datapath.coverage_cases' comm_est_in_rtr
// failed with every path over the network: wire loopback).
TEST_F(WireQpTest, TheFirstMessageInRtrRaisesCommEstOnce) {
  host_.SetQpState(kQpB, IBV_QPS_RTR);
  host_.PostRecv(kQpB, 7, dst_, 64, 0x200);
  host_.PostRecv(kQpB, 8, dst_, 64, 0x200);
  host_.Qp(kQpA).Post(Wr(IBV_WR_SEND, 1, src_, 8, 0x100));
  host_.Qp(kQpA).Post(Wr(IBV_WR_SEND, 2, src_, 8, 0x100));
  host_.Deliver();
  ASSERT_EQ(host_.RecvCompletions(kQpB).size(), 2u);
  const std::vector<std::pair<uint32_t, ibv_event_type>> once = {{kQpB, IBV_EVENT_COMM_EST}};
  EXPECT_EQ(host_.events, once);
}

// A reliable QP that a requester error moves to ERR flushes its receives
// after its send queue, as hardware does (they never completed before
// session 26).
TEST_F(WireQpTest, ARequesterErrorFlushesTheReceivesOfTheQp) {
  host_.PostRecv(kQpA, 31, dst_, 64, 0x200);
  host_.PostRecv(kQpA, 32, dst_, 64, 0x200);
  host_.Qp(kQpA).Post(Wr(IBV_WR_SEND, 1, src_, 8, 0x999));  // a bad lkey
  host_.Deliver();
  auto sent = host_.SendCompletions(kQpA);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, IBV_WC_LOC_PROT_ERR);
  auto recv = host_.RecvCompletions(kQpA);
  ASSERT_EQ(recv.size(), 2u);
  EXPECT_EQ(recv[0].wr_id, 31u);
  EXPECT_EQ(recv[0].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(recv[1].wr_id, 32u);
  EXPECT_EQ(recv[1].status, IBV_WC_WR_FLUSH_ERR);
}

TEST_F(WireQpTest, ALostTailIsSentAgainAfterTheAckTimeout) {
  host_.PostRecv(kQpB, 77, dst_, 4096, 0x200);
  host_.Qp(kQpA).Post(Wr(IBV_WR_SEND, 1, src_, 100, 0x100));
  host_.Deliver([](const Packet& p) { return Op(p) != IbtaOperation::kSendOnly; });
  EXPECT_TRUE(host_.SendCompletions(kQpA).empty());
  host_.Advance(AckTimeoutNs(10) - 1);
  host_.Deliver();
  EXPECT_TRUE(host_.SendCompletions(kQpA).empty());  // not yet
  host_.Advance(2);
  host_.Deliver();
  EXPECT_EQ(host_.Qp(kQpA).counters().timeouts, 1u);
  auto sent = host_.SendCompletions(kQpA);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, IBV_WC_SUCCESS);
}

TEST_F(WireQpTest, NoAnswerEndsInRetryExceededAfterRetryCntTimeouts) {
  host_.Qp(kQpA).Post(Wr(IBV_WR_RDMA_WRITE, 1, src_, 64, 0x100));
  host_.Qp(kQpA).Post(Wr(IBV_WR_RDMA_WRITE, 2, src_, 64, 0x100));
  for (int i = 0; i < 4; ++i) {  // retry_cnt 3: the fourth timeout gives up
    host_.Deliver([](const Packet&) { return false; });
    EXPECT_TRUE(host_.SendCompletions(kQpA).empty() || i == 3);
    host_.Advance(AckTimeoutNs(10));
  }
  auto sent = host_.SendCompletions(kQpA);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].status, IBV_WC_RETRY_EXC_ERR);
  EXPECT_EQ(sent[0].vendor_err, kVendorNoResponse);
  EXPECT_EQ(sent[1].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(host_.errors, std::vector<uint32_t>{kQpA});
  // In ERR before its error completion was seen (ibv_query_qp after
  // polling it answers ERR).
  EXPECT_EQ(host_.completions_before_error, std::vector<uint64_t>{0});
  EXPECT_EQ(host_.Qp(kQpA).requester_state(), RequesterState::kError);
}

TEST_F(WireQpTest, AReceiveTooSmallFailsTheResponderBeforeItsCompletionIsSeen) {
  host_.PostRecv(kQpB, 7, dst_, 16, 0x200);
  host_.PostRecv(kQpB, 8, dst_, 16, 0x200);
  host_.Qp(kQpA).Post(Wr(IBV_WR_SEND, 1, src_, 100, 0x100));
  host_.Deliver();
  auto recv = host_.RecvCompletions(kQpB);
  ASSERT_EQ(recv.size(), 2u);
  EXPECT_EQ(recv[0].status, IBV_WC_LOC_LEN_ERR);
  EXPECT_EQ(recv[0].wr_id, 7u);
  EXPECT_EQ(recv[1].status, IBV_WC_WR_FLUSH_ERR);
  auto sent = host_.SendCompletions(kQpA);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, IBV_WC_REM_INV_REQ_ERR);
  // B entered ERR before its LOC_LEN_ERR was published, A before its
  // REM_INV_REQ_ERR.
  EXPECT_EQ(host_.errors, (std::vector<uint32_t>{kQpB, kQpA}));
  EXPECT_EQ(host_.completions_before_error, (std::vector<uint64_t>{0, 0}));
}

TEST_F(WireQpTest, NoReceiveWqeIsAnRnrNakThenTheRetrySucceeds) {
  host_.Qp(kQpA).Post(Wr(IBV_WR_SEND, 1, src_, 100, 0x100));
  host_.Deliver();
  EXPECT_EQ(host_.Qp(kQpB).counters().rnr_naks_sent, 1u);
  EXPECT_EQ(host_.Qp(kQpA).requester_state(), RequesterState::kRnrWait);
  host_.PostRecv(kQpB, 9, dst_, 4096, 0x200);
  host_.Advance(RnrTimerNs(1));
  host_.Deliver();
  auto recv = host_.RecvCompletions(kQpB);
  ASSERT_EQ(recv.size(), 1u);
  EXPECT_EQ(recv[0].wr_id, 9u);
  EXPECT_EQ(host_.SendCompletions(kQpA).size(), 1u);
}

// A copy of a SEND the responder RNR-NAKed arrives once a receive is
// posted (the network delayed or duplicated it; or the responder kept the
// packet while its memory's owner converted it): executed and ACKed. The
// ACK completes the WR the requester had gone back to, and the QP goes on.
TEST_F(WireQpTest, AnAckAfterAnRnrNakOfTheSamePsnCompletesTheWr) {
  host_.Qp(kQpA).Post(Wr(IBV_WR_SEND, 1, src_, 100, 0x100));
  host_.Deliver();
  ASSERT_EQ(host_.Qp(kQpB).counters().rnr_naks_sent, 1u);
  ASSERT_EQ(host_.Qp(kQpA).requester_state(), RequesterState::kRnrWait);
  const Packet send = host_.delivered()[0];
  host_.PostRecv(kQpB, 9, dst_, 4096, 0x200);
  host_.Resend(send);
  host_.Deliver();
  auto sent = host_.SendCompletions(kQpA);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, IBV_WC_SUCCESS);
  host_.Advance(RnrTimerNs(1));
  host_.Deliver();
  host_.PostRecv(kQpB, 10, dst_ + 4096, 4096, 0x200);
  host_.Qp(kQpA).Post(Wr(IBV_WR_SEND, 2, src_, 100, 0x100));
  host_.Deliver();
  sent = host_.SendCompletions(kQpA);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].wr_id, 2u);
  EXPECT_EQ(sent[0].status, IBV_WC_SUCCESS);
  auto recv = host_.RecvCompletions(kQpB);
  ASSERT_EQ(recv.size(), 2u);  // each SEND once: the first one's resend was a duplicate
  EXPECT_EQ(host_.Qp(kQpA).requester_state(), RequesterState::kIdle);
}

TEST_F(WireQpTest, RnrRetryExceeded) {
  host_.Qp(kQpA).Post(Wr(IBV_WR_SEND, 1, src_, 100, 0x100));
  for (int i = 0; i < 3; ++i) {  // rnr_retry 2: the third RNR NAK ends it
    host_.Deliver();
    host_.Advance(RnrTimerNs(1));
  }
  auto sent = host_.SendCompletions(kQpA);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, IBV_WC_RNR_RETRY_EXC_ERR);
}

TEST_F(WireQpTest, ADuplicatedFetchAddIsReplayedNotExecutedTwice) {
  uint64_t* counter = reinterpret_cast<uint64_t*>(dst_);
  *counter = 40;
  SendWr wr = Wr(IBV_WR_ATOMIC_FETCH_AND_ADD, 1, src_, 8, 0x100);
  wr.remote_addr = reinterpret_cast<uint64_t>(counter);
  wr.rkey = 0x200;
  wr.compare_add = 2;
  host_.Qp(kQpA).Post(wr);
  // The ATOMIC ACKNOWLEDGE is lost: the requester times out and asks again.
  host_.Deliver([](const Packet& p) { return Op(p) != IbtaOperation::kAtomicAcknowledge; });
  host_.Advance(AckTimeoutNs(10));
  host_.Deliver();
  EXPECT_EQ(*counter, 42u);  // once
  EXPECT_EQ(host_.Qp(kQpB).counters().duplicates, 1u);
  uint64_t old;
  memcpy(&old, src_, 8);
  EXPECT_EQ(old, 40u);
  auto sent = host_.SendCompletions(kQpA);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(sent[0].opcode, IBV_WC_FETCH_ADD);
}

TEST_F(WireQpTest, ALostLastReadResponseIsRequestedAgainAfterTheAckTimeout) {
  PostRead(3000);
  // Nothing comes after the last response: only the timer can tell.
  host_.Deliver([](const Packet& p) { return Op(p) != IbtaOperation::kReadResponseLast; });
  EXPECT_TRUE(host_.SendCompletions(kQpA).empty());
  host_.Advance(AckTimeoutNs(10));
  host_.Deliver();
  // The second request starts at byte 2048 with the PSN of the missing packet.
  ExpectReadRequest(1, 2, 102, 2048, 3000);
  EXPECT_EQ(host_.Qp(kQpA).counters().timeouts, 1u);
  ExpectReadDone(3000);
}

TEST_F(WireQpTest, AGapInReadResponsesAsksAgainAtOnceAndOnlyOnce) {
  PostRead(8000);  // 8 responses
  bool dropped = false;
  host_.Deliver([&](const Packet& p) {
    if (!dropped && Op(p) == IbtaOperation::kReadResponseMiddle) return !(dropped = true);
    return true;
  });
  // Six later responses each showed the gap; one request went, from the
  // missing PSN, with no timeout.
  ExpectReadRequest(1, 2, 101, 1024, 8000);
  EXPECT_EQ(host_.Qp(kQpA).counters().read_gaps, 1u);
  EXPECT_EQ(host_.Qp(kQpA).counters().timeouts, 0u);
  ExpectReadDone(8000);
}

TEST_F(WireQpTest, AGapInTheRepeatedResponsesAsksAgainToo) {
  PostRead(8000);  // PSNs 100..107
  // PSN 101 is lost the first time (102 shows the gap); the repeat passes
  // 102, then loses 105 (106 shows a second gap).
  std::map<uint32_t, int> seen;
  host_.Deliver([&](const Packet& p) {
    if (Op(p) == IbtaOperation::kReadRequest) return true;
    const int n = ++seen[p.fields.psn];
    return !((p.fields.psn == 101 && n == 1) || (p.fields.psn == 105 && n == 2));
  });
  ExpectReadRequest(1, 3, 101, 1024, 8000);
  ExpectReadRequest(2, 3, 105, 5 * 1024, 8000);
  EXPECT_EQ(host_.Qp(kQpA).counters().read_gaps, 2u);
  EXPECT_EQ(host_.Qp(kQpA).counters().timeouts, 0u);
  ExpectReadDone(8000);
}

// A SEND whose ACK is lost, then a READ whose first response is lost: the
// later responses acknowledge the SEND (it completes now, not when the READ
// does).
TEST_F(WireQpTest, AReadResponseAfterAGapAcknowledgesTheRequestsBeforeTheRead) {
  host_.PostRecv(kQpB, 77, dst_ + 4096, 4096, 0x200);
  host_.Qp(kQpA).Post(Wr(IBV_WR_SEND, 5, src_, 100, 0x100));
  PostRead(3000);
  int requests = 0;
  host_.Deliver([&](const Packet& p) {
    if (Op(p) == IbtaOperation::kAcknowledge) return false;
    if (Op(p) == IbtaOperation::kReadRequest) return ++requests == 1;  // the second is lost
    return Op(p) != IbtaOperation::kReadResponseFirst || requests > 1;
  });
  auto sent = host_.SendCompletions(kQpA);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].wr_id, 5u);
  EXPECT_EQ(sent[0].status, IBV_WC_SUCCESS);
  host_.Advance(AckTimeoutNs(10));  // the READ asked again, after the timer
  host_.Deliver();
  ExpectReadDone(3000);
}

// The READ's response is lost and the responder no longer answers the READ
// asked again (its MR was deregistered meanwhile: a duplicate READ it cannot
// read is dropped, as rxe does), while the WRITE after it is acknowledged
// each time. The requester goes back once per retry and ends in
// IBV_WC_RETRY_EXC_ERR; until session 26 each ACK of the WRITE sent both
// again and restarted the ACK timer - the two QPs ping-ponged forever.
TEST_F(WireQpTest, AReadTheResponderNoLongerAnswersEndsInRetryExceededWithoutAStorm) {
  PostRead(64);
  SendWr write = Wr(IBV_WR_RDMA_WRITE, 2, dst_ + 2048, 64, 0x200);
  write.remote_addr = reinterpret_cast<uint64_t>(dst_ + 4096);
  write.rkey = 0x200;
  host_.Qp(kQpA).Post(write);
  bool lost = false;
  const auto lose_the_read_response = [&](const Packet& p) {
    if (lost || Op(p) != IbtaOperation::kReadResponseOnly) return true;
    host_.RemoveMr(0x100);
    return !(lost = true);
  };
  host_.Deliver(lose_the_read_response);
  std::vector<Completion> sent;
  for (int i = 0; i < 10 && sent.empty(); ++i) {
    host_.Advance(AckTimeoutNs(10));
    host_.Deliver();
    sent = host_.SendCompletions(kQpA);
  }
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].status, IBV_WC_RETRY_EXC_ERR);
  EXPECT_EQ(sent[1].status, IBV_WC_WR_FLUSH_ERR);
  // READ and WRITE once, then again for each of the retry_cnt (3) retries
  // at most: nothing like a storm.
  EXPECT_LE(host_.Qp(kQpA).counters().packets_sent, 2u + 2u * 3u);
}

// An RNR NAK naming a PSN inside a READ's responses - no responder sends
// one, but anyone on the network can - must not leave the READ waiting:
// asked again from its first missing response, it completes. Until session
// 26 that PSN counted as outside the send window, and the READ waited for
// it, with no timer, forever.
TEST_F(WireQpTest, AnRnrNakInsideAReadsResponsesDoesNotStallTheRead) {
  PostRead(3000);  // responses at PSNs 100, 101, 102
  host_.Deliver([](const Packet& p) { return Op(p) == IbtaOperation::kReadRequest; });
  WirePacket nak;
  nak.fields.opcode = IbtaOpcode(IbtaTransport::kRc, IbtaOperation::kAcknowledge);
  nak.fields.dest_qp = kQpA;
  nak.fields.psn = 102;
  nak.fields.syndrome = roce::RnrNakSyndrome(1);
  host_.Qp(kQpA).Receive(nak);
  for (int i = 0; i < 5 && host_.Qp(kQpA).outstanding(); ++i) {
    host_.Advance(AckTimeoutNs(10));
    host_.Deliver();
  }
  ExpectReadDone(3000);
}

TEST_F(WireQpTest, ALateReadResponseIsTakenAndItsRepeatsDropped) {
  PostRead(3000);
  // The middle response arrives after the last one (reordered).
  std::optional<Packet> held;
  host_.Deliver([&](const Packet& p) {
    if (!held && Op(p) == IbtaOperation::kReadResponseMiddle) {
      held = p;
      return false;
    }
    if (held && Op(p) == IbtaOperation::kReadResponseLast && held->fields.psn == 101) {
      host_.SendPacket(nullptr, nullptr, 0, roce::PathIpFields{}, held->fields, held->payload);
      held->fields.psn = 0;  // put back once
    }
    return true;
  });
  EXPECT_EQ(host_.Qp(kQpA).counters().read_gaps, 1u);
  EXPECT_EQ(ReadRequests(host_.delivered()).size(), 2u);
  ExpectReadDone(3000);
  EXPECT_TRUE(host_.SendCompletions(kQpA).empty());  // the repeats complete nothing more
}

TEST_F(WireQpTest, ABadRkeyIsNakedAsRemoteAccessErrorAndBothSidesFail) {
  SendWr wr = Wr(IBV_WR_RDMA_WRITE, 1, src_, 64, 0x100);
  wr.remote_addr = reinterpret_cast<uint64_t>(dst_);
  wr.rkey = 0x300;  // no such MR
  host_.Qp(kQpA).Post(wr);
  host_.Deliver();
  auto sent = host_.SendCompletions(kQpA);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(sent[0].vendor_err, kVendorRemoteNak + 2);
  EXPECT_EQ(host_.Qp(kQpB).responder_state(), ResponderState::kError);
  EXPECT_EQ(host_.errors, (std::vector<uint32_t>{kQpB, kQpA}));
}

TEST_F(WireQpTest, WritesCoalesceIntoOneAckPerBurst) {
  for (int i = 0; i < 10; ++i) {
    SendWr wr = Wr(IBV_WR_RDMA_WRITE, static_cast<uint64_t>(i), src_, 8, 0x100);
    wr.remote_addr = reinterpret_cast<uint64_t>(dst_ + 8 * i);
    wr.rkey = 0x200;
    host_.Qp(kQpA).Post(wr);
  }
  host_.Deliver();
  int acks = 0;
  for (const Packet& p : host_.delivered()) acks += Op(p) == IbtaOperation::kAcknowledge;
  EXPECT_LE(acks, 10);
  EXPECT_EQ(host_.SendCompletions(kQpA).size(), 10u);
  // The last packet of each post asked for an ACK (each Post is a burst of
  // its own here); one batch of deliveries answers them with one ACK.
  EXPECT_EQ(acks, 1);
}

TEST_F(WireQpTest, PostsInSqdWaitForRtsAndTheOthersDrain) {
  host_.PostRecv(kQpB, 1, dst_, 4096, 0x200);
  host_.PostRecv(kQpB, 2, dst_ + 4096, 4096, 0x200);
  WireQp& a = host_.Qp(kQpA);
  a.Post(Wr(IBV_WR_SEND, 1, src_, 100, 0x100));  // started in RTS
  a.Hold(true);                                  // RTS -> SQD
  a.Post(Wr(IBV_WR_SEND, 2, src_, 100, 0x100));  // posted in SQD
  EXPECT_FALSE(a.SendQueueDrained());
  host_.Deliver();
  EXPECT_TRUE(a.SendQueueDrained());  // the first is done; the second waits
  EXPECT_EQ(host_.SendCompletions(kQpA).size(), 1u);
  EXPECT_EQ(host_.RecvCompletions(kQpB).size(), 1u);
  a.Hold(false);  // SQD -> RTS
  host_.Deliver();
  auto sent = host_.SendCompletions(kQpA);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].wr_id, 2u);
}

TEST_F(WireQpTest, PsnsWrapAround) {
  FakeWire host;
  host.AddMr(0x100, src_, sizeof(src_));
  host.AddMr(0x200, dst_, sizeof(dst_));
  host.AddQp(kQpA, kQpB, 0xfffffe, 0);
  host.AddQp(kQpB, kQpA, 0, 0xfffffe);
  host.PostRecv(kQpB, 1, dst_, 8192, 0x200);
  host.Qp(kQpA).Post(Wr(IBV_WR_SEND, 1, src_, 5000, 0x100));  // PSNs fffffe .. 000002
  host.Deliver();
  auto recv = host.RecvCompletions(kQpB);
  ASSERT_EQ(recv.size(), 1u);
  EXPECT_EQ(recv[0].byte_len, 5000u);
  EXPECT_EQ(host.SendCompletions(kQpA).size(), 1u);
  EXPECT_EQ(host.delivered().back().fields.psn, 2u);  // the ACK of the last one
}

}  // namespace
}  // namespace softverbs::datapath
