// The responder of the network transport (wire_qp.h): request packets
// become writes to registered memory, receive completions, READ responses
// and atomic results. RC (and XRC) check each PSN against the expected one:
// a duplicate is answered again (an ACK; a READ is read again; an atomic's
// result, or an ATOMIC WRITE's answer, is replayed, never executed twice), a gap is NAKed once with
// PSN-sequence-error. A missing receive WQE is an RNR NAK that leaves the
// expected PSN where it is. UC has no ACKs: a gap drops the rest of the
// message. UD checks the Q_Key and puts the packet's real IP header in the
// receive buffer as its GRH. A packet whose memory the owner is converting
// waits (DeferForOwner; wire_owner_wait.cc).
#include <endian.h>

#include <algorithm>
#include <utility>

#include "datapath/comm_est.h"
#include "datapath/keyed_access.h"
#include "datapath/tag_matching.h"
#include "datapath/ud_receive.h"
#include "datapath/wire_qp.h"
#include "roce/aeth.h"
#include "roce/flow.h"
#include "roce/segment.h"

namespace softverbs::datapath {

namespace {

bool IsFirst(IbtaOperation op) {
  return IbtaOperationRow(op).segment == IbtaSegment::kFirst ||
         IbtaOperationRow(op).segment == IbtaSegment::kOnly;
}

bool IsLast(IbtaOperation op) {
  return IbtaOperationRow(op).segment == IbtaSegment::kLast ||
         IbtaOperationRow(op).segment == IbtaSegment::kOnly;
}

bool IsSend(IbtaOperation op) {
  return op <= IbtaOperation::kSendOnlyWithImm || op == IbtaOperation::kSendLastWithInvalidate ||
         op == IbtaOperation::kSendOnlyWithInvalidate;
}

bool IsWrite(IbtaOperation op) {
  return op >= IbtaOperation::kWriteFirst && op <= IbtaOperation::kWriteOnlyWithImm;
}

// The packet-sequence check (IBA 9.8.3.1); before any packet (kNone) a
// message must begin.
bool SequenceOk(IbtaOperation prev, IbtaOperation next) {
  return prev == IbtaOperation::kNone ? IsFirst(next) : roce::MayFollow(prev, next);
}

bool HasImmediate(IbtaOperation op) {
  return (IbtaOperationRow(op).headers & kHeaderImmDt) != 0;
}

bool HasInvalidate(IbtaOperation op) {
  return (IbtaOperationRow(op).headers & kHeaderIeth) != 0;
}

}  // namespace

IbtaTransport WireQp::ResponseTransport() const {
  return config_.type == IBV_QPT_XRC_RECV ? IbtaTransport::kXrc : TransportOf(config_.type);
}

const char* ResponderStateName(ResponderState s) {
  switch (s) {
    case ResponderState::kIdle:
      return "idle";
    case ResponderState::kInMessage:
      return "in-message";
    case ResponderState::kAfterGap:
      return "after-gap";
    case ResponderState::kOwnerWait:
      return "owner-wait";
    case ResponderState::kError:
      return "error";
  }
  return "?";
}

void WireQp::Receive(const WirePacket& packet) {
  counters_.packets_received++;
  if (IbtaOperationRow(OperationOfOpcode(packet.fields.opcode)).response) {
    OnResponse(packet);
    return;
  }
  if (rsp_state_ == ResponderState::kError) return;
  if (rsp_state_ == ResponderState::kOwnerWait) {
    WhileParked(packet);  // the kept packet goes first
    return;
  }
  switch (config_.type) {
    case IBV_QPT_UD:
      OnUdRequest(packet);
      return;
    case IBV_QPT_UC:
      OnUcRequest(packet);
      return;
    case IBV_QPT_RC:
    case IBV_QPT_XRC_RECV:
      OnRequest(packet);
      return;
    default:
      counters_.dropped++;  // an XRC send QP receives no requests
      return;
  }
}

void WireQp::OnRequest(const WirePacket& packet) {
  const roce::TransportFields& f = packet.fields;
  const IbtaOperation op = OperationOfOpcode(f.opcode);
  const int32_t d = roce::PsnDiff(f.psn, epsn_);
  if (d < 0) {
    // A duplicate: its first answer was lost, or the requester went back.
    counters_.duplicates++;
    if (op == IbtaOperation::kReadRequest) {
      AnswerRead(f, true);
    } else if (op == IbtaOperation::kCompareSwap || op == IbtaOperation::kFetchAdd ||
               op == IbtaOperation::kAtomicWrite) {
      FlushAck();
      for (const AtomicResult& r : atomics_) {
        if (!r.valid || r.psn != f.psn) continue;
        SendAtomicAnswer(f, r);
        break;
      }
    } else {
      ack_pending_ = true;  // re-ACKed with the batch
      ack_psn_ = roce::PsnAdd(epsn_, roce::kPsnMask);
    }
    return;
  }
  if (d > 0) {
    counters_.sequence_errors++;
    if (rsp_state_ != ResponderState::kAfterGap) {
      SendNak(epsn_, roce::NakSyndrome(roce::NakCode::kPsnSequenceError));
      rsp_state_ = ResponderState::kAfterGap;
    }
    return;
  }
  if (!SequenceOk(last_op_, op)) {
    ResponderError(f.psn, roce::NakSyndrome(roce::NakCode::kInvalidRequest), false);
    return;
  }
  RaiseCommEstOnce(host_, host_.table().FindQp(config_.qpn), config_.qpn);
  if (!Execute(packet)) {
    if (owner_deferred_) Park(packet);
    return;
  }
  last_op_ = op;
  rsp_state_ = IsLast(op) || op == IbtaOperation::kReadRequest ? ResponderState::kIdle
                                                               : ResponderState::kInMessage;
  if (f.ack_req && (IsSend(op) || IsWrite(op))) {
    // Coalesced: one ACK for the batch the carrier is delivering.
    ack_pending_ = true;
    ack_psn_ = f.psn;
  }
  if (pump_after_request_) {
    // A rendezvous read of tag matching (wire_tag_matching.cc): after the
    // ACK of the request that asked for it.
    pump_after_request_ = false;
    FlushAck();
    Pump();
  }
}

void WireQp::OnUcRequest(const WirePacket& packet) {
  const roce::TransportFields& f = packet.fields;
  const IbtaOperation op = OperationOfOpcode(f.opcode);
  if (f.psn != epsn_ || rsp_state_ == ResponderState::kAfterGap) {
    // A gap: the message in progress is lost (its receive WQE, if claimed,
    // serves the next message); only a new message's first packet resumes.
    if (!IsFirst(op)) {
      counters_.dropped++;
      rsp_state_ = ResponderState::kAfterGap;
      epsn_ = roce::PsnAdd(f.psn, 1);
      return;
    }
    if (f.psn != epsn_) counters_.sequence_errors++;
    epsn_ = f.psn;
    last_op_ = IbtaOperation::kNone;
    rx_offset_ = 0;
  }
  if (!SequenceOk(last_op_, op)) {
    counters_.dropped++;
    rsp_state_ = ResponderState::kAfterGap;
    epsn_ = roce::PsnAdd(f.psn, 1);
    return;
  }
  RaiseCommEstOnce(host_, host_.table().FindQp(config_.qpn), config_.qpn);
  if (!Execute(packet)) {
    if (owner_deferred_) {
      Park(packet);
      return;
    }
    // Dropped (no WQE, bad key): the rest of the message goes too.
    rsp_state_ = ResponderState::kAfterGap;
    epsn_ = roce::PsnAdd(f.psn, 1);
    return;
  }
  last_op_ = op;
  rsp_state_ = IsLast(op) ? ResponderState::kIdle : ResponderState::kInMessage;
}

void WireQp::OnUdRequest(const WirePacket& packet) {
  const roce::TransportFields& f = packet.fields;
  const IbtaOperation op = OperationOfOpcode(f.opcode);
  QpEntry* e = host_.table().FindQp(config_.qpn);
  if (!e || (op != IbtaOperation::kSendOnly && op != IbtaOperation::kSendOnlyWithImm) ||
      f.qkey != e->qkey.load()) {
    counters_.dropped++;  // a Q_Key violation is silently dropped
    return;
  }
  PeerQp* peer = host_.FindPeerQp(config_.qpn, config_.generation);
  if (!peer) return;
  rx_ = peer;
  rx_pdn_ = config_.pdn;
  // A WQE is still held when the packet that claimed it waited for its
  // owner (owner waits) and now runs again.
  if (!have_wqe_ && !ClaimReceive(host_, *peer, &wqe_)) {
    counters_.dropped++;
    return;
  }
  have_wqe_ = true;
  // Without its IP header (a packet the tests hand over bare) it counts as
  // IPv6, whose GRH is the whole 40 bytes.
  ud_sl_ = UdReceiveSl(packet.ends ? packet.ends->ipv6 : true);
  const uint32_t needed = static_cast<uint32_t>(packet.payload.size()) + kGrhBytes;
  uint64_t room = 0;
  for (uint32_t i = 0; i < wqe_.num_sge; ++i) room += wqe_.sge[i].length;
  MrGuards guards;
  PieceList dst;
  if (room < needed) {
    CompleteReceive(f, needed, IBV_WC_LOC_LEN_ERR, kVendorRecvTooSmall);
    return;
  }
  if (AddKeyedPieces(host_, guards, wqe_.sge, wqe_.num_sge, false, rx_pdn_, peer->owner,
                     IBV_ACCESS_LOCAL_WRITE, &dst) != kVendorNone) {
    CompleteReceive(f, needed, IBV_WC_LOC_PROT_ERR, kVendorRecvBadLkey);
    return;
  }
  uint8_t grh[kGrhBytes] = {};
  if (packet.ends) roce::WriteGrh(*packet.ends, packet.roce_bytes, grh);
  PieceList src;
  src.Add({grh, -1, 0, kGrhBytes});
  src.Add({const_cast<uint8_t*>(packet.payload.data()), -1, 0, packet.payload.size()});
  const bool moved = CopyPieces(dst, src);
  if (!moved && DeferForOwner()) {
    Park(packet);
    return;
  }
  CompleteReceive(f, needed, moved ? IBV_WC_SUCCESS : IBV_WC_LOC_ACCESS_ERR,
                  moved ? kVendorNone : kVendorOwnerGone);
}

bool WireQp::ReceiveSide(const WirePacket& packet) {
  if (config_.type != IBV_QPT_XRC_RECV) {
    rx_ = host_.FindPeerQp(config_.qpn, config_.generation);
    rx_pdn_ = config_.pdn;
    if (rx_) return true;
    ResponderError(packet.fields.psn, roce::NakSyndrome(roce::NakCode::kRemoteOperationalError),
                   false);
    return false;
  }
  // XRC: the SRQ the XRCETH names, which must belong to this QP's domain.
  QpEntry* e = host_.table().FindQp(config_.qpn);
  PeerQp* srq = host_.FindXrcSrq(packet.fields.xrc_srq);
  if (!e || !srq || srq->xrcd != e->xrcd.load()) {
    ResponderError(packet.fields.psn, roce::NakSyndrome(roce::NakCode::kRemoteAccessError), true);
    return false;
  }
  rx_ = srq;
  rx_pdn_ = srq->pdn;
  return true;
}

bool WireQp::ClaimWqe() {
  if (have_wqe_) return true;  // UC: the WQE of a message lost to a gap
  if (!rx_ || !ClaimReceive(host_, *rx_, &wqe_)) return false;
  have_wqe_ = true;
  return true;
}

bool WireQp::Execute(const WirePacket& packet) {
  const IbtaOperation op = OperationOfOpcode(packet.fields.opcode);
  // The receive side is looked up for every packet (a map lookup): a
  // pointer kept from an earlier packet could name rings the device has
  // since unmapped (an XRC SRQ destroyed in the middle of a message).
  if (!ReceiveSide(packet)) return false;
  if (IsSend(op)) return PlaceSend(packet, op);
  if (IsWrite(op)) return PlaceWrite(packet, op);
  if (op == IbtaOperation::kReadRequest) return AnswerRead(packet.fields, false);
  if (op == IbtaOperation::kCompareSwap || op == IbtaOperation::kFetchAdd) {
    return ExecuteAtomic(packet);
  }
  if (op == IbtaOperation::kAtomicWrite) return ExecuteAtomicWrite(packet);
  ResponderError(packet.fields.psn, roce::NakSyndrome(roce::NakCode::kInvalidRequest), false);
  return false;
}

bool WireQp::PlaceSend(const WirePacket& packet, IbtaOperation op) {
  const roce::TransportFields& f = packet.fields;
  if (IsFirst(op)) {
    // A reliable QP on a tag-matching SRQ: the message is matched first
    // (wire_tag_matching.cc) - once: a first packet that waited for its
    // owner (owner waits) and runs again keeps its match, as ClaimWqe keeps
    // the WQE such a packet claimed.
    const bool matched_before = have_wqe_ && tm_.active;
    if (!matched_before) tm_ = {};
    const bool tagged_srq = !matched_before && Reliable() && config_.type != IBV_QPT_XRC_RECV &&
                            TagList(rx_->rq.header()).valid();
    if (tagged_srq ? !StartTaggedMessage(packet) : !ClaimWqe()) {
      counters_.rnr_naks_sent++;
      SendNak(f.psn, roce::RnrNakSyndrome(config_.min_rnr_timer));
      return false;
    }
    rx_offset_ = 0;
  }
  if (tm_.discard) {
    // A matched rendezvous request: its data is read, nothing of it placed.
    rx_offset_ += packet.payload.size();
    epsn_ = roce::PsnAdd(epsn_, 1);
    if (IsLast(op)) msn_ = roce::PsnAdd(msn_, 1);
    return true;
  }
  if (!have_wqe_ || !rx_) {
    ResponderError(f.psn, roce::NakSyndrome(roce::NakCode::kInvalidRequest), false);
    return false;
  }
  // The bytes of the message not placed (an eager TMH) come first.
  const uint64_t skipped =
      std::min<uint64_t>(packet.payload.size(), rx_offset_ < tm_.skip ? tm_.skip - rx_offset_ : 0);
  const uint32_t len = static_cast<uint32_t>(packet.payload.size() - skipped);
  const uint64_t placed = rx_offset_ + skipped - tm_.skip;  // where this packet's bytes go
  uint64_t room = 0;
  for (uint32_t i = 0; i < wqe_.num_sge; ++i) room += wqe_.sge[i].length;
  if (placed + len > room) {
    const FailedReceive failed{f, static_cast<uint32_t>(placed + len), IBV_WC_LOC_LEN_ERR,
                               kVendorRecvTooSmall};
    ResponderError(f.psn, roce::NakSyndrome(roce::NakCode::kInvalidRequest), false, &failed);
    return false;
  }
  if (len) {
    RecvSge slice[kMaxSendSge];
    const uint32_t n = SliceSges(wqe_.sge, wqe_.num_sge, placed, len, slice);
    MrGuards guards;
    PieceList dst;
    if (AddKeyedPieces(host_, guards, slice, n, false, rx_pdn_, rx_->owner, IBV_ACCESS_LOCAL_WRITE,
                       &dst) != kVendorNone) {
      const FailedReceive failed{f, static_cast<uint32_t>(placed + len), IBV_WC_LOC_PROT_ERR,
                                 kVendorRecvBadLkey};
      ResponderError(f.psn, roce::NakSyndrome(roce::NakCode::kRemoteOperationalError), false,
                     &failed);
      return false;
    }
    PieceList src;
    src.Add({const_cast<uint8_t*>(packet.payload.data() + skipped), -1, 0, len});
    if (!CopyPieces(dst, src)) {
      if (DeferForOwner()) return false;
      const FailedReceive failed{f, static_cast<uint32_t>(placed + len), IBV_WC_LOC_ACCESS_ERR,
                                 kVendorOwnerGone};
      ResponderError(f.psn, roce::NakSyndrome(roce::NakCode::kRemoteOperationalError), false,
                     &failed);
      return false;
    }
  }
  // SEND with invalidate: the window goes before the message is reported
  // (IBA 10.6.7.3); a key this QP may not invalidate is an invalid request.
  if (HasInvalidate(op) && !host_.InvalidateWindow(config_.qpn, f.invalidate_rkey, true)) {
    CompleteReceive(f, static_cast<uint32_t>(placed + len), IBV_WC_REM_INV_REQ_ERR,
                    kVendorRemoteInvalidate);
    ResponderError(f.psn, roce::NakSyndrome(roce::NakCode::kInvalidRequest), false);
    return false;
  }
  rx_offset_ += packet.payload.size();
  epsn_ = roce::PsnAdd(epsn_, 1);
  if (IsLast(op)) {
    CompleteReceive(f, static_cast<uint32_t>(placed + len), IBV_WC_SUCCESS, kVendorNone);
    msn_ = roce::PsnAdd(msn_, 1);
  }
  return true;
}

bool WireQp::PlaceWrite(const WirePacket& packet, IbtaOperation op) {
  const roce::TransportFields& f = packet.fields;
  QpEntry* e = host_.table().FindQp(config_.qpn);
  if (IsFirst(op)) {
    if (!e || !(e->access.load() & IBV_ACCESS_REMOTE_WRITE)) {
      ResponderError(f.psn, roce::NakSyndrome(roce::NakCode::kInvalidRequest), false);
      return false;
    }
    write_va_ = f.va;
    write_rkey_ = f.rkey;
    write_len_ = f.dma_len;
    rx_offset_ = 0;
    if (write_len_ > 0) {
      RecvSge whole{write_va_, write_len_, write_rkey_};
      MrGuards guards;
      PieceList pieces;
      if (AddKeyedPieces(host_, guards, &whole, 1, true, rx_pdn_, rx_->owner,
                         IBV_ACCESS_REMOTE_WRITE, &pieces, config_.qpn) != kVendorNone) {
        ResponderError(f.psn, roce::NakSyndrome(roce::NakCode::kRemoteAccessError), true);
        return false;
      }
    }
  }
  if (!rx_) {
    ResponderError(f.psn, roce::NakSyndrome(roce::NakCode::kInvalidRequest), false);
    return false;
  }
  const uint32_t len = static_cast<uint32_t>(packet.payload.size());
  if (rx_offset_ + len > write_len_) {
    ResponderError(f.psn, roce::NakSyndrome(roce::NakCode::kInvalidRequest), false);
    return false;
  }
  if (HasImmediate(op) && !ClaimWqe()) {
    counters_.rnr_naks_sent++;
    SendNak(f.psn, roce::RnrNakSyndrome(config_.min_rnr_timer));
    return false;
  }
  if (len) {
    RecvSge slice{write_va_ + rx_offset_, len, write_rkey_};
    MrGuards guards;
    PieceList dst;
    if (AddKeyedPieces(host_, guards, &slice, 1, true, rx_pdn_, rx_->owner, IBV_ACCESS_REMOTE_WRITE,
                       &dst, config_.qpn) != kVendorNone) {
      ResponderError(f.psn, roce::NakSyndrome(roce::NakCode::kRemoteAccessError), true);
      return false;
    }
    PieceList src;
    src.Add({const_cast<uint8_t*>(packet.payload.data()), -1, 0, len});
    if (!CopyPieces(dst, src)) {
      if (DeferForOwner()) return false;
      ResponderError(f.psn, roce::NakSyndrome(roce::NakCode::kRemoteAccessError), true);
      return false;
    }
  }
  rx_offset_ += len;
  epsn_ = roce::PsnAdd(epsn_, 1);
  if (IsLast(op)) {
    if (HasImmediate(op)) CompleteReceive(f, write_len_, IBV_WC_SUCCESS, kVendorNone);
    msn_ = roce::PsnAdd(msn_, 1);
  }
  return true;
}

bool WireQp::AnswerRead(const roce::TransportFields& f, bool duplicate) {
  FlushAck();  // responses go in PSN order
  WirePacket request;
  request.fields = f;
  if (!ReceiveSide(request)) return false;
  QpEntry* e = host_.table().FindQp(config_.qpn);
  if (!e || !(e->access.load() & IBV_ACCESS_REMOTE_READ)) {
    if (duplicate) return false;
    ResponderError(f.psn, roce::NakSyndrome(roce::NakCode::kInvalidRequest), false);
    return false;
  }
  if (f.dma_len > 0) {
    RecvSge whole{f.va, f.dma_len, f.rkey};
    MrGuards guards;
    PieceList pieces;
    if (AddKeyedPieces(host_, guards, &whole, 1, true, rx_pdn_, rx_->owner, IBV_ACCESS_REMOTE_READ,
                       &pieces, config_.qpn) != kVendorNone) {
      if (duplicate) return false;
      ResponderError(f.psn, roce::NakSyndrome(roce::NakCode::kRemoteAccessError), true);
      return false;
    }
  }
  const uint32_t mtu = config_.mtu_bytes;
  const uint32_t n = roce::PacketsOf(f.dma_len, mtu);
  const uint32_t msn = duplicate ? msn_ : roce::PsnAdd(msn_, 1);
  uint8_t buffer[4096];
  // A READ kept for its owner (owner waits) goes on where it stopped.
  const uint32_t first = duplicate ? 0 : std::exchange(read_resume_, 0);
  for (uint32_t i = first; i < n; ++i) {
    const uint64_t offset = static_cast<uint64_t>(i) * mtu;
    const uint32_t len = static_cast<uint32_t>(
        std::min<uint64_t>(std::min<uint64_t>(mtu, sizeof(buffer)), f.dma_len - offset));
    if (len) {
      RecvSge slice{f.va + offset, len, f.rkey};
      MrGuards guards;
      PieceList src;
      PieceList dst;
      dst.Add({buffer, -1, 0, len});
      const bool keyed = AddKeyedPieces(host_, guards, &slice, 1, true, rx_pdn_, rx_->owner,
                                        IBV_ACCESS_REMOTE_READ, &src, config_.qpn) == kVendorNone;
      if (!keyed || !CopyPieces(dst, src)) {
        if (duplicate) return false;
        if (keyed && DeferForOwner()) {
          read_resume_ = i;
          return false;
        }
        ResponderError(roce::PsnAdd(f.psn, i), roce::NakSyndrome(roce::NakCode::kRemoteAccessError),
                       true);
        return false;
      }
    }
    roce::TransportFields r;
    r.opcode = IbtaOpcode(TransportOfOpcode(f.opcode), roce::ReadResponseOperation(i, n));
    r.psn = roce::PsnAdd(f.psn, i);
    r.syndrome = roce::AckSyndrome();
    r.msn = msn;
    SendResponse(r, {buffer, len});
  }
  if (!duplicate) {
    epsn_ = roce::PsnAdd(epsn_, n);
    msn_ = msn;
  }
  return true;
}

bool WireQp::AtomicTarget(const roce::TransportFields& f, uint32_t access, MrGuards& guards,
                          PieceList* remote) {
  RecvSge target{f.va, 8, f.rkey};
  if (AddKeyedPieces(host_, guards, &target, 1, true, rx_pdn_, rx_->owner, access, remote,
                     config_.qpn) == kVendorNone &&
      remote->count == 1) {
    return true;
  }
  ResponderError(f.psn, roce::NakSyndrome(roce::NakCode::kRemoteAccessError), true);
  return false;
}

void WireQp::AnswerAtomic(const roce::TransportFields& f, IbtaOperation answer, uint64_t orig) {
  epsn_ = roce::PsnAdd(epsn_, 1);
  msn_ = roce::PsnAdd(msn_, 1);
  AtomicResult& r = atomics_[atomics_next_++ % atomics_.size()];
  r = {f.psn, true, orig, roce::AckSyndrome(), answer};
  FlushAck();
  SendAtomicAnswer(f, r);
}

void WireQp::SendAtomicAnswer(const roce::TransportFields& request, const AtomicResult& r) {
  roce::TransportFields a;
  a.opcode = IbtaOpcode(TransportOfOpcode(request.opcode), r.answer);
  a.psn = r.psn;
  a.syndrome = r.syndrome;
  a.msn = msn_;
  a.atomic_orig = r.orig;  // carried by an ATOMIC ACKNOWLEDGE only
  SendResponse(a, {});
}

bool WireQp::ExecuteAtomic(const WirePacket& packet) {
  const roce::TransportFields& f = packet.fields;
  QpEntry* e = host_.table().FindQp(config_.qpn);
  if (!e || !(e->access.load() & IBV_ACCESS_REMOTE_ATOMIC) || (f.va & 7)) {
    ResponderError(f.psn, roce::NakSyndrome(roce::NakCode::kInvalidRequest), false);
    return false;
  }
  MrGuards guards;
  PieceList remote;
  if (!AtomicTarget(f, IBV_ACCESS_REMOTE_ATOMIC, guards, &remote)) return false;
  uint64_t orig = 0;
  const bool done = OperationOfOpcode(f.opcode) == IbtaOperation::kCompareSwap
                        ? AtomicCompareSwap(remote.piece[0], f.compare, f.swap_add, &orig)
                        : AtomicFetchAdd(remote.piece[0], f.swap_add, &orig);
  if (!done) {
    if (DeferForOwner()) return false;
    ResponderError(f.psn, roce::NakSyndrome(roce::NakCode::kRemoteAccessError), true);
    return false;
  }
  AnswerAtomic(f, IbtaOperation::kAtomicAcknowledge, orig);
  return true;
}

// IBA 1.5 ATOMIC WRITE, as rxe executes it: the QP must grant remote write,
// the request name 8 bytes at an 8-byte aligned address and carry them
// (else an invalid request); the rkey must grant remote write on them (else
// a remote access error). The 8 bytes are stored at once, and the answer -
// a READ RESPONSE ONLY without payload - is kept for a duplicate.
bool WireQp::ExecuteAtomicWrite(const WirePacket& packet) {
  const roce::TransportFields& f = packet.fields;
  QpEntry* e = host_.table().FindQp(config_.qpn);
  if (!e || !(e->access.load() & IBV_ACCESS_REMOTE_WRITE) || (f.va & 7) || f.dma_len != 8 ||
      packet.payload.size() != 8) {
    ResponderError(f.psn, roce::NakSyndrome(roce::NakCode::kInvalidRequest), false);
    return false;
  }
  MrGuards guards;
  PieceList remote;
  if (!AtomicTarget(f, IBV_ACCESS_REMOTE_WRITE, guards, &remote)) return false;
  uint64_t value = 0;
  std::copy(packet.payload.begin(), packet.payload.end(), reinterpret_cast<uint8_t*>(&value));
  if (!AtomicStore(remote.piece[0], value)) {
    if (DeferForOwner()) return false;
    ResponderError(f.psn, roce::NakSyndrome(roce::NakCode::kRemoteAccessError), true);
    return false;
  }
  AnswerAtomic(f, IbtaOperation::kReadResponseOnly, 0);
  return true;
}

void WireQp::CompleteReceive(const roce::TransportFields& f, uint32_t byte_len,
                             ibv_wc_status status, uint32_t vendor_err) {
  if (!rx_ || !have_wqe_) return;
  const IbtaOperation op = OperationOfOpcode(f.opcode);
  Completion c{};
  c.wr_id = wqe_.wr_id;
  c.status = status;
  c.vendor_err = vendor_err;
  c.byte_len = byte_len;
  c.qp_num = config_.qpn;
  c.src_qp = config_.type == IBV_QPT_UD ? f.src_qp : config_.dest_qpn;
  c.sl = config_.type == IBV_QPT_UD ? ud_sl_ : config_.sl;
  c.solicited = f.solicited ? 1 : 0;
  c.opcode = IsWrite(op) ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
  if (HasImmediate(op)) {
    c.imm_data = htobe32(f.imm);
    c.wc_flags |= IBV_WC_WITH_IMM;
  } else if (HasInvalidate(op)) {
    c.imm_data = f.invalidate_rkey;  // wc.invalidated_rkey
    c.wc_flags |= IBV_WC_WITH_INV;
  }
  if (config_.type == IBV_QPT_UD) c.wc_flags |= IBV_WC_GRH;
  if (tm_.active && !IsWrite(op)) {
    // A message to a tag-matching SRQ (wire_tag_matching.cc); one placed in
    // a posted tag's buffer consumed no WQE of the SRQ.
    c.opcode = static_cast<ibv_wc_opcode>(tm_.opcode);
    c.wc_flags |= tm_.wc_flags;
    c.tm_tag = tm_.tag;
    c.tm_priv = tm_.app_ctx;
    Complete(rx_->recv_cq, rx_->cq_event_fd, c, tm_.matched ? nullptr : &wqe_);
    have_wqe_ = false;
    return;
  }
  Complete(rx_->recv_cq, rx_->cq_event_fd, c, &wqe_);
  have_wqe_ = false;
}

void WireQp::SendResponse(roce::TransportFields& f, std::span<const uint8_t> payload) {
  f.dest_qp = config_.dest_qpn;
  host_.SendPacket(config_.sgid, config_.dgid, SourcePortOf(config_), config_.path, f, payload);
  counters_.packets_sent++;
}

void WireQp::FlushAck() {
  if (!ack_pending_) return;
  ack_pending_ = false;
  SendAck(ack_psn_);
}

void WireQp::SendAck(uint32_t psn) {
  roce::TransportFields a;
  a.opcode = IbtaOpcode(ResponseTransport(), IbtaOperation::kAcknowledge);
  a.psn = psn;
  a.syndrome = roce::AckSyndrome();
  a.msn = msn_;
  SendResponse(a, {});
}

void WireQp::SendNak(uint32_t psn, uint8_t syndrome) {
  if (config_.type == IBV_QPT_UC || config_.type == IBV_QPT_UD) return;
  FlushAck();  // responses go in PSN order
  if (roce::AckTypeOf(syndrome) == roce::AckType::kNak) counters_.naks_sent++;
  roce::TransportFields a;
  a.opcode = IbtaOpcode(ResponseTransport(), IbtaOperation::kAcknowledge);
  a.psn = psn;
  a.syndrome = syndrome;
  a.msn = msn_;
  SendResponse(a, {});
}

void WireQp::ResponderError(uint32_t psn, uint8_t nak_syndrome, bool access_error,
                            const FailedReceive* failed_receive) {
  const auto complete_failed_receive = [&] {
    if (!failed_receive) return;
    const FailedReceive& r = *failed_receive;
    CompleteReceive(r.f, r.byte_len, r.status, r.vendor_err);
  };
  if (config_.type == IBV_QPT_UC) {
    complete_failed_receive();
    counters_.dropped++;  // UC: the message is dropped, the QP stays
    return;
  }
  SendNak(psn, nak_syndrome);
  rsp_state_ = ResponderState::kError;
  // The error state first, as hardware: a program that polls the failed
  // receive's completion and then queries the QP finds ERR.
  host_.SetQpError(config_.qpn);
  complete_failed_receive();
  FlushOwnReceives();
  if (config_.type == IBV_QPT_XRC_RECV) {
    host_.RaiseQpEvent(config_.qpn, access_error ? IBV_EVENT_QP_ACCESS_ERR : IBV_EVENT_QP_REQ_ERR);
  }
}

}  // namespace softverbs::datapath
