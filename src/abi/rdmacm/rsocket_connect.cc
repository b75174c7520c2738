// rsockets' connection: rsocket, rbind, rlisten, raccept, rconnect, and the
// endpoint each connection gets (QP, CQ, the three registered areas, the
// receives) with the RsConnData both sides exchange in the REQ and the REP.
// Connecting is a small state machine (DriveConnect) over the id's
// non-blocking event channel: resolve the address, the route, connect;
// a blocking caller sleeps in poll(2) on the channel between the steps.
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <stdlib.h>
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
constexpr bool kBigEndianHost = __BYTE_ORDER == __BIG_ENDIAN;

int SetNonblocking(int fd) {
  int fl = fcntl(fd, F_GETFL);
  return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

// Page-aligned, zeroed memory for a registered area (nothing else of the
// process shares its pages).
void* AllocArea(size_t len) {
  void* p = nullptr;
  if (posix_memalign(&p, 4096, len)) return nullptr;
  memset(p, 0, len);
  return p;
}

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

void FormatConnData(const Rsocket& rs, RsConnData* c) {
  memset(c, 0, sizeof(*c));
  c->version = kConnVersion;
  c->flags = kConnFlagIomap | (kBigEndianHost ? kConnFlagNet : 0);
  c->credits_be = htobe16(rs.rq_size);
  c->target_iomap_size = EncodeIomapSize(rs.target_iomap_size);
  c->target_sgl.addr = htobe64(reinterpret_cast<uintptr_t>(rs.target_sgl));
  c->target_sgl.key = htobe32(rs.target_mr->rkey);
  c->target_sgl.length = htobe32(kTargetSglEntries);
  c->data_buf.addr = htobe64(reinterpret_cast<uintptr_t>(rs.rbuf));
  c->data_buf.key = htobe32(rs.rmr->rkey);
  c->data_buf.length = htobe32(rs.rbuf_size / 2);
}

// The peer's RsConnData: where our SGL and IOMAP_SGL messages go, its first
// receive buffer half, its credits. The socket is connected afterwards.
void SaveConnData(Rsocket& rs, const RsConnData& c) {
  rs.remote_sgl.addr = be64toh(c.target_sgl.addr);
  rs.remote_sgl.key = be32toh(c.target_sgl.key);
  rs.remote_sgl.length = be32toh(c.target_sgl.length);
  rs.remote_sge = 1;  // entry 0 is the data_buf it named
  rs.swap_sgl = ((c.flags & kConnFlagNet) != 0) != kBigEndianHost;
  if (c.flags & kConnFlagIomap) {
    rs.remote_iomap.addr = rs.remote_sgl.addr + sizeof(RsSge) * rs.remote_sgl.length;
    rs.remote_iomap.length = DecodeIomapSize(c.target_iomap_size);
    rs.remote_iomap.key = rs.remote_sgl.key;
  }
  rs.target_sgl[0].addr = be64toh(c.data_buf.addr);
  rs.target_sgl[0].key = be32toh(c.data_buf.key);
  rs.target_sgl[0].length = be32toh(c.data_buf.length);
  rs.sseq_comp = be16toh(c.credits_be);
  rs.iomap_used.assign(rs.remote_iomap.length, false);
}

void MarkConnected(Rsocket& rs) {
  rs.phase = Phase::kConnected;
  rs.readable = rs.writable = true;
}

// The QP, its CQ and completion channel (both ends of the QP complete on
// one CQ), the registered areas, and rq_size posted receives.
int CreateEndpoint(Rsocket& rs) {
  rdma_cm_id* id = rs.id;
  ibv_device_attr dev{};
  if (ibv_query_device(id->verbs, &dev)) return -1;
  const int max_size = std::min<int>(dev.max_qp_wr, kMaxQueueSize);
  rs.sq_size = static_cast<uint16_t>(std::clamp<int>(rs.sq_size, kMinQueueSize, max_size));
  rs.rq_size = static_cast<uint16_t>(std::clamp<int>(rs.rq_size, kMinQueueSize, max_size));

  rs.comp = ibv_create_comp_channel(id->verbs);
  if (!rs.comp) return -1;
  rs.cq = ibv_create_cq(id->verbs, rs.sq_size + rs.rq_size, &rs, rs.comp, 0);
  if (!rs.cq || SetNonblocking(rs.comp->fd)) {
    int err = errno;
    if (rs.cq) ibv_destroy_cq(rs.cq);
    ibv_destroy_comp_channel(rs.comp);
    rs.cq = nullptr;
    rs.comp = nullptr;
    errno = err;
    return -1;
  }
  // The id owns them from here: rdma_destroy_qp destroys them (also when
  // rdma_create_qp fails).
  id->recv_cq = id->send_cq = rs.cq;
  id->recv_cq_channel = id->send_cq_channel = rs.comp;

  ibv_qp_init_attr qa{};
  qa.qp_context = &rs;
  qa.send_cq = qa.recv_cq = rs.cq;
  qa.qp_type = IBV_QPT_RC;
  qa.sq_sig_all = 1;
  qa.cap.max_send_wr = rs.sq_size;
  qa.cap.max_recv_wr = rs.rq_size;
  qa.cap.max_send_sge = 2;
  qa.cap.max_recv_sge = 1;
  qa.cap.max_inline_data = rs.sq_inline;
  if (rdma_create_qp(id, nullptr, &qa)) {
    rs.cq = nullptr;
    rs.comp = nullptr;
    return -1;
  }
  rs.sq_inline = static_cast<uint16_t>(qa.cap.max_inline_data);

  // Send buffer, then the control slots (SGL messages' RsSge when they do
  // not go inline).
  const size_t sbuf_total = rs.sbuf_size + kControlSlots * sizeof(RsSge);
  rs.sbuf = static_cast<uint8_t*>(AllocArea(sbuf_total));
  if (!rs.sbuf) return errno = ENOMEM, -1;
  rs.smr = ibv_reg_mr(id->pd, rs.sbuf, sbuf_total, IBV_ACCESS_LOCAL_WRITE);
  if (!rs.smr) return -1;

  const size_t target_len =
      sizeof(RsSge) * kTargetSglEntries + sizeof(RsIomap) * rs.target_iomap_size;
  rs.target_area = AllocArea(target_len);
  if (!rs.target_area) return errno = ENOMEM, -1;
  rs.target_mr = ibv_reg_mr(id->pd, rs.target_area, target_len,
                            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!rs.target_mr) return -1;
  rs.target_sgl = static_cast<volatile RsSge*>(rs.target_area);
  if (rs.target_iomap_size) {
    rs.target_iomap = reinterpret_cast<volatile RsIomap*>(static_cast<uint8_t*>(rs.target_area) +
                                                          sizeof(RsSge) * kTargetSglEntries);
  }

  rs.rbuf = static_cast<uint8_t*>(AllocArea(rs.rbuf_size));
  if (!rs.rbuf) return errno = ENOMEM, -1;
  rs.rmr =
      ibv_reg_mr(id->pd, rs.rbuf, rs.rbuf_size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!rs.rmr) return -1;

  rs.sbuf_head = 0;
  rs.sbuf_avail = rs.sbuf_size;
  rs.ctrl_seqno = 0;
  rs.ctrl_max_seqno = kControlSlots;
  rs.sqe_avail = rs.sq_size - kControlSlots;
  rs.rbuf_free_offset = rs.rbuf_size / 2;  // the first half goes in the conn data
  rs.rbuf_avail = rs.rbuf_size / 2;
  rs.rseq_comp = rs.rq_size / 2;
  rs.rmsg.assign(rs.rq_size + 1u, 0);

  for (int i = 0; i < rs.rq_size; ++i) {
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    wr.wr_id = kRecvWrId;
    if (int err = ibv_post_recv(id->qp, &wr, &bad)) return errno = err, -1;
  }
  return 0;
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

void WaitForCm(Rsocket& rs, std::unique_lock<std::mutex>& lock, int timeout_ms) {
  pollfd p{rs.id->channel->fd, POLLIN, 0};
  lock.unlock();
  poll(&p, 1, timeout_ms);
  lock.lock();
}

int DriveConnect(Rsocket& rs, std::unique_lock<std::mutex>& lock, bool nonblocking) {
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

void FreeSocket(Rsocket* rs) {
  RemoveSocket(rs);
  for (IomapBuffer& b : rs->iomaps) ibv_dereg_mr(b.mr);
  if (rs->smr) ibv_dereg_mr(rs->smr);
  if (rs->rmr) ibv_dereg_mr(rs->rmr);
  if (rs->target_mr) ibv_dereg_mr(rs->target_mr);
  free(rs->sbuf);
  free(rs->rbuf);
  free(rs->target_area);
  if (rs->id) {
    if (rs->cq && rs->cq_events_unacked) ibv_ack_cq_events(rs->cq, rs->cq_events_unacked);
    if (rs->id->qp || rs->id->recv_cq) rdma_destroy_qp(rs->id);
    if (rs->id->event) {
      rdma_ack_cm_event(rs->id->event);
      rs->id->event = nullptr;
    }
    rdma_destroy_id(rs->id);
  }
  delete rs;
}

}  // namespace softverbs::rdmacm::rs

namespace {

// A new socket on id (the caller's, or a request's), in the table.
Rsocket* NewSocket(rdma_cm_id* id, int domain, const Rsocket* options) {
  auto* rs = new (std::nothrow) Rsocket;
  if (!rs) return nullptr;
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
  InsertSocket(rs);
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

SV_EXPORT int rsocket(int domain, int type, int protocol) {
  if (domain != AF_INET && domain != AF_INET6) {
    return RejectMinusOne(EAFNOSUPPORT, "rsocket: domain %d is neither AF_INET nor AF_INET6",
                          domain);
  }
  const int base_type = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (base_type == SOCK_DGRAM) {
    return RejectMinusOne(EOPNOTSUPP,
                          "rsocket: SOCK_DGRAM (UD rsockets) is not supported by softverbs");
  }
  if (base_type != SOCK_STREAM) {
    return RejectMinusOne(EPROTONOSUPPORT, "rsocket: type %d is not SOCK_STREAM", type);
  }
  if (protocol && protocol != IPPROTO_TCP) {
    return RejectMinusOne(EPROTONOSUPPORT, "rsocket: protocol %d is not IPPROTO_TCP", protocol);
  }
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP)) return -1;
  id->route.addr.src_addr.sa_family = static_cast<sa_family_t>(domain);
  Rsocket* rs = NewSocket(id, domain, nullptr);
  if (!rs) {
    rdma_destroy_id(id);
    errno = ENOMEM;
    return -1;
  }
  rs->nonblocking = (type & SOCK_NONBLOCK) != 0;
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
  rs->phase = Phase::kListening;
  return 0;
}

SV_EXPORT int raccept(int socket, sockaddr* addr, socklen_t* addrlen) {
  Rsocket* ls = LookupSocket(socket, "raccept");
  if (!ls) return -1;
  std::unique_lock lock(ls->mu);
  if (ls->phase != Phase::kListening) {
    return RejectMinusOne(EINVAL, "raccept: rsocket %d is not listening", socket);
  }
  rdma_cm_id* id = nullptr;
  while (rdma_get_request(ls->id, &id)) {
    if (errno != EAGAIN) return -1;
    if (ls->nonblocking) return -1;
    WaitForCm(*ls, lock, -1);
  }
  // The request's REQ data, before rdma_accept acknowledges its event.
  const RsConnData* creq = ConnDataOf(id->event);
  RsConnData peer_data{};
  if (creq) peer_data = *creq;
  rdma_conn_param param = id->event->param.conn;
  Rsocket* rs = creq ? NewSocket(id, ls->domain, ls) : nullptr;
  lock.unlock();
  if (!rs || CreateEndpoint(*rs)) {
    int err = errno;
    rdma_reject(id, nullptr, 0);
    if (rs) {
      FreeSocket(rs);
    } else {
      rdma_destroy_id(id);
    }
    errno = err == EPROTO ? ECONNABORTED : err;
    return -1;
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
    int err = errno;
    new_lock.unlock();
    FreeSocket(rs);
    errno = err;
    return -1;
  }
  if (addr && addrlen) {
    const sockaddr* peer = rdma_get_peer_addr(id);
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
  if (IsOpening(rs->phase)) {
    errno = EALREADY;
    return -1;
  }
  if (rs->phase == Phase::kConnected) {
    return RejectMinusOne(EISCONN, "rconnect: rsocket %d is connected", socket);
  }
  if (rs->phase != Phase::kFresh && rs->phase != Phase::kBound) {
    return RejectMinusOne(EINVAL,
                          "rconnect: rsocket %d listens, or was connected before (an rsocket "
                          "connects once)",
                          socket);
  }
  memset(&rs->peer, 0, sizeof(rs->peer));
  memcpy(&rs->peer, addr, addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
  return DriveConnect(*rs, lock, rs->nonblocking);
}
