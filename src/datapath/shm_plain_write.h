// The success path of an RDMA WRITE on the shared-memory engine, without
// the general engine's bookkeeping: no copy of the work request, no piece
// lists, no responder outcome to judge. It asks the same questions as the
// requester and responder (shm_requester.cc, shm_responder.cc) - the same
// key checks (CheckMrAccess), the same in-flight counts (MrGuards), the
// same peer cache - but only where every answer leads to a plain ACK; any
// other answer sends the WR to the general engine before anything has
// changed, and that engine reports it (docs/datapath.md, "The plain WRITE
// path"). A template on the host, as the send queue is on its port: the
// provider's post calls its host's methods directly, most of them inline.
#pragma once

#include <string.h>

#include <cstdint>

#include "datapath/engine.h"
#include "datapath/keyed_access.h"
#include "datapath/shm_responder.h"

namespace softverbs::datapath {

// One RC or UC RDMA WRITE of `bytes` (> 0) contiguous bytes.
struct PlainWrite {
  uint64_t src_addr;  // this process's address of the bytes (an SGE's addr)
  uint32_t lkey;      // the SGE's lkey; ignored when the bytes are inline
  bool inline_src;    // IBV_SEND_INLINE: the bytes need no key
  uint32_t bytes;
  uint64_t remote_addr;
  uint32_t rkey;
};

// A receive state in which a message needs nothing of the responder but
// the write: RTR only once IBV_EVENT_COMM_EST was raised (the general
// engine raises it, ReachTarget).
inline bool EstablishedForPlainWrite(const QpEntry& te) {
  switch (te.state.load()) {
    case IBV_QPS_RTS:
    case IBV_QPS_SQD:
    case IBV_QPS_SQE:
      return true;
    case IBV_QPS_RTR:
      return te.comm_est.load(std::memory_order_relaxed) != 0;
    default:
      return false;
  }
}

// Executes w for qp when its success path is certain: the source is inline
// or lies in an MR of this process reached directly; the target QP is of
// the matching type, in a receive state past its first message and allows
// remote writes; the rkey names an MR (not a window) of the target's PD
// that grants remote write and covers the range, which is mapped here in
// whole (no page reached through the owner's /proc/<pid>/mem, no
// on-demand MR). True: the bytes are written, and the WR's completion is
// the plain success one. False: nothing happened (no byte moved, no count
// left, no state changed); run the WR through Execute.
template <typename H>
bool TryPlainWrite(H& host, const LocalQp& qp, const PlainWrite& w) {
  if (qp.type != IBV_QPT_RC && qp.type != IBV_QPT_UC) return false;
  ExecutionScope scope(host);
  const DeviceTable& table = host.table();
  const uint32_t me = host.client_id();
  // The requester's side (GatherSource): inline bytes, or this process's
  // own MR, which the execution gate covers without a count.
  const uint8_t* src = reinterpret_cast<const uint8_t*>(w.src_addr);
  if (!w.inline_src) {
    const MrEntry& e = *table.MrSlot(w.lkey);
    if (!host.OwnAccessesFenced() || !host.OwnsMemory(e)) return false;
    uint64_t va = 0;
    if (CheckMrAccess(e, w.lkey, false, qp.pdn, me, 0, w.src_addr, w.bytes, &va) != MrCheck::kOk) {
      return false;
    }
    const MrMapping* m = host.FindMrMapping(w.lkey, e);
    if (!m || !m->local) return false;
    src = reinterpret_cast<const uint8_t*>(va);
  }
  // The responder's side (ReachTarget, RespondToRdma): the target QP, its
  // access flags, then the rkey under an in-flight count.
  const QpEntry* te = table.FindQp(qp.dest_qpn);
  if (!te || te->type.load() != qp.type || !EstablishedForPlainWrite(*te)) return false;
  const uint32_t need = WrOpcode(IBV_WR_RDMA_WRITE).remote_access;
  if (!(te->access.load() & need)) return false;
  PeerQp* peer = ReachPeerQp(host, qp, qp.dest_qpn, te->generation.load());
  if (!peer) return false;
  MrEntry* re = table.MrSlot(w.rkey);
  if (re->window_of.load(std::memory_order_acquire) != 0) return false;
  MrGuards guards;
  const bool own = peer->owner == me && host.OwnAccessesFenced() && host.OwnsMemory(*re);
  if (!own && !host.ChangesKeysBetweenAccesses()) {
    guards.Enter(&re->inflight, host.AccessRecord(w.rkey));
  }
  uint64_t va = 0;
  if (CheckMrAccess(*re, w.rkey, true, te->pdn.load(), peer->owner, need, w.remote_addr, w.bytes,
                    &va) != MrCheck::kOk) {
    return false;
  }
  const MrMapping* m = host.FindMrMapping(w.rkey, *re);
  if (!m) return false;
  uint8_t* dst = nullptr;
  if (m->local) {
    dst = reinterpret_cast<uint8_t*>(va);
  } else if (va >= m->backed_begin && va < m->backed_end && w.bytes <= m->backed_end - va) {
    dst = m->backed + (va - m->backed_begin);
  } else {
    return false;  // a partial page: through the owner's /proc/<pid>/mem
  }
  StallInsideAccessForTests();
  memcpy(dst, src, w.bytes);
  return true;
}

}  // namespace softverbs::datapath
