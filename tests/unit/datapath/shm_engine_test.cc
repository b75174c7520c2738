// The shared-memory engine (datapath/engine.h) with a fake host: no daemon,
// no second process. QPs share one device table in anonymous memory; their
// rings are plain memory, MRs are this process's buffers, and the clock is
// the test's. Each test walks the requester's send queue, the responder's
// answers or the completer's verdicts through one transition.
#include <errno.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "datapath/block_signature.h"
#include "datapath/engine.h"
#include "datapath/keyed_access.h"
#include "datapath/shm_completer.h"
#include "datapath/shm_plain_post.h"
#include "datapath/shm_send_queue.h"
#include "datapath/timers.h"
#include "fake_device.h"

namespace softverbs::datapath {
namespace {

constexpr uint32_t kOwner = 1;
constexpr uint32_t kPdn = 7;
constexpr uint32_t kQpA = 0x21;  // the requester of most tests
constexpr uint32_t kQpB = 0x22;  // its target
constexpr uint32_t kKey = 0x100;
using testing::TestDeviceTable;
using testing::TestReceiveSide;

class FakeHost : public Host {
 public:
  // A QP of `type` in `state` (connected to dest for RC/UC) with its own
  // receive queue; Q_Key 0x1111.
  QpEntry* AddQp(uint32_t qpn, uint32_t type, uint32_t dest, uint32_t state = IBV_QPS_RTS) {
    QpEntry* e = device_.AddQp(qpn, type, dest, kOwner, kPdn, state);
    e->qkey.store(0x1111);
    sides_[qpn] = std::make_unique<TestReceiveSide>(qpn, kOwner, kPdn);
    return e;
  }
  void AddMr(uint32_t key, void* p, uint64_t len) { device_.AddMr(key, p, len, kOwner, kPdn); }
  void PostRecv(uint32_t qpn, uint64_t wr_id, void* p, uint32_t len, uint32_t lkey = kKey) {
    RecvSge sge{reinterpret_cast<uint64_t>(p), len, lkey};
    ASSERT_TRUE(sides_.at(qpn)->peer.rq.Post(wr_id, &sge, 1));
  }
  std::vector<Completion> RecvCompletions(uint32_t qpn) { return sides_.at(qpn)->recv.Drain(); }
  void Advance(uint64_t ns) { now_ += ns; }
  // The accesses of MR key this host's access record says it is inside.
  uint32_t Inside(uint32_t key) const { return record_[MrSlotOf(key)].load(); }

  std::vector<uint32_t> qp_errors;  // SetQpError calls
  // For each SetQpError: how many receive completions of that QP were
  // published before it.
  std::vector<uint64_t> recv_completions_before_error;
  std::vector<std::pair<uint32_t, ibv_event_type>> events;
  std::vector<std::pair<uint32_t, SigError>> sig_errors;
  // Whether this process's own accesses go uncounted (the provider's
  // execution gate), and a mapping to answer instead of "this process's
  // memory" (a peer's MR, mapped in part).
  bool fenced = false;
  const MrMapping* remote_mapping = nullptr;
  uint64_t epoch = 0;  // PeerEpoch: bumped when a peer's mapping is retired

  // Host
  uint64_t Now() override { return now_; }
  uint32_t client_id() const override { return kOwner; }
  const DeviceTable& table() const override { return device_.table(); }
  PeerQp* FindPeerQp(uint32_t qpn, uint32_t generation) override {
    auto it = sides_.find(qpn);
    return it == sides_.end() || generation != 1 ? nullptr : &it->second->peer;
  }
  const MrMapping* FindMrMapping(uint32_t, const MrEntry&) override {
    return remote_mapping ? remote_mapping : &local_;
  }
  bool OwnAccessesFenced() const override { return fenced; }
  uint64_t PeerEpoch() const override { return epoch; }
  std::atomic<uint32_t>* AccessRecord(uint32_t key) override { return &record_[MrSlotOf(key)]; }
  PeerQp* FindXrcSrq(uint32_t) override { return nullptr; }
  void SetQpError(uint32_t qpn) override {
    qp_errors.push_back(qpn);
    recv_completions_before_error.push_back(sides_.at(qpn)->recv.cq.Depth());
    device_.table().QpSlot(qpn)->state.store(IBV_QPS_ERR);
  }
  void SrqLimitReached(uint32_t) override {}
  void ReportSigError(uint32_t key, const SigError& err) override {
    sig_errors.emplace_back(key, err);
  }
  void RaiseQpEvent(uint32_t qpn, ibv_event_type e) override { events.emplace_back(qpn, e); }
  void McastMembers(const uint8_t*, std::vector<uint32_t>*) override {}

 private:
  TestDeviceTable device_;
  MrMapping local_{0, true, nullptr, 0, 0, -1};
  std::map<uint32_t, std::unique_ptr<TestReceiveSide>> sides_;
  uint64_t now_ = 1'000'000'000;
  std::vector<std::atomic<uint32_t>> record_ = std::vector<std::atomic<uint32_t>>(kMrSlots);
};

// QP A's side as its send queue reaches it (the provider's QpPort).
class FakePort {
 public:
  FakePort(FakeHost& host, uint32_t type) : host_(host), type_(type) {}
  Host& host() { return host_; }
  uint32_t qpn() const { return kQpA; }
  LocalQp View() {
    const QpEntry* e = host_.table().QpSlot(kQpA);
    return {kQpA, type_, kPdn, e->dest_qpn.load(), e->qkey.load(), 1024, 0, nullptr};
  }
  RequesterAttributes Requester() { return attributes; }
  bool SignalsAll() const { return sig_all; }
  void CompleteSend(const Completion& c) { send_completions.push_back(c); }
  void SetError() {
    set_error++;
    completions_before_error = send_completions.size();
  }
  void FlushReceivesAfterError() { receive_flushes++; }
  void SendQueueDrained() { drained++; }
  void DrainOnSigError() { sig_drains++; }

  RequesterAttributes attributes{.timeout = 8, .retry_cnt = 2, .rnr_retry = 2};  // 1.05 ms
  bool sig_all = false;
  std::vector<Completion> send_completions;
  int set_error = 0;
  size_t completions_before_error = 0;  // at the last SetError
  int receive_flushes = 0;
  int drained = 0;
  int sig_drains = 0;

 private:
  FakeHost& host_;
  uint32_t type_;
};

static_assert(ShmQpPort<FakePort>);

class ShmEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    host_.AddQp(kQpA, IBV_QPT_RC, kQpB);
    target_ = host_.AddQp(kQpB, IBV_QPT_RC, kQpA);
    host_.AddMr(kKey, buf_, sizeof(buf_));
  }
  uint8_t* src() { return buf_; }
  uint8_t* dst() { return buf_ + 4096; }
  SendWr Wr(uint64_t id, uint32_t opcode, uint32_t len = 64) {
    SendWr wr;
    wr.wr_id = id;
    wr.opcode = opcode;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.num_sge = 1;
    wr.sge[0] = {reinterpret_cast<uint64_t>(src()), len, kKey};
    wr.remote_addr = reinterpret_cast<uint64_t>(dst());
    wr.rkey = kKey;
    return wr;
  }
  int Post(SendWr wr, bool hold = false, uint32_t max_send_wr = 16) {
    return sq_.Post(port_, wr, hold, max_send_wr);
  }

  FakeHost host_;
  FakePort port_{host_, IBV_QPT_RC};
  ShmSendQueue sq_;
  QpEntry* target_ = nullptr;
  alignas(4096) uint8_t buf_[3 * 4096] = {};
};

TEST_F(ShmEngine, SendIsAckedAndCompletesOnBothSides) {
  memset(src(), 0xab, 64);
  host_.PostRecv(kQpB, 7, dst(), 128);
  ASSERT_EQ(Post(Wr(1, IBV_WR_SEND)), 0);
  EXPECT_EQ(sq_.state(), ShmSendState::kIdle);
  ASSERT_EQ(port_.send_completions.size(), 1u);
  EXPECT_EQ(port_.send_completions[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(port_.send_completions[0].opcode, IBV_WC_SEND);
  EXPECT_EQ(port_.send_completions[0].wr_id, 1u);
  auto recv = host_.RecvCompletions(kQpB);
  ASSERT_EQ(recv.size(), 1u);
  EXPECT_EQ(recv[0].wr_id, 7u);
  EXPECT_EQ(recv[0].byte_len, 64u);
  EXPECT_EQ(recv[0].src_qp, kQpA);
  EXPECT_EQ(dst()[63], 0xab);
  EXPECT_EQ(dst()[64], 0);
}

// An access of memory that is not this process's own (or of its own, where
// its executions are not fenced) is counted in the host's access record for
// as long as the access lasts: that count is what the device sums when the
// MR is deregistered (docs/datapath.md).
TEST_F(ShmEngine, AnAccessIsCountedInTheAccessRecordWhileItLasts) {
  RecvSge sge{reinterpret_cast<uint64_t>(dst()), 64, kKey};
  for (bool fenced : {false, true}) {
    host_.fenced = fenced;
    {
      MrGuards guards;
      PieceList pieces;
      ASSERT_EQ(AddKeyedPieces(host_, guards, &sge, 1, false, kPdn, kOwner, IBV_ACCESS_LOCAL_WRITE,
                               &pieces),
                kVendorNone);
      // Fenced, the MR is this process's own: its dereg waits for its
      // executions instead, so nothing is counted.
      EXPECT_EQ(host_.Inside(kKey), fenced ? 0u : 1u) << "fenced " << fenced;
    }
    EXPECT_EQ(host_.Inside(kKey), 0u) << "fenced " << fenced;
  }
  // Counted before the key check: a refused access holds no count after.
  {
    MrGuards guards;
    PieceList pieces;
    RecvSge outside{reinterpret_cast<uint64_t>(buf_) + sizeof(buf_), 64, kKey};
    host_.fenced = false;
    EXPECT_NE(AddKeyedPieces(host_, guards, &outside, 1, false, kPdn, kOwner,
                             IBV_ACCESS_LOCAL_WRITE, &pieces),
              kVendorNone);
  }
  EXPECT_EQ(host_.Inside(kKey), 0u);
}

// A send queue with DCI streams (here: two streams in error at most) keeps
// a WR's error in its stream: no SetError, the stream's next WR flushed
// without running, another stream's WR runs; a reset stream runs again;
// the error that makes two streams errored is the QP's (SetError); Clear
// (RESET) forgets the errors.
TEST_F(ShmEngine, DciStreamsKeepAnErrorInItsStream) {
  sq_.EnableStreams(2);
  const auto on_stream = [this](uint64_t id, uint16_t stream, bool bad_lkey = false) {
    SendWr wr = Wr(id, IBV_WR_RDMA_WRITE, 8);
    wr.dci_stream = stream;
    if (bad_lkey) wr.sge[0].lkey = kKey + 0x100;
    return Post(wr);
  };
  const auto last = [this] { return port_.send_completions.back(); };
  ASSERT_EQ(on_stream(1, 5, true), 0);
  EXPECT_EQ(last().status, IBV_WC_LOC_PROT_ERR);
  EXPECT_EQ(port_.set_error, 0);
  EXPECT_EQ(port_.receive_flushes, 0);
  memset(src(), 0x5a, 8);
  ASSERT_EQ(on_stream(2, 5), 0);
  EXPECT_EQ(last().wr_id, 2u);
  EXPECT_EQ(last().status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(dst()[0], 0) << "a WR of a stream in error ran";
  ASSERT_EQ(on_stream(3, 6), 0);
  EXPECT_EQ(last().status, IBV_WC_SUCCESS);
  EXPECT_EQ(dst()[0], 0x5a);
  EXPECT_FALSE(sq_.ResetStream(6));
  EXPECT_TRUE(sq_.ResetStream(5));
  ASSERT_EQ(on_stream(4, 5), 0);
  EXPECT_EQ(last().status, IBV_WC_SUCCESS);

  ASSERT_EQ(on_stream(5, 7, true), 0);
  EXPECT_EQ(port_.set_error, 0);
  ASSERT_EQ(on_stream(6, 8, true), 0);
  EXPECT_EQ(last().status, IBV_WC_LOC_PROT_ERR);
  EXPECT_EQ(port_.set_error, 1) << "the second stream in error is the QP's error";
  sq_.Clear();
  EXPECT_FALSE(sq_.ResetStream(7));
  EXPECT_TRUE(sq_.HasStreams());
}

TEST_F(ShmEngine, UnsignaledSuccessCompletesOnlyWithSqSigAll) {
  SendWr wr = Wr(1, IBV_WR_RDMA_WRITE);
  wr.send_flags = 0;
  ASSERT_EQ(Post(wr), 0);
  EXPECT_TRUE(port_.send_completions.empty());
  port_.sig_all = true;
  ASSERT_EQ(Post(wr), 0);
  EXPECT_EQ(port_.send_completions.size(), 1u);
}

TEST_F(ShmEngine, RnrNakWaitsThenCompletesInOrder) {
  Outcome out = Execute(host_, port_.View(), Wr(1, IBV_WR_SEND));
  EXPECT_EQ(out.response, Response::kRnrNak);
  EXPECT_EQ(out.rnr_timer_ns, 1u);

  ASSERT_EQ(Post(Wr(2, IBV_WR_SEND)), 0);
  EXPECT_EQ(sq_.state(), ShmSendState::kRnrWait);
  ASSERT_EQ(Post(Wr(3, IBV_WR_RDMA_WRITE)), 0);  // waits behind, not run
  EXPECT_EQ(sq_.size(), 2u);
  EXPECT_TRUE(port_.send_completions.empty());
  host_.PostRecv(kQpB, 7, dst(), 128);
  sq_.Progress(port_, false);  // the RNR timer (10 us) has not run out
  EXPECT_EQ(sq_.size(), 2u);
  host_.Advance(RnrTimerNs(1));
  sq_.Progress(port_, false);
  EXPECT_EQ(sq_.state(), ShmSendState::kIdle);
  ASSERT_EQ(port_.send_completions.size(), 2u);
  EXPECT_EQ(port_.send_completions[0].wr_id, 2u);
  EXPECT_EQ(port_.send_completions[1].wr_id, 3u);
  EXPECT_EQ(port_.set_error, 0);
}

TEST_F(ShmEngine, RnrRetryExceededCompletesOnceAndFlushesTheRest) {
  ASSERT_EQ(Post(Wr(1, IBV_WR_SEND)), 0);
  ASSERT_EQ(Post(Wr(2, IBV_WR_RDMA_WRITE)), 0);
  for (int i = 0; i < 2; ++i) {  // rnr_retry 2: two more tries
    EXPECT_EQ(sq_.state(), ShmSendState::kRnrWait);
    host_.Advance(RnrTimerNs(1));
    sq_.Progress(port_, false);
  }
  EXPECT_EQ(sq_.state(), ShmSendState::kIdle);
  ASSERT_EQ(port_.send_completions.size(), 2u);  // one each, never two
  EXPECT_EQ(port_.send_completions[0].wr_id, 1u);
  EXPECT_EQ(port_.send_completions[0].status, IBV_WC_RNR_RETRY_EXC_ERR);
  EXPECT_EQ(port_.send_completions[1].wr_id, 2u);
  EXPECT_EQ(port_.send_completions[1].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(port_.send_completions[1].opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(port_.set_error, 1);
  EXPECT_EQ(port_.receive_flushes, 1);
}

TEST_F(ShmEngine, RnrRetrySevenRetriesForever) {
  port_.attributes.rnr_retry = 7;
  ASSERT_EQ(Post(Wr(1, IBV_WR_SEND)), 0);
  for (int i = 0; i < 50; ++i) {
    host_.Advance(RnrTimerNs(1));
    sq_.Progress(port_, false);
  }
  EXPECT_EQ(sq_.state(), ShmSendState::kRnrWait);
  host_.PostRecv(kQpB, 7, dst(), 128);
  host_.Advance(RnrTimerNs(1));
  sq_.Progress(port_, false);
  ASSERT_EQ(port_.send_completions.size(), 1u);
  EXPECT_EQ(port_.send_completions[0].status, IBV_WC_SUCCESS);
}

TEST_F(ShmEngine, NoAnswerWaitsThenRetryExceeded) {
  target_->state.store(IBV_QPS_INIT);  // not ready to receive: no answer
  ASSERT_EQ(Post(Wr(1, IBV_WR_RDMA_WRITE)), 0);
  EXPECT_EQ(sq_.state(), ShmSendState::kAckWait);
  const uint64_t budget = AckTimeoutNs(port_.attributes.timeout) * (port_.attributes.retry_cnt + 1);
  host_.Advance(budget / 2);
  sq_.Progress(port_, false);
  EXPECT_TRUE(port_.send_completions.empty());
  host_.Advance(budget);
  sq_.Progress(port_, false);
  ASSERT_EQ(port_.send_completions.size(), 1u);
  EXPECT_EQ(port_.send_completions[0].status, IBV_WC_RETRY_EXC_ERR);
  EXPECT_EQ(port_.send_completions[0].vendor_err, kVendorNoResponse);
  EXPECT_EQ(port_.set_error, 1);
  // In ERR before its error completion was seen (ibv_query_qp after
  // polling it answers ERR).
  EXPECT_EQ(port_.completions_before_error, 0u);
}

TEST_F(ShmEngine, NoAnswerEndsWhenTheTargetIsReady) {
  target_->state.store(IBV_QPS_INIT);
  ASSERT_EQ(Post(Wr(1, IBV_WR_RDMA_WRITE)), 0);
  EXPECT_EQ(sq_.state(), ShmSendState::kAckWait);
  target_->state.store(IBV_QPS_RTR);
  host_.Advance(200'000);
  sq_.Progress(port_, false);
  ASSERT_EQ(port_.send_completions.size(), 1u);
  EXPECT_EQ(port_.send_completions[0].status, IBV_WC_SUCCESS);
  // The first message in RTR establishes communication.
  ASSERT_EQ(host_.events.size(), 1u);
  EXPECT_EQ(host_.events[0].second, IBV_EVENT_COMM_EST);
}

TEST_F(ShmEngine, HeldInSqdUntilUnhold) {
  ASSERT_EQ(Post(Wr(1, IBV_WR_RDMA_WRITE), true), 0);
  EXPECT_EQ(sq_.state(), ShmSendState::kHeld);
  sq_.Progress(port_, true);
  EXPECT_TRUE(port_.send_completions.empty());
  sq_.Unhold();
  sq_.Progress(port_, false);
  EXPECT_EQ(sq_.state(), ShmSendState::kIdle);
  ASSERT_EQ(port_.send_completions.size(), 1u);
}

TEST_F(ShmEngine, DrainNotifyWaitsForWrsStartedBeforeSqd) {
  ASSERT_EQ(Post(Wr(1, IBV_WR_SEND)), 0);              // RNR: still waiting
  ASSERT_EQ(Post(Wr(2, IBV_WR_RDMA_WRITE), true), 0);  // posted in SQD: does not count
  sq_.StartDrainNotify(port_);
  EXPECT_EQ(port_.drained, 0);
  host_.PostRecv(kQpB, 7, dst(), 128);
  host_.Advance(RnrTimerNs(1));
  sq_.Progress(port_, true);
  EXPECT_EQ(port_.drained, 1);
  EXPECT_EQ(sq_.state(), ShmSendState::kHeld);
  sq_.StartDrainNotify(port_);  // nothing started before SQD waits: at once
  EXPECT_EQ(port_.drained, 2);
}

TEST_F(ShmEngine, FlushCompletesEveryWaitingWr) {
  ASSERT_EQ(Post(Wr(1, IBV_WR_SEND)), 0);
  ASSERT_EQ(Post(Wr(2, IBV_WR_RDMA_READ)), 0);
  sq_.Flush(port_);
  EXPECT_TRUE(sq_.empty());
  EXPECT_EQ(sq_.state(), ShmSendState::kIdle);
  ASSERT_EQ(port_.send_completions.size(), 2u);
  EXPECT_EQ(port_.send_completions[0].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(port_.send_completions[1].opcode, IBV_WC_RDMA_READ);
}

TEST_F(ShmEngine, ClearForgetsWithoutCompletions) {
  ASSERT_EQ(Post(Wr(1, IBV_WR_SEND)), 0);
  sq_.Clear();
  EXPECT_TRUE(sq_.empty());
  EXPECT_EQ(sq_.state(), ShmSendState::kIdle);
  EXPECT_TRUE(port_.send_completions.empty());
}

TEST_F(ShmEngine, FullQueueRefusesAndChangesNothing) {
  ASSERT_EQ(Post(Wr(1, IBV_WR_SEND), false, 2), 0);
  ASSERT_EQ(Post(Wr(2, IBV_WR_SEND), false, 2), 0);
  EXPECT_EQ(Post(Wr(3, IBV_WR_SEND), false, 2), ENOMEM);
  EXPECT_EQ(sq_.size(), 2u);
}

TEST_F(ShmEngine, BadRkeyIsNakedAndBothQpsFail) {
  SendWr wr = Wr(1, IBV_WR_RDMA_WRITE);
  wr.rkey = kKey + 1;
  Outcome out = Execute(host_, port_.View(), wr);
  EXPECT_EQ(out.response, Response::kNak);
  EXPECT_EQ(out.completion.status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(host_.qp_errors, std::vector<uint32_t>{kQpB});
  ASSERT_EQ(Post(Wr(2, IBV_WR_RDMA_WRITE)), 0);  // B is in ERR now: no answer
  EXPECT_EQ(sq_.state(), ShmSendState::kAckWait);
}

TEST_F(ShmEngine, MissingQpAccessIsAnInvalidRequest) {
  target_->access.store(IBV_ACCESS_REMOTE_READ);
  Outcome out = Execute(host_, port_.View(), Wr(1, IBV_WR_RDMA_WRITE));
  EXPECT_EQ(out.response, Response::kNak);
  EXPECT_EQ(out.completion.status, IBV_WC_REM_INV_REQ_ERR);
  EXPECT_EQ(out.completion.vendor_err, kVendorQpAccess);
}

TEST_F(ShmEngine, ReceiveTooSmallFailsBothSides) {
  host_.PostRecv(kQpB, 7, dst(), 16);
  ASSERT_EQ(Post(Wr(1, IBV_WR_SEND)), 0);
  ASSERT_EQ(port_.send_completions.size(), 1u);
  EXPECT_EQ(port_.send_completions[0].status, IBV_WC_REM_INV_REQ_ERR);
  auto recv = host_.RecvCompletions(kQpB);
  ASSERT_EQ(recv.size(), 1u);
  EXPECT_EQ(recv[0].status, IBV_WC_LOC_LEN_ERR);
  EXPECT_EQ(port_.set_error, 1);
  // Both QPs entered their error state before their completions were seen.
  EXPECT_EQ(port_.completions_before_error, 0u);
  EXPECT_EQ(host_.qp_errors, std::vector<uint32_t>{kQpB});
  EXPECT_EQ(host_.recv_completions_before_error, std::vector<uint64_t>{0});
}

TEST_F(ShmEngine, BadLkeyFailsLocallyWithoutAResponder) {
  SendWr wr = Wr(1, IBV_WR_RDMA_WRITE);
  wr.sge[0].lkey = kKey + 1;
  Outcome out = Execute(host_, port_.View(), wr);
  EXPECT_EQ(out.response, Response::kNone);
  EXPECT_EQ(out.completion.status, IBV_WC_LOC_PROT_ERR);
  EXPECT_TRUE(host_.qp_errors.empty());
}

TEST_F(ShmEngine, ReadAndAtomicsAreAcked) {
  memcpy(dst(), "remote!", 8);
  Outcome out = Execute(host_, port_.View(), Wr(1, IBV_WR_RDMA_READ, 8));
  EXPECT_EQ(out.response, Response::kAck);
  EXPECT_EQ(memcmp(src(), "remote!", 8), 0);
  uint64_t counter = 5;
  memcpy(dst(), &counter, 8);
  SendWr fa = Wr(2, IBV_WR_ATOMIC_FETCH_AND_ADD, 8);
  fa.compare_add = 3;
  out = Execute(host_, port_.View(), fa);
  EXPECT_EQ(out.response, Response::kAck);
  uint64_t old = 0, now = 0;
  memcpy(&old, src(), 8);
  memcpy(&now, dst(), 8);
  EXPECT_EQ(old, 5u);
  EXPECT_EQ(now, 8u);
}

TEST_F(ShmEngine, UnreliableResponderDropsSilently) {
  host_.AddQp(0x31, IBV_QPT_UC, 0x32);
  host_.AddQp(0x32, IBV_QPT_UC, 0x31);
  const LocalQp uc{0x31, IBV_QPT_UC, kPdn, 0x32, 0, 1024, 0, nullptr};
  SendWr wr = Wr(1, IBV_WR_RDMA_WRITE);
  wr.rkey = kKey + 1;
  Outcome out = Execute(host_, uc, wr);
  EXPECT_EQ(out.response, Response::kDropped);
  EXPECT_EQ(out.completion.status, IBV_WC_SUCCESS);
  out = Execute(host_, uc, Wr(2, IBV_WR_SEND));  // no receive posted: no RNR on UC
  EXPECT_EQ(out.response, Response::kDropped);
}

TEST_F(ShmEngine, UdQkeyMismatchIsDropped) {
  host_.AddQp(0x41, IBV_QPT_UD, 0);
  host_.AddQp(0x42, IBV_QPT_UD, 0);
  host_.PostRecv(0x42, 9, dst(), 256);
  const LocalQp ud{0x41, IBV_QPT_UD, kPdn, 0, 0x1111, 1024, 0, nullptr};
  SendWr wr = Wr(1, IBV_WR_SEND, 16);
  wr.remote_qpn = 0x42;
  wr.remote_qkey = 0x2222;
  Outcome out = Execute(host_, ud, wr);
  EXPECT_EQ(out.response, Response::kDropped);
  EXPECT_TRUE(host_.RecvCompletions(0x42).empty());
  wr.remote_qkey = 0x1111;
  out = Execute(host_, ud, wr);
  EXPECT_EQ(out.response, Response::kAck);
  auto recv = host_.RecvCompletions(0x42);
  ASSERT_EQ(recv.size(), 1u);
  EXPECT_EQ(recv[0].byte_len, 16u + kGrhBytes);
  EXPECT_TRUE(recv[0].wc_flags & IBV_WC_GRH);
}

// A UD message on one host reaches the receive buffer as the network would
// deliver it (RoCE v2): the GRH holds the packet's IP header, and the
// completion's sl says which kind it is as mlx5 reports it (bit 3: UDP;
// 1 IPv6, 2 IPv4), which UCX's UD transport reads to find the destination
// address. Byte offsets from RFC 791 / RFC 8200 and IBA A17.4.5.2 (IPv4: the
// header in the second half of the 40 bytes).
TEST_F(ShmEngine, UdReceiveShowsThePacketsIpHeaderAndType) {
  host_.AddQp(0x41, IBV_QPT_UD, 0);
  host_.AddQp(0x42, IBV_QPT_UD, 0);
  const LocalQp ud{0x41, IBV_QPT_UD, kPdn, 0, 0x1111, 1024, 0, nullptr};
  SendWr wr = Wr(1, IBV_WR_SEND, 16);
  wr.remote_qpn = 0x42;
  wr.remote_qkey = 0x1111;
  const uint8_t v4_src[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 51, 100, 1};
  const uint8_t v4_dst[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 51, 100, 2};
  memcpy(wr.sgid, v4_src, 16);
  memcpy(wr.dgid, v4_dst, 16);
  memset(dst(), 0xee, 256);
  host_.PostRecv(0x42, 9, dst(), 256);
  ASSERT_EQ(Execute(host_, ud, wr).response, Response::kAck);
  auto recv = host_.RecvCompletions(0x42);
  ASSERT_EQ(recv.size(), 1u);
  EXPECT_EQ(recv[0].sl, 0x8 | 0x2);  // RoCE v2 over IPv4
  const uint8_t* ip = dst() + 20;
  EXPECT_EQ(ip[0], 0x45);  // version 4, 5 words
  // total length: IPv4 20 + UDP 8 + BTH 12 + DETH 8 + 16 + ICRC 4
  EXPECT_EQ(ip[2] << 8 | ip[3], 68);
  EXPECT_EQ(ip[1], 0);   // TOS: the AH's traffic class, 0
  EXPECT_EQ(ip[8], 64);  // TTL: the default path's (an AH's hop limit 0 goes as 64 too)
  EXPECT_EQ(ip[9], 17);  // UDP
  EXPECT_EQ(memcmp(ip + 12, v4_src + 12, 4), 0);
  EXPECT_EQ(memcmp(ip + 16, v4_dst + 12, 4), 0);
  uint32_t sum = 0;  // a valid header checksum sums to 0xffff
  for (int i = 0; i < 20; i += 2) sum += ip[i] << 8 | ip[i + 1];
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  EXPECT_EQ(sum, 0xffffu);
  EXPECT_EQ(dst()[40], src()[0]);  // the payload after the 40 bytes

  // Between IPv6 addresses: the IPv6 header, all 40 bytes.
  const uint8_t v6_src[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  const uint8_t v6_dst[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  memcpy(wr.sgid, v6_src, 16);
  memcpy(wr.dgid, v6_dst, 16);
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.path = {0xb8, 17};  // the AH's GRH, as a packet would carry them
  host_.PostRecv(0x42, 10, dst(), 256);
  ASSERT_EQ(Execute(host_, ud, wr).response, Response::kAck);
  recv = host_.RecvCompletions(0x42);
  ASSERT_EQ(recv.size(), 1u);
  EXPECT_EQ(recv[0].sl, 0x8 | 0x1);  // RoCE v2 over IPv6
  const uint8_t* ip6 = dst();
  EXPECT_EQ(ip6[0] >> 4, 6);
  EXPECT_EQ((ip6[0] << 4 | ip6[1] >> 4) & 0xff, 0xb8);  // traffic class
  // payload length: UDP 8 + BTH 12 + DETH 8 + immediate 4 + 16 + ICRC 4
  EXPECT_EQ(ip6[4] << 8 | ip6[5], 52);
  EXPECT_EQ(ip6[6], 17);  // next header: UDP
  EXPECT_EQ(ip6[7], 17);  // hop limit
  EXPECT_EQ(memcmp(ip6 + 8, v6_src, 16), 0);
  EXPECT_EQ(memcmp(ip6 + 24, v6_dst, 16), 0);
}

// The plain post path (shm_plain_post.h): the success path alone, or
// nothing at all.
class PlainPath : public ShmEngine {
 protected:
  PlainPost Inline(uint32_t opcode = IBV_WR_RDMA_WRITE, uint32_t len = 8) {
    return {opcode, IBV_SEND_SIGNALED | IBV_SEND_INLINE,
            0,      reinterpret_cast<uint64_t>(src()),
            0,      true,
            len,    reinterpret_cast<uint64_t>(dst()),
            kKey};
  }
  // The plain path refuses an 8-byte SEND to the oldest receive WQE,
  // `wr_id`, leaving it queued; the general engine then takes it and
  // completes it with receive_status, the SEND with send_status.
  void ExpectRefusedThenReported(uint64_t wr_id, ibv_wc_status send_status,
                                 ibv_wc_status receive_status) {
    EXPECT_FALSE(TryPlainPost(host_, port_.View(), Inline(IBV_WR_SEND)));
    ExpectUntouched();
    Outcome out = Execute(host_, port_.View(), Wr(1, IBV_WR_SEND, 8));
    EXPECT_EQ(out.completion.status, send_status);
    auto recv = host_.RecvCompletions(kQpB);
    ASSERT_EQ(recv.size(), 1u);
    EXPECT_EQ(recv[0].wr_id, wr_id);
    EXPECT_EQ(recv[0].status, receive_status);
  }
  // A peer's MR as this process maps it: only the second page of buf_,
  // the rest reached through the owner's /proc/<pid>/mem.
  MrMapping SecondPageMapped() {
    return {1,
            false,
            buf_ + 4096,
            reinterpret_cast<uint64_t>(buf_) + 4096,
            reinterpret_cast<uint64_t>(buf_) + 8192,
            -1};
  }
  // Nothing of a refused post is left: no byte, no count, no error, no event.
  void ExpectUntouched() {
    EXPECT_EQ(dst()[0], 0);
    EXPECT_EQ(host_.Inside(kKey), 0u);
    EXPECT_TRUE(host_.qp_errors.empty());
    EXPECT_TRUE(host_.events.empty());
    EXPECT_TRUE(host_.RecvCompletions(kQpB).empty());
  }
};

TEST_F(PlainPath, InlineWriteLandsAndLeavesNoCount) {
  memset(src(), 0xcd, 8);
  ASSERT_TRUE(TryPlainPost(host_, port_.View(), Inline()));
  EXPECT_EQ(dst()[7], 0xcd);
  EXPECT_EQ(dst()[8], 0);
  EXPECT_EQ(host_.Inside(kKey), 0u);
  EXPECT_TRUE(host_.RecvCompletions(kQpB).empty());
}

TEST_F(PlainPath, KeyedSourceOnlyWhereOwnAccessesAreFenced) {
  memset(src(), 0xcd, 8);
  PlainPost w = Inline();
  w.inline_src = false;
  w.lkey = kKey;
  EXPECT_FALSE(TryPlainPost(host_, port_.View(), w));  // would need a count: the general engine
  ExpectUntouched();
  host_.fenced = true;
  ASSERT_TRUE(TryPlainPost(host_, port_.View(), w));
  EXPECT_EQ(dst()[7], 0xcd);
}

TEST_F(PlainPath, WriteRefusesWhatIsNotTheSuccessPath) {
  memset(src(), 0xcd, 8);
  host_.fenced = true;
  PlainPost bad_lkey = Inline();
  bad_lkey.inline_src = false;
  bad_lkey.lkey = kKey + 1;
  EXPECT_FALSE(TryPlainPost(host_, port_.View(), bad_lkey));
  PlainPost bad_rkey = Inline();
  bad_rkey.rkey = kKey + 1;
  EXPECT_FALSE(TryPlainPost(host_, port_.View(), bad_rkey));
  PlainPost past_end = Inline();
  past_end.remote_addr = reinterpret_cast<uint64_t>(buf_) + sizeof(buf_) - 4;
  EXPECT_FALSE(TryPlainPost(host_, port_.View(), past_end));
  ExpectUntouched();
  target_->access.store(IBV_ACCESS_REMOTE_READ);
  EXPECT_FALSE(TryPlainPost(host_, port_.View(), Inline()));
  ExpectUntouched();
  target_->access.store(IBV_ACCESS_REMOTE_WRITE);
  // RTR before its first message: IBV_EVENT_COMM_EST is the general
  // engine's to raise.
  target_->state.store(IBV_QPS_RTR);
  EXPECT_FALSE(TryPlainPost(host_, port_.View(), Inline()));
  ExpectUntouched();
  target_->comm_est.store(1);
  EXPECT_TRUE(TryPlainPost(host_, port_.View(), Inline()));
  EXPECT_TRUE(host_.events.empty());
}

TEST_F(PlainPath, WriteRefusesBytesOutsideThePeersMappedPages) {
  // A peer's MR whose mapped (memfd-backed) pages are the second page of
  // buf_ only: the first page is reached through /proc/<pid>/mem. Not
  // fenced: the access counts, as a peer's does.
  const MrMapping peer = SecondPageMapped();
  host_.remote_mapping = &peer;
  PlainPost w = Inline();
  w.remote_addr = reinterpret_cast<uint64_t>(buf_) + 4092;  // 4 bytes before, 4 inside
  EXPECT_FALSE(TryPlainPost(host_, port_.View(), w));
  EXPECT_EQ(host_.Inside(kKey), 0u);
  memset(src(), 0xcd, 8);
  w.remote_addr = reinterpret_cast<uint64_t>(buf_) + 4096;
  ASSERT_TRUE(TryPlainPost(host_, port_.View(), w));
  EXPECT_EQ(buf_[4096 + 7], 0xcd);
  EXPECT_EQ(host_.Inside(kKey), 0u);  // taken, then given back
}

TEST_F(PlainPath, SendTakesTheOldestReceiveAndCompletesIt) {
  memset(src(), 0xab, 8);
  host_.PostRecv(kQpB, 7, dst(), 128);
  host_.PostRecv(kQpB, 8, dst() + 128, 128);
  PlainPost send = Inline(IBV_WR_SEND_WITH_IMM);
  send.imm_data = 0x01020304;
  send.send_flags |= IBV_SEND_SOLICITED;
  ASSERT_TRUE(TryPlainPost(host_, port_.View(), send));
  EXPECT_EQ(dst()[7], 0xab);
  EXPECT_EQ(dst()[8], 0);
  auto recv = host_.RecvCompletions(kQpB);
  ASSERT_EQ(recv.size(), 1u);
  EXPECT_EQ(recv[0].wr_id, 7u);
  EXPECT_EQ(recv[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(recv[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(recv[0].byte_len, 8u);
  EXPECT_EQ(recv[0].qp_num, kQpB);
  EXPECT_EQ(recv[0].src_qp, kQpA);
  EXPECT_EQ(recv[0].wc_flags, IBV_WC_WITH_IMM);
  EXPECT_EQ(recv[0].imm_data, 0x01020304u);
  EXPECT_EQ(recv[0].solicited, 1);
  EXPECT_EQ(host_.Inside(kKey), 0u);
  // The general engine's SEND of the same bytes completes the same way.
  Outcome out = Execute(host_, port_.View(), Wr(2, IBV_WR_SEND, 8));
  EXPECT_EQ(out.response, Response::kAck);
  auto general = host_.RecvCompletions(kQpB);
  ASSERT_EQ(general.size(), 1u);
  EXPECT_EQ(general[0].wr_id, 8u);
  EXPECT_EQ(general[0].byte_len, 8u);
  EXPECT_EQ(general[0].qp_num, recv[0].qp_num);
  EXPECT_EQ(general[0].src_qp, recv[0].src_qp);
  EXPECT_EQ(general[0].sl, recv[0].sl);
}

TEST_F(PlainPath, SendRefusesAndLeavesTheReceiveQueued) {
  memset(src(), 0xab, 8);
  // No receive WQE: RNR is the general engine's.
  EXPECT_FALSE(TryPlainPost(host_, port_.View(), Inline(IBV_WR_SEND)));
  ExpectUntouched();
  // A receive too small: refused, not taken.
  host_.PostRecv(kQpB, 7, dst(), 4);
  ExpectRefusedThenReported(7, IBV_WC_REM_INV_REQ_ERR, IBV_WC_LOC_LEN_ERR);
}

TEST_F(PlainPath, SendRefusesAReceiveWithABadKey) {
  host_.PostRecv(kQpB, 9, dst(), 128, kKey + 1);
  ExpectRefusedThenReported(9, IBV_WC_REM_OP_ERR, IBV_WC_LOC_PROT_ERR);
}

// An atomic on a word of this process's own MR that lies outside the MR's
// backed pages (peers reach it through /proc/<pid>/mem, under the owner's
// word lock) is not plain: the engine takes it, and it lands all the same.
TEST_F(PlainPath, AnOwnAtomicOutsideTheBackingIsTheEnginesWay) {
  host_.fenced = true;
  MrEntry* e = const_cast<MrEntry*>(host_.table().MrSlot(kKey));
  e->backed_end.store(reinterpret_cast<uint64_t>(dst()));  // the first page only
  uint64_t word = 40;
  memcpy(dst() + 64, &word, 8);
  PlainPost add = Inline(IBV_WR_ATOMIC_FETCH_AND_ADD);
  add.inline_src = false;
  add.lkey = kKey;
  add.remote_addr = reinterpret_cast<uint64_t>(dst()) + 64;
  add.compare_add = 2;
  EXPECT_FALSE(TryPlainPost(host_, port_.View(), add));
  memcpy(&word, dst() + 64, 8);
  EXPECT_EQ(word, 40u);  // untouched
  SendWr wr = Wr(3, IBV_WR_ATOMIC_FETCH_AND_ADD, 8);
  wr.remote_addr = reinterpret_cast<uint64_t>(dst()) + 64;
  wr.compare_add = 2;
  EXPECT_EQ(Execute(host_, port_.View(), wr).completion.status, IBV_WC_SUCCESS);
  memcpy(&word, dst() + 64, 8);
  EXPECT_EQ(word, 42u);
}

TEST_F(PlainPath, ReadAndAtomicsReturnTheRemoteBytes) {
  host_.fenced = true;  // the local buffer is keyed: this process's own MR
  auto keyed = [&](uint32_t opcode, uint64_t remote_offset) {
    PlainPost p = Inline(opcode);
    p.inline_src = false;
    p.lkey = kKey;
    p.remote_addr = reinterpret_cast<uint64_t>(dst()) + remote_offset;
    return p;
  };
  memset(dst(), 0x5a, 8);
  ASSERT_TRUE(TryPlainPost(host_, port_.View(), keyed(IBV_WR_RDMA_READ, 0)));
  EXPECT_EQ(src()[0], 0x5a);
  EXPECT_EQ(src()[7], 0x5a);
  uint64_t word = 40;
  memcpy(dst() + 64, &word, 8);
  PlainPost add = keyed(IBV_WR_ATOMIC_FETCH_AND_ADD, 64);
  add.compare_add = 2;
  ASSERT_TRUE(TryPlainPost(host_, port_.View(), add));
  uint64_t got = 0;
  memcpy(&got, src(), 8);
  EXPECT_EQ(got, 40u);
  memcpy(&word, dst() + 64, 8);
  EXPECT_EQ(word, 42u);
  PlainPost cas = keyed(IBV_WR_ATOMIC_CMP_AND_SWP, 64);
  cas.compare_add = 42;
  cas.swap = 7;
  ASSERT_TRUE(TryPlainPost(host_, port_.View(), cas));
  memcpy(&got, src(), 8);
  EXPECT_EQ(got, 42u);
  memcpy(&word, dst() + 64, 8);
  EXPECT_EQ(word, 7u);
  EXPECT_EQ(host_.Inside(kKey), 0u);
  // Refused: a misaligned atomic, a result buffer under 8 bytes, a target
  // without remote atomics.
  PlainPost misaligned = keyed(IBV_WR_ATOMIC_FETCH_AND_ADD, 60);
  EXPECT_FALSE(TryPlainPost(host_, port_.View(), misaligned));
  PlainPost short_result = keyed(IBV_WR_ATOMIC_FETCH_AND_ADD, 64);
  short_result.bytes = 4;
  EXPECT_FALSE(TryPlainPost(host_, port_.View(), short_result));
  target_->access.store(IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
  EXPECT_FALSE(TryPlainPost(host_, port_.View(), keyed(IBV_WR_ATOMIC_FETCH_AND_ADD, 64)));
  memcpy(&word, dst() + 64, 8);
  EXPECT_EQ(word, 7u) << "a refused atomic changed the remote word";
  EXPECT_EQ(host_.Inside(kKey), 0u);
  EXPECT_TRUE(host_.qp_errors.empty());
}

TEST_F(PlainPath, ReadNeedsLocalWriteOnItsBuffer) {
  host_.fenced = true;
  uint8_t own[64] = {};
  host_.AddMr(kKey + 0x100, own, sizeof(own));
  host_.table().MrSlot(kKey + 0x100)->access.store(IBV_ACCESS_REMOTE_READ);  // no LOCAL_WRITE
  PlainPost read = Inline(IBV_WR_RDMA_READ);
  read.inline_src = false;
  read.lkey = kKey + 0x100;
  read.local_addr = reinterpret_cast<uint64_t>(own);
  memset(dst(), 0x5a, 8);
  EXPECT_FALSE(TryPlainPost(host_, port_.View(), read));
  EXPECT_EQ(own[0], 0);
  EXPECT_EQ(host_.Inside(kKey), 0u);
}

// A WRITE or READ that succeeds keeps its route (plain_route.h); the QP's
// next WR with the same keys runs on it (TryRoutedPost) - while the words
// the route was found under say the same.
class PlainRoutePath : public PlainPath {
 protected:
  void SetUp() override {
    PlainPath::SetUp();
    host_.fenced = true;
  }
  PlainPost Keyed(uint32_t opcode) {
    PlainPost w = Inline(opcode);
    w.inline_src = false;
    w.lkey = kKey;
    return w;
  }
  // A route of a keyed WRITE of 8 bytes from src() to dst().
  PlainRoute WriteRoute() {
    PlainRoute route;
    EXPECT_TRUE(TryPlainPost(host_, port_.View(), Keyed(IBV_WR_RDMA_WRITE), &route));
    EXPECT_TRUE(route.valid);
    memset(dst(), 0, 16);
    return route;
  }
  // The WR TryRoutedPost gets: 8 bytes (or `bytes`) from src() to
  // dst() + remote_offset, keyed with kKey.
  static RoutedWr Wr(uint64_t local, uint64_t remote, uint32_t bytes = 8, uint32_t dest = kQpB) {
    return {dest, kQpA, 0, IBV_SEND_SIGNALED, 0, local, kKey, bytes, remote, kKey};
  }
  bool Routed(const PlainRoute& route, uint64_t remote_offset = 0, uint32_t bytes = 8,
              uint32_t dest = kQpB) {
    return TryRoutedPost(host_, route,
                         Wr(reinterpret_cast<uint64_t>(src()),
                            reinterpret_cast<uint64_t>(dst()) + remote_offset, bytes, dest));
  }
};

TEST_F(PlainRoutePath, TheNextWriteAndReadRunOnTheirRoutes) {
  PlainRoute write = WriteRoute();
  EXPECT_EQ(write.opcode, IBV_WR_RDMA_WRITE);
  EXPECT_EQ(write.remote.record, nullptr);  // this process's own memory
  memset(src(), 0x11, 16);
  ASSERT_TRUE(Routed(write));
  EXPECT_EQ(dst()[7], 0x11);
  EXPECT_EQ(dst()[8], 0);
  ASSERT_TRUE(Routed(write, 64, 16));  // elsewhere in the same MR
  EXPECT_EQ(dst()[64 + 15], 0x11);

  PlainRoute read;
  ASSERT_TRUE(TryPlainPost(host_, port_.View(), Keyed(IBV_WR_RDMA_READ), &read));
  ASSERT_TRUE(read.valid);
  memset(dst(), 0x22, 8);
  ASSERT_TRUE(TryRoutedPost(
      host_, read, Wr(reinterpret_cast<uint64_t>(src()), reinterpret_cast<uint64_t>(dst()))));
  EXPECT_EQ(src()[7], 0x22);
  EXPECT_EQ(host_.Inside(kKey), 0u);

  // An atomic keeps none (and a refused WRITE empties the route).
  PlainRoute none = WriteRoute();
  ASSERT_TRUE(TryPlainPost(host_, port_.View(), Keyed(IBV_WR_ATOMIC_FETCH_AND_ADD), &none));
  EXPECT_FALSE(none.valid);
  none = WriteRoute();
  PlainPost bad = Keyed(IBV_WR_RDMA_WRITE);
  bad.rkey = kKey + 1;
  EXPECT_FALSE(TryPlainPost(host_, port_.View(), bad, &none));
  EXPECT_FALSE(none.valid);
}

TEST_F(PlainRoutePath, ARouteAnswersNoMoreOnceAWordItWasFoundUnderChanged) {
  MrEntry* mr = host_.table().MrSlot(kKey);
  struct Change {
    const char* what;
    std::function<void()> make;
    std::function<void()> undo;
  };
  const Change changes[] = {
      {"the rkey cleared (a dereg)", [&] { mr->rkey.store(0); }, [&] { mr->rkey.store(kKey); }},
      {"the lkey cleared", [&] { mr->lkey.store(0); }, [&] { mr->lkey.store(kKey); }},
      {"the slot published again (a rereg)", [&] { mr->generation.fetch_add(1); }, [] {}},
      {"the target without remote write", [&] { target_->access.store(IBV_ACCESS_REMOTE_READ); },
       [&] { target_->access.store(IBV_ACCESS_REMOTE_WRITE); }},
      {"the target in ERR", [&] { target_->state.store(IBV_QPS_ERR); },
       [&] { target_->state.store(IBV_QPS_RTS); }},
      {"the target in RTR before its first message", [&] { target_->state.store(IBV_QPS_RTR); },
       [&] { target_->state.store(IBV_QPS_RTS); }},
      {"a new QP of the target's number", [&] { target_->generation.fetch_add(1); },
       [&] { target_->generation.fetch_sub(1); }},
      {"a peer's mapping retired", [&] { host_.epoch++; }, [] {}},
  };
  memset(src(), 0x33, 8);
  for (const Change& c : changes) {
    PlainRoute route = WriteRoute();
    c.make();
    EXPECT_FALSE(Routed(route)) << c.what;
    EXPECT_EQ(dst()[0], 0) << c.what << ": a refused route wrote";
    c.undo();
  }
  // Bytes the route's keys do not reach, or another destination QP.
  PlainRoute route = WriteRoute();
  EXPECT_FALSE(Routed(route, sizeof(buf_) - 4096 - 4));  // 4 of 8 past the MR's end
  EXPECT_FALSE(Routed(route, 0, 8, kQpA));
  EXPECT_EQ(dst()[0], 0);
  EXPECT_EQ(host_.Inside(kKey), 0u);
  EXPECT_TRUE(host_.qp_errors.empty());
  EXPECT_TRUE(host_.events.empty());
}

TEST_F(PlainRoutePath, ARoutedAccessOfAPeersMemoryCountsAndReachesOnlyItsMappedPages) {
  // A peer's MR whose mapped pages are the second page of buf_ only (not
  // fenced: its accesses count, as a peer's do).
  host_.fenced = false;
  const MrMapping peer = SecondPageMapped();
  host_.remote_mapping = &peer;
  PlainPost w = Inline();
  PlainRoute route;
  ASSERT_TRUE(TryPlainPost(host_, port_.View(), w, &route));
  ASSERT_TRUE(route.valid);
  EXPECT_NE(route.remote.record, nullptr);
  EXPECT_TRUE(route.inline_src);
  memset(src(), 0x44, 8);
  ASSERT_TRUE(Routed(route, 64));
  EXPECT_EQ(buf_[4096 + 64 + 7], 0x44);
  EXPECT_EQ(host_.Inside(kKey), 0u);  // taken, then given back
  // The page before: reached through the owner's /proc/<pid>/mem, not here.
  EXPECT_FALSE(TryRoutedPost(
      host_, route,
      Wr(reinterpret_cast<uint64_t>(src()), reinterpret_cast<uint64_t>(buf_) + 4092)));
  host_.table().MrSlot(kKey)->rkey.store(0);
  EXPECT_FALSE(Routed(route, 128));
  EXPECT_EQ(buf_[4096 + 128], 0);
  EXPECT_EQ(host_.Inside(kKey), 0u);  // a refused access leaves no count
}

TEST_F(PlainRoutePath, TheNextSendRunsOnItsRouteWhileTheReceiveWqesKeyIsTheKeptOne) {
  uint8_t other[64] = {};
  host_.AddMr(kKey + 0x100, other, sizeof(other));
  host_.PostRecv(kQpB, 1, dst(), 64);
  PlainRoute route;
  PlainPost send = Keyed(IBV_WR_SEND_WITH_IMM);
  send.imm_data = 0x0a0b0c0d;
  ASSERT_TRUE(TryPlainPost(host_, port_.View(), send, &route));
  ASSERT_TRUE(route.valid);
  EXPECT_EQ(route.remote.key, kKey);  // the receive WQE's lkey
  ASSERT_EQ(host_.RecvCompletions(kQpB).size(), 1u);

  memset(src(), 0x55, 8);
  host_.PostRecv(kQpB, 2, dst() + 64, 64);
  RoutedWr w = Wr(reinterpret_cast<uint64_t>(src()), 0);
  w.imm_data = 0x01020304;
  w.send_flags |= IBV_SEND_SOLICITED;
  ASSERT_TRUE(TryRoutedPost(host_, route, w));
  EXPECT_EQ(dst()[64 + 7], 0x55);
  auto recv = host_.RecvCompletions(kQpB);
  ASSERT_EQ(recv.size(), 1u);
  EXPECT_EQ(recv[0].wr_id, 2u);
  EXPECT_EQ(recv[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(recv[0].byte_len, 8u);
  EXPECT_EQ(recv[0].src_qp, kQpA);
  EXPECT_EQ(recv[0].imm_data, 0x01020304u);
  EXPECT_TRUE(recv[0].wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(recv[0].solicited, 1);

  // Refused, nothing taken: no receive WQE (the general engine's RNR), a
  // WQE of another key.
  EXPECT_FALSE(TryRoutedPost(host_, route, w));
  host_.PostRecv(kQpB, 3, other, 64, kKey + 0x100);
  EXPECT_FALSE(TryRoutedPost(host_, route, w));
  EXPECT_TRUE(host_.RecvCompletions(kQpB).empty());
  EXPECT_EQ(other[0], 0);
}

TEST_F(PlainRoutePath, ASendRouteRefusesAReceiveBufferItsKeyDoesNotReach) {
  host_.PostRecv(kQpB, 1, dst(), 64);
  PlainRoute route;
  ASSERT_TRUE(TryPlainPost(host_, port_.View(), Keyed(IBV_WR_SEND), &route));
  ASSERT_TRUE(route.valid);
  host_.RecvCompletions(kQpB);
  // A WQE whose buffer runs past the MR's end is not taken.
  host_.PostRecv(kQpB, 2, buf_ + sizeof(buf_) - 32, 64);
  EXPECT_FALSE(TryRoutedPost(host_, route, Wr(reinterpret_cast<uint64_t>(src()), 0)));
  EXPECT_TRUE(host_.RecvCompletions(kQpB).empty());
  EXPECT_EQ(host_.Inside(kKey), 0u);
}

TEST(ShmCompleter, JudgesOnlyRetriesAndReadsAttributesOnlyThen) {
  FakeHost host;
  SendWr wr;
  int reads = 0;
  auto attributes = [&] {
    ++reads;
    return RequesterAttributes{.timeout = 1, .retry_cnt = 0, .rnr_retry = 0};
  };
  for (Response r : {Response::kNone, Response::kAck, Response::kDropped, Response::kNak}) {
    Outcome out;
    out.response = r;
    EXPECT_EQ(Judge(host, attributes, &out, &wr), CompleterVerdict::kComplete) << ResponseName(r);
  }
  EXPECT_EQ(reads, 0);
  Outcome rnr;
  rnr.response = Response::kRnrNak;
  EXPECT_EQ(Judge(host, attributes, &rnr, &wr), CompleterVerdict::kComplete);  // rnr_retry 0
  EXPECT_EQ(rnr.completion.status, IBV_WC_RNR_RETRY_EXC_ERR);
  EXPECT_EQ(reads, 1);
}

}  // namespace
}  // namespace softverbs::datapath
