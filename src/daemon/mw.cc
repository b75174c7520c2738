// Memory windows (IBA 10.6.7; ibv_alloc_mw(3), ibv_bind_mw(3)): a window is a
// remote key onto a part of an MR with rights of its own. The rules each
// step checks are the IBA's, as rxe's rxe_mw.c applies them; a refused bind
// or invalidate changes nothing.
#include <errno.h>

#include "common/device_limits.h"
#include "daemon/device.h"

namespace softverbs::daemon {

namespace dp = softverbs::datapath;
namespace lim = softverbs::limits;

namespace {

constexpr uint32_t kWindowAccess =
    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

}  // namespace

Mr* Device::FindMrByKey(uint32_t key) {
  auto it = mr_by_index_.find(MrKeyIndex(key));
  if (it == mr_by_index_.end()) return nullptr;
  Mr& mr = mrs_.at(it->second);
  return mr.lkey == key || mr.rkey == key ? &mr : nullptr;
}

Mw* Device::FindMwByKey(uint32_t rkey) {
  auto it = mw_by_index_.find(MrKeyIndex(rkey));
  return it == mw_by_index_.end() ? nullptr : &mws_.at(it->second);
}

void Device::PublishMw(const Mw& mw) {
  if (!table_.valid()) return;
  const Mr& mr = mrs_.at(mw.mr);
  dp::MrEntry* e = table_.MrSlot(mw.rkey);
  e->rkey.store(0);
  e->lkey.store(0);
  e->generation.fetch_add(1);
  e->access.store(mw.access);
  e->owner.store(GroupOf(mw.owner));
  e->registrant.store(mw.owner);
  e->pdn.store(pds_.at(mw.pd).pdn);
  e->iova.store(mw.addr);
  e->length.store(mw.length);
  e->addr.store(mr.addr + (mw.addr - mr.iova));
  e->backed_begin.store(0);
  e->backed_end.store(0);
  e->backed_offset.store(0);
  e->bound_qpn.store(mw.bound_qpn);
  e->window_of.store(mr.lkey, std::memory_order_release);
  // The key last: a reader that sees it sees the rest.
  e->rkey.store(mw.rkey, std::memory_order_release);
}

void Device::UnbindMw(Mw& mw) {
  if (!mw.bound) return;
  if (table_.valid()) {
    dp::MrEntry* e = table_.MrSlot(mw.rkey);
    e->rkey.store(0, std::memory_order_seq_cst);
    e->window_of.store(0, std::memory_order_seq_cst);
  }
  if (auto it = mrs_.find(mw.mr); it != mrs_.end()) it->second.windows--;
  if (mr_gone_) mr_gone_(mw.rkey);
  mw.bound = false;
  mw.mr = 0;
  mw.bound_qpn = 0;
}

Verdict Device::AllocMw(ClientId c, const protocol::AllocMwRequest& req,
                        protocol::AllocMwReply* out) {
  Pd* pd = FindOwned(pds_, c, req.pd);
  if (!pd) return Verdict::Fail(EINVAL, "alloc_mw: no such PD in this context");
  if (req.type != IBV_MW_TYPE_1 && req.type != IBV_MW_TYPE_2) {
    return Verdict::Fail(EINVAL, "alloc_mw: type " + std::to_string(req.type) +
                                     " is neither IBV_MW_TYPE_1 nor IBV_MW_TYPE_2");
  }
  if (KeysInUse() >= static_cast<size_t>(lim::kMaxMw)) {
    return Verdict::Fail(ENOMEM, "device limit max_mw reached (MRs and windows share it)");
  }
  const uint32_t index = AllocateMrIndex();
  if (index == 0) return Verdict::Fail(ENOMEM, "alloc_mw: no key index left");
  Mw mw{NextHandle(), c, req.pd, static_cast<ibv_mw_type>(req.type),
        (index << 8) | (index & 0xff) | 0x80000000u};
  if (table_.valid()) {
    dp::MrEntry* e = table_.MrSlot(mw.rkey);
    e->rkey.store(0);
    e->lkey.store(0);
    e->window_of.store(0);
  }
  mws_[mw.handle] = mw;
  mw_by_index_[index] = mw.handle;
  pd->users++;
  *out = {mw.handle, mw.rkey};
  return Verdict::Ok();
}

Verdict Device::DeallocMw(ClientId c, Handle h) {
  Mw* mw = FindOwned(mws_, c, h);
  if (!mw) return Verdict::Fail(EINVAL, "dealloc_mw: no such memory window in this context");
  UnbindMw(*mw);
  pds_.at(mw->pd).users--;
  mw_by_index_.erase(MrKeyIndex(mw->rkey));
  mws_.erase(h);
  return Verdict::Ok();
}

Verdict Device::BindMw(ClientId c, const protocol::BindMwRequest& req, protocol::BindMwReply* out) {
  *out = {};
  Mw* mw = FindOwned(mws_, c, req.mw);
  if (!mw) return Verdict::Fail(EINVAL, "bind_mw: no such memory window in this context");
  auto q = qps_.find(req.qpn);
  if (q == qps_.end() || !SameGroup(q->second.creator, c)) {
    return Verdict::Fail(EINVAL, "bind_mw: QP 0x" + ToHex(req.qpn) + " is not this context's");
  }
  // C10-72: the QP and the window are in the same PD.
  if (q->second.pd != mw->pd) {
    return Verdict::Fail(EINVAL, "bind_mw: the window's PD is not the QP's");
  }
  // IBV_ACCESS_LOCAL_WRITE means nothing for a window (no local access goes
  // through one) and is accepted, as by rxe and mlx5; rdma-core's test_mr
  // binds with it.
  if (req.access & ~(kWindowAccess | IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ZERO_BASED)) {
    return Verdict::Fail(EINVAL, "bind_mw: mw_access_flags 0x" + ToHex(req.access) +
                                     " has bits other than IBV_ACCESS_REMOTE_* and LOCAL_WRITE");
  }
  if (req.access & IBV_ACCESS_ZERO_BASED) {
    return Verdict::Fail(EINVAL, "bind_mw: zero-based windows are not supported by softverbs");
  }
  if (mw->type == IBV_MW_TYPE_2) {
    // o10-37.2.30: a bound type 2 window is invalidated before it is bound
    // again; o10-37.2.40: it is bound to a range of an MR.
    if (mw->bound) {
      return Verdict::Fail(EINVAL, "bind_mw: the type 2 window is bound; invalidate it first");
    }
    if (req.mr_lkey == 0 || req.length == 0) {
      return Verdict::Fail(EINVAL, "bind_mw: a type 2 window is bound to a non-empty MR range");
    }
  }
  Mr* mr = nullptr;
  if (req.mr_lkey != 0) {
    mr = FindMrByKey(req.mr_lkey);
    if (mr && (mr->lkey != req.mr_lkey || !SameGroup(mr->owner, c))) mr = nullptr;
    if (!mr)
      return Verdict::Fail(EINVAL,
                           "bind_mw: no MR of this context has lkey 0x" + ToHex(req.mr_lkey));
    if (mr->pd != mw->pd) return Verdict::Fail(EPERM, "bind_mw: the MR's PD is not the window's");
    // C10-73: the MR allows windows; C10-74: remote write or atomic rights
    // need a locally writable MR; C10-75: the range lies in the MR.
    if (!(mr->access & IBV_ACCESS_MW_BIND)) {
      return Verdict::Fail(EINVAL, "bind_mw: the MR was not registered with IBV_ACCESS_MW_BIND");
    }
    if ((req.access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
        !(mr->access & IBV_ACCESS_LOCAL_WRITE)) {
      return Verdict::Fail(EINVAL,
                           "bind_mw: remote write or atomic rights on an MR without local write");
    }
    if (req.addr < mr->iova || req.addr - mr->iova > mr->length ||
        req.length > mr->length - (req.addr - mr->iova)) {
      return Verdict::Fail(EINVAL, "bind_mw: the range is not inside the MR");
    }
  } else if (req.addr != 0 || req.length != 0) {
    return Verdict::Fail(EINVAL, "bind_mw: a range without an MR");
  }
  // Apply: the old binding goes before the new key exists.
  UnbindMw(*mw);
  mw->rkey = (mw->rkey & ~0xffu) | (req.rkey & 0xff);
  if (mr) {
    mw->bound = true;
    mw->mr = mr->handle;
    mw->bound_qpn = mw->type == IBV_MW_TYPE_2 ? req.qpn : 0;
    mw->addr = req.addr;
    mw->length = req.length;
    mw->access = req.access & kWindowAccess;
    mr->windows++;
    PublishMw(*mw);
  }
  out->rkey = mw->rkey;
  return Verdict::Ok();
}

Verdict Device::InvalidateMw(ClientId c, const protocol::InvalidateMwRequest& req) {
  auto q = qps_.find(req.qpn);
  if (q == qps_.end() || (!req.remote && !SameGroup(q->second.creator, c))) {
    return Verdict::Fail(EINVAL, "invalidate: QP 0x" + ToHex(req.qpn) + " is not this context's");
  }
  if (Mkey* mkey = FindMkeyByKey(req.rkey)) return InvalidateMkey(c, req, *mkey);
  Mw* mw = FindMwByKey(req.rkey);
  if (!mw || !mw->bound || mw->rkey != req.rkey) {
    return Verdict::Fail(EINVAL,
                         "invalidate: no bound memory window has rkey 0x" + ToHex(req.rkey) +
                             " (an MR is not invalidated: softverbs has no fast-registered MRs)");
  }
  // o10-37.2.26: type 1 windows are invalidated by a bind of length 0.
  if (mw->type != IBV_MW_TYPE_2) {
    return Verdict::Fail(EINVAL, "invalidate: rkey 0x" + ToHex(req.rkey) +
                                     " is a type 1 window (bind it with length 0 instead)");
  }
  if (q->second.pd != mw->pd) {
    return Verdict::Fail(EINVAL, "invalidate: the window is not in the QP's PD");
  }
  if (req.remote && mw->bound_qpn != req.qpn) {
    return Verdict::Fail(EINVAL, "invalidate: the window is bound to another QP");
  }
  UnbindMw(*mw);
  return Verdict::Ok();
}

}  // namespace softverbs::daemon
