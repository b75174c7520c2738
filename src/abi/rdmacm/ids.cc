// Communication identifiers: rdma_create_id, rdma_destroy_id,
// rdma_migrate_id, rdma_set_option, rdma_bind_addr, rdma_resolve_addr,
// rdma_resolve_route, rdma_listen, rdma_notify, rdma_get_src_port,
// rdma_get_dst_port.
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "abi/rdmacm/cm_internal.h"

using namespace softverbs::rdmacm;
using softverbs::protocol::CmReply;
using softverbs::protocol::CmRequest;
using softverbs::protocol::Op;

namespace {

#define SV_EXPORT extern "C" __attribute__((visibility("default")))

__be16 PortOf(const sockaddr* addr) {
  if (addr->sa_family == AF_INET) return reinterpret_cast<const sockaddr_in*>(addr)->sin_port;
  if (addr->sa_family == AF_INET6) return reinterpret_cast<const sockaddr_in6*>(addr)->sin6_port;
  return 0;
}

}  // namespace

int softverbs::rdmacm::CreateId(rdma_event_channel* channel, rdma_cm_id** id, void* context,
                                rdma_port_space ps, ibv_qp_type qp_type) {
  if (!id) return RejectMinusOne(EINVAL, "rdma_create_id: id is NULL");
  if (InitDevice()) return -1;
  Id* priv = AllocId(channel, context, ps, qp_type);
  if (!priv) return -1;
  CmRequest req{};
  req.channel = ChannelOf(priv->id.channel)->number;
  req.port_space = ps;
  req.qp_type = qp_type;
  CmReply rep{};
  if (Call(Op::kCmCreateId, req, &rep)) {
    int err = errno;
    FreeId(priv);
    errno = err;
    return -1;
  }
  priv->handle = rep.id;
  InsertId(priv);
  *id = &priv->id;
  return 0;
}

SV_EXPORT int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** id, void* context,
                             rdma_port_space ps) {
  ibv_qp_type qp_type = (ps == RDMA_PS_IPOIB || ps == RDMA_PS_UDP) ? IBV_QPT_UD : IBV_QPT_RC;
  return CreateId(channel, id, context, ps, qp_type);
}

SV_EXPORT int rdma_destroy_id(rdma_cm_id* id) {
  if (!id) return RejectMinusOne(EINVAL, "rdma_destroy_id: id is NULL");
  Id* priv = IdOf(id);
  // Events still on the channel for this id are dropped from now on.
  RemoveId(priv);
  CmRequest req = RequestFor(priv);
  if (Call(Op::kCmDestroyId, req, nullptr)) {
    InsertId(priv);
    return -1;
  }
  if (id->event) {
    rdma_ack_cm_event(id->event);
    id->event = nullptr;
  }
  {
    std::unique_lock lock(priv->mut);
    priv->cond.wait(lock, [&] { return priv->events_completed >= priv->events_reported; });
  }
  FreeId(priv);
  return 0;
}

namespace {

// rdma_migrate_id's second step: reads every event the old channel's socket
// holds and gives them back to the device (kCmMigrateDone), which delivers
// the migrating id's on its new channel - before the ones held since the
// first step - and returns the others to the old channel.
void MovePendingEvents(uint32_t id_handle, rdma_event_channel* old_channel) {
  using softverbs::protocol::CmEventRecord;
  using softverbs::protocol::CmMigrateDone;
  constexpr size_t kMaxRecords =
      (softverbs::protocol::kMaxMessageSize - 64 - sizeof(CmMigrateDone)) / sizeof(CmEventRecord);
  std::vector<uint8_t> body(sizeof(CmMigrateDone));
  uint32_t count = 0;
  CmEventRecord rec;
  while (count < kMaxRecords) {
    const ssize_t n = recv(old_channel->fd, &rec, sizeof(rec), MSG_DONTWAIT);
    if (n != static_cast<ssize_t>(sizeof(rec))) break;
    const auto* bytes = reinterpret_cast<const uint8_t*>(&rec);
    body.insert(body.end(), bytes, bytes + sizeof(rec));
    ++count;
  }
  CmMigrateDone done{id_handle, ChannelOf(old_channel)->number, count, 0};
  memcpy(body.data(), &done, sizeof(done));
  softverbs_call(TheDevice().verbs, static_cast<uint16_t>(Op::kCmMigrateDone), body.data(),
                 body.size(), nullptr, 0, nullptr, nullptr, 0);
}

}  // namespace

SV_EXPORT int rdma_migrate_id(rdma_cm_id* id, rdma_event_channel* channel) {
  if (!id) return RejectMinusOne(EINVAL, "rdma_migrate_id: id is NULL");
  Id* priv = IdOf(id);
  if (priv->sync && !channel) {
    return RejectMinusOne(EINVAL, "rdma_migrate_id: id is synchronous already (channel NULL)");
  }
  const bool sync = channel == nullptr;
  if (sync) {
    channel = rdma_create_event_channel();
    if (!channel) return -1;
  }
  CmRequest req = RequestFor(priv);
  req.channel = ChannelOf(channel)->number;
  if (Call(Op::kCmMigrateId, req, nullptr)) {
    int err = errno;
    if (sync) rdma_destroy_event_channel(channel);
    errno = err;
    return -1;
  }
  // The id's events the old channel already holds move with it, as the
  // kernel's ucma moves them (its new events wait in the device meanwhile).
  MovePendingEvents(priv->handle, id->channel);
  if (priv->sync) {
    if (id->event) {
      rdma_ack_cm_event(id->event);
      id->event = nullptr;
    }
    rdma_destroy_event_channel(id->channel);
  }
  std::unique_lock lock(priv->mut);
  priv->sync = sync;
  id->channel = channel;
  priv->cond.wait(lock, [&] { return priv->events_completed >= priv->events_reported; });
  return 0;
}

SV_EXPORT int rdma_set_option(rdma_cm_id* id, int level, int optname, void* optval, size_t optlen) {
  if (!id) return RejectMinusOne(EINVAL, "rdma_set_option: id is NULL");
  if (!optval) return RejectMinusOne(EINVAL, "rdma_set_option: optval is NULL");
  Id* priv = IdOf(id);
  if (level == RDMA_OPTION_ID) {
    switch (optname) {
      case RDMA_OPTION_ID_TOS:
      case RDMA_OPTION_ID_ACK_TIMEOUT:
        if (optlen != sizeof(uint8_t)) {
          return RejectMinusOne(EINVAL, "rdma_set_option: option %d takes a uint8_t, not %zu bytes",
                                optname, optlen);
        }
        if (optname == RDMA_OPTION_ID_TOS) {
          priv->tos = *static_cast<uint8_t*>(optval);
          priv->tos_set = true;
        } else {
          priv->ack_timeout = *static_cast<uint8_t*>(optval);
          priv->ack_timeout_set = true;
        }
        return 0;
      case RDMA_OPTION_ID_REUSEADDR:
      case RDMA_OPTION_ID_AFONLY: {
        if (optlen != sizeof(int)) {
          return RejectMinusOne(EINVAL, "rdma_set_option: option %d takes an int, not %zu bytes",
                                optname, optlen);
        }
        uint32_t bit = optname == RDMA_OPTION_ID_REUSEADDR ? softverbs::protocol::kCmReuseAddr
                                                           : softverbs::protocol::kCmAfOnly;
        if (*static_cast<int*>(optval)) {
          priv->option_flags |= bit;
        } else {
          priv->option_flags &= ~bit;
        }
        return 0;
      }
      default:
        break;
    }
  } else if (level == RDMA_OPTION_IB && optname == RDMA_OPTION_IB_PATH) {
    return RejectMinusOne(EOPNOTSUPP,
                          "rdma_set_option: RDMA_OPTION_IB_PATH is not supported by softverbs "
                          "(routes come from rdma_resolve_route)");
  }
  return RejectMinusOne(ENOSYS, "rdma_set_option: unknown option level %d name %d", level, optname);
}

SV_EXPORT int rdma_bind_addr(rdma_cm_id* id, sockaddr* addr) {
  if (!id) return RejectMinusOne(EINVAL, "rdma_bind_addr: id is NULL");
  Id* priv = IdOf(id);
  CmRequest req = RequestFor(priv);
  if (!ToCmAddr(addr, &req.src)) {
    return RejectMinusOne(EINVAL, "rdma_bind_addr: addr is %s",
                          addr ? "not AF_INET or AF_INET6" : "NULL");
  }
  CmReply rep{};
  if (Call(Op::kCmBindAddr, req, &rep)) return -1;
  ApplyRoute(priv, rep.route);
  return 0;
}

SV_EXPORT int rdma_resolve_addr(rdma_cm_id* id, sockaddr* src_addr, sockaddr* dst_addr,
                                int timeout_ms) {
  if (!id) return RejectMinusOne(EINVAL, "rdma_resolve_addr: id is NULL");
  Id* priv = IdOf(id);
  CmRequest req = RequestFor(priv);
  if (!ToCmAddr(dst_addr, &req.dst)) {
    return RejectMinusOne(EINVAL, "rdma_resolve_addr: dst_addr is %s",
                          dst_addr ? "not AF_INET or AF_INET6" : "NULL");
  }
  if (src_addr && !ToCmAddr(src_addr, &req.src)) {
    return RejectMinusOne(EINVAL, "rdma_resolve_addr: src_addr is not AF_INET or AF_INET6");
  }
  req.timeout_ms = timeout_ms;
  CmReply rep{};
  if (Call(Op::kCmResolveAddr, req, &rep)) return -1;
  ApplyRoute(priv, rep.route);
  memcpy(&id->route.addr.dst_storage, dst_addr, AddrLen(dst_addr));
  if (rep.route.dst.sin6_family) {
    memcpy(&id->route.addr.dst_storage, &rep.route.dst,
           AddrLen(reinterpret_cast<const sockaddr*>(&rep.route.dst)));
  }
  return Complete(priv);
}

SV_EXPORT int rdma_resolve_route(rdma_cm_id* id, int timeout_ms) {
  if (!id) return RejectMinusOne(EINVAL, "rdma_resolve_route: id is NULL");
  Id* priv = IdOf(id);
  CmRequest req = RequestFor(priv);
  req.timeout_ms = timeout_ms;
  if (Call(Op::kCmResolveRoute, req, nullptr)) return -1;
  return Complete(priv);
}

SV_EXPORT int rdma_listen(rdma_cm_id* id, int backlog) {
  if (!id) return RejectMinusOne(EINVAL, "rdma_listen: id is NULL");
  Id* priv = IdOf(id);
  CmRequest req = RequestFor(priv);
  req.backlog = backlog;
  CmReply rep{};
  if (Call(Op::kCmListen, req, &rep)) return -1;
  ApplyRoute(priv, rep.route);
  return 0;
}

SV_EXPORT int rdma_notify(rdma_cm_id* id, ibv_event_type event) {
  if (!id) return RejectMinusOne(EINVAL, "rdma_notify: id is NULL");
  CmRequest req = RequestFor(IdOf(id));
  req.qp_state = event;
  return Call(Op::kCmNotify, req, nullptr);
}

SV_EXPORT __be16 rdma_get_src_port(rdma_cm_id* id) {
  return id ? PortOf(&id->route.addr.src_addr) : 0;
}

SV_EXPORT __be16 rdma_get_dst_port(rdma_cm_id* id) {
  return id ? PortOf(&id->route.addr.dst_addr) : 0;
}
