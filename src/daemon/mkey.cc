// mlx5's indirect memory keys (mlx5dv_create_mkey(3), mlx5dv_wr_mr_list(3),
// mlx5dv_wr_mkey_configure(3)): a key of a PD whose zero-based range is made
// of pieces of MRs, given by a UMR work request and taken away by an
// invalidation (LOCAL_INV, or SEND_WITH_INV if the key was created with
// MLX5DV_MKEY_INIT_ATTR_FLAGS_REMOTE_INVALIDATE). Each step checks, then
// applies; a refused one changes nothing. The layout lives in the device
// table (datapath/layout.h: MkeyLayout), the bytes stay the MRs': every
// access checks the MRs beneath again (datapath/keyed_access.h). A UMR of a
// memory window's key (libmlx5's bind WQE) is a bind (BindMwByUmr).
#include <errno.h>

#include "common/device_limits.h"
#include "daemon/device.h"
#include "datapath/block_signature.h"
#include "datapath/mkey_layout.h"

namespace softverbs::daemon {

namespace dp = softverbs::datapath;
namespace lim = softverbs::limits;

namespace {

constexpr uint32_t kMkeyAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

}  // namespace

Mkey* Device::FindMkeyByKey(uint32_t key) {
  auto it = mkey_by_index_.find(MrKeyIndex(key));
  if (it == mkey_by_index_.end()) return nullptr;
  Mkey& mkey = mkeys_.at(it->second);
  return mkey.lkey == key || mkey.rkey == key ? &mkey : nullptr;
}

void Device::UnpublishMkey(Mkey& mkey) {
  if (mkey.configured && table_.valid()) {
    dp::MrEntry* e = table_.MrSlot(mkey.lkey);
    e->rkey.store(0, std::memory_order_seq_cst);
    e->lkey.store(0, std::memory_order_seq_cst);
  }
  mkey.configured = false;
}

Verdict Device::CreateMkey(ClientId c, const protocol::CreateMkeyRequest& req,
                           protocol::CreateMkeyReply* out) {
  *out = {};
  Pd* pd = FindOwned(pds_, c, req.pd);
  if (!pd) return Verdict::Fail(EINVAL, "create_mkey: no such PD in this context");
  if (req.max_entries > lim::kMaxMkeyEntries) {
    return Verdict::Fail(EINVAL, "create_mkey: max_entries " + std::to_string(req.max_entries) +
                                     " is above softverbs' " +
                                     std::to_string(lim::kMaxMkeyEntries));
  }
  if (req.flags & ~(protocol::kMkeyRemoteInvalidate | protocol::kMkeySignature)) {
    return Verdict::Fail(EINVAL, "create_mkey: flags 0x" + ToHex(req.flags) + " has unknown bits");
  }
  if (KeysInUse() >= static_cast<size_t>(lim::kMaxMr)) {
    return Verdict::Fail(ENOMEM,
                         "device limit max_mr reached (MRs, memory windows and memory keys "
                         "share it)");
  }
  const uint32_t index = AllocateMrIndex();
  if (index == 0) return Verdict::Fail(ENOMEM, "create_mkey: no key index left");
  // As mlx5's: the low 8 bits 0 (no tag); the rkey has bit 31, as every
  // rkey here, so a local key never works remotely.
  Mkey mkey{NextHandle(), c, req.pd, index << 8, (index << 8) | 0x80000000u, req.max_entries};
  mkey.remote_invalidate = req.flags & protocol::kMkeyRemoteInvalidate;
  mkey.signature = req.flags & protocol::kMkeySignature;
  if (table_.valid()) {
    dp::MrEntry* e = table_.MrSlot(mkey.lkey);
    e->rkey.store(0);
    e->lkey.store(0);
    e->window_of.store(0);
  }
  mkeys_[mkey.handle] = mkey;
  mkey_by_index_[index] = mkey.handle;
  pd->users++;
  *out = {mkey.handle, mkey.lkey, mkey.rkey};
  return Verdict::Ok();
}

Verdict Device::DestroyMkey(ClientId c, Handle h) {
  Mkey* mkey = FindOwned(mkeys_, c, h);
  if (!mkey) return Verdict::Fail(EINVAL, "destroy_mkey: no such memory key in this context");
  UnpublishMkey(*mkey);
  pds_.at(mkey->pd).users--;
  mkey_by_index_.erase(MrKeyIndex(mkey->lkey));
  mkeys_.erase(h);
  return Verdict::Ok();
}

Verdict Device::ConfigureMkey(ClientId c, const protocol::ConfigureMkeyRequest& req) {
  auto q = qps_.find(req.qpn);
  if (q == qps_.end() || !SameGroup(q->second.creator, c)) {
    return Verdict::Fail(EINVAL, "umr: QP 0x" + ToHex(req.qpn) + " is not this context's");
  }
  Mkey* mkey = FindMkeyByKey(req.mkey);
  if (!mkey) {
    if (Mw* mw = FindMwByKey(req.mkey); mw && mw->rkey == req.mkey) {
      return BindMwByUmr(c, req, *mw);
    }
  }
  if (!mkey || mkey->lkey != req.mkey || !SameGroup(mkey->owner, c)) {
    return Verdict::Fail(EINVAL,
                         "umr: no memory key of this context has lkey 0x" + ToHex(req.mkey));
  }
  if (q->second.pd != mkey->pd) {
    return Verdict::Fail(EINVAL, "umr: the memory key's PD is not the QP's");
  }
  if (req.sets &
      ~uint32_t{dp::kUmrSetsAccess | dp::kUmrSetsLayout | dp::kUmrSetsSig | dp::kUmrResetsSig}) {
    return Verdict::Fail(EINVAL, "umr: sets 0x" + ToHex(req.sets) + " has unknown bits");
  }
  const bool sets_sig = req.sets & dp::kUmrSetsSig;
  const bool resets_sig = req.sets & dp::kUmrResetsSig;
  if ((sets_sig || resets_sig) && !mkey->signature) {
    return Verdict::Fail(EINVAL,
                         "umr: a block signature for a memory key created without "
                         "MLX5DV_MKEY_INIT_ATTR_FLAGS_BLOCK_SIGNATURE");
  }
  if (sets_sig) {
    if (const char* problem = dp::SigAttrProblem(req.sig)) {
      return Verdict::Fail(EINVAL, std::string("umr: block signature: ") + problem);
    }
  }
  const bool sets_access = req.sets & dp::kUmrSetsAccess;
  const bool sets_layout = req.sets & dp::kUmrSetsLayout;
  if (sets_access && (req.access & ~kMkeyAccess)) {
    return Verdict::Fail(EINVAL, "umr: access 0x" + ToHex(req.access) +
                                     " has bits other than LOCAL_WRITE and REMOTE_*");
  }
  if (sets_layout && req.num_entries > mkey->max_entries) {
    return Verdict::Fail(EINVAL, "umr: " + std::to_string(req.num_entries) +
                                     " entries, the memory key was created for " +
                                     std::to_string(mkey->max_entries));
  }
  const uint32_t repeat_count = sets_layout ? req.repeat_count : mkey->repeat_count;
  const uint32_t num_entries =
      sets_layout ? req.num_entries : static_cast<uint32_t>(mkey->layout.size());
  const dp::UmrEntry* entries = sets_layout ? req.entry : mkey->layout.data();
  // The MRs are checked again, whichever UMR named them: one may be gone.
  for (uint32_t i = 0; i < num_entries; ++i) {
    const dp::UmrEntry& entry = entries[i];
    if (entry.bytes_count == 0) continue;
    const Mr* mr = FindMrByKey(entry.lkey);
    if (!mr || mr->lkey != entry.lkey || !SameGroup(mr->owner, c)) {
      return Verdict::Fail(EINVAL, "umr: entry " + std::to_string(i) + ": no MR of this context " +
                                       "has lkey 0x" + ToHex(entry.lkey));
    }
    if (mr->pd != mkey->pd) {
      return Verdict::Fail(
          EINVAL, "umr: entry " + std::to_string(i) + ": the MR's PD is not the memory key's");
    }
    // The entry's last block ends inside the MR.
    const unsigned __int128 last_end =
        static_cast<unsigned __int128>(entry.addr) +
        static_cast<unsigned __int128>(repeat_count ? repeat_count - 1 : 0) * entry.stride +
        entry.bytes_count;
    if (entry.addr < mr->iova || last_end > static_cast<unsigned __int128>(mr->iova) + mr->length) {
      return Verdict::Fail(EINVAL, "umr: entry " + std::to_string(i) + " reaches outside its MR");
    }
  }
  uint64_t block = 0;
  for (uint32_t i = 0; i < num_entries; ++i) block += entries[i].bytes_count;
  if (block != 0 && repeat_count > UINT64_MAX / block) {
    return Verdict::Fail(EINVAL, "umr: the layout addresses more than 2^64 bytes");
  }
  if (!table_.valid()) return Verdict::Fail(EIO, "umr: the device has no key table");
  // Apply: the old layout's keys go before the new layout is written.
  if (sets_access) mkey->access = req.access;
  if (sets_layout) {
    mkey->layout.assign(req.entry, req.entry + req.num_entries);
    mkey->repeat_count = req.repeat_count;
  }
  if (sets_sig) {
    mkey->sig = req.sig;
    mkey->sig.enabled = 1;
  } else if (resets_sig) {
    mkey->sig = dp::SigAttr{};
  }
  // A UMR arms the key's signature errors again (libmlx5 writes the error
  // count it has seen into the key with every UMR).
  mkey->sig_armed = true;
  // An access through a signature key sees its wire domain: each whole
  // block with the wire's signature after it.
  const uint64_t mem_length = block * repeat_count;
  const uint64_t length =
      mkey->sig.enabled ? dp::SigGeometryOf(mkey->sig, mem_length).wire_length() : mem_length;
  dp::MrEntry* e = table_.MrSlot(mkey->lkey);
  e->rkey.store(0, std::memory_order_seq_cst);
  e->lkey.store(0, std::memory_order_seq_cst);
  e->generation.fetch_add(1);
  dp::WriteMkeyLayout(table_.MkeyLayoutSlot(mkey->lkey), mkey->layout.data(),
                      static_cast<uint32_t>(mkey->layout.size()), mkey->repeat_count, mkey->sig);
  e->access.store(mkey->access | dp::kMrIndirect);
  e->owner.store(GroupOf(mkey->owner));
  e->registrant.store(mkey->owner);
  e->pdn.store(pds_.at(mkey->pd).pdn);
  e->iova.store(0);
  e->length.store(length);
  e->addr.store(0);
  e->backed_begin.store(0);
  e->backed_end.store(0);
  e->backed_offset.store(0);
  e->window_of.store(0);
  e->bound_qpn.store(0);
  // Keys last: a reader that sees them sees the rest.
  e->rkey.store(mkey->rkey, std::memory_order_release);
  e->lkey.store(mkey->lkey, std::memory_order_release);
  mkey->configured = true;
  return Verdict::Ok();
}

// libmlx5's bind of a memory window is a UMR WQE of the window's key: one
// KLM (the MR's lkey, the range), the window's access, the new key's tag
// (ibv_bind_mw(3)'s checks, by BindMw).
Verdict Device::BindMwByUmr(ClientId c, const protocol::ConfigureMkeyRequest& req, Mw& mw) {
  if (!(req.sets & dp::kUmrSetsLayout) || req.num_entries != 1) {
    return Verdict::Fail(
        EINVAL, "umr: a bind of memory window 0x" + ToHex(req.mkey) + " names one range (one KLM)");
  }
  protocol::BindMwRequest bind{mw.handle,         req.qpn,
                               req.entry[0].lkey, (mw.rkey & ~0xffu) | req.new_tag,
                               req.entry[0].addr, req.entry[0].bytes_count,
                               req.access,        0};
  protocol::BindMwReply out{};
  return BindMw(c, bind, &out);
}

void Device::ReportSigError(uint32_t key, const dp::SigError& err) {
  Mkey* mkey = FindMkeyByKey(key);
  if (!mkey || !mkey->configured || !mkey->sig.enabled || !mkey->sig_armed) return;
  mkey->sig_armed = false;
  mkey->sig_error_kept = true;
  mkey->sig_error = err;
}

Verdict Device::CheckMkey(ClientId c, Handle h, protocol::CheckMkeyReply* out) {
  *out = {};
  Mkey* mkey = FindOwned(mkeys_, c, h);
  if (!mkey) return Verdict::Fail(EINVAL, "mkey_check: no such memory key in this context");
  if (mkey->sig_error_kept) {
    out->has_error = 1;
    out->error = mkey->sig_error;
    mkey->sig_error_kept = false;
  }
  return Verdict::Ok();
}

Verdict Device::InvalidateMkey(ClientId c, const protocol::InvalidateMwRequest& req, Mkey& mkey) {
  const Qp& qp = qps_.at(req.qpn);
  if (req.remote) {
    // A SEND_WITH_INV names the rkey of a key created for it, of the PD and
    // the owner of the QP it arrived on.
    if (!mkey.remote_invalidate || req.rkey != mkey.rkey) {
      return Verdict::Fail(EINVAL, "invalidate: memory key 0x" + ToHex(req.rkey) +
                                       " may not be invalidated remotely (it was not created with "
                                       "MLX5DV_MKEY_INIT_ATTR_FLAGS_REMOTE_INVALIDATE)");
    }
    if (!SameGroup(qp.creator, mkey.owner)) {
      return Verdict::Fail(
          EINVAL, "invalidate: memory key 0x" + ToHex(req.rkey) + " is not of the QP's context");
    }
  } else if (!SameGroup(mkey.owner, c)) {
    return Verdict::Fail(EINVAL,
                         "invalidate: memory key 0x" + ToHex(req.rkey) + " is not this context's");
  }
  if (qp.pd != mkey.pd) {
    return Verdict::Fail(EINVAL, "invalidate: the memory key is not in the QP's PD");
  }
  UnpublishMkey(mkey);
  return Verdict::Ok();
}

}  // namespace softverbs::daemon
