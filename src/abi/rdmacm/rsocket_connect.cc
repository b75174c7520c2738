// rsockets' connection: rsocket, rbind, rlisten, raccept, rconnect, with
// the RsConnData both sides exchange in the REQ and the REP (the endpoint
// they name is rsocket_endpoint.cc). Connecting is a small state machine
// (DriveConnect) over the id's non-blocking event channel: resolve the
// address, the route, connect; a blocking caller sleeps in poll(2) on the
// channel between the steps.
#include <errno.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <string.h>

#include <algorithm>
#include <new>

#include "abi/ibverbs/reject.h"
#include "abi/rdmacm/rsocket_internal.h"

using namespace softverbs::rdmacm::rs;
using softverbs::abi::RejectMinusOne;

namespace {

#define SV_EXPORT extern "C" __attribute__((visibility("default")))

constexpr int kResolveTimeoutMs = 2000;

// The id's next CM event into id->event (the previous one acknowledged), as
// librdmacm's ucma_complete: 0 when it reports success; -1 with errno:
// EAGAIN when none is there yet, else the event's failure.
int NextCmEvent(rdma_cm_id* id) {
  if (id->event) {
    rdma_ack_cm_event(id->event);
    id->event = nullptr;
  }
  if (rdma_get_cm_event(id->channel, &id->event)) return -1;
  const rdma_cm_event* e = id->event;
  switch (e->event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
    case RDMA_CM_EVENT_ESTABLISHED:
      if (!e->status) return 0;
      break;
    case RDMA_CM_EVENT_REJECTED:
      errno = ECONNREFUSED;
      return -1;
    case RDMA_CM_EVENT_DISCONNECTED:
      errno = ECONNRESET;
      return -1;
    default:
      break;
  }
  errno = e->status < 0 ? -e->status : (e->status ? e->status : ECONNABORTED);
  return -1;
}

// rdma_connect with our RsConnData, as rdma-core's rsockets connect.
int SendConnect(Rsocket& rs) {
  if (CreateEndpoint(rs)) return -1;
  RsConnData data;
  FormatConnData(rs, &data);
  rdma_conn_param param{};
  param.private_data = &data;
  param.private_data_len = sizeof(data);
  param.flow_control = 1;
  param.retry_count = 7;
  param.rnr_retry_count = 7;
  return rdma_connect(rs.id, &param);
}

// A new socket on id (the caller's, or a request's), in the table.
Rsocket* NewSocket(rdma_cm_id* id, int domain, const Rsocket* options);

// The peer's RsConnData from the event (REQ or REP), or nullptr (errno set).
const RsConnData* ConnDataOf(const rdma_cm_event* e) {
  const auto& conn = e->param.conn;
  if (!conn.private_data || conn.private_data_len < sizeof(RsConnData)) {
    RejectMinusOne(EPROTO, "rsockets: the peer's connection data has %u bytes, not %zu",
                   conn.private_data_len, sizeof(RsConnData));
    return nullptr;
  }
  const auto* c = static_cast<const RsConnData*>(conn.private_data);
  if (c->version != kConnVersion) {
    RejectMinusOne(EPROTO, "rsockets: the peer speaks version %u, not %u", c->version,
                   kConnVersion);
    return nullptr;
  }
  return c;
}

// One step of the connection; never sleeps: 0 once connected, -1 with
// EAGAIN while waiting for an event, or the failure.
int StepConnect(Rsocket& rs) {
  rdma_cm_id* id = rs.id;
  for (;;) {
    switch (rs.phase) {
      case Phase::kFresh:
      case Phase::kBound:
        rs.phase = Phase::kResolvingAddr;
        if (rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&rs.peer),
                              kResolveTimeoutMs)) {
          return -1;
        }
        break;  // resolved at once: its event was there
      case Phase::kResolvingAddr:
        if (!id->event || id->event->event != RDMA_CM_EVENT_ADDR_RESOLVED) {
          if (NextCmEvent(id)) return -1;
        }
        rs.phase = Phase::kResolvingRoute;
        if (rdma_resolve_route(id, kResolveTimeoutMs)) return -1;
        break;
      case Phase::kResolvingRoute:
        if (!id->event || id->event->event != RDMA_CM_EVENT_ROUTE_RESOLVED) {
          if (NextCmEvent(id)) return -1;
        }
        rs.phase = Phase::kConnecting;
        if (SendConnect(rs)) return -1;
        break;
      case Phase::kConnecting: {
        if (!id->event || id->event->event != RDMA_CM_EVENT_ESTABLISHED) {
          if (NextCmEvent(id)) return -1;
        }
        const RsConnData* c = ConnDataOf(id->event);
        if (!c) return -1;
        SaveConnData(rs, *c);
        MarkConnected(rs);
        return 0;
      }
      case Phase::kAccepting:
        if (!id->event || id->event->event != RDMA_CM_EVENT_ESTABLISHED) {
          if (NextCmEvent(id)) return -1;
        }
        MarkConnected(rs);
        return 0;
      default:
        return 0;
    }
  }
}

}  // namespace

namespace softverbs::rdmacm::rs {

void WaitForCm(Rsocket& rs, RsLock& lock, int timeout_ms) {
  pollfd p{rs.id->channel->fd, POLLIN, 0};
  lock.unlock();
  poll(&p, 1, timeout_ms);
  lock.lock();
}

Rsocket* AcceptRequest(Rsocket& ls, RsLock& lock, rdma_cm_id* id) {
  // The request's REQ data, before rdma_accept acknowledges its event.
  const RsConnData* creq = ConnDataOf(id->event);
  RsConnData peer_data{};
  if (creq) peer_data = *creq;
  rdma_conn_param param = id->event->param.conn;
  Rsocket* rs = creq ? NewSocket(id, ls.domain, &ls) : nullptr;
  lock.unlock();
  if (!rs || CreateEndpoint(*rs)) {
    rdma_reject(id, nullptr, 0);
    if (rs) {
      FreeSocket(rs);
    } else {
      rdma_destroy_id(id);
    }
    lock.lock();
    return nullptr;
  }
  std::unique_lock new_lock(rs->mu);
  SaveConnData(*rs, peer_data);
  RsConnData data;
  FormatConnData(*rs, &data);
  param.private_data = &data;
  param.private_data_len = sizeof(data);
  rs->phase = Phase::kAccepting;
  if (rdma_accept(id, &param) == 0) {
    MarkConnected(*rs);
  } else if (errno != EAGAIN) {
    new_lock.unlock();
    FreeSocket(rs);
    lock.lock();
    return nullptr;
  }
  new_lock.unlock();
  lock.lock();
  return rs;
}

int DriveConnect(Rsocket& rs, RsLock& lock, bool nonblocking) {
  for (;;) {
    if (!IsOpening(rs.phase) && rs.phase != Phase::kFresh && rs.phase != Phase::kBound) return 0;
    if (StepConnect(rs) == 0) return 0;
    if (errno != EAGAIN) {
      rs.phase = Phase::kConnectFailed;
      rs.error = errno;
      softverbs::abi::Reject(rs.error, "rconnect: rsocket %d did not connect: %s", rs.fd,
                             strerror(rs.error));
      errno = rs.error;
      return -1;
    }
    if (nonblocking) {
      errno = EINPROGRESS;
      return -1;
    }
    WaitForCm(rs, lock, -1);
  }
}

}  // namespace softverbs::rdmacm::rs

namespace {

Rsocket* NewSocket(rdma_cm_id* id, int domain, const Rsocket* options) {
  auto* rs = new (std::nothrow) Rsocket;
  if (!rs) {
    errno = ENOMEM;
    return nullptr;
  }
  if (options) {
    rs->sbuf_size = options->sbuf_size;
    rs->rbuf_size = options->rbuf_size;
    rs->sq_size = options->sq_size;
    rs->rq_size = options->rq_size;
    rs->sq_inline = options->sq_inline;
    rs->target_iomap_size = options->target_iomap_size;
    rs->so_options = options->so_options;
    rs->tcp_options = options->tcp_options;
  }
  rs->id = id;
  rs->domain = domain;
  rs->fd = id->channel->fd;
  id->context = rs;
  SetNonblocking(rs->fd);
  if (!InsertSocket(rs)) {
    id->context = nullptr;
    delete rs;
    errno = EMFILE;
    return nullptr;
  }
  return rs;
}

bool ValidAddress(const char* verb, const Rsocket& rs, const sockaddr* addr, socklen_t len) {
  if (!addr) return RejectMinusOne(EFAULT, "%s: addr is NULL", verb), false;
  if (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) {
    return RejectMinusOne(EAFNOSUPPORT, "%s: address family %d is neither AF_INET nor AF_INET6",
                          verb, addr->sa_family),
           false;
  }
  const socklen_t need = addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  if (len < need) {
    return RejectMinusOne(EINVAL, "%s: addrlen %u is below the %u of the family", verb, len, need),
           false;
  }
  if (rs.domain == AF_INET && addr->sa_family != AF_INET) {
    return RejectMinusOne(EAFNOSUPPORT, "%s: an AF_INET socket takes AF_INET addresses", verb),
           false;
  }
  return true;
}

}  // namespace

// A domain, type or protocol rsockets do not have: ENOTSUP, as librdmacm
// answers (not socket(2)'s EAFNOSUPPORT / EPROTONOSUPPORT).
SV_EXPORT int rsocket(int domain, int type, int protocol) {
  if (domain != AF_INET && domain != AF_INET6) {
    return RejectMinusOne(ENOTSUP, "rsocket: domain %d is neither AF_INET nor AF_INET6", domain);
  }
  // The type exactly, as librdmacm: SOCK_NONBLOCK or SOCK_CLOEXEC or'ed in
  // are refused (rfcntl sets O_NONBLOCK).
  if (type == SOCK_DGRAM) {
    return RejectMinusOne(EOPNOTSUPP,
                          "rsocket: SOCK_DGRAM (UD rsockets) is not supported by softverbs");
  }
  if (type != SOCK_STREAM) {
    return RejectMinusOne(ENOTSUP, "rsocket: type %d is not SOCK_STREAM", type);
  }
  if (protocol && protocol != IPPROTO_TCP) {
    return RejectMinusOne(ENOTSUP, "rsocket: protocol %d is not IPPROTO_TCP", protocol);
  }
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP)) return -1;
  id->route.addr.src_addr.sa_family = static_cast<sa_family_t>(domain);
  Rsocket* rs = NewSocket(id, domain, nullptr);
  if (!rs) {
    const int err = errno;  // ENOMEM, or EMFILE: a descriptor past the table
    rdma_destroy_id(id);
    errno = err;
    return -1;
  }
  return rs->fd;
}

SV_EXPORT int rbind(int socket, const sockaddr* addr, socklen_t addrlen) {
  Rsocket* rs = LookupSocket(socket, "rbind");
  if (!rs) return -1;
  std::lock_guard lock(rs->mu);
  if (!ValidAddress("rbind", *rs, addr, addrlen)) return -1;
  if (rs->phase != Phase::kFresh) {
    return RejectMinusOne(EINVAL, "rbind: rsocket %d is bound already", socket);
  }
  if (rdma_bind_addr(rs->id, const_cast<sockaddr*>(addr))) return -1;
  rs->phase = Phase::kBound;
  return 0;
}

SV_EXPORT int rlisten(int socket, int backlog) {
  Rsocket* rs = LookupSocket(socket, "rlisten");
  if (!rs) return -1;
  std::lock_guard lock(rs->mu);
  if (rs->phase == Phase::kListening) return 0;
  if (rs->phase == Phase::kFresh) {  // as listen(2): the wildcard address, an ephemeral port
    sockaddr_storage any{};
    any.ss_family = static_cast<sa_family_t>(rs->domain);
    if (rdma_bind_addr(rs->id, reinterpret_cast<sockaddr*>(&any))) return -1;
    rs->phase = Phase::kBound;
  }
  if (rs->phase != Phase::kBound) {
    return RejectMinusOne(EINVAL, "rlisten: rsocket %d is connected or connecting", socket);
  }
  if (rdma_listen(rs->id, backlog)) return -1;
  if (StartAcceptor(*rs)) return -1;
  rs->phase = Phase::kListening;
  return 0;
}

// The next connection the listening socket's acceptor made (rsocket_accept.cc).
SV_EXPORT int raccept(int socket, sockaddr* addr, socklen_t* addrlen) {
  Rsocket* ls = LookupSocket(socket, "raccept");
  if (!ls) return -1;
  std::unique_lock lock(ls->mu);
  if (ls->phase != Phase::kListening) {
    return RejectMinusOne(EINVAL, "raccept: rsocket %d is not listening", socket);
  }
  Rsocket* rs = TakeAccepted(*ls, lock);
  if (!rs) return -1;
  lock.unlock();
  {
    std::lock_guard rs_lock(rs->mu);
    RenumberAccepted(*rs);
  }
  if (addr && addrlen) {
    const sockaddr* peer = rdma_get_peer_addr(rs->id);
    socklen_t len = peer->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    memcpy(addr, peer, std::min(len, *addrlen));
    *addrlen = len;
  }
  return rs->fd;
}

SV_EXPORT int rconnect(int socket, const sockaddr* addr, socklen_t addrlen) {
  Rsocket* rs = LookupSocket(socket, "rconnect");
  if (!rs) return -1;
  std::unique_lock lock(rs->mu);
  if (!ValidAddress("rconnect", *rs, addr, addrlen)) return -1;
  // Again on an rsocket that is not fresh, as librdmacm's rs_do_connect
  // answers: one still connecting is driven on (EINPROGRESS, or 0 once
  // connected), a connected one is 0, one whose connection failed or ended
  // ENOTCONN, a listening one EINVAL.
  if (IsOpening(rs->phase)) return DriveConnect(*rs, lock, rs->nonblocking);
  if (rs->phase == Phase::kConnected) return 0;
  if (rs->phase == Phase::kConnectFailed || rs->phase == Phase::kDisconnected ||
      rs->phase == Phase::kError) {
    return RejectMinusOne(ENOTCONN, "rconnect: rsocket %d's connection failed or ended", socket);
  }
  if (rs->phase != Phase::kFresh && rs->phase != Phase::kBound) {
    return RejectMinusOne(EINVAL, "rconnect: rsocket %d listens", socket);
  }
  memset(&rs->peer, 0, sizeof(rs->peer));
  memcpy(&rs->peer, addr, addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
  return DriveConnect(*rs, lock, rs->nonblocking);
}
