#include "datapath/keyed_access.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>

namespace softverbs::datapath {

VendorError AddKeyedPieces(Host& host, MrGuards& guards, const RecvSge* sge, uint32_t num_sge,
                           bool remote, uint32_t pdn, uint32_t owner, uint32_t need, PieceList* out,
                           uint32_t responder_qpn) {
  for (uint32_t i = 0; i < num_sge; ++i) {
    if (sge[i].length == 0) continue;
    uint32_t key = sge[i].lkey;
    bool by_rkey = remote;
    uint32_t need_of_mr = need;
    MrEntry* e = host.table().MrSlot(key);
    if (remote && e->window_of.load(std::memory_order_acquire) != 0) {
      // A memory window: its own rights and bounds; then the MR it lies in
      // serves the bytes, as to a local access with the MR's lkey.
      uint32_t mr_lkey = 0;
      switch (CheckWindowAccess(*e, key, pdn, owner, need, responder_qpn, sge[i].addr,
                                sge[i].length, &mr_lkey)) {
        case MrCheck::kOk:
          break;
        case MrCheck::kNoAccess:
          return kVendorRkeyAccess;
        case MrCheck::kOutOfRange:
          return kVendorRkeyRange;
        default:
          return kVendorBadRkey;
      }
      key = mr_lkey;
      by_rkey = false;
      need_of_mr = 0;
      e = host.table().MrSlot(key);
    }
    // This process's own memory: its dereg waits for the executions in
    // progress here (Host::OwnAccessesFenced), so no count is needed. Nor
    // for the device's accesses (Host::ChangesKeysBetweenAccesses).
    const bool own = owner == host.client_id() && host.OwnAccessesFenced() && host.OwnsMemory(*e);
    if (!own && !host.ChangesKeysBetweenAccesses()) guards.Enter(host.AccessRecord(key));
    uint64_t va = 0;
    switch (
        CheckMrAccess(*e, key, by_rkey, pdn, owner, need_of_mr, sge[i].addr, sge[i].length, &va)) {
      case MrCheck::kOk:
        break;
      case MrCheck::kNoAccess:
        return remote ? kVendorRkeyAccess : kVendorLkeyAccess;
      case MrCheck::kOutOfRange:
        return remote ? kVendorRkeyRange : kVendorLkeyRange;
      default:
        return remote ? kVendorBadRkey : kVendorBadLkey;
    }
    const MrMapping* m = host.FindMrMapping(key, *e);
    if (!m || !AddMrPieces(*m, *e, va, sge[i].length, out)) return kVendorOwnerGone;
  }
  return kVendorNone;
}
void NoteReceiveClaimed(Host& host, PeerQp& peer) {
  if (!peer.srqn) return;
  RecvQueueHeader* h = peer.rq.header();
  uint32_t limit = h->srq_limit.load(std::memory_order_acquire);
  if (limit && peer.rq.Count() < limit &&
      h->srq_limit.compare_exchange_strong(limit, 0, std::memory_order_acq_rel)) {
    host.SrqLimitReached(peer.srqn);
  }
}

bool ClaimReceive(Host& host, PeerQp& peer, ClaimedRecv* r) {
  if (!peer.rq.valid() || !peer.rq.Claim(r)) return false;
  NoteReceiveClaimed(host, peer);
  return true;
}

uint32_t SliceSges(const RecvSge* sge, uint32_t num_sge, uint64_t offset, uint64_t length,
                   RecvSge* out) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < num_sge && length > 0 && n < kMaxSendSge; ++i) {
    if (offset >= sge[i].length) {
      offset -= sge[i].length;
      continue;
    }
    const uint64_t take = std::min<uint64_t>(sge[i].length - offset, length);
    out[n++] = {sge[i].addr + offset, static_cast<uint32_t>(take), sge[i].lkey};
    length -= take;
    offset = 0;
  }
  return n;
}

}  // namespace softverbs::datapath
