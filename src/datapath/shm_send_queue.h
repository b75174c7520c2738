// One QP's send queue on the shared-memory engine (engine.h): a WR runs at
// once, in the posting thread, when nothing waits ahead of it; one the
// completer says must wait (an RNR NAK, no answer yet) waits at the front
// with everything posted after it, and runs again when its time comes -
// from the next post or poll of the context, or its helper thread
// (Progress). WRs posted in SQD are held behind the others until SQD->RTS
// (IBA 10.3.1). The requester's state is the front WR's: named, and
// printed in the engine's trace (trace.h).
//
// The queue reaches its QP through a port (the ShmQpPort concept): the
// provider's QpPort, or a test's fake. The queue is a template on it so
// that the post path - one call per ibv_post_send - has no indirect call.
// Not thread-safe: the caller serialises every call on one queue (the
// provider's per-QP lock).
#pragma once

#include <errno.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "datapath/engine.h"
#include "datapath/layout.h"
#include "datapath/shm_completer.h"
#include "datapath/sig_access.h"
#include "datapath/trace.h"

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
template <typename P>
concept ShmQpPort = requires(P& p, const Completion& c) {
  // The engine's host: the device's tables, peers, the clock.
  { p.host() } -> std::convertible_to<Host&>;
  { p.qpn() } -> std::convertible_to<uint32_t>;
  // The QP as the engine sees it (its attributes as the device published).
  { p.View() } -> std::same_as<LocalQp>;
  { p.Requester() } -> std::same_as<RequesterAttributes>;
  // sq_sig_all: every WR completes, signaled or not.
  { p.SignalsAll() } -> std::convertible_to<bool>;
  // A completion for the QP's send CQ.
  p.CompleteSend(c);
  // The requester met an error: an unreliable QP (UD, UC) moves to SQE, a
  // reliable one to ERR (the device publishes either, IBA 10.3.1).
  p.SetError();
  // After SetError and the send queue's flush: a reliable QP's receive
  // queue is flushed too (an unreliable one's keeps working).
  p.FlushReceivesAfterError();
  // Raises IBV_EVENT_SQ_DRAINED.
  p.SendQueueDrained();
  // mlx5's signature pipelining stopped the queue: the QP moves to SQD and
  // IBV_EVENT_SQ_DRAINED is raised.
  p.DrainOnSigError();
};

// The completion of a WR that is flushed (the QP is in ERR or SQE).
Completion FlushedCompletion(const SendWr& wr, uint32_t qpn);
// The completion of a canceled WR (mlx5's NOP in its place): successful,
// with the WR's own opcode.
Completion CanceledCompletion(const SendWr& wr, uint32_t qpn);

// Traces one execution (trace.h).
void TraceExecution(uint32_t qpn, const SendWr& wr, const Outcome& out, CompleterVerdict v);

class ShmSendQueue {
 public:
  // Runs wr now if nothing waits and it is not held (posted in SQD), else
  // queues it behind the others. ENOMEM when max_send_wr WRs wait already
  // (nothing changes). wr may be updated (it runs in place; copied only if
  // it must wait).
  template <ShmQpPort Port>
  int Post(Port& port, SendWr& wr, bool hold, uint32_t max_send_wr) {
    if (waiting_.empty() && !hold) [[likely]] {
      switch (RunOne(port, wr)) {
        case Step::kFinished:
          return 0;
        case Step::kWait:
          waiting_.push_back(wr);
          Settle(port.qpn());
          return 0;
        case Step::kFailed:
          Fail(port);
          return 0;
        case Step::kSigDrain:
          waiting_.push_back(wr);
          StopOnSigError(port);
          return 0;
      }
    }
    if (waiting_.size() >= max_send_wr) return ENOMEM;
    waiting_.push_back(wr);
    waiting_.back().held = hold;  // on the queue's copy: the caller may reuse its SendWr
    Settle(port.qpn());
    return 0;
  }

  // Runs the waiting WRs whose time has come, front first, up to one that
  // must wait longer; held WRs stay held while in_sqd.
  template <ShmQpPort Port>
  void Progress(Port& port, bool in_sqd) {
    const uint64_t now = port.host().Now();
    while (!waiting_.empty()) {
      SendWr& wr = waiting_.front();
      if (wr.held) {
        // Posted in SQD: it starts once the QP is back in RTS (Unhold on
        // the modify; this covers a state changed elsewhere).
        if (in_sqd) break;
        wr.held = false;
      }
      if (wr.next_attempt_ns > now) break;
      const Step step = RunOne(port, wr);
      if (step == Step::kWait) break;
      if (step == Step::kSigDrain) {
        StopOnSigError(port);
        break;
      }
      waiting_.pop_front();
      if (step == Step::kFailed) {
        Fail(port);  // flushes the WRs behind it
        break;
      }
      if (Drained()) NoteDrained(port);
    }
    Settle(port.qpn());
  }

  // The QP is in ERR or SQE: every waiting WR completes with
  // IBV_WC_WR_FLUSH_ERR (on the send CQ, whether signaled or not).
  template <ShmQpPort Port>
  void Flush(Port& port) {
    for (const SendWr& wr : waiting_) port.CompleteSend(FlushedCompletion(wr, port.qpn()));
    waiting_.clear();
    Settle(port.qpn());
  }

  // The QP went to RESET: waiting WRs are forgotten, and so are the
  // streams in error.
  void Clear() {
    waiting_.clear();
    drain_notify_ = false;
    state_ = ShmSendState::kIdle;
    errored_streams_.clear();
    sig_error_seen_ = false;
  }
  // mlx5's signature pipelining (MLX5DV_QP_CREATE_SIG_PIPELINING; docs/devx.md,
  // "Signature keys"): once a WR's access met a bad signature, the next WR
  // with IBV_SEND_FENCE does not start - the queue stops before it, the QP
  // moves to SQD (IBV_EVENT_SQ_DRAINED) with it and every later WR still
  // posted, for mlx5dv_qp_cancel_posted_send_wrs and then SQD->RTS.
  void EnableSigPipelining() { sig_pipelining_ = true; }
  bool SigPipelining() const { return sig_pipelining_; }
  // mlx5dv_qp_cancel_posted_send_wrs: the waiting WRs of wr_id become NOPs
  // that complete with their own opcode; how many.
  int Cancel(uint64_t wr_id) {
    int n = 0;
    for (SendWr& wr : waiting_) {
      if (wr.wr_id != wr_id || wr.canceled) continue;
      wr.canceled = true;
      ++n;
    }
    return n;
  }
  // mlx5's DCI streams (docs/devx.md, "DCI streams"): a WR that fails puts
  // its stream (SendWr::dci_stream) in error and the QP stays in RTS, until
  // max_errored streams are in error - the error that makes them that many
  // moves the QP to ERR; a WR of a stream in error completes with
  // IBV_WC_WR_FLUSH_ERR without running, until ResetStream.
  void EnableStreams(uint32_t max_errored) { max_errored_streams_ = max_errored; }
  bool HasStreams() const { return max_errored_streams_ != 0; }
  bool StreamInError(uint16_t stream) const {
    for (uint16_t s : errored_streams_) {
      if (s == stream) return true;
    }
    return false;
  }
  // A WR of `stream` failed: the stream is in error; true while fewer than
  // max_errored streams are (the error stays in its stream). The DEVX
  // queue engine asks these two for a DCI's mlx5 WQEs too.
  bool ContainInStream(uint16_t stream) {
    errored_streams_.push_back(stream);
    return errored_streams_.size() < max_errored_streams_;
  }
  // mlx5dv_dci_stream_id_reset: false when the stream is not in error.
  bool ResetStream(uint16_t stream) {
    for (size_t i = 0; i < errored_streams_.size(); ++i) {
      if (errored_streams_[i] != stream) continue;
      errored_streams_.erase(errored_streams_.begin() + static_cast<std::ptrdiff_t>(i));
      return true;
    }
    return false;
  }
  // SQD->RTS: the WRs posted in SQD are no longer held (all at once, so a
  // later RTS->SQD drains them like any WR started in RTS).
  void Unhold() {
    for (SendWr& wr : waiting_) wr.held = false;
  }
  // RTS->SQD with en_sqd_async_notify: IBV_EVENT_SQ_DRAINED now if no WR
  // started before SQD waits, else when the last of them completes (not at
  // all if one fails or CancelDrainNotify comes first). The WRs still
  // waiting keep running in SQD; WRs posted since (held) do not count.
  template <ShmQpPort Port>
  void StartDrainNotify(Port& port) {
    drain_notify_ = true;
    if (Drained()) NoteDrained(port);
  }
  void CancelDrainNotify() { drain_notify_ = false; }

  bool empty() const { return waiting_.empty(); }
  size_t size() const { return waiting_.size(); }
  ShmSendState state() const { return state_; }

 private:
  enum class Step { kFinished, kWait, kFailed, kSigDrain };

  // Executes wr, judges the response, writes the local completion (an
  // error's whether signaled or not). Inlined into the post: it is the
  // whole of a post's work besides the requester and responder.
  template <ShmQpPort Port>
  [[gnu::always_inline]] Step RunOne(Port& port, SendWr& wr) {
    if (HasStreams() && StreamInError(wr.dci_stream)) [[unlikely]] {
      port.CompleteSend(FlushedCompletion(wr, port.qpn()));
      return Step::kFinished;
    }
    if (wr.canceled) [[unlikely]] {
      if (port.SignalsAll() || (wr.send_flags & IBV_SEND_SIGNALED)) {
        port.CompleteSend(CanceledCompletion(wr, port.qpn()));
      }
      return Step::kFinished;
    }
    uint64_t sig_errors = 0;
    if (sig_pipelining_) [[unlikely]] {
      if (sig_error_seen_ && (wr.send_flags & IBV_SEND_FENCE)) {
        sig_error_seen_ = false;
        return Step::kSigDrain;
      }
      sig_errors = SigErrorsReportedByThisThread();
    }
    const LocalQp qp = port.View();
    Outcome out = Execute(port.host(), qp, wr);
    if (sig_pipelining_ && SigErrorsReportedByThisThread() != sig_errors) [[unlikely]] {
      sig_error_seen_ = true;
    }
    const CompleterVerdict verdict = Judge(
        port.host(), [&port] { return port.Requester(); }, &out, &wr);
    if (EngineTraceOn()) [[unlikely]] {
      TraceExecution(qp.qpn, wr, out, verdict);
    }
    switch (verdict) {
      case CompleterVerdict::kRnrWait:
        front_wait_ = ShmSendState::kRnrWait;
        return Step::kWait;
      case CompleterVerdict::kAckWait:
        front_wait_ = ShmSendState::kAckWait;
        return Step::kWait;
      case CompleterVerdict::kComplete:
        break;
    }
    const Completion& c = out.completion;
    const bool failed = c.status != IBV_WC_SUCCESS;
    if (failed && HasStreams() && ContainInStream(wr.dci_stream)) [[unlikely]] {
      port.CompleteSend(c);  // the QP stays in RTS
      return Step::kFinished;
    }
    // A failed WR puts the QP in its error state before its completion is
    // seen, as hardware does: a program that polls the error completion
    // and then queries the QP finds ERR (SQE), never RTS.
    if (failed) port.SetError();
    if (failed || port.SignalsAll() || (wr.send_flags & IBV_SEND_SIGNALED)) {
      port.CompleteSend(c);
    }
    // A rendezvous to a tag-matching SRQ: its FIN comes after our completion.
    if (out.rendezvous.pending) FinishRendezvous(port.host(), qp, out.rendezvous);
    return failed ? Step::kFailed : Step::kFinished;
  }

  // After a WR failed (and left the queue, the QP in its error state since
  // RunOne): the other WRs flushed, then a reliable QP's receives. A drain
  // in progress ends here: the QP left SQD without draining.
  template <ShmQpPort Port>
  void Fail(Port& port) {
    drain_notify_ = false;
    Flush(port);
    port.FlushReceivesAfterError();
  }

  // The queue stopped before its front WR (a fenced WR after a bad
  // signature): it stays, held, until SQD->RTS.
  template <ShmQpPort Port>
  void StopOnSigError(Port& port) {
    waiting_.front().held = true;
    port.DrainOnSigError();
    Settle(port.qpn());
  }

  // Every WR started before SQD is done (what is left, if any, is held:
  // held WRs only ever sit behind the others).
  bool Drained() const { return waiting_.empty() || waiting_.front().held; }
  template <ShmQpPort Port>
  void NoteDrained(Port& port) {
    if (!drain_notify_) return;
    drain_notify_ = false;
    port.SendQueueDrained();
  }
  // The state the front WR puts the queue in (traced when it changes).
  void Settle(uint32_t qpn);

  std::deque<SendWr> waiting_;
  ShmSendState state_ = ShmSendState::kIdle;
  ShmSendState front_wait_ = ShmSendState::kAckWait;  // why the front WR waits (RunOne)
  bool drain_notify_ = false;
  // DCI streams: 0 = none; else how many streams in error move the QP to
  // ERR, and those in error now (at most that many).
  uint32_t max_errored_streams_ = 0;
  std::vector<uint16_t> errored_streams_;
  // Signature pipelining: on, and a bad signature met since the last stop.
  bool sig_pipelining_ = false;
  bool sig_error_seen_ = false;
};

}  // namespace softverbs::datapath
