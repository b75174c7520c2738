// The completer of the network transport (wire_qp.h): responses to our
// requests become send completions. An ACK of PSN p completes every WR
// wholly before p+1 (a READ or atomic among them completes only with its own
// response: if an ACK overtakes it, its response was lost and the requester
// goes back to it); an RNR NAK waits its timer and sends again, up to
// rnr_retry times (7: forever); a NAK-sequence-error sends again from its
// PSN; any other NAK completes the WR with the error it names and moves the
// QP to ERR.
#include <errno.h>

#include <algorithm>

#include "datapath/keyed_access.h"
#include "datapath/sig_access.h"
#include "datapath/timers.h"
#include "datapath/wire_qp.h"
#include "roce/aeth.h"

namespace softverbs::datapath {

namespace {

// The completion status of a NAK (IBA 9.7.5.2.4 / table 43).
ibv_wc_status NakStatus(roce::NakCode code) {
  switch (code) {
    case roce::NakCode::kInvalidRequest:
      return IBV_WC_REM_INV_REQ_ERR;
    case roce::NakCode::kRemoteAccessError:
      return IBV_WC_REM_ACCESS_ERR;
    default:
      return IBV_WC_REM_OP_ERR;
  }
}

}  // namespace

void WireQp::OnResponse(const WirePacket& packet) {
  if (error_) return;
  const roce::TransportFields& f = packet.fields;
  // Only responses to PSNs we sent and have not seen acknowledged.
  if (roce::PsnDiff(f.psn, unacked_psn_) < 0 || roce::PsnDiff(f.psn, next_psn_) >= 0) return;
  switch (OperationOfOpcode(f.opcode)) {
    case IbtaOperation::kAcknowledge:
      OnAck(f.psn, f.syndrome);
      break;
    case IbtaOperation::kAtomicAcknowledge:
      OnAtomicAck(packet);
      break;
    case IbtaOperation::kReadResponseFirst:
    case IbtaOperation::kReadResponseMiddle:
    case IbtaOperation::kReadResponseLast:
    case IbtaOperation::kReadResponseOnly: {
      // A READ's destination may be a signature key of ours (pipelining).
      const uint64_t sig_errors = SigErrorsReportedByThisThread();
      OnReadResponse(packet);
      if (SigErrorsReportedByThisThread() != sig_errors) sig_error_seen_ = true;
      break;
    }
    default:
      counters_.dropped++;
      return;
  }
  Pump();
}

bool WireQp::CompleteBefore(uint32_t psn) {
  while (!sq_.empty()) {
    Pending& p = sq_.front();
    const uint32_t end = roce::PsnAdd(p.first_psn, p.psn_span);
    if (roce::PsnDiff(end, psn) > 0) break;  // not wholly before psn
    // The requester went back to it (an RNR NAK, a NAK): acknowledged all
    // the same if it was sent - a copy of it was executed after all (one
    // the network delayed or duplicated, one its responder kept). Left
    // waiting, it closed the window for good.
    if (next_send_ == 0 &&
        (!sent_any_ || roce::PsnDiff(roce::PsnAdd(end, roce::kPsnMask), highest_sent_psn_) > 0)) {
      break;
    }
    if (WrTakesResponse(*p.info)) {
      // Its response never came, yet later PSNs were answered: lost. Asked
      // again once - a retry, as rxe's completer counts it - until a WR
      // completes or the timer fires: the answers to the PSNs after it
      // that are still on their way must not each send the window again.
      // Each did until session 26, and restarted the ACK timer: with a
      // responder that no longer answers the request (a duplicate READ
      // of an MR deregistered since, an atomic result no longer kept) the
      // two QPs ping-ponged forever, growing with every round.
      if (!lost_response_asked_) {
        if (!place_wait_.Active(host_.Now())) {
          if (retries_ >= config_.retry_cnt) {
            RequesterError(IBV_WC_RETRY_EXC_ERR, kVendorNoResponse);
            return false;
          }
          retries_++;
        }
        lost_response_asked_ = true;
        GoBackTo(roce::PsnAdd(p.first_psn, p.read_received));
      }
      return false;
    }
    CompleteFront(IBV_WC_SUCCESS, kVendorNone);
  }
  if (roce::PsnDiff(psn, unacked_psn_) > 0) unacked_psn_ = psn;
  return true;
}

void WireQp::OnAck(uint32_t psn, uint8_t syndrome) {
  switch (roce::AckTypeOf(syndrome)) {
    case roce::AckType::kAck: {
      if (!CompleteBefore(roce::PsnAdd(psn, 1))) return;
      retries_ = 0;
      ack_deadline_ = UINT64_MAX;  // Pump restarts it while packets are out
      return;
    }
    case roce::AckType::kRnrNak: {
      counters_.rnr_naks_received++;
      if (!CompleteBefore(psn)) return;
      if (config_.rnr_retry != 7 && rnr_retries_ >= config_.rnr_retry) {
        RequesterError(IBV_WC_RNR_RETRY_EXC_ERR, kVendorRnrExceeded);
        return;
      }
      rnr_retries_++;
      retries_ = 0;
      GoBackTo(psn);
      rnr_until_ = host_.Now() + RnrTimerNs(roce::SyndromeValue(syndrome));
      return;
    }
    case roce::AckType::kNak: {
      counters_.naks_received++;
      if (!CompleteBefore(psn)) return;
      const auto code = static_cast<roce::NakCode>(roce::SyndromeValue(syndrome));
      if (code == roce::NakCode::kPsnSequenceError) {
        GoBackTo(psn);
        return;
      }
      RequesterError(NakStatus(code), kVendorRemoteNak + static_cast<uint32_t>(code));
      return;
    }
    default:
      counters_.dropped++;
      return;
  }
}

void WireQp::OnReadResponse(const WirePacket& packet) {
  const roce::TransportFields& f = packet.fields;
  // The READ whose PSN run holds f.psn, which must be the next response it
  // expects; anything else is a duplicate or comes after a loss (dropped:
  // the READ is requested again from its first missing packet).
  size_t i = 0;
  for (; i < next_send_ && i < sq_.size(); ++i) {
    const Pending& p = sq_[i];
    const int32_t into = roce::PsnDiff(f.psn, p.first_psn);
    if (into >= 0 && static_cast<uint32_t>(into) < p.psn_span) break;
  }
  if (i == next_send_ || i == sq_.size()) return;
  Pending& p = sq_[i];
  const uint32_t expected = roce::PsnAdd(p.first_psn, p.read_received);
  // An ATOMIC WRITE is answered by a READ RESPONSE ONLY without payload.
  const bool read = p.info->action == WrAction::kRead;
  if ((!read && !p.info->atomic_write) || roce::PsnDiff(f.psn, expected) != 0) {
    counters_.dropped++;
    // A later response of the READ came first: the expected one was lost
    // (or is late). Ask again from it now rather than after the ACK
    // timeout, as rdmavt's requester does (the IBA lets a retried READ
    // reread the part not yet answered); once, until the responses reach
    // the one that showed the gap (the rest of the first request's
    // responses, still arriving, do not each ask again), the READ
    // completes or the timer fires. It counts as a retry.
    if (p.info->action == WrAction::kRead && roce::PsnDiff(f.psn, expected) > 0 &&
        !read_gap_asked_) {
      // Any response of this READ acknowledges the requests before it.
      if (i > 0 && !CompleteBefore(p.first_psn)) return;
      // Not when the missing response was dropped because this side's
      // page is being converted (owner waits: bounded in time instead).
      if (!place_wait_.Active(host_.Now())) {
        if (retries_ >= config_.retry_cnt) {
          RequesterError(IBV_WC_RETRY_EXC_ERR, kVendorNoResponse);
          return;
        }
        retries_++;
      }
      read_gap_asked_ = true;
      read_gap_psn_ = f.psn;
      counters_.read_gaps++;
      GoBackTo(expected);
    }
    return;
  }
  // Earlier WRs are acknowledged by this response (IBA 9.7.5.1.2).
  if (i > 0) {
    if (!CompleteBefore(p.first_psn)) return;
  }
  const uint64_t offset = p.read_bytes;
  const uint32_t len = static_cast<uint32_t>(packet.payload.size());
  if (offset + len > p.bytes || (!read && len != 0)) {
    RequesterError(IBV_WC_BAD_RESP_ERR, kVendorMessageTooLong);
    return;
  }
  if (len) {
    RecvSge slice[kMaxSendSge];
    const uint32_t n = SliceSges(p.wr.sge, p.wr.num_sge, offset, len, slice);
    MrGuards guards;
    PieceList dst;
    const RequesterSigScope own;
    if (AddKeyedPieces(host_, guards, slice, n, false, config_.pdn, config_.owner,
                       IBV_ACCESS_LOCAL_WRITE, &dst) != kVendorNone) {
      RequesterError(IBV_WC_LOC_PROT_ERR, kVendorBadLkey);
      return;
    }
    PieceList src;
    src.Add({const_cast<uint8_t*>(packet.payload.data()), -1, 0, len});
    if (!CopyPieces(dst, src)) {
      // The owner converts the page (owner waits): as if the response were
      // lost - the READ is asked again from it.
      if (place_wait_.MayRetry(errno, host_.Now())) {
        counters_.dropped++;
        counters_.owner_waits++;
        return;
      }
      RequesterError(IBV_WC_LOC_ACCESS_ERR, kVendorOwnerGone);
      return;
    }
  }
  place_wait_.End();
  p.read_received++;
  p.read_bytes += len;
  if (read_gap_asked_ && roce::PsnDiff(f.psn, read_gap_psn_) >= 0) read_gap_asked_ = false;
  retries_ = 0;
  unacked_psn_ = roce::PsnAdd(f.psn, 1);
  ack_deadline_ = UINT64_MAX;
  if (p.read_received == p.psn_span) {
    read_gap_asked_ = false;
    // Now the front: everything before it completed above.
    CompleteFront(IBV_WC_SUCCESS, kVendorNone);
  }
}

void WireQp::OnAtomicAck(const WirePacket& packet) {
  const roce::TransportFields& f = packet.fields;
  size_t i = 0;
  for (; i < next_send_ && i < sq_.size(); ++i) {
    if (sq_[i].first_psn == f.psn) break;
  }
  if (i == next_send_ || i == sq_.size() || sq_[i].info->action != WrAction::kAtomic) {
    counters_.dropped++;
    return;
  }
  if (i > 0 && !CompleteBefore(f.psn)) return;
  Pending& p = sq_.front();
  RecvSge sge = p.wr.sge[0];
  sge.length = 8;
  MrGuards guards;
  PieceList dst;
  const RequesterSigScope own;
  if (AddKeyedPieces(host_, guards, &sge, 1, false, config_.pdn, config_.owner,
                     IBV_ACCESS_LOCAL_WRITE, &dst) != kVendorNone) {
    RequesterError(IBV_WC_LOC_PROT_ERR, kVendorBadLkey);
    return;
  }
  uint64_t orig = f.atomic_orig;
  PieceList src;
  src.Add({reinterpret_cast<uint8_t*>(&orig), -1, 0, 8});
  if (!CopyPieces(dst, src)) {
    if (place_wait_.MayRetry(errno, host_.Now())) {
      counters_.dropped++;  // owner waits: the atomic is sent again, its result replayed
      counters_.owner_waits++;
      return;
    }
    RequesterError(IBV_WC_LOC_ACCESS_ERR, kVendorOwnerGone);
    return;
  }
  place_wait_.End();
  retries_ = 0;
  unacked_psn_ = roce::PsnAdd(f.psn, 1);
  ack_deadline_ = UINT64_MAX;
  CompleteFront(IBV_WC_SUCCESS, kVendorNone);
}

bool WireQp::PushSendCompletion(const Completion& c, const CqRing::OnReserved* on_reserved) {
  CqRing* ring = nullptr;
  int event_fd = -1;
  return host_.SendCq(config_.qpn, &ring, &event_fd) &&
         Complete(*ring, event_fd, c, nullptr, on_reserved);
}

void WireQp::CompleteFront(ibv_wc_status status, uint32_t vendor_err) {
  const Pending& p = sq_.front();
  if (p.internal != Internal::kNone) [[unlikely]] {
    // The device's own WR (tag matching's rendezvous): no completion of its
    // own, and not one the owner posted (not counted retired).
    const Internal kind = p.internal;
    const RendezvousInfo info = p.rendezvous;
    sq_.pop_front();
    if (next_send_ > 0) next_send_--;
    rnr_retries_ = 0;
    lost_response_asked_ = false;
    FinishInternal(kind, info, status);
    return;
  }
  // Its slot in the send queue is free before the application can see the
  // completion, and its completion's slot in the CQ is taken before the
  // application can see the WR gone: a CQ resize that waited for the
  // network's WRs to retire counts it (ibv_resize_cq).
  struct Retire {
    WireHost& host;
    uint32_t qpn;
    bool done = false;
    static void Run(void* arg) {
      auto* r = static_cast<Retire*>(arg);
      r->host.SendWrsRetired(r->qpn, 1);
      r->done = true;
    }
  } retire{host_, config_.qpn};
  const CqRing::OnReserved on_reserved{&Retire::Run, &retire};
  if (status != IBV_WC_SUCCESS || config_.sq_sig_all || (p.wr.send_flags & IBV_SEND_SIGNALED)) {
    Completion c{};
    c.wr_id = p.wr.wr_id;
    c.status = status;
    c.opcode = RequesterWcOpcode(p.wr);
    c.vendor_err = vendor_err;
    c.byte_len = p.bytes;
    c.qp_num = config_.qpn;
    PushSendCompletion(c, &on_reserved);
  }
  if (!retire.done) Retire::Run(&retire);
  sq_.pop_front();
  if (next_send_ > 0) next_send_--;
  rnr_retries_ = 0;
  lost_response_asked_ = false;
}

void WireQp::RequesterError(ibv_wc_status status, uint32_t vendor_err) {
  // A reliable QP goes to ERR; an unreliable one's send queue to SQE (its
  // receive side keeps working). The device publishes either, before the
  // error completion is seen, as hardware does: a program that polls it
  // and then queries the QP finds the error state.
  if (Reliable()) {
    host_.SetQpError(config_.qpn);
  } else {
    host_.SetSendQueueError(config_.qpn);
  }
  if (!sq_.empty()) CompleteFront(status, vendor_err);
  error_ = true;
  next_send_ = sq_.size();
  while (!sq_.empty()) CompleteFront(IBV_WC_WR_FLUSH_ERR, kVendorFlushed);
  ack_deadline_ = UINT64_MAX;
  rnr_until_ = 0;
  // A reliable QP in ERR flushes its receives too, after its send queue
  // (as the shared-memory engine's FlushReceivesAfterError does); an SRQ's
  // stay for its other QPs. Until session 26 they stayed posted and never
  // completed (datapath.sqe_cases' rc_send_error_enters_err under wire
  // loopback).
  if (Reliable()) FlushOwnReceives();
}

void WireQp::FlushOwnReceives() {
  PeerQp* own = host_.FindPeerQp(config_.qpn, config_.generation);
  if (own && !own->srqn && own->rq.valid()) {
    FlushRecvQueue(own->rq, own->recv_cq, own->cq_event_fd, config_.qpn);
  }
}

}  // namespace softverbs::datapath
