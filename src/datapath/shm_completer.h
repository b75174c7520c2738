// The completer of the shared-memory engine (engine.h): what the requester
// makes of the responder's answer (Outcome::response), as IBA 9.7.5.1 and
// Soft-RoCE's completer do - an ACK completes the WR, an RNR NAK makes it
// wait for the responder's RNR timer up to rnr_retry times (7: forever), no
// answer makes it look again until the local ACK timeout x (retry_cnt + 1)
// has passed, an error NAK completes it with the error. Verbs send queues
// (shm_send_queue.h) and DEVX queues ask the same function.
#pragma once

#include <cstdint>

#include "datapath/engine.h"
#include "datapath/layout.h"

namespace softverbs::datapath {

// What happens to the WR next (printed in traces).
enum class CompleterVerdict : uint8_t {
  kComplete,  // finished, well or not: out.completion is its completion
  kRnrWait,   // RNR NAK within rnr_retry: runs again at wr.next_attempt_ns
  kAckWait,   // no answer within the budget: runs again at wr.next_attempt_ns
};
const char* CompleterVerdictName(CompleterVerdict v);

// Judges a response that asks for a retry (an RNR NAK, no answer): sets
// wr's retry bookkeeping (rnr_retries, first_attempt_ns, next_attempt_ns)
// for the wait, or the final status of out->completion
// (IBV_WC_RNR_RETRY_EXC_ERR, IBV_WC_RETRY_EXC_ERR) when the budget is spent.
CompleterVerdict JudgeRetry(Host& host, const RequesterAttributes& r, Outcome* out, SendWr* wr);

// Judges one execution of wr. attributes() gives the QP's timeout,
// retry_cnt and rnr_retry; it and the clock (host.Now) are read only when
// the response asks for a retry.
template <typename Attributes>
CompleterVerdict Judge(Host& host, Attributes&& attributes, Outcome* out, SendWr* wr) {
  if (out->response != Response::kRnrNak && out->response != Response::kNoAnswer) {
    return CompleterVerdict::kComplete;
  }
  return JudgeRetry(host, attributes(), out, wr);
}

// Complete and FlushRecvQueue (engine.h) are here too: the completer writes
// completions.

}  // namespace softverbs::datapath
