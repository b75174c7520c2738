#include "datapath/keyed_access.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>

#include "datapath/mkey_layout.h"
#include "datapath/sig_access.h"

namespace softverbs::datapath {

namespace {

VendorError KeyError(MrCheck check, bool remote) {
  switch (check) {
    case MrCheck::kOk:
      return kVendorNone;
    case MrCheck::kNoAccess:
      return remote ? kVendorRkeyAccess : kVendorLkeyAccess;
    case MrCheck::kOutOfRange:
      return remote ? kVendorRkeyRange : kVendorLkeyRange;
    default:
      return remote ? kVendorBadRkey : kVendorBadLkey;
  }
}

// Whether this host's access to slot e takes an in-flight count: not its
// own memory under its execution gate (Host::OwnAccessesFenced), nor any
// access of the device (Host::ChangesKeysBetweenAccesses).
bool Counted(Host& host, const MrEntry& e, uint32_t owner) {
  const bool own = owner == host.client_id() && host.OwnAccessesFenced() && host.OwnsMemory(e);
  return !own && !host.ChangesKeysBetweenAccesses();
}

// [addr, addr + len) of the MR whose lkey an indirect key's layout names:
// a local access of the key's owner and PD; errors reported as the
// access's (`remote`: as the rkey's).
VendorError AddLayoutPiece(Host& host, MrGuards& guards, uint32_t lkey, bool remote, uint32_t pdn,
                           uint32_t owner, uint32_t need, uint64_t addr, uint64_t len,
                           PieceList* out) {
  MrEntry* e = host.table().MrSlot(lkey);
  if (Counted(host, *e, owner) && !guards.Enter(host.AccessRecord(lkey))) {
    return KeyError(MrCheck::kBadKey, remote);
  }
  uint64_t va = 0;
  // An indirect key beneath another (kIndirect) is not walked: a bad key.
  if (MrCheck check = CheckMrAccess(*e, lkey, false, pdn, owner, need, addr, len, &va);
      check != MrCheck::kOk) {
    return KeyError(check, remote);
  }
  const MrMapping* m = host.FindMrMapping(lkey, *e);
  if (!m || !AddMrPieces(*m, *e, va, len, out)) return kVendorOwnerGone;
  return kVendorNone;
}

// [addr, addr + len) of indirect key `key` (slot e, whose own checks
// passed): through the MRs of its layout, copied now. The layout may have
// changed since the key check (a UMR that keeps the key): the copy's bounds
// are checked again.
VendorError AddIndirectPieces(Host& host, MrGuards& guards, uint32_t key, bool remote, uint32_t pdn,
                              uint32_t owner, uint32_t need, uint64_t addr, uint64_t len,
                              PieceList* out) {
  MkeyLayoutCopy layout;
  if (!ReadMkeyLayout(*host.table().MkeyLayoutSlot(key), &layout)) {
    return KeyError(MrCheck::kBadKey, remote);
  }
  const uint32_t need_of_mr =
      (need & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC))
          ? IBV_ACCESS_LOCAL_WRITE
          : 0;
  // The key's memory domain: its layout's ranges, each MR checked.
  class LayoutMemory final : public KeyMemory {
   public:
    LayoutMemory(const MkeyLayoutCopy& layout, Host& host, MrGuards& guards, bool remote,
                 uint32_t pdn, uint32_t owner, uint32_t need)
        : layout_(layout),
          host_(host),
          guards_(guards),
          remote_(remote),
          pdn_(pdn),
          owner_(owner),
          need_(need) {}
    VendorError Add(uint64_t offset, uint64_t len, PieceList* out) override {
      VendorError why = kVendorNone;
      const bool whole = ForEachMkeyPiece(
          layout_, offset, len, [&](const UmrEntry& entry, uint64_t at, uint64_t bytes) {
            why = AddLayoutPiece(host_, guards_, entry.lkey, remote_, pdn_, owner_, need_, at,
                                 bytes, out);
            return why == kVendorNone;
          });
      if (why != kVendorNone) return why;
      return whole ? kVendorNone : KeyError(MrCheck::kOutOfRange, remote_);
    }

   private:
    const MkeyLayoutCopy& layout_;
    Host& host_;
    MrGuards& guards_;
    const bool remote_;
    const uint32_t pdn_, owner_, need_;
  } memory(layout, host, guards, remote, pdn, owner, need_of_mr);
  if (!layout.sig.enabled) return memory.Add(addr, len, out);
  // A signature key: an atomic through it has no meaning (mlx5 refuses it).
  if (need & IBV_ACCESS_REMOTE_ATOMIC) return KeyError(MrCheck::kNoAccess, remote);
  return AddSignedPieces(host, key, layout.sig, layout.length, need_of_mr != 0, addr, len, memory,
                         KeyError(MrCheck::kOutOfRange, remote), out);
}

}  // namespace

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
    if (Counted(host, *e, owner) && !guards.Enter(host.AccessRecord(key))) {
      return KeyError(MrCheck::kBadKey, remote);
    }
    uint64_t va = 0;
    const MrCheck check =
        CheckMrAccess(*e, key, by_rkey, pdn, owner, need_of_mr, sge[i].addr, sge[i].length, &va);
    if (check == MrCheck::kIndirect) {
      if (VendorError why = AddIndirectPieces(host, guards, key, remote, pdn, owner, need,
                                              sge[i].addr, sge[i].length, out)) {
        return why;
      }
      continue;
    }
    if (check != MrCheck::kOk) return KeyError(check, remote);
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
