#include "datapath/shm_completer.h"

#include <unistd.h>

#include <algorithm>

#include "datapath/timers.h"

namespace softverbs::datapath {

const char* ResponseName(Response r) {
  switch (r) {
    case Response::kNone:
      return "none";
    case Response::kAck:
      return "ack";
    case Response::kRnrNak:
      return "rnr-nak";
    case Response::kNoAnswer:
      return "no-answer";
    case Response::kDropped:
      return "dropped";
    case Response::kNak:
      return "nak";
  }
  return "?";
}

const char* CompleterVerdictName(CompleterVerdict v) {
  switch (v) {
    case CompleterVerdict::kComplete:
      return "complete";
    case CompleterVerdict::kRnrWait:
      return "rnr-wait";
    case CompleterVerdict::kAckWait:
      return "ack-wait";
  }
  return "?";
}

CompleterVerdict JudgeRetry(Host& host, const RequesterAttributes& r, Outcome* out, SendWr* wr) {
  Completion& c = out->completion;
  switch (out->response) {
    case Response::kRnrNak: {
      if (r.rnr_retry != 7 && wr->rnr_retries >= r.rnr_retry) {
        c.status = IBV_WC_RNR_RETRY_EXC_ERR;
        c.vendor_err = kVendorRnrExceeded;
        return CompleterVerdict::kComplete;
      }
      wr->rnr_retries++;
      wr->first_attempt_ns = 0;  // the responder answered: the ACK timer restarts
      wr->next_attempt_ns = host.Now() + RnrTimerNs(static_cast<uint32_t>(out->rnr_timer_ns));
      return CompleterVerdict::kRnrWait;
    }
    case Response::kNoAnswer: {
      const uint64_t now = host.Now();
      if (wr->first_attempt_ns == 0) wr->first_attempt_ns = now;
      const uint64_t timeout = AckTimeoutNs(r.timeout);
      const uint64_t budget = timeout == UINT64_MAX ? UINT64_MAX : timeout * (r.retry_cnt + 1ull);
      if (budget != UINT64_MAX && now - wr->first_attempt_ns >= budget) {
        c.status = IBV_WC_RETRY_EXC_ERR;
        c.vendor_err = kVendorNoResponse;
        return CompleterVerdict::kComplete;
      }
      // Look again soon: a target that becomes ready is served at once.
      wr->next_attempt_ns = now + std::min<uint64_t>(timeout, 200000);
      return CompleterVerdict::kAckWait;
    }
    case Response::kNone:
    case Response::kAck:
    case Response::kDropped:
    case Response::kNak:
      break;
  }
  return CompleterVerdict::kComplete;
}

bool Complete(CqRing& cq, int event_fd, const Completion& c, const ClaimedRecv* consumed,
              const CqRing::OnReserved* on_reserved) {
  if (!cq.valid()) return false;
  const bool pushed =
      cq.Push(c, consumed ? static_cast<uint32_t>(consumed->index + 1) : 0, on_reserved);
  // A CQ without a completion channel raises no events: its owner does not
  // arm it (ReqNotifyCqOp), and producers skip the hand-off's fence.
  if (event_fd < 0) return pushed;
  if (cq.TakeArm(c.solicited || c.status != IBV_WC_SUCCESS)) {
    uint64_t one = 1;
    ssize_t ignored = write(event_fd, &one, sizeof(one));
    (void)ignored;
  }
  return pushed;
}

void FlushRecvQueue(RecvQueue& rq, CqRing& cq, int event_fd, uint32_t qpn) {
  ClaimedRecv r;
  while (rq.valid() && rq.Claim(&r)) {
    Completion c{};
    c.wr_id = r.wr_id;
    c.status = IBV_WC_WR_FLUSH_ERR;
    c.opcode = IBV_WC_RECV;
    c.vendor_err = kVendorFlushed;
    c.qp_num = qpn;
    Complete(cq, event_fd, c);
  }
}

}  // namespace softverbs::datapath
