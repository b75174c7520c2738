// One QP's send queue on the shared-memory engine (engine.h): a WR runs at
// once, in the posting thread, when nothing waits ahead of it; one the
// completer says must wait (an RNR NAK, no answer yet) waits at the front
// with everything posted after it, and runs again when its time comes -
// from the next post or poll of the context, or its helper thread
// (Progress). WRs posted in SQD are held behind the others until SQD->RTS
// (IBA 10.3.1). The requester's state is the front WR's: named, and
// printed in the engine's trace (trace.h).
//
// Not thread-safe: the caller serialises every call on one queue (the
// provider's per-QP lock).
#pragma once

#include <cstdint>
#include <deque>

#include "datapath/engine.h"
#include "datapath/layout.h"

namespace softverbs::datapath {

enum class ShmSendState : uint8_t {
  kIdle,     // nothing waits: a new WR runs at once
  kRnrWait,  // the front WR got an RNR NAK: it runs again when its RNR timer expires
  kAckWait,  // the front WR got no answer (target gone, not ready): it runs again
             // soon, until the local ACK timeout x (retry_cnt + 1) has passed
  kHeld,     // the front WR was posted in SQD: it starts on SQD->RTS
};
const char* ShmSendStateName(ShmSendState s);

// One QP as its send queue reaches it (the provider's QP).
class ShmQpPort {
 public:
  virtual ~ShmQpPort() = default;
  virtual Host& host() = 0;
  virtual uint32_t qpn() const = 0;
  // The QP as the engine sees it (its attributes as the device published).
  virtual LocalQp View() = 0;
  virtual RequesterAttributes Requester() = 0;
  // sq_sig_all: every WR completes, signaled or not.
  virtual bool SignalsAll() const = 0;
  // A completion for the QP's send CQ.
  virtual void CompleteSend(const Completion& c) = 0;
  // The requester met an error: an unreliable QP (UD, UC) moves to SQE,
  // a reliable one to ERR (the device publishes either, IBA 10.3.1).
  virtual void SetError() = 0;
  // After SetError and the send queue's flush: a reliable QP's receive
  // queue is flushed too (an unreliable one's keeps working).
  virtual void FlushReceivesAfterError() = 0;
  // Raises IBV_EVENT_SQ_DRAINED.
  virtual void SendQueueDrained() = 0;
};

// The completion of a WR that is flushed (the QP is in ERR or SQE).
Completion FlushedCompletion(const SendWr& wr, uint32_t qpn);

class ShmSendQueue {
 public:
  // Runs wr now if nothing waits and it is not held (posted in SQD), else
  // queues it behind the others. ENOMEM when max_send_wr WRs wait already
  // (nothing changes). wr may be updated (it runs in place; copied only if
  // it must wait).
  int Post(ShmQpPort& port, SendWr& wr, bool hold, uint32_t max_send_wr);
  // Runs the waiting WRs whose time has come, front first, up to one that
  // must wait longer; held WRs stay held while in_sqd.
  void Progress(ShmQpPort& port, bool in_sqd);
  // The QP is in ERR or SQE: every waiting WR completes with
  // IBV_WC_WR_FLUSH_ERR (on the send CQ, whether signaled or not).
  void Flush(ShmQpPort& port);
  // The QP went to RESET: waiting WRs are forgotten.
  void Clear();
  // SQD->RTS: the WRs posted in SQD are no longer held (all at once, so a
  // later RTS->SQD drains them like any WR started in RTS).
  void Unhold();
  // RTS->SQD with en_sqd_async_notify: IBV_EVENT_SQ_DRAINED now if no WR
  // started before SQD waits, else when the last of them completes (not at
  // all if one fails or CancelDrainNotify comes first).
  void StartDrainNotify(ShmQpPort& port);
  void CancelDrainNotify() { drain_notify_ = false; }

  bool empty() const { return waiting_.empty(); }
  size_t size() const { return waiting_.size(); }
  ShmSendState state() const { return state_; }

 private:
  enum class Step { kFinished, kWait, kFailed };
  // Executes wr, judges the response, writes the local completion (an
  // error's whether signaled or not).
  Step RunOne(ShmQpPort& port, SendWr& wr);
  // After a WR failed (and left the queue): the QP's error state, the
  // other WRs flushed, then a reliable QP's receives.
  void Fail(ShmQpPort& port);
  // Every WR started before SQD is done (what is left, if any, is held:
  // held WRs only ever sit behind the others).
  bool Drained() const { return waiting_.empty() || waiting_.front().held; }
  void NoteDrained(ShmQpPort& port);
  // The state the front WR puts the queue in.
  void Settle(ShmQpPort& port);

  std::deque<SendWr> waiting_;
  ShmSendState state_ = ShmSendState::kIdle;
  ShmSendState front_wait_ = ShmSendState::kAckWait;  // why the front WR waits (RunOne)
  bool drain_notify_ = false;
};

}  // namespace softverbs::datapath
