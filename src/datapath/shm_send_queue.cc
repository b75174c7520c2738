#include "datapath/shm_send_queue.h"

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
  c.opcode = RequesterWcOpcode(wr);
  c.vendor_err = kVendorFlushed;
  c.qp_num = qpn;
  return c;
}

Completion CanceledCompletion(const SendWr& wr, uint32_t qpn) {
  Completion c = FlushedCompletion(wr, qpn);
  c.status = IBV_WC_SUCCESS;
  c.vendor_err = 0;
  return c;
}

void TraceExecution(uint32_t qpn, const SendWr& wr, const Outcome& out, CompleterVerdict v) {
  TraceEngine("QP 0x%x WR 0x%llx %s: responder %s, completer %s (status %u)", qpn,
              static_cast<unsigned long long>(wr.wr_id), WrOpcode(wr.opcode).name,
              ResponseName(out.response), CompleterVerdictName(v), out.completion.status);
}

void ShmSendQueue::Settle(uint32_t qpn) {
  const ShmSendState next = waiting_.empty()        ? ShmSendState::kIdle
                            : waiting_.front().held ? ShmSendState::kHeld
                                                    : front_wait_;
  if (next == state_) return;
  if (EngineTraceOn()) {
    TraceEngine("QP 0x%x requester %s -> %s (%zu waiting)", qpn, ShmSendStateName(state_),
                ShmSendStateName(next), waiting_.size());
  }
  state_ = next;
}

}  // namespace softverbs::datapath
