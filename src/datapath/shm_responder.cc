#include "datapath/shm_responder.h"

#include <endian.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datapath/comm_est.h"
#include "datapath/keyed_access.h"
#include "datapath/tag_matching.h"
#include "datapath/ud_receive.h"

namespace softverbs::datapath {

std::atomic<long> stall_in_access_us{-1};

void StallInsideAccessSlow() {
  long us = stall_in_access_us.load(std::memory_order_relaxed);
  if (us < 0) {
    const char* env = getenv("SOFTVERBS_TEST_STALL_IN_ACCESS_US");
    us = env && atol(env) > 0 ? atol(env) : 0;
    stall_in_access_us.store(us, std::memory_order_relaxed);
  }
  if (us > 0) usleep(static_cast<useconds_t>(us));
}

namespace {

bool IsReceiveState(uint32_t s) {
  return s == IBV_QPS_RTR || s == IBV_QPS_RTS || s == IBV_QPS_SQD || s == IBV_QPS_SQE;
}

// The receive side a message is delivered to: the cached rings of the
// target QP (or of the XRC SRQ it names), used in place - never copied, so
// that state producers keep in them (the CQ ring's cached head) persists -
// and the QP number and PD the responder acts for.
struct Target {
  PeerQp* peer = nullptr;
  uint32_t qpn = 0;
  uint32_t pdn = 0;
  bool dct = false;  // an mlx5 DCT (verbs::kQptDcTgt)
};

// The responder detected an error on an RC/UC QP, in hardware's order: the
// QP moves to the error state before anything of the error can be seen -
// the receive's error completion, if the error consumed one, then the flush
// of its own receive queue (an SRQ's is not flushed: other QPs use it) - so
// a program that polls the error completion and queries the QP finds ERR.
//
// An mlx5 DCT serves every DCI that knows its key: the error is the
// requester's (its NAK), the DCT reports a receive it consumed and stays
// in RTR.
void FailTarget(Host& host, const Target& t, const Completion* receive_error = nullptr) {
  PeerQp& peer = *t.peer;
  if (t.dct) {
    if (receive_error) Complete(peer.recv_cq, peer.cq_event_fd, *receive_error);
    return;
  }
  host.SetQpError(t.qpn);
  if (receive_error) Complete(peer.recv_cq, peer.cq_event_fd, *receive_error);
  if (!peer.srqn && peer.rq.valid()) {
    FlushRecvQueue(peer.rq, peer.recv_cq, peer.cq_event_fd, t.qpn);
  }
}

Completion ReceiveCompletion(const ClaimedRecv& r, const Target& t, const LocalQp& qp,
                             const SendWr& wr, const WrOpcodeInfo& info) {
  // UD: the packet's type, as mlx5 reports it (ud_receive.h).
  const uint8_t sl = qp.type == IBV_QPT_UD ? UdReceiveSl(UdMessageIsIpv6(wr.sgid, wr.dgid)) : qp.sl;
  Completion c =
      MessageReceiveCompletion(r.wr_id, t.qpn, qp.qpn, sl, wr.send_flags, wr.imm_data, info);
  // A raw frame names no source QP and no service level, as mlx5 reports
  // an Ethernet packet's receive.
  if (qp.type == IBV_QPT_RAW_PACKET) c.src_qp = c.sl = 0;
  return c;
}

bool IsReliable(uint32_t type) {
  return type == IBV_QPT_RC || type == IBV_QPT_XRC_SEND || type == verbs::kQptDcIni;
}

// The QP type a requester of `type` talks to.
uint32_t TargetTypeOf(uint32_t type) {
  if (type == IBV_QPT_XRC_SEND) return IBV_QPT_XRC_RECV;
  if (type == verbs::kQptDcIni) return verbs::kQptDcTgt;
  return type;
}

// Finds the target QP of a work request and its receive side. For XRC the
// receive side is the SRQ the WR names, which must be an XRC SRQ of the
// target QP's domain: its ring, CQ, PD and owner stand in for the QP's.
// Returns false when the WR ended here (`out` says how: no response, or an
// error completion).
bool ReachTarget(Host& host, const LocalQp& qp, const SendWr& wr, uint32_t target_qpn,
                 QpEntry** te_out, Target* t, Outcome* out) {
  const bool reliable = IsReliable(qp.type);
  QpEntry* te = host.table().FindQp(target_qpn);
  if (!te || te->type.load() != TargetTypeOf(qp.type) || !IsReceiveState(te->state.load())) {
    // UC/UD: the packet is silently dropped
    out->response = reliable ? Response::kNoAnswer : Response::kDropped;
    return false;
  }
  *te_out = te;
  const bool dct = qp.type == verbs::kQptDcIni;
  if (dct && DcAccessKeyOf(*te) != wr.dc_key) {
    // A DC access key violation: the DCT drops the message (as a Q_Key
    // violation is dropped), and the DCI, unanswered, retries.
    out->response = Response::kNoAnswer;
    return false;
  }
  if (qp.type != IBV_QPT_XRC_SEND) {
    PeerQp* p = ReachPeerQp(host, qp, target_qpn, te->generation.load());
    if (!p) {
      out->response = reliable ? Response::kNoAnswer : Response::kDropped;
      return false;
    }
    t->peer = p;
    t->qpn = target_qpn;
    t->pdn = te->pdn.load();
    t->dct = dct;
    // A DCT is never connected: no communication-established event.
    // Nor is a UD or raw packet QP.
    if (qp.type != IBV_QPT_UD && qp.type != IBV_QPT_RAW_PACKET && !dct) {
      RaiseCommEstOnce(host, te, target_qpn);
    }
    return true;
  }
  PeerQp* srq = host.FindXrcSrq(wr.remote_srqn);
  if (!srq || srq->xrcd != te->xrcd.load()) {
    // An invalid XRCETH or an XRC domain violation is a local access
    // violation at the responder (IBA; hns reports both as QP_ACCESS_ERR):
    // the target QP goes to the error state and the requester is NAKed
    // with Remote Access Error.
    host.SetQpError(target_qpn);
    host.RaiseQpEvent(target_qpn, IBV_EVENT_QP_ACCESS_ERR);
    Nak(out, IBV_WC_REM_ACCESS_ERR, kVendorXrcSrq);
    return false;
  }
  t->peer = srq;
  t->qpn = target_qpn;
  t->pdn = srq->pdn;
  RaiseCommEstOnce(host, te, target_qpn);
  return true;
}

// The bytes of src past its first `skip`.
PieceList SkipBytes(const PieceList& src, uint64_t skip) {
  PieceList out;
  for (int i = 0; i < src.count; ++i) {
    MemPiece p = src.piece[i];
    const uint64_t cut = skip < p.len ? skip : p.len;
    skip -= cut;
    if (p.ptr) p.ptr += cut;
    p.va += cut;
    p.len -= cut;
    out.Add(p);
  }
  return out;
}

// Scatters a SEND's bytes into the receive WQE r claimed for it and writes
// the receive completion `recv` (errors as the IBA's responder reports them).
void ScatterAndComplete(Host& host, const LocalQp& qp, const SendWr& wr, const WrOpcodeInfo& info,
                        const PieceList& src, uint32_t bytes, const Target& target,
                        const ClaimedRecv& r, Completion recv, Outcome* out) {
  const bool rc = IsReliable(qp.type);
  const bool ud = qp.type == IBV_QPT_UD;
  PeerQp* peer = target.peer;
  const uint32_t needed = bytes + (ud ? kGrhBytes : 0);
  uint64_t room = 0;
  for (uint32_t i = 0; i < r.num_sge; ++i) room += r.sge[i].length;
  MrGuards guards;
  PieceList dst;
  VendorError why = kVendorNone;
  if (room < needed) {
    why = kVendorRecvTooSmall;
  } else if (AddKeyedPieces(host, guards, r.sge, r.num_sge, false, target.pdn, peer->owner,
                            IBV_ACCESS_LOCAL_WRITE, &dst) != kVendorNone) {
    why = kVendorRecvBadLkey;
  }
  if (why != kVendorNone) {
    recv.status = why == kVendorRecvTooSmall ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_PROT_ERR;
    recv.vendor_err = why;
    recv.byte_len = needed;
    FailTarget(host, target, &recv);
    if (rc)
      return Nak(out, why == kVendorRecvTooSmall ? IBV_WC_REM_INV_REQ_ERR : IBV_WC_REM_OP_ERR, why);
    out->response = Response::kDropped;
    return;
  }
  if (ud) {
    uint8_t grh[kGrhBytes];
    WriteUdReceiveGrh(wr.sgid, wr.dgid, wr.path, bytes, info.immediate, grh);
    PieceList with_grh;
    with_grh.Add({grh, -1, 0, kGrhBytes});
    for (int i = 0; i < src.count; ++i) with_grh.Add(src.piece[i]);
    if (!CopyPieces(dst, with_grh)) recv.status = IBV_WC_LOC_ACCESS_ERR;
    recv.wc_flags |= IBV_WC_GRH;
  } else if (!CopyPieces(dst, src)) {
    recv.status = IBV_WC_LOC_ACCESS_ERR;
  }
  recv.byte_len = needed;
  // SEND with invalidate: the responder invalidates the window before it
  // reports the message (IBA 10.6.7.3); a key it may not invalidate is an
  // invalid request, and the QP goes to the error state as rxe's does.
  if (info.invalidate && recv.status == IBV_WC_SUCCESS &&
      !host.InvalidateWindow(target.qpn, wr.imm_data, true)) {
    recv.status = IBV_WC_REM_INV_REQ_ERR;
    recv.vendor_err = kVendorRemoteInvalidate;
    FailTarget(host, target, &recv);
    return Nak(out, IBV_WC_REM_INV_REQ_ERR, kVendorRemoteInvalidate);
  }
  Complete(peer->recv_cq, peer->cq_event_fd, recv, &r);
  out->response = Response::kAck;
}

// A tagged message matched `tag`: eager data lands in the tag's buffer; a
// rendezvous request makes the device read the sender's buffer into it
// (the FIN to the sender and the data's completion follow the sender's own
// completion: Outcome::rendezvous, FinishRendezvous).
void DeliverMatched(Host& host, const LocalQp& qp, const SendWr& wr, const WrOpcodeInfo& info,
                    const PieceList& src, uint32_t bytes, const Target& target, QpEntry* te,
                    const Tmh& tmh, const uint8_t* rvh_bytes, const TmTag& tag, Outcome* out) {
  PeerQp* peer = target.peer;
  ClaimedRecv r;
  r.wr_id = tag.recv_wr_id;
  Completion c = ReceiveCompletion(r, target, qp, wr, info);
  c.opcode = IBV_WC_TM_RECV;
  c.tm_tag = tmh.tag;
  c.tm_priv = tmh.app_ctx;
  MrGuards guards;
  PieceList dst;
  if (tag.num_sge && AddKeyedPieces(host, guards, &tag.sge, 1, false, target.pdn, peer->owner,
                                    IBV_ACCESS_LOCAL_WRITE, &dst) != kVendorNone) {
    c.status = IBV_WC_LOC_PROT_ERR;
    c.vendor_err = kVendorRecvBadLkey;
    FailTarget(host, target, &c);
    return Nak(out, IBV_WC_REM_OP_ERR, kVendorRecvBadLkey);
  }
  if (tmh.opcode == IBV_TMH_EAGER) {
    c.byte_len = bytes - kTmhBytes;
    if (c.byte_len > dst.bytes) {
      c.status = IBV_WC_LOC_LEN_ERR;
      c.vendor_err = kVendorRecvTooSmall;
      FailTarget(host, target, &c);
      return Nak(out, IBV_WC_REM_INV_REQ_ERR, kVendorRecvTooSmall);
    }
    if (!CopyPieces(dst, SkipBytes(src, kTmhBytes))) c.status = IBV_WC_LOC_ACCESS_ERR;
    c.wc_flags |= IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID;
    out->response = Response::kAck;
    Complete(peer->recv_cq, peer->cq_event_fd, c);
    return;
  }
  // Rendezvous: the match is reported at once, the data once it is read.
  const Rvh rvh = DecodeRvh(rvh_bytes);
  c.byte_len = rvh.len;
  c.wc_flags |= IBV_WC_TM_MATCH;
  Complete(peer->recv_cq, peer->cq_event_fd, c);
  // The read: an RDMA READ of the receiving QP from the sender, so the
  // sender's QP must allow remote reads and the rkey must grant them.
  ibv_wc_status status = IBV_WC_SUCCESS;
  const QpEntry* self = host.table().FindQp(qp.qpn);
  PieceList from;
  RecvSge rsge{rvh.va, rvh.len, rvh.rkey};
  if (rvh.len > dst.bytes || !self || !(self->access.load() & IBV_ACCESS_REMOTE_READ) ||
      (rvh.len && AddKeyedPieces(host, guards, &rsge, 1, true, qp.pdn, host.client_id(),
                                 IBV_ACCESS_REMOTE_READ, &from, qp.qpn) != kVendorNone) ||
      !CopyPieces(dst, from)) {
    status = IBV_WC_TM_RNDV_INCOMPLETE;
  }
  out->rendezvous = {true,    target.qpn, te->generation.load(), tag.recv_wr_id,
                     rvh.len, status,     tmh.app_ctx,           tmh.tag};
  out->response = Response::kAck;
}

// A message to a tag-matching SRQ (datapath/tag_matching.h): a tagged one
// (EAGER, RNDV) is matched against the posted tags; unmatched, or untagged
// (NO_TAG and anything else), it takes an ordinary receive of the SRQ whole,
// header included, as IBV_WC_TM_RECV (counted unexpected) or
// IBV_WC_TM_NO_TAG.
void DeliverTagged(Host& host, const LocalQp& qp, const SendWr& wr, const WrOpcodeInfo& info,
                   const PieceList& src, uint32_t bytes, const Target& target, QpEntry* te,
                   Outcome* out) {
  PeerQp* peer = target.peer;
  TagList list(peer->rq.header());
  uint8_t head[kTmhBytes + kRvhBytes] = {};
  PieceList head_dst;
  head_dst.Add({head, -1, 0, sizeof(head)});
  CopyPieces(head_dst, src);
  const Tmh tmh = bytes >= kTmhBytes ? DecodeTmh(head) : Tmh{};
  const bool tagged =
      bytes >= kTmhBytes && (tmh.opcode == IBV_TMH_EAGER ||
                             (tmh.opcode == IBV_TMH_RNDV && bytes >= kTmhBytes + kRvhBytes));
  TmTag tag;
  if (tagged && list.Match(tmh.tag, &tag)) {
    return DeliverMatched(host, qp, wr, info, src, bytes, target, te, tmh, head + kTmhBytes, tag,
                          out);
  }
  ClaimedRecv r;
  if (!ClaimReceive(host, *peer, &r)) {
    out->response = Response::kRnrNak;
    out->rnr_timer_ns = te->min_rnr_timer.load();
    return;
  }
  if (tagged) list.CountUnexpected();
  Completion recv = ReceiveCompletion(r, target, qp, wr, info);
  recv.opcode = tagged ? IBV_WC_TM_RECV : IBV_WC_TM_NO_TAG;
  ScatterAndComplete(host, qp, wr, info, src, bytes, target, r, recv, out);
}

}  // namespace

void RespondToSend(Host& host, const LocalQp& qp, const SendWr& wr, const WrOpcodeInfo& info,
                   const PieceList& src, uint32_t bytes, uint32_t target_qpn, Outcome* out) {
  const bool rc = IsReliable(qp.type);
  const bool ud = qp.type == IBV_QPT_UD;
  QpEntry* te = nullptr;
  Target target;
  if (!ReachTarget(host, qp, wr, target_qpn, &te, &target, out)) return;
  PeerQp* peer = target.peer;
  if (ud) {
    uint32_t qkey = (wr.remote_qkey & 0x80000000u) ? qp.qkey : wr.remote_qkey;
    if (qkey != te->qkey.load()) {
      out->response = Response::kDropped;  // as a Q_Key violation is
      return;
    }
  }
  if (rc && TagList(peer->rq.header()).valid()) {
    return DeliverTagged(host, qp, wr, info, src, bytes, target, te, out);
  }
  ClaimedRecv r;
  if (!ClaimReceive(host, *peer, &r)) {
    out->response = rc ? Response::kRnrNak : Response::kDropped;
    out->rnr_timer_ns = te->min_rnr_timer.load();
    return;
  }
  ScatterAndComplete(host, qp, wr, info, src, bytes, target, r,
                     ReceiveCompletion(r, target, qp, wr, info), out);
}

void RespondToRdma(Host& host, const LocalQp& qp, const SendWr& wr, const WrOpcodeInfo& info,
                   const PieceList& local, uint32_t bytes, Outcome* out) {
  const bool rc = IsReliable(qp.type);
  const bool is_read = info.action == WrAction::kRead;
  const bool is_atomic = info.action == WrAction::kAtomic;
  const bool with_imm = info.consumes_recv;
  MrGuards guards;
  QpEntry* te = nullptr;
  Target target;
  if (!ReachTarget(host, qp, wr, ConnectedTargetOf(qp, wr), &te, &target, out)) return;
  PeerQp* peer = target.peer;
  // Responder checks: the QP's access flags, alignment, then the rkey.
  const uint32_t need = info.remote_access;
  auto responder_error = [&](ibv_wc_status status, VendorError why) {
    if (!rc) {
      out->response = Response::kDropped;  // UC: the responder drops the message
      return;
    }
    FailTarget(host, target);
    // A shared XRC receive QP: every handle hears of the error, as the
    // affiliated async event of the responder's NAK.
    if (peer->xrcd) {
      host.RaiseQpEvent(target.qpn, status == IBV_WC_REM_ACCESS_ERR ? IBV_EVENT_QP_ACCESS_ERR
                                                                    : IBV_EVENT_QP_REQ_ERR);
    }
    Nak(out, status, why);
  };
  if (!(te->access.load() & need)) return responder_error(IBV_WC_REM_INV_REQ_ERR, kVendorQpAccess);
  if ((is_atomic || info.atomic_write) && (wr.remote_addr & 7)) {
    return responder_error(IBV_WC_REM_INV_REQ_ERR, kVendorMisaligned);
  }
  if (info.atomic_write && bytes != 8) {
    return responder_error(IBV_WC_REM_INV_REQ_ERR, kVendorMessageTooLong);
  }
  PieceList remote;
  if (bytes > 0) {
    RecvSge rsge{wr.remote_addr, bytes, wr.rkey};
    if (VendorError why = AddKeyedPieces(host, guards, &rsge, 1, true, target.pdn, peer->owner,
                                         need, &remote, target.qpn)) {
      return responder_error(IBV_WC_REM_ACCESS_ERR, why);
    }
  }
  ClaimedRecv r;
  if (with_imm && !ClaimReceive(host, *peer, &r)) {
    out->response = rc ? Response::kRnrNak : Response::kDropped;
    out->rnr_timer_ns = te->min_rnr_timer.load();
    return;
  }
  StallInsideAccessForTests();
  bool moved = true;
  if (is_atomic) {
    uint64_t old = 0;
    moved = info.wire_only == IbtaOperation::kCompareSwap
                ? AtomicCompareSwap(remote.piece[0], wr.compare_add, wr.swap, &old)
                : AtomicFetchAdd(remote.piece[0], wr.compare_add, &old);
    PieceList result;
    result.Add({reinterpret_cast<uint8_t*>(&old), -1, 0, 8});
    moved = moved && CopyPieces(local, result);
  } else if (is_read) {
    moved = CopyPieces(local, remote);
  } else if (info.atomic_write) {
    // The 8 bytes are gathered first, then stored at once.
    uint64_t value = 0;
    PieceList staging;
    staging.Add({reinterpret_cast<uint8_t*>(&value), -1, 0, 8});
    moved = CopyPieces(staging, local) && AtomicStore(remote.piece[0], value);
  } else {
    moved = CopyPieces(remote, local);
  }
  if (!moved) return responder_error(IBV_WC_REM_ACCESS_ERR, kVendorOwnerGone);
  if (with_imm) {
    Completion recv = ReceiveCompletion(r, target, qp, wr, info);
    recv.byte_len = bytes;
    Complete(peer->recv_cq, peer->cq_event_fd, recv);
  }
  out->response = Response::kAck;
}

void FinishRendezvous(Host& host, const LocalQp& qp, const RendezvousFinish& f) {
  ExecutionScope scope(host);
  if (f.status == IBV_WC_SUCCESS) {
    // The FIN: a 16-byte SEND of the receiving QP to the sender, telling it
    // that its buffer was read (it consumes one of the sender's receives).
    const QpEntry* self = host.table().FindQp(qp.qpn);
    PeerQp* own = self ? host.FindPeerQp(qp.qpn, self->generation.load()) : nullptr;
    ClaimedRecv r;
    if (own && ClaimReceive(host, *own, &r)) {
      uint8_t fin[kTmhBytes];
      EncodeTmh({IBV_TMH_FIN, f.app_ctx, f.tag}, fin);
      PieceList from;
      from.Add({fin, -1, 0, kTmhBytes});
      Completion c{};
      c.wr_id = r.wr_id;
      c.status = IBV_WC_SUCCESS;
      c.opcode = IBV_WC_RECV;
      c.qp_num = qp.qpn;
      c.src_qp = f.target_qpn;
      c.sl = qp.sl;
      c.byte_len = kTmhBytes;
      MrGuards guards;
      PieceList to;
      if (AddKeyedPieces(host, guards, r.sge, r.num_sge, false, qp.pdn, own->owner,
                         IBV_ACCESS_LOCAL_WRITE, &to) != kVendorNone) {
        c.status = IBV_WC_LOC_PROT_ERR;
      } else if (to.bytes < kTmhBytes) {
        c.status = IBV_WC_LOC_LEN_ERR;
      } else if (!CopyPieces(to, from)) {
        c.status = IBV_WC_LOC_ACCESS_ERR;
      }
      Complete(own->recv_cq, own->cq_event_fd, c);
    }
  }
  PeerQp* peer = host.FindPeerQp(f.target_qpn, f.target_generation);
  if (!peer) return;
  Completion c{};
  c.wr_id = f.recv_wr_id;
  c.status = f.status;
  c.opcode = IBV_WC_TM_RECV;
  c.wc_flags = f.status == IBV_WC_SUCCESS ? IBV_WC_TM_DATA_VALID : 0;
  c.byte_len = f.len;
  c.qp_num = f.target_qpn;
  c.src_qp = qp.qpn;
  Complete(peer->recv_cq, peer->cq_event_fd, c);
}

}  // namespace softverbs::datapath
