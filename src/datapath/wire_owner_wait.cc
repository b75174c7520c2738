// Owner waits (wire_qp.h): a request packet whose memory its owner is
// converting is kept and run again from the QP's timer, the packets that
// arrive meanwhile are dropped, and the requester is brought back to them
// once the kept one went through.
#include <errno.h>

#include "datapath/wire_qp.h"
#include "roce/aeth.h"

namespace softverbs::datapath {

bool WireQp::DeferForOwner() {
  owner_deferred_ = rsp_wait_.MayRetry(errno, host_.Now());
  return owner_deferred_;
}

void WireQp::Park(const WirePacket& packet) {
  owner_deferred_ = false;
  // Parked again from RetryParked: the packet is already here.
  if (!parked_.retrying) {
    counters_.owner_waits++;
    parked_.fields = packet.fields;
    parked_.payload.assign(packet.payload.begin(), packet.payload.end());
    parked_.has_ends = packet.ends != nullptr;
    if (packet.ends) parked_.ends = *packet.ends;
    parked_.roce_bytes = packet.roce_bytes;
    parked_.dropped_since = false;
  }
  parked_.state = rsp_state_;
  rsp_state_ = ResponderState::kOwnerWait;
  parked_retry_at_ = host_.Now() + OwnerWait::kRetryNs;
}

// A packet that came while one is kept. The kept one again: its requester
// timed out - an RNR NAK holds it off without spending its retry count (a
// NIC answers a responder page fault of an on-demand MR so). Anything else
// is dropped and asked for again once the kept one went through.
void WireQp::WhileParked(const WirePacket& packet) {
  const bool reliable = config_.type == IBV_QPT_RC || config_.type == IBV_QPT_XRC_RECV;
  if (reliable && packet.fields.psn == parked_.fields.psn) {
    counters_.rnr_naks_sent++;
    SendNak(packet.fields.psn, roce::RnrNakSyndrome(config_.min_rnr_timer));
    return;
  }
  counters_.dropped++;
  parked_.dropped_since = true;
}

void WireQp::RetryParked() {
  rsp_state_ = parked_.state;
  const WirePacket packet{parked_.fields, parked_.payload,
                          parked_.has_ends ? &parked_.ends : nullptr, parked_.roce_bytes};
  parked_.retrying = true;
  switch (config_.type) {
    case IBV_QPT_UD:
      OnUdRequest(packet);
      break;
    case IBV_QPT_UC:
      OnUcRequest(packet);
      break;
    default:
      OnRequest(packet);
      break;
  }
  parked_.retrying = false;
  if (rsp_state_ == ResponderState::kOwnerWait) return;  // still out of reach
  rsp_wait_.End();
  FlushAck();  // no carrier batch ends after a timer
  const bool reliable = config_.type == IBV_QPT_RC || config_.type == IBV_QPT_XRC_RECV;
  if (parked_.dropped_since && reliable && rsp_state_ != ResponderState::kError) {
    // What came meanwhile was dropped: the requester goes back to it now
    // rather than at its ACK timeout.
    SendNak(epsn_, roce::NakSyndrome(roce::NakCode::kPsnSequenceError));
    rsp_state_ = ResponderState::kAfterGap;
  }
  parked_.dropped_since = false;
}

}  // namespace softverbs::datapath
