// The requester of the network transport (wire_qp.h): work requests become
// request packets. Each WR takes a run of PSNs when it is posted (a READ as
// many as its response packets), its packets go out as the send window
// allows, and what is not acknowledged is sent again from the first
// unacknowledged PSN (go-back-N) after a NAK-sequence-error, an RNR NAK's
// timer or the local ACK timeout.
#include <endian.h>
#include <errno.h>

#include <algorithm>

#include "datapath/keyed_access.h"
#include "datapath/local_ops.h"
#include "datapath/sig_access.h"
#include "datapath/timers.h"
#include "datapath/wire_post.h"
#include "datapath/wire_qp.h"
#include "roce/aeth.h"
#include "roce/flow.h"
#include "roce/segment.h"

namespace softverbs::datapath {

namespace {

// Request packets in flight (sent, not acknowledged): four 64 KiB messages
// of 1 KiB packets, so that a message goes while the ACKs of the previous
// ones come back (64 - one such message - left the link idle between
// messages: 0.61 of iperf3 against 0.73, bench/two_hosts.sh medians of 5).
// The receiving carrier's socket buffer holds them (udp_carrier.cc
// SO_RCVBUF); more in one burst would be dropped there and sent again.
constexpr int32_t kWindowPackets = 256;
// Inside a long message every 16th packet asks for an ACK (and the last
// one of every message), so the window slides before the message ends.
constexpr uint32_t kAckRequestEvery = 16;

uint32_t MessageBytes(const SendWr& wr, const WrOpcodeInfo& info) {
  return info.action == WrAction::kAtomic ? 8 : WrBytes(wr);
}

}  // namespace

const char* RequesterStateName(RequesterState s) {
  switch (s) {
    case RequesterState::kIdle:
      return "idle";
    case RequesterState::kSending:
      return "sending";
    case RequesterState::kWindowFull:
      return "window-full";
    case RequesterState::kRnrWait:
      return "rnr-wait";
    case RequesterState::kError:
      return "error";
  }
  return "?";
}

WireQp::WireQp(WireHost& host, const WireQpConfig& config) : host_(host), config_(config) {
  next_psn_ = unacked_psn_ = config.sq_psn & roce::kPsnMask;
  epsn_ = config.rq_psn & roce::kPsnMask;
}

void WireQp::Reconfigure(const WireQpConfig& config, bool rq_psn_set, bool sq_psn_set) {
  config_ = config;
  if (sq_psn_set && sq_.empty()) next_psn_ = unacked_psn_ = config.sq_psn & roce::kPsnMask;
  if (rq_psn_set) epsn_ = config.rq_psn & roce::kPsnMask;
}

bool WireQp::Reliable() const {
  return config_.type == IBV_QPT_RC || config_.type == IBV_QPT_XRC_SEND;
}

RequesterState WireQp::requester_state() const {
  if (error_) return RequesterState::kError;
  if (sq_.empty()) return RequesterState::kIdle;
  if (rnr_until_) return RequesterState::kRnrWait;
  if (next_send_ < sq_.size() && !WindowOpen(sq_[next_send_])) return RequesterState::kWindowFull;
  return RequesterState::kSending;
}

WireQp::Pending& WireQp::Enqueue(const SendWr& wr) {
  // Straight into the send queue, and only the parts of the WR in use: a
  // SendWr is ~1 KiB of SGE and inline room, and a whole copy (two, by way
  // of a local) was a good part of an 8-byte WRITE's cost in the daemon.
  Pending& p = sq_.push_back_slot();
  static_cast<PendingProgress&>(p) = PendingProgress{};
  CopyUsedSendWr(&p.wr, &wr);
  p.wr.held = hold_;
  p.wr.canceled = false;
  p.info = &WrOpcode(wr.opcode);
  return p;
}

void WireQp::Number(Pending& p) {
  p.bytes = MessageBytes(p.wr, *p.info);
  const uint32_t mtu = config_.mtu_bytes;
  p.packets = WrTakesResponse(*p.info) ? 1 : roce::PacketsOf(p.bytes, mtu);
  p.psn_span = p.info->action == WrAction::kRead ? roce::PacketsOf(p.bytes, mtu) : p.packets;
  p.first_psn = next_psn_;
  next_psn_ = roce::PsnAdd(next_psn_, p.psn_span);
}

void WireQp::Post(const SendWr& wr) {
  Pending& p = Enqueue(wr);
  if (error_) {
    next_send_ = sq_.size();
    while (!sq_.empty()) CompleteFront(IBV_WC_WR_FLUSH_ERR, kVendorFlushed);
    return;
  }
  // A bind or a local invalidate: no packet, no PSN (Pump runs it).
  if (p.info->action != WrAction::kLocal) Number(p);
  Pump();
}

// A PSN before unacked_psn_ is inside: a READ asked again from its first
// missing response when a (RNR) NAK named a PSN past it. Until session 26
// such a PSN counted as far outside, and the READ waited - with no timer -
// forever.
bool WireQp::InWindow(uint32_t psn) const {
  return roce::PsnDiff(psn, unacked_psn_) < kWindowPackets;
}

bool WireQp::WindowOpen(const Pending& p) const {
  if (!Reliable()) return true;
  const uint32_t psn = roce::PsnAdd(
      p.first_psn, p.info->action == WrAction::kRead ? p.read_received : p.next_packet);
  return InWindow(psn);
}

// Checks the WR's local keys before its first packet, as a NIC reads its
// SGEs: a bad lkey or length completes the WR with a local error.
static VendorError CheckLocal(WireHost& host, const WireQpConfig& qp, const SendWr& wr,
                              const WrOpcodeInfo& info, ibv_wc_status* status) {
  *status = IBV_WC_LOC_PROT_ERR;
  if (info.action == WrAction::kAtomic && (wr.num_sge != 1 || wr.sge[0].length < 8)) {
    *status = IBV_WC_LOC_LEN_ERR;
    return kVendorMessageTooLong;
  }
  if (qp.type == IBV_QPT_UD && MessageBytes(wr, info) > qp.mtu_bytes) {
    *status = IBV_WC_LOC_LEN_ERR;
    return kVendorMessageTooLong;
  }
  if ((wr.send_flags & IBV_SEND_INLINE) && wr.num_sge == 0) return kVendorNone;
  RecvSge sge[kMaxSendSge];
  std::copy(wr.sge, wr.sge + wr.num_sge, sge);
  if (info.action == WrAction::kAtomic) sge[0].length = 8;
  MrGuards guards;
  PieceList pieces;
  const RequesterSigScope own;
  return AddKeyedPieces(host, guards, sge, wr.num_sge, false, qp.pdn, qp.owner,
                        info.writes_local ? IBV_ACCESS_LOCAL_WRITE : 0, &pieces);
}

void WireQp::Pump() {
  if (error_) return;
  if (rnr_until_) {
    if (host_.Now() < rnr_until_) return;
    rnr_until_ = 0;
  }
  if (send_retry_at_) {
    if (host_.Now() < send_retry_at_) return;
    send_retry_at_ = 0;
  }
  while (next_send_ < sq_.size()) {
    Pending& p = sq_[next_send_];
    if (p.wr.held) break;  // posted in SQD: waits for RTS
    if (p.wr.canceled) {
      // A NOP now (mlx5dv_qp_cancel_posted_send_wrs): it completes in
      // order, with no packet.
      if (next_send_ != 0) break;
      p.bytes = 0;
      next_send_++;
      CompleteFront(IBV_WC_SUCCESS, kVendorNone);
      continue;
    }
    if (p.wr.sig_pipelining && (p.wr.send_flags & IBV_SEND_FENCE) && sig_error_seen_ &&
        p.next_packet == 0 && p.read_received == 0) {
      // Signature pipelining (docs/devx.md, "Signature keys"): the fence
      // waits for the WRs before it; then the queue stops here, the QP
      // drained to SQD, this WR and those after it held until SQD->RTS.
      if (next_send_ != 0) break;
      sig_error_seen_ = false;
      p.wr.held = true;
      host_.DrainOnSigError(config_.qpn);
      return;
    }
    if (p.info->action == WrAction::kLocal) {
      // The device's tables change in the send queue's order: once every
      // WR before it has completed.
      if (next_send_ != 0) break;
      const LocalQp qp{config_.qpn, config_.type, config_.pdn, config_.dest_qpn, 0, 0, 0, nullptr};
      ibv_wc_status status;
      uint32_t byte_len;
      if (VendorError why = RunLocalOperation(host_, qp, config_.owner, p.wr, &status, &byte_len)) {
        RequesterError(status, why);
        return;
      }
      p.bytes = byte_len;
      next_send_++;
      CompleteFront(IBV_WC_SUCCESS, kVendorNone);
      continue;
    }
    if (p.info->wire_only == IbtaOperation::kNone) {
      // An operation the network transport has no packet for (a table
      // row without one; ATOMIC WRITE until session 27): a local QP
      // operation error at once, rather than a packet of no known opcode
      // that ends in IBV_WC_RETRY_EXC_ERR. Completions come in order.
      if (next_send_ == 0) RequesterError(IBV_WC_LOC_QP_OP_ERR, kVendorNotOnTheWire);
      return;
    }
    if (p.next_packet == 0 && p.read_received == 0) {
      ibv_wc_status status;
      if (VendorError why = CheckLocal(host_, config_, p.wr, *p.info, &status)) {
        // Completions come in order: the WR fails once those before it
        // have completed.
        if (next_send_ == 0) RequesterError(status, why);
        return;
      }
    }
    const bool response = WrTakesResponse(*p.info);
    if (response && p.next_packet == 0) {
      uint32_t in_flight = 0;
      for (size_t i = 0; i < next_send_; ++i) in_flight += WrTakesResponse(*sq_[i].info) ? 1 : 0;
      if (in_flight >= std::max<uint32_t>(1, config_.max_rd_atomic)) break;
    }
    while (p.next_packet < p.packets) {
      if (!WindowOpen(p)) goto window_full;
      VendorError why = kVendorNone;
      const uint64_t sig_errors = SigErrorsReportedByThisThread();
      const PacketSent sent = SendRequestPacket(p, next_send_, p.next_packet, &why);
      if (SigErrorsReportedByThisThread() != sig_errors) sig_error_seen_ = true;
      if (sent == PacketSent::kOwnerWaits) {
        send_retry_at_ = host_.Now() + OwnerWait::kRetryNs;
        goto window_full;
      }
      if (sent == PacketSent::kLocalError) {
        // A NIC reads the SGEs again for every packet it sends, the
        // resends too: an MR deregistered since the WR's check fails the
        // WR with a local protection error (memory it cannot read at all,
        // with a local access error) - once those before it have
        // completed, as the check's own failure above.
        if (next_send_ == 0) {
          RequesterError(why == kVendorOwnerGone ? IBV_WC_LOC_ACCESS_ERR : IBV_WC_LOC_PROT_ERR,
                         why);
          return;
        }
        goto window_full;
      }
      p.next_packet++;
    }
    if (Reliable()) {
      next_send_++;
    } else {
      // UC and UD: done once on the wire.
      next_send_++;
      CompleteFront(IBV_WC_SUCCESS, kVendorNone);
    }
  }
window_full:
  if (Reliable() && next_send_ > 0 && ack_deadline_ == UINT64_MAX) StartAckTimer();
}

bool WireQp::MoreToSendAfter(const Pending& p, size_t pos, uint32_t index) const {
  if (index + 1 < p.packets) {
    const uint32_t next = roce::PsnAdd(p.first_psn, index + 1);
    return InWindow(next);
  }
  // The next WR, if any, goes now unless the window is full; a READ or an
  // atomic answers for the PSNs before it anyway.
  if (pos + 1 >= sq_.size()) return false;
  const Pending& next = sq_[pos + 1];
  if (WrTakesResponse(*next.info)) return true;
  return InWindow(next.first_psn);
}

void WireQp::StartAckTimer() {
  const uint64_t timeout = AckTimeoutNs(config_.timeout);
  ack_deadline_ = timeout == UINT64_MAX ? UINT64_MAX : host_.Now() + timeout;
}

WireQp::PacketSent WireQp::SendRequestPacket(Pending& p, size_t pos, uint32_t index,
                                             VendorError* why) {
  const SendWr& wr = p.wr;
  const WrOpcodeInfo& info = *p.info;
  const uint32_t mtu = config_.mtu_bytes;
  const bool read = info.action == WrAction::kRead;
  const bool last = index + 1 == p.packets;
  roce::TransportFields f;
  f.opcode = IbtaOpcode(TransportOf(config_.type), roce::RequestOperation(info, index, p.packets));
  const uint8_t headers = IbtaOperationRow(OperationOfOpcode(f.opcode)).headers;
  f.dest_qp = config_.type == IBV_QPT_UD ? wr.remote_qpn : config_.dest_qpn;
  f.psn = roce::PsnAdd(p.first_psn, read ? p.read_received : index);
  f.solicited = last && (wr.send_flags & IBV_SEND_SOLICITED);
  // AckReq: every kAckRequestEvery-th packet of a message, and the last
  // packet of a burst (nothing more can go now). A message's last packet in
  // the middle of a burst needs none: a later ACK covers it.
  f.ack_req =
      Reliable() && ((index + 1) % kAckRequestEvery == 0 || !MoreToSendAfter(p, pos, index));
  f.xrc_srq = wr.remote_srqn;
  if (config_.type == IBV_QPT_UD) {
    f.qkey = (wr.remote_qkey & 0x80000000u) ? config_.qkey : wr.remote_qkey;
    f.src_qp = config_.qpn;
  }
  uint64_t offset = static_cast<uint64_t>(index) * mtu;
  if (headers & kHeaderReth) {
    const uint64_t skip = read ? p.read_bytes : 0;
    f.va = wr.remote_addr + skip;
    f.rkey = wr.rkey;
    f.dma_len = static_cast<uint32_t>(p.bytes - skip);
  }
  if (headers & kHeaderAtomicEth) {
    f.va = wr.remote_addr;
    f.rkey = wr.rkey;
    const bool cs = info.wire_only == IbtaOperation::kCompareSwap;
    f.swap_add = cs ? wr.swap : wr.compare_add;
    f.compare = cs ? wr.compare_add : 0;
  }
  if (headers & kHeaderImmDt) f.imm = be32toh(wr.imm_data);
  if (headers & kHeaderIeth) f.invalidate_rkey = wr.imm_data;  // ibv_send_wr.invalidate_rkey
  uint8_t buffer[4096];
  uint32_t len = 0;
  // The payload: straight from the MR's mapping when it is one piece the
  // daemon maps (the carrier builds the packet from it: one copy, into the
  // packet), else gathered into `buffer` first. The guards keep the MR
  // from going away until the packet is built.
  const uint8_t* payload = buffer;
  MrGuards guards;
  if (!read && info.action != WrAction::kAtomic && offset < p.bytes) {
    len = static_cast<uint32_t>(std::min<uint64_t>(mtu, p.bytes - offset));
    len = std::min<uint32_t>(len, sizeof(buffer));
    // The packet's bytes [offset, offset + len): first from the inline
    // bytes, then from the SGEs that follow them.
    PieceList src;
    const uint64_t inline_bytes = (wr.send_flags & IBV_SEND_INLINE) ? wr.inline_len : 0;
    if (offset < inline_bytes) {
      const uint32_t from_inline =
          static_cast<uint32_t>(std::min<uint64_t>(len, inline_bytes - offset));
      src.Add({const_cast<uint8_t*>(wr.inline_data + offset), -1, 0, from_inline});
    }
    if (offset + len > inline_bytes) {
      const uint64_t sge_offset = offset > inline_bytes ? offset - inline_bytes : 0;
      const uint64_t sge_len = offset + len - std::max<uint64_t>(offset, inline_bytes);
      RecvSge slice[kMaxSendSge];
      const uint32_t n = SliceSges(wr.sge, wr.num_sge, sge_offset, sge_len, slice);
      const RequesterSigScope own;
      *why = AddKeyedPieces(host_, guards, slice, n, false, config_.pdn, config_.owner, 0, &src);
      if (*why != kVendorNone) return PacketSent::kLocalError;
    }
    if (len && src.count == 1 && src.piece[0].ptr) {
      payload = src.piece[0].ptr;
    } else if (len) {
      PieceList dst;
      dst.Add({buffer, -1, 0, len});
      if (!CopyPieces(dst, src)) {
        // The owner converts the page (owner waits): sent later. Past
        // that (the owner gone, its memory unmapped) the WR fails, as a
        // READ response that cannot be placed does (wire_completer.cc).
        const bool waiting = send_wait_.waiting;
        if (send_wait_.MayRetry(errno, host_.Now())) {
          if (!waiting) counters_.owner_waits++;
          return PacketSent::kOwnerWaits;
        }
        send_wait_.End();
        *why = kVendorOwnerGone;
        return PacketSent::kLocalError;
      }
    }
    send_wait_.End();
  }
  const uint8_t* dgid = config_.type == IBV_QPT_UD ? wr.dgid : config_.dgid;
  const uint8_t* sgid = config_.type == IBV_QPT_UD ? wr.sgid : config_.sgid;
  if (Reliable() && roce::PsnDiff(f.psn, highest_sent_psn_) <= 0 && sent_any_) {
    counters_.retransmitted++;
  } else {
    highest_sent_psn_ = f.psn;
    sent_any_ = true;
  }
  const roce::PathIpFields& path = config_.type == IBV_QPT_UD ? wr.path : config_.path;
  host_.SendPacket(sgid, dgid, SourcePortOf(config_), path, f, {payload, len});
  counters_.packets_sent++;
  return PacketSent::kSent;
}

void WireQp::GoBackTo(uint32_t psn) {
  for (size_t i = 0; i < sq_.size() && i < next_send_ + 1; ++i) {
    Pending& p = sq_[i];
    const int32_t into = roce::PsnDiff(psn, p.first_psn);
    if (into < 0 || static_cast<uint32_t>(into) >= p.psn_span) continue;
    next_send_ = i;
    p.next_packet = p.info->action == WrAction::kRead ? 0 : static_cast<uint32_t>(into);
    for (size_t k = i + 1; k < sq_.size(); ++k) sq_[k].next_packet = 0;
    unacked_psn_ = psn;
    ack_deadline_ = UINT64_MAX;
    return;
  }
}

void WireQp::OnTimer(uint64_t now) {
  // The responder's kept packet (owner waits); an unreliable QP's responder
  // works on while its send queue is in error.
  if (rsp_state_ == ResponderState::kOwnerWait && now >= parked_retry_at_) RetryParked();
  if (error_) return;
  if (ack_deadline_ != UINT64_MAX && now >= ack_deadline_) {
    ack_deadline_ = UINT64_MAX;
    read_gap_asked_ = false;
    lost_response_asked_ = false;
    counters_.timeouts++;
    // A response dropped while this side's page is converted (owner
    // waits) spends no retry: that wait is bounded in time instead.
    if (!place_wait_.Active(now)) {
      if (retries_ >= config_.retry_cnt) {
        RequesterError(IBV_WC_RETRY_EXC_ERR, kVendorNoResponse);
        return;
      }
      retries_++;
    }
    GoBackTo(unacked_psn_);
  }
  Pump();
}

uint64_t WireQp::NextDeadline() const {
  const uint64_t parked = rsp_state_ == ResponderState::kOwnerWait ? parked_retry_at_ : UINT64_MAX;
  if (error_) return parked;
  uint64_t next = std::min(ack_deadline_, parked);
  if (rnr_until_) next = std::min(next, rnr_until_);
  if (send_retry_at_) next = std::min(next, send_retry_at_);
  return next;
}

void WireQp::Flush() {
  FlushSendQueue();
  rsp_state_ = ResponderState::kError;
  have_wqe_ = false;
}

void WireQp::FlushSendQueue() {
  error_ = true;
  ack_deadline_ = UINT64_MAX;
  rnr_until_ = 0;
  send_retry_at_ = 0;
  send_wait_.End();
  next_send_ = sq_.size();
  while (!sq_.empty()) CompleteFront(IBV_WC_WR_FLUSH_ERR, kVendorFlushed);
}

void WireQp::Hold(bool on) {
  hold_ = on;
  if (on) return;
  sq_.ForEach([](Pending& p) { p.wr.held = false; });
  Pump();
}

int WireQp::Cancel(uint64_t wr_id) {
  int n = 0;
  for (size_t i = next_send_; i < sq_.size(); ++i) {
    Pending& p = sq_[i];
    if (p.wr.wr_id != wr_id || p.wr.canceled || p.next_packet != 0 || p.read_received != 0) {
      continue;
    }
    p.wr.canceled = true;
    ++n;
    // It sends no packet: the WRs after it (none started: WRs start in
    // order) take its PSNs, so the responder sees no gap.
    const uint32_t back = (roce::kPsnMask + 1 - p.psn_span) & roce::kPsnMask;
    for (size_t j = i + 1; j < sq_.size(); ++j) {
      sq_[j].first_psn = roce::PsnAdd(sq_[j].first_psn, back);
    }
    next_psn_ = roce::PsnAdd(next_psn_, back);
    p.psn_span = 0;
    p.packets = 0;
  }
  return n;
}

void WireQp::ResumeSendQueue() {
  if (rsp_state_ != ResponderState::kError) error_ = false;
}

}  // namespace softverbs::datapath
