#include "daemon/device.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/device_limits.h"
#include "common/log.h"
#include "common/port_facts.h"
#include "datapath/cq_ring.h"
#include "verbs/mr_rules.h"

namespace softverbs::daemon {

namespace lim = softverbs::limits;

namespace {

// The registration rules are shared with the library, which checks them
// before it touches any memory (verbs/mr_rules.h).
Verdict CheckMrAccess(uint32_t access) {
  verbs::MrRuleVerdict v = verbs::CheckMrAccess(access);
  return v.ok() ? Verdict::Ok() : Verdict::Fail(v.err, v.why);
}

Verdict CheckMrRange(uint64_t addr, uint64_t length) {
  verbs::MrRuleVerdict v = verbs::CheckMrRange(addr, length, lim::kMaxMrSize);
  return v.ok() ? Verdict::Ok() : Verdict::Fail(v.err, v.why);
}

}  // namespace

Device::Device()
    : gids_(BuildGidTable()),
      active_mtu_(MtuForInterface(gids_.mtu)),
      next_cqn_(lim::kFirstCqn),
      next_srqn_(lim::kFirstSrqn) {
  const char* loopback = getenv("SOFTVERBS_ROCE_LOOPBACK");
  gids_.wire_loopback = loopback && strcmp(loopback, "1") == 0;
  if (gids_.wire_loopback) Log("wire loopback: paths between this host's GIDs use RoCE v2 too");
  // Tests make the device let go of kept memfds early (the library passes
  // them again): integration.it_pd_mr_kept_backings_limit.
  if (const char* max = getenv("SOFTVERBS_TEST_MAX_KEPT_BACKINGS"); max && *max) {
    max_kept_backings_ = strtoul(max, nullptr, 10);
  }
  CreateDeviceTable();
}

void Device::AddClient(const ClientInfo& info) {
  clients_[info.id] = info;
}

void Device::CountDroppedEvent(ClientId client) {
  if (auto it = clients_.find(client); it != clients_.end()) ++it->second.async_events_dropped;
}

void Device::PostEvent(ClientId c, ibv_event_type type, protocol::EventElement element, Handle h,
                       uint32_t number) {
  if (!event_sink_) return;
  protocol::AsyncEventRecord rec{static_cast<uint32_t>(type), static_cast<uint32_t>(element), h,
                                 number, 0};
  event_sink_(c, rec);
}

// ---- protection domains ----------------------------------------------------

Verdict Device::AllocPd(ClientId c, protocol::AllocPdReply* out) {
  if (pds_.size() >= static_cast<size_t>(lim::kMaxPd)) {
    return Verdict::Fail(ENOMEM, "device limit max_pd reached");
  }
  Pd pd{NextHandle(), c, next_pdn_++};
  pds_[pd.handle] = pd;
  *out = {pd.handle, pd.pdn};
  return Verdict::Ok();
}

Verdict Device::DeallocPd(ClientId c, Handle h) {
  Pd* pd = FindOwned(pds_, c, h);
  if (!pd) return Verdict::Fail(EINVAL, "no such PD in this context");
  if (pd->users > 0) {
    return Verdict::Fail(
        EBUSY, "PD is still used by " + std::to_string(pd->users) + " MR/QP/SRQ/AH object(s)");
  }
  pds_.erase(h);
  return Verdict::Ok();
}

// ---- memory regions ----------------------------------------------------------

Verdict Device::RegMr(ClientId c, const protocol::RegMrRequest& req, protocol::RegMrReply* out,
                      bool zero_length_ok) {
  Pd* pd = FindOwned(pds_, c, req.pd);
  if (!pd) return Verdict::Fail(EINVAL, "reg_mr: no such PD in this context");
  if (!(zero_length_ok && req.length == 0)) {
    verbs::MrRuleVerdict rule =
        verbs::CheckMrRegistration(req.addr, req.length, req.access, lim::kMaxMrSize);
    if (!rule.ok()) return Verdict::Fail(rule.err, rule.why);
  }
  if (Verdict v = CheckMrAccess(req.access); !v.ok()) return v;
  if (KeysInUse() >= static_cast<size_t>(lim::kMaxMr)) {
    return Verdict::Fail(ENOMEM,
                         "device limit max_mr reached (MRs, memory windows and memory keys "
                         "share it)");
  }
  // Keys: bits 8..30 the MR index, bit 31 set in the rkey only, low byte a
  // generation. lkey and rkey are distinct so a local key never works remotely.
  const uint32_t index = AllocateMrIndex();
  if (index == 0) return Verdict::Fail(ENOMEM, "reg_mr: no MR key index left");
  uint32_t key = (index << 8) | (index & 0xff);
  Mr mr{NextHandle(), c,          req.pd, req.addr,         req.length,
        req.iova,     req.access, key,    key | 0x80000000u};
  mrs_[mr.handle] = mr;
  mr_by_index_[index] = mr.handle;
  pd->users++;
  PublishMr(mr);
  *out = {mr.handle, mr.lkey, mr.rkey, 0};
  return Verdict::Ok();
}

Verdict Device::ReregMr(ClientId c, const protocol::ReregMrRequest& req,
                        protocol::RegMrReply* out) {
  Mr* mr = FindOwned(mrs_, c, req.mr);
  if (!mr) return Verdict::Fail(EINVAL, "rereg_mr: no such MR in this context");
  if (mr->windows > 0) {
    return Verdict::Fail(EBUSY, "rereg_mr: " + std::to_string(mr->windows) +
                                    " memory window(s) are bound to the MR");
  }
  constexpr uint32_t kKnown =
      IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS;
  if (req.flags == 0 || (req.flags & ~kKnown)) {
    return Verdict::Fail(EINVAL,
                         "rereg_mr: flags must be a non-empty set of IBV_REREG_MR_CHANGE_*");
  }
  Pd* new_pd = nullptr;
  if (req.flags & IBV_REREG_MR_CHANGE_PD) {
    new_pd = FindOwned(pds_, c, req.pd);
    if (!new_pd) return Verdict::Fail(EINVAL, "rereg_mr: no such PD in this context");
  }
  if (req.flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
    if (Verdict v = CheckMrRange(req.addr, req.length); !v.ok()) return v;
  }
  if (req.flags & IBV_REREG_MR_CHANGE_ACCESS) {
    if (Verdict v = CheckMrAccess(req.access); !v.ok()) return v;
  }
  // Apply. Peers must stop using the old keys before the new ones exist.
  UnpublishMr(*mr);
  if (new_pd) {
    pds_[mr->pd].users--;
    new_pd->users++;
    mr->pd = new_pd->handle;
  }
  if (req.flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
    // The old backing no longer describes the range: peers fall back to
    // the owner's /proc/self/mem for the new one.
    ReleaseBacking(*mr);
    mr->addr = req.addr;
    mr->iova = req.addr;
    mr->length = req.length;
  }
  if (req.flags & IBV_REREG_MR_CHANGE_ACCESS) mr->access = req.access;
  // A new translation gets new keys (mlx5 makes a new mkey): the old rkey
  // must stop working. A PD or access change keeps them, as mlx5 (UMR) and
  // rxe do; from now on they carry the new rights (rdma-core's
  // test_mr_rereg_access uses the rkey it learnt before the rereg).
  if (req.flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
    uint32_t gen = ((mr->lkey & 0xff) + 1) & 0xff;
    mr->lkey = (mr->lkey & ~0xffu) | gen;
    mr->rkey = mr->lkey | 0x80000000u;
  }
  PublishMr(*mr);
  *out = {mr->handle, mr->lkey, mr->rkey, 0};
  return Verdict::Ok();
}

Verdict Device::DeregMr(ClientId c, Handle h, uint32_t* peers_inside) {
  Mr* mr = FindOwned(mrs_, c, h);
  if (!mr) return Verdict::Fail(EINVAL, "dereg_mr: no such MR in this context");
  // IBA 10.6.7.2.6 (as rxe): not while windows are bound to it.
  if (mr->windows > 0) {
    return Verdict::Fail(EINVAL, "dereg_mr: " + std::to_string(mr->windows) +
                                     " memory window(s) are bound to the MR");
  }
  pds_[mr->pd].users--;
  if (mr->dm) dms_.at(mr->dm).mrs--;
  UnpublishMr(*mr);
  if (peers_inside) *peers_inside = MrPeersInside(mr->lkey);
  ReleaseBacking(*mr);
  mr_by_index_.erase(MrKeyIndex(mr->lkey));
  mrs_.erase(h);
  return Verdict::Ok();
}

// ---- completion queues --------------------------------------------------------

Verdict Device::CreateCq(ClientId c, const protocol::CreateCqRequest& req,
                         protocol::CreateCqReply* out) {
  if (req.cqe < 1 || req.cqe > static_cast<uint32_t>(lim::kMaxCqe)) {
    return Verdict::Fail(EINVAL, "cqe " + std::to_string(req.cqe) + " is outside 1.." +
                                     std::to_string(lim::kMaxCqe));
  }
  if (req.comp_vector >= static_cast<uint32_t>(lim::kNumCompVectors)) {
    return Verdict::Fail(EINVAL, "comp_vector " + std::to_string(req.comp_vector) +
                                     " is not below num_comp_vectors " +
                                     std::to_string(lim::kNumCompVectors));
  }
  if (cqs_.size() >= static_cast<size_t>(lim::kMaxCq)) {
    return Verdict::Fail(ENOMEM, "device limit max_cq reached");
  }
  const auto cqe = static_cast<uint32_t>(lim::RoundedCqe(static_cast<int>(req.cqe)));
  Cq cq{NextHandle(), c, next_cqn_, cqe, req.comp_vector};
  cq.ring_fd = MakeCqFile(cqe, cq.cqn);
  if (cq.ring_fd < 0) return Verdict::Fail(ENOMEM, "create_cq: cannot make the CQ ring");
  next_cqn_++;
  cqs_[cq.handle] = cq;
  *out = {cq.handle, cq.cqn, cq.cqe, 0};
  return Verdict::Ok();
}

Verdict Device::ResizeCq(ClientId c, const protocol::ResizeCqRequest& req,
                         protocol::ResizeCqReply* out) {
  Cq* cq = FindVerbsCq(c, req.handle);
  if (!cq) return Verdict::Fail(EINVAL, "resize_cq: no such CQ in this context");
  if (req.cqe < 1 || req.cqe > static_cast<uint32_t>(lim::kMaxCqe)) {
    return Verdict::Fail(EINVAL, "cqe " + std::to_string(req.cqe) + " is outside 1.." +
                                     std::to_string(lim::kMaxCqe));
  }
  // The ring is resized in place by the owner's library, which holds it
  // closed while this runs and checks the completions outstanding
  // (datapath/cq_ring.h).
  cq->cqe = static_cast<uint32_t>(lim::RoundedCqe(static_cast<int>(req.cqe)));
  *out = {cq->cqe, 0};
  return Verdict::Ok();
}

Verdict Device::DestroyCq(ClientId c, Handle h) {
  Cq* cq = FindVerbsCq(c, h);
  if (!cq) return Verdict::Fail(EINVAL, "destroy_cq: no such CQ in this context");
  if (cq->users > 0) {
    return Verdict::Fail(EBUSY,
                         "CQ is still used by " + std::to_string(cq->users) + " QP/SRQ object(s)");
  }
  if (cq->ring_fd >= 0) close(cq->ring_fd);
  if (cq->event_fd >= 0) close(cq->event_fd);
  cqs_.erase(h);
  return Verdict::Ok();
}

}  // namespace softverbs::daemon
