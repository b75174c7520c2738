// A fake host for the network transport's state machines (datapath/
// wire_qp.h): no daemon, no sockets. RC QPs share one device table in
// anonymous memory; the packets each sends wait in a queue the test
// delivers, drops or duplicates one by one, and the clock is the test's.
#pragma once

#include <endian.h>
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "datapath/timers.h"
#include "datapath/wire_qp.h"
#include "fake_device.h"
#include "roce/aeth.h"

namespace softverbs::datapath::wire_test {

using testing::TestCq;
using testing::TestDeviceTable;
using testing::TestReceiveSide;

inline constexpr uint32_t kOwner = 1;
inline constexpr uint32_t kPdn = 7;
inline constexpr uint32_t kQpA = 0x11;  // requester side of most tests
inline constexpr uint32_t kQpB = 0x12;
inline constexpr uint32_t kUdQkey = 0x1234;

struct Packet {
  roce::TransportFields fields;
  std::vector<uint8_t> payload;
};

class FakeWire : public WireHost {
 public:
  // A QP in RTS connected to `dest` (RC, UC; a UD QP takes Q_Key kUdQkey),
  // with its own receive queue.
  WireQp& AddQp(uint32_t qpn, uint32_t dest, uint32_t sq_psn, uint32_t rq_psn,
                uint32_t type = IBV_QPT_RC) {
    device_.AddQp(qpn, type, dest, kOwner, kPdn);
    if (type == IBV_QPT_UD) device_.table().QpSlot(qpn)->qkey.store(kUdQkey);
    auto side = std::make_unique<Side>(qpn);
    WireQpConfig c;
    c.qpn = qpn;
    c.type = type;
    c.qkey = kUdQkey;
    c.generation = 1;
    c.owner = kOwner;
    c.pdn = kPdn;
    c.dest_qpn = dest;
    c.sq_psn = sq_psn;
    c.rq_psn = rq_psn;
    c.mtu_bytes = 1024;
    c.timeout = 10;
    c.retry_cnt = 3;
    c.rnr_retry = 2;
    c.min_rnr_timer = 1;
    c.max_rd_atomic = 4;
    side->wire = std::make_unique<WireQp>(*this, c);
    WireQp& w = *side->wire;
    sides_[qpn] = std::move(side);
    return w;
  }
  // Registers [p, p + len) under key (as lkey and rkey).
  void AddMr(uint32_t key, void* p, uint64_t len,
             uint32_t access = IBV_ACCESS_LOCAL_WRITE | testing::kAllRemoteAccess) {
    device_.AddMr(key, p, len, kOwner, kPdn, access);
  }
  void RemoveMr(uint32_t key) { device_.RemoveMr(key); }
  // QP qpn's state as the device table shows it (the responder reads it).
  void SetQpState(uint32_t qpn, ibv_qp_state state) {
    device_.table().QpSlot(qpn)->state.store(state);
  }
  void PostRecv(uint32_t qpn, uint64_t wr_id, void* p, uint32_t len, uint32_t key) {
    RecvSge sge{reinterpret_cast<uint64_t>(p), len, key};
    ASSERT_TRUE(sides_.at(qpn)->rx.peer.rq.Post(wr_id, &sge, 1));
  }
  std::vector<Completion> SendCompletions(uint32_t qpn) { return sides_.at(qpn)->send.Drain(); }
  std::vector<Completion> RecvCompletions(uint32_t qpn) { return sides_.at(qpn)->rx.recv.Drain(); }
  WireQp& Qp(uint32_t qpn) { return *sides_.at(qpn)->wire; }

  // Delivers the packets on the wire, in order, until none is left; `fate`
  // may drop one (false) on its way. Each batch ends with the receiver's
  // coalesced ACK, as the carrier's does.
  void Deliver(const std::function<bool(const Packet&)>& fate = nullptr, int rounds = 100) {
    for (int r = 0; r < rounds && !wire_.empty(); ++r) {
      std::deque<Packet> batch;
      batch.swap(wire_);
      std::vector<WireQp*> touched;
      for (Packet& p : batch) {
        if (keep_delivered_) delivered_.push_back(p);
        if (fate && !fate(p)) continue;
        auto it = sides_.find(p.fields.dest_qp);
        if (it == sides_.end()) continue;
        WirePacket w;
        w.fields = p.fields;
        w.payload = p.payload;
        it->second->wire->Receive(w);
        touched.push_back(it->second->wire.get());
      }
      for (WireQp* w : touched) w->FlushAck();
    }
  }
  // A copy of packet p on the wire again (one the network duplicated or
  // delayed).
  void Resend(const Packet& p) { wire_.push_back(p); }
  // Moves the clock on and runs the timers.
  void Advance(uint64_t ns) {
    now_ += ns;
    for (auto& [qpn, side] : sides_) {
      if (side->wire->NextDeadline() <= now_) side->wire->OnTimer(now_);
    }
  }
  const std::vector<Packet>& delivered() const { return delivered_; }
  // Whether delivered() keeps what was delivered (a long run need not).
  void KeepDelivered(bool keep) { keep_delivered_ = keep; }
  std::vector<uint32_t> errors;                             // SetQpError calls
  std::vector<std::pair<uint32_t, ibv_event_type>> events;  // RaiseQpEvent calls
  // For each SetQpError / SetSendQueueError call: how many of that QP's
  // completions (send and receive CQs) were published before it.
  std::vector<uint64_t> completions_before_error;

  // WireHost
  uint32_t client_id() const override { return 0; }
  const DeviceTable& table() const override { return device_.table(); }
  PeerQp* FindPeerQp(uint32_t qpn, uint32_t generation) override {
    auto it = sides_.find(qpn);
    return it == sides_.end() || generation != 1 ? nullptr : &it->second->rx.peer;
  }
  const MrMapping* FindMrMapping(uint32_t, const MrEntry&) override {
    return through_file_.mem_fd >= 0 ? &through_file_ : &local_;
  }
  // From now on every MR is reached as another process's MR whose bytes no
  // shared memory backs: through mem_fd (this process's /proc/self/mem).
  void ReachMrsThrough(int mem_fd) { through_file_.mem_fd = mem_fd; }
  // The device's host, as the daemon's WireService: its accesses take no
  // count (it has no access record).
  bool ChangesKeysBetweenAccesses() const override { return true; }
  PeerQp* FindXrcSrq(uint32_t) override { return nullptr; }
  void SetQpError(uint32_t qpn) override {
    errors.push_back(qpn);
    completions_before_error.push_back(CompletionsOf(qpn));
    device_.table().QpSlot(qpn)->state.store(IBV_QPS_ERR);
  }
  void SetSendQueueError(uint32_t qpn) override {
    errors.push_back(qpn);
    completions_before_error.push_back(CompletionsOf(qpn));
  }
  void SrqLimitReached(uint32_t) override {}
  void ReportSigError(uint32_t, const SigError&) override {}
  void DrainOnSigError(uint32_t) override {}
  void RaiseQpEvent(uint32_t qpn, ibv_event_type event) override { events.push_back({qpn, event}); }
  void McastMembers(const uint8_t*, std::vector<uint32_t>*) override {}
  void SendPacket(const uint8_t*, const uint8_t*, uint16_t, const roce::PathIpFields&,
                  const roce::TransportFields& f, std::span<const uint8_t> payload) override {
    wire_.push_back({f, {payload.begin(), payload.end()}});
  }
  bool SendCq(uint32_t qpn, CqRing** ring, int* event_fd) override {
    *ring = &sides_.at(qpn)->send.cq;
    *event_fd = -1;
    return true;
  }
  uint64_t Now() override { return now_; }

 private:
  uint64_t CompletionsOf(uint32_t qpn) const {
    const Side& s = *sides_.at(qpn);
    return s.send.cq.Depth() + s.rx.recv.cq.Depth();
  }
  struct Side {
    explicit Side(uint32_t qpn) : rx(qpn, kOwner, kPdn) {}
    TestReceiveSide rx;
    TestCq send{64};
    std::unique_ptr<WireQp> wire;
  };
  TestDeviceTable device_;
  MrMapping local_{0, true, nullptr, 0, 0, -1};
  MrMapping through_file_{0, false, nullptr, 0, 0, -1};
  std::map<uint32_t, std::unique_ptr<Side>> sides_;
  std::deque<Packet> wire_;
  std::vector<Packet> delivered_;
  bool keep_delivered_ = true;
  uint64_t now_ = 1'000'000'000;
};

inline IbtaOperation Op(const Packet& p) {
  return OperationOfOpcode(p.fields.opcode);
}

inline SendWr Wr(uint32_t opcode, uint64_t wr_id, void* p, uint32_t len, uint32_t key) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = opcode;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.num_sge = 1;
  wr.sge[0] = {reinterpret_cast<uint64_t>(p), len, key};
  return wr;
}

// The READ requests among the packets delivered so far.
inline std::vector<const Packet*> ReadRequests(const std::vector<Packet>& delivered) {
  std::vector<const Packet*> out;
  for (const Packet& p : delivered) {
    if (Op(p) == IbtaOperation::kReadRequest) out.push_back(&p);
  }
  return out;
}

}  // namespace softverbs::datapath::wire_test
