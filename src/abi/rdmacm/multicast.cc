// Multicast: rdma_join_multicast, rdma_join_multicast_ex,
// rdma_leave_multicast. The daemon answers a join with MULTICAST_JOIN (the
// group's RoCE MGID); the library attaches the id's QP when the event is
// read (events.cc) and detaches it on leave, as librdmacm does.
#include <errno.h>
#include <string.h>

#include <atomic>
#include <new>

#include "abi/rdmacm/cm_internal.h"

using namespace softverbs::rdmacm;
using softverbs::protocol::CmRequest;
using softverbs::protocol::Op;

#define SV_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

std::atomic<uint64_t> g_next_token{1};

int Join(const char* verb, rdma_cm_id* id, sockaddr* addr, uint16_t join_flags, void* context) {
  Id* priv = IdOf(id);
  CmRequest req = RequestFor(priv);
  if (!ToCmAddr(addr, &req.src)) {
    return RejectMinusOne(EINVAL, "%s: addr is %s", verb,
                          addr ? "not AF_INET or AF_INET6" : "NULL");
  }
  auto* mc = new (std::nothrow) Multicast;
  if (!mc) return RejectMinusOne(ENOMEM, "%s: out of memory", verb);
  mc->context = context;
  mc->join_flags = join_flags;
  memcpy(&mc->addr, addr, AddrLen(addr));
  mc->token = g_next_token++;
  req.token = mc->token;
  {
    std::lock_guard lock(priv->mut);
    priv->groups.push_back(mc);
  }
  if (Call(Op::kCmJoinMcast, req, nullptr)) {
    int err = errno;
    std::lock_guard lock(priv->mut);
    priv->groups.remove(mc);
    delete mc;
    errno = err;
    return -1;
  }
  return Complete(priv);
}

}  // namespace

SV_EXPORT int rdma_join_multicast(rdma_cm_id* id, sockaddr* addr, void* context) {
  if (!id) return RejectMinusOne(EINVAL, "rdma_join_multicast: id is NULL");
  return Join("rdma_join_multicast", id, addr, RDMA_MC_JOIN_FLAG_FULLMEMBER, context);
}

SV_EXPORT int rdma_join_multicast_ex(rdma_cm_id* id, rdma_cm_join_mc_attr_ex* attr, void* context) {
  if (!id || !attr) return RejectMinusOne(EINVAL, "rdma_join_multicast_ex: id or attr is NULL");
  if (attr->comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED) {
    return RejectMinusOne(ENOTSUP, "rdma_join_multicast_ex: comp_mask 0x%x has unknown bits",
                          attr->comp_mask);
  }
  if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS)) {
    return RejectMinusOne(EINVAL, "rdma_join_multicast_ex: comp_mask lacks the address");
  }
  if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ||
      attr->join_flags >= RDMA_MC_JOIN_FLAG_RESERVED) {
    return RejectMinusOne(EINVAL, "rdma_join_multicast_ex: join flags missing or unknown (%u)",
                          attr->join_flags);
  }
  return Join("rdma_join_multicast_ex", id, attr->addr, static_cast<uint16_t>(attr->join_flags),
              context);
}

SV_EXPORT int rdma_leave_multicast(rdma_cm_id* id, sockaddr* addr) {
  if (!id) return RejectMinusOne(EINVAL, "rdma_leave_multicast: id is NULL");
  socklen_t len = AddrLen(addr);
  if (!len) return RejectMinusOne(EINVAL, "rdma_leave_multicast: addr is not AF_INET or AF_INET6");
  Id* priv = IdOf(id);
  Multicast* mc = nullptr;
  {
    std::lock_guard lock(priv->mut);
    for (Multicast* m : priv->groups) {
      if (memcmp(&m->addr, addr, len) == 0) {
        mc = m;
        break;
      }
    }
    if (mc) priv->groups.remove(mc);
  }
  if (!mc) return RejectMinusOne(EADDRNOTAVAIL, "rdma_leave_multicast: the id has not joined it");
  if (id->qp && mc->join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER) {
    ibv_detach_mcast(id->qp, &mc->mgid, mc->mlid);
  }
  CmRequest req = RequestFor(priv);
  ToCmAddr(addr, &req.src);
  int ret = Call(Op::kCmLeaveMcast, req, nullptr);
  {
    std::unique_lock lock(priv->mut);
    priv->cond.wait(lock, [&] { return mc->events_completed >= mc->events_reported; });
  }
  delete mc;
  return ret;
}
