#include "datapath/shm_send_queue.h"

#include <errno.h>

#include "datapath/shm_completer.h"
#include "datapath/trace.h"

namespace softverbs::datapath {

const char* ShmSendStateName(ShmSendState s) {
  switch (s) {
    case ShmSendState::kIdle:
      return "idle";
    case ShmSendState::kRnrWait:
      return "rnr-wait";
    case ShmSendState::kAckWait:
      return "ack-wait";
    case ShmSendState::kHeld:
      return "held";
  }
  return "?";
}

Completion FlushedCompletion(const SendWr& wr, uint32_t qpn) {
  Completion c{};
  c.wr_id = wr.wr_id;
  c.status = IBV_WC_WR_FLUSH_ERR;
  c.opcode = WrOpcode(wr.opcode).send_wc;
  c.vendor_err = kVendorFlushed;
  c.qp_num = qpn;
  return c;
}

ShmSendQueue::Step ShmSendQueue::RunOne(ShmQpPort& port, SendWr& wr) {
  const LocalQp qp = port.View();
  Outcome out = Execute(port.host(), qp, wr);
  const CompleterVerdict verdict = Judge(
      port.host(), [&port] { return port.Requester(); }, &out, &wr);
  const Completion& c = out.completion;
  if (EngineTraceOn()) {
    TraceEngine("QP 0x%x WR 0x%llx %s: responder %s, completer %s (status %u)", qp.qpn,
                static_cast<unsigned long long>(wr.wr_id), WrOpcode(wr.opcode).name,
                ResponseName(out.response), CompleterVerdictName(verdict), c.status);
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
  if (c.status != IBV_WC_SUCCESS || port.SignalsAll() || (wr.send_flags & IBV_SEND_SIGNALED)) {
    port.CompleteSend(c);
  }
  // A rendezvous to a tag-matching SRQ: its FIN comes after our completion.
  if (out.rendezvous.pending) FinishRendezvous(port.host(), qp, out.rendezvous);
  return c.status == IBV_WC_SUCCESS ? Step::kFinished : Step::kFailed;
}

void ShmSendQueue::Fail(ShmQpPort& port) {
  // A drain in progress ends here: the QP left SQD without draining.
  drain_notify_ = false;
  port.SetError();
  Flush(port);
  port.FlushReceivesAfterError();
}

int ShmSendQueue::Post(ShmQpPort& port, SendWr& wr, bool hold, uint32_t max_send_wr) {
  if (!waiting_.empty() || hold) {
    if (waiting_.size() >= max_send_wr) return ENOMEM;
    waiting_.push_back(wr);
    waiting_.back().held = hold;  // on the queue's copy: the caller may reuse its SendWr
    Settle(port);
    return 0;
  }
  switch (RunOne(port, wr)) {
    case Step::kFinished:
      break;
    case Step::kWait:
      waiting_.push_back(wr);
      Settle(port);
      break;
    case Step::kFailed:
      Fail(port);
      break;
  }
  return 0;
}

void ShmSendQueue::Progress(ShmQpPort& port, bool in_sqd) {
  const uint64_t now = port.host().Now();
  while (!waiting_.empty()) {
    SendWr& wr = waiting_.front();
    if (wr.held) {
      // Posted in SQD: it starts once the QP is back in RTS (Unhold on the
      // modify; this covers a state changed elsewhere).
      if (in_sqd) break;
      wr.held = false;
    }
    if (wr.next_attempt_ns > now) break;
    const Step step = RunOne(port, wr);
    if (step == Step::kWait) break;
    waiting_.pop_front();
    if (step == Step::kFailed) {
      Fail(port);  // flushes the WRs behind it
      break;
    }
    if (Drained()) NoteDrained(port);
  }
  Settle(port);
}

void ShmSendQueue::Flush(ShmQpPort& port) {
  for (const SendWr& wr : waiting_) port.CompleteSend(FlushedCompletion(wr, port.qpn()));
  waiting_.clear();
  Settle(port);
}

void ShmSendQueue::Clear() {
  waiting_.clear();
  drain_notify_ = false;
  state_ = ShmSendState::kIdle;
}

void ShmSendQueue::Unhold() {
  for (SendWr& wr : waiting_) wr.held = false;
}

void ShmSendQueue::StartDrainNotify(ShmQpPort& port) {
  // The WRs still waiting (RNR, no answer) keep running in SQD; the last of
  // them to complete raises the event. WRs posted since (held) do not count.
  drain_notify_ = true;
  if (Drained()) NoteDrained(port);
}

void ShmSendQueue::NoteDrained(ShmQpPort& port) {
  if (!drain_notify_) return;
  drain_notify_ = false;
  port.SendQueueDrained();
}

void ShmSendQueue::Settle(ShmQpPort& port) {
  const ShmSendState next = waiting_.empty()        ? ShmSendState::kIdle
                            : waiting_.front().held ? ShmSendState::kHeld
                                                    : front_wait_;
  if (next == state_) return;
  if (EngineTraceOn()) {
    TraceEngine("QP 0x%x requester %s -> %s (%zu waiting)", port.qpn(), ShmSendStateName(state_),
                ShmSendStateName(next), waiting_.size());
  }
  state_ = next;
}

}  // namespace softverbs::datapath
