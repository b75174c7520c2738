#include "datapath/shm_plain_write.h"

#include <string.h>

#include "datapath/keyed_access.h"
#include "datapath/shm_responder.h"

namespace softverbs::datapath {

namespace {

// A receive state in which a message needs nothing of the responder but
// the write: RTR only once IBV_EVENT_COMM_EST was raised (the general
// engine raises it, ReachTarget).
bool Established(const QpEntry& te) {
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

}  // namespace

bool TryPlainWrite(Host& host, const LocalQp& qp, const PlainWrite& w) {
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
  // The responder's side (ReachTarget, RespondToRdma): the target QP,
  // its access flags, then the rkey under an in-flight count.
  const QpEntry* te = table.FindQp(qp.dest_qpn);
  if (!te || te->type.load() != qp.type || !Established(*te)) return false;
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
