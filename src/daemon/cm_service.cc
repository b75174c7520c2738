// The connection manager's requests: check -> apply -> report, as the
// kernel's rdma_cm answers the ucma commands (errnos of rdma_cm(7) and the
// librdmacm man pages). The messages they start are handled in
// cm_messages.cc.
#include "daemon/cm_service.h"

#include <errno.h>
#include <rdma/rdma_cma.h>

#include <algorithm>
#include <cstring>
#include <random>

namespace softverbs::daemon {

using protocol::CmConnParam;
using protocol::CmEventRecord;
using protocol::CmReply;
using protocol::CmRequest;
using protocol::Op;

namespace {

constexpr int kMaxBacklog = 1024;  // the kernel's ucma max_backlog default
// How long a DREQ waits for its DREP before the sender reports DISCONNECTED
// anyway (ib_cm's DREQ timeout).
constexpr auto kDreqTimeout = std::chrono::milliseconds(1000);
// The private data a message carries for the user (IBTA 12.6 field sizes;
// REQ and SIDR REQ lose the 36-byte rdma_cm IP header).

bool ValidPortSpace(uint32_t ps) {
  return ps == RDMA_PS_TCP || ps == RDMA_PS_UDP || ps == RDMA_PS_IB || ps == RDMA_PS_IPOIB;
}

std::string IdName(uint32_t h) {
  return "id " + std::to_string(h);
}

}  // namespace

// A starting PSN (24 bits).
uint32_t RandomPsn() {
  static std::mt19937 rng{std::random_device{}()};
  return rng() & 0xffffff;
}

const char* CmStateName(CmState s) {
  static constexpr const char* kNames[] = {
      "IDLE",      "ADDR_BOUND",   "ADDR_QUERY", "ADDR_RESOLVED", "ROUTE_RESOLVED", "LISTEN",
      "REQ_SENT",  "REQ_RCVD",     "REP_SENT",   "REP_RCVD",      "ESTABLISHED",    "DREQ_SENT",
      "DREQ_RCVD", "DISCONNECTED", "REJECTED",   "SIDR_REQ_SENT", "SIDR_REQ_RCVD",  "SIDR_DONE"};
  return kNames[static_cast<int>(s)];
}

uint32_t CmService::AddChannel(ClientId owner, int fd) {
  uint32_t n = next_channel_++;
  channels_[n] = {owner, fd};
  return n;
}

void CmService::RemoveChannel(int fd) {
  for (auto it = channels_.begin(); it != channels_.end(); ++it) {
    if (it->second.fd == fd) {
      channels_.erase(it);
      return;
    }
  }
}

std::vector<int> CmService::RemoveClient(ClientId c) {
  std::vector<uint32_t> mine;
  for (auto& [h, id] : ids_) {
    if (id.owner == c) mine.push_back(h);
  }
  for (uint32_t h : mine) {
    if (Id* id = Find(h)) DestroyId(*id);
  }
  std::vector<int> fds;
  for (auto it = channels_.begin(); it != channels_.end();) {
    if (it->second.owner == c) {
      fds.push_back(it->second.fd);
      it = channels_.erase(it);
    } else {
      ++it;
    }
  }
  Pump();
  return fds;
}

CmService::Id* CmService::Find(uint32_t handle) {
  auto it = ids_.find(handle);
  return it == ids_.end() ? nullptr : &it->second;
}

Verdict CmService::Handle(ClientId c, Op op, const CmRequest& req, CmReply* out) {
  Verdict v;
  if (op == Op::kCmCreateId) {
    v = CreateId(c, req, out);
  } else {
    Id* id = Find(req.id);
    if (!id || id->owner != c)
      return Verdict::Fail(EINVAL, IdName(req.id) + " is not an id of this process");
    if (req.tos_set) id->traffic_class = req.tos;
    switch (op) {
      case Op::kCmDestroyId:
        v = DestroyId(*id);
        id = nullptr;
        break;
      case Op::kCmBindAddr:
        v = BindAddr(*id, req.src, req.flags);
        break;
      case Op::kCmResolveAddr:
        v = ResolveAddr(*id, req);
        break;
      case Op::kCmResolveRoute:
        v = ResolveRoute(*id);
        break;
      case Op::kCmListen:
        id->flags = req.flags;
        v = Listen(*id, req.backlog);
        break;
      case Op::kCmConnect:
        v = Connect(*id, req.conn);
        break;
      case Op::kCmAccept:
        v = Accept(*id, req.conn);
        break;
      case Op::kCmReject:
        v = Reject(*id, req.conn);
        break;
      case Op::kCmEstablish:
        v = Establish(*id);
        break;
      case Op::kCmDisconnect:
        v = Disconnect(*id);
        break;
      case Op::kCmInitQpAttr:
        v = InitQpAttr(*id, req.qp_state, out);
        break;
      case Op::kCmMigrateId: {
        auto ch = channels_.find(req.channel);
        if (ch == channels_.end() || ch->second.owner != c) {
          v = Verdict::Fail(EINVAL, "event channel " + std::to_string(req.channel) +
                                        " is not a channel of this process");
        } else {
          id->channel = req.channel;
          id->holding = true;  // until kCmMigrateDone brings what the old channel held
        }
        break;
      }
      case Op::kCmNotify:
        v = Notify(*id, req.qp_state);
        break;
      case Op::kCmJoinMcast:
        v = JoinMcast(*id, req.src, req.token);
        break;
      case Op::kCmLeaveMcast:
        v = LeaveMcast(*id, req.src);
        break;
      default:
        v = Verdict::Fail(EOPNOTSUPP, "not a connection manager operation");
    }
    if (id && v.ok()) out->route = id->route;
  }
  Pump();
  return v;
}

Verdict CmService::CreateId(ClientId c, const CmRequest& req, CmReply* out) {
  auto ch = channels_.find(req.channel);
  if (ch == channels_.end() || ch->second.owner != c) {
    return Verdict::Fail(EINVAL, "event channel " + std::to_string(req.channel) +
                                     " is not a channel of this process");
  }
  if (!ValidPortSpace(req.port_space)) {
    return Verdict::Fail(EINVAL, "port space " + std::to_string(req.port_space) +
                                     " is not one of "
                                     "RDMA_PS_TCP, RDMA_PS_UDP, RDMA_PS_IB, RDMA_PS_IPOIB");
  }
  if (req.qp_type != IBV_QPT_RC && req.qp_type != IBV_QPT_UC && req.qp_type != IBV_QPT_UD &&
      req.qp_type != IBV_QPT_XRC_SEND && req.qp_type != IBV_QPT_XRC_RECV) {
    return Verdict::Fail(EINVAL, "QP type " + std::to_string(req.qp_type) +
                                     " cannot be connected by rdma_cm (RC, UC, UD, XRC)");
  }
  Id id;
  id.handle = next_handle_++;
  id.owner = c;
  id.channel = req.channel;
  id.port_space = req.port_space;
  id.qp_type = req.qp_type;
  id.route.pkey = 0xffff;
  id.route.path_mtu = active_mtu_;
  ids_[id.handle] = id;
  out->id = id.handle;
  out->route = id.route;
  return Verdict::Ok();
}

Verdict CmService::DestroyId(Id& id) {
  LeaveConnection(id);
  ReleaseRequest(id);
  ids_.erase(id.handle);
  return Verdict::Ok();
}

void CmService::SetRouteFromAddrs(Id& id) {
  id.route.sgid_index = GidIndexFor(gids_, id.route.src, id.route.sgid);
  if (IsMulticast(id.route.dst)) {
    MulticastGid(id.route.dst, id.route.dgid);
  } else if (id.route.dst.sin6_family && !IsLocalAddress(id.route.dst)) {
    IpAsGid(id.route.dst, id.route.dgid);  // another host: its RoCE v2 GID
  } else if (id.route.dst.sin6_family) {
    GidIndexFor(gids_, id.route.dst, id.route.dgid);
  }
  id.route.on_device = 1;
}

Verdict CmService::BindAddr(Id& id, const CmAddr& addr, uint32_t flags) {
  if (id.state != CmState::kIdle) {
    return Verdict::Fail(
        EINVAL, IdName(id.handle) + " is already bound (state " + CmStateName(id.state) + ")");
  }
  if (addr.sin6_family != AF_INET && addr.sin6_family != AF_INET6) {
    return Verdict::Fail(EAFNOSUPPORT, "address family " + std::to_string(addr.sin6_family) +
                                           " is not AF_INET or AF_INET6");
  }
  if (!IsWildcard(addr) && !IsLocalAddress(addr)) {
    return Verdict::Fail(EADDRNOTAVAIL, FormatAddr(addr) + " is not an address of this host");
  }
  if (Verdict v = ReservePort(id, addr, flags); !v.ok()) return v;
  id.flags = flags;
  id.state = CmState::kAddrBound;
  // As the kernel's rdma_bind_addr: loopback, like the wildcard, takes no
  // device (id->verbs stays NULL); a resolve or a connection gives one.
  if (!IsAnyAddress(addr)) SetRouteFromAddrs(id);
  return Verdict::Ok();
}

Verdict CmService::ResolveAddr(Id& id, const CmRequest& req) {
  const CmAddr& dst = req.dst;
  if (dst.sin6_family != AF_INET && dst.sin6_family != AF_INET6) {
    return Verdict::Fail(EAFNOSUPPORT, "destination family " + std::to_string(dst.sin6_family) +
                                           " is not AF_INET or AF_INET6");
  }
  if (id.state == CmState::kIdle) {
    CmAddr src = req.src.sin6_family ? req.src : WildcardOf(dst.sin6_family);
    if (Verdict v = BindAddr(id, src, req.flags); !v.ok()) return v;
  } else if (id.state != CmState::kAddrBound && id.state != CmState::kAddrResolved) {
    return Verdict::Fail(
        EINVAL, IdName(id.handle) + " cannot resolve an address in state " + CmStateName(id.state));
  }
  if (id.route.src.sin6_family != dst.sin6_family) {
    return Verdict::Fail(EINVAL, "source " + FormatAddr(id.route.src) + " and destination " +
                                     FormatAddr(dst) + " are of different families");
  }
  id.route.dst = dst;
  if (IsWildcard(dst) || IsMulticast(dst) || IsLocalAddress(dst)) {
    // Reached through this host's device: the source IP is the bound one, or
    // (unbound) the destination's own, as the routing table answers for a
    // local address; the wildcard stands for loopback.
    if (IsWildcard(dst)) {
      CmAddr lo = LoopbackOf(dst.sin6_family);
      uint16_t port = PortOf(dst);
      id.route.dst = IsWildcard(id.route.src) ? lo : id.route.src;
      SetPort(&id.route.dst, port);
    }
    if (IsWildcard(id.route.src)) {
      // A group is sent to from this host's loopback address when no source
      // was bound (one host: every address reaches the same device).
      uint16_t port = PortOf(id.route.src);
      id.route.src = IsMulticast(dst) ? LoopbackOf(dst.sin6_family) : id.route.dst;
      SetPort(&id.route.src, port);
    }
    SetRouteFromAddrs(id);
    id.state = CmState::kAddrResolved;
    PushEvent(id, EventFor(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0));
    return Verdict::Ok();
  }
  // Another host's address: reached through the interface the routing
  // table picks, if that interface's address is one of the port's GIDs
  // (RoCE v2: the peer's GID is its IP). The neighbour is not asked; a peer
  // that does not answer shows as the CM's timeouts.
  CmAddr via{};
  if (RouteSource(dst, &via)) {
    uint8_t gid[16];
    IpAsGid(via, gid);
    const bool bound_elsewhere = !IsWildcard(id.route.src) && !SameIp(id.route.src, via);
    if (GidTableHas(gids_, gid) && !bound_elsewhere) {
      const uint16_t port = PortOf(id.route.src);
      id.route.src = via;
      SetPort(&id.route.src, port);
      SetRouteFromAddrs(id);
      id.state = CmState::kAddrResolved;
      PushEvent(id, EventFor(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0));
      return Verdict::Ok();
    }
  }
  // No route from an address of the port: nothing answers, so the
  // resolution times out.
  id.state = CmState::kAddrQuery;
  id.timer = true;
  id.deadline = Clock::now() + std::chrono::milliseconds(std::max(req.timeout_ms, 0));
  return Verdict::Ok();
}

Verdict CmService::ResolveRoute(Id& id) {
  if (id.state != CmState::kAddrResolved) {
    return Verdict::Fail(EINVAL, IdName(id.handle) + " has no resolved address (state " +
                                     CmStateName(id.state) + ")");
  }
  id.state = CmState::kRouteResolved;
  PushEvent(id, EventFor(id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0));
  return Verdict::Ok();
}

Verdict CmService::Listen(Id& id, int backlog) {
  const int effective = backlog > 0 && backlog < kMaxBacklog ? backlog : kMaxBacklog;
  if (id.state == CmState::kListen) {
    // The kernel's rdma_listen takes an id only from ADDR_BOUND (or IDLE,
    // binding it): listening again is EINVAL, as librdmacm returns it.
    return Verdict::Fail(EINVAL, IdName(id.handle) + " is listening already");
  }
  if (id.state == CmState::kIdle) {
    if (Verdict v = BindAddr(id, WildcardOf(AF_INET), id.flags); !v.ok()) return v;
  } else if (id.state != CmState::kAddrBound) {
    return Verdict::Fail(EINVAL,
                         IdName(id.handle) + " cannot listen in state " + CmStateName(id.state));
  }
  for (auto& [h, other] : ids_) {
    if (h != id.handle && other.state == CmState::kListen && Overlaps(id, other)) {
      return Verdict::Fail(
          EADDRINUSE, FormatAddr(id.route.src) + " already has a listener (" + IdName(h) + ")");
    }
  }
  id.backlog = effective;
  id.state = CmState::kListen;
  // Every listener may hear from other hosts: one bound to loopback listens
  // on every device, as the kernel's rdma_cm does (cma_listen_on_all).
  if (listen_hook_) listen_hook_();
  RetryParkedRequests();
  Pump();
  return Verdict::Ok();
}

Verdict CmService::Connect(Id& id, const CmConnParam& conn) {
  if (id.state != CmState::kRouteResolved) {
    return Verdict::Fail(
        EINVAL, IdName(id.handle) + " has no resolved route (state " + CmStateName(id.state) + ")");
  }
  const bool ud = id.qp_type == IBV_QPT_UD;
  const uint8_t limit = CmUserPrivateData(ud ? CmMsgKind::kSidrReq : CmMsgKind::kReq);
  if (conn.private_data_len > limit) {
    return Verdict::Fail(EINVAL, "private data of " + std::to_string(conn.private_data_len) +
                                     " bytes is above the " + std::to_string(limit) +
                                     " a connect carries");
  }
  id.local = conn;
  id.local_psn = RandomPsn();
  id.active = true;
  id.responder_resources = conn.responder_resources;
  id.initiator_depth = conn.initiator_depth;
  CmMessage msg = MessageFrom(id, ud ? CmMsgKind::kSidrReq : CmMsgKind::kReq);
  msg.port_space = id.port_space;
  msg.conn = conn;
  msg.conn.private_data_len = limit;
  id.state = ud ? CmState::kSidrReqSent : CmState::kReqSent;
  // MADs may be lost: a REQ to another host goes again until it is answered.
  if (GoesToAnotherHost(msg.dgid)) {
    SendUntilAnswered(id, msg, kCmResponseTime, kCmReqRetries);
  } else {
    Send(msg);
  }
  return Verdict::Ok();
}

Verdict CmService::Accept(Id& id, const CmConnParam& conn) {
  if (id.state == CmState::kSidrReqRcvd) {
    CmMessage msg = MessageFrom(id, CmMsgKind::kSidrRep);
    msg.conn = conn;
    msg.conn.qkey = RDMA_UDP_QKEY;
    msg.conn.private_data_len = CmUserPrivateData(CmMsgKind::kSidrRep);
    msg.status = 0;  // IB_SIDR_SUCCESS
    id.state = CmState::kSidrDone;
    ReleaseRequest(id);
    Send(msg);
    return Verdict::Ok();
  }
  if (id.state != CmState::kReqRcvd) {
    return Verdict::Fail(EINVAL, IdName(id.handle) +
                                     " has no connection request to accept "
                                     "(state " +
                                     CmStateName(id.state) + ")");
  }
  const uint8_t rep_bytes = CmUserPrivateData(CmMsgKind::kRep);
  if (conn.private_data_len > rep_bytes) {
    return Verdict::Fail(EINVAL, "private data of " + std::to_string(conn.private_data_len) +
                                     " bytes is above the " + std::to_string(rep_bytes) +
                                     " a REP carries");
  }
  // local_psn was chosen when the REQ arrived (OnReq): the QP went to RTS
  // with it before this accept, as rdma_accept(3) does it.
  id.local = conn;
  id.responder_resources = conn.responder_resources;
  id.initiator_depth = conn.initiator_depth;
  CmMessage msg = MessageFrom(id, CmMsgKind::kRep);
  msg.conn = conn;
  msg.conn.private_data_len = rep_bytes;
  id.state = CmState::kRepSent;
  ReleaseRequest(id);
  // A REP to another host goes again until the RTU comes, as often and as
  // long as the REQ asked (its local CM response timeout, max CM retries).
  if (GoesToAnotherHost(msg.dgid)) {
    SendUntilAnswered(id, msg, id.peer_response_time, id.peer_max_retries);
  } else {
    Send(msg);
  }
  return Verdict::Ok();
}

Verdict CmService::Reject(Id& id, const CmConnParam& conn) {
  if (id.state != CmState::kReqRcvd && id.state != CmState::kSidrReqRcvd) {
    return Verdict::Fail(EINVAL, IdName(id.handle) +
                                     " has no connection request to reject "
                                     "(state " +
                                     CmStateName(id.state) + ")");
  }
  const bool ud = id.state == CmState::kSidrReqRcvd;
  CmMessage msg = MessageFrom(id, ud ? CmMsgKind::kSidrRep : CmMsgKind::kRej);
  msg.conn.private_data_len = CmUserPrivateData(msg.kind);
  memset(msg.conn.private_data, 0, sizeof(msg.conn.private_data));
  memcpy(msg.conn.private_data, conn.private_data,
         std::min<size_t>(conn.private_data_len, CmUserPrivateData(CmMsgKind::kRej)));
  // IB_SIDR_REJECT; else the reason asked for (rdma_reject_ece: 35, vendor
  // option not supported) or IB_CM_REJ_CONSUMER_DEFINED.
  msg.status = ud ? 2 : (conn.reject_reason ? conn.reject_reason : 28);
  id.state = CmState::kRejected;
  ReleaseRequest(id);
  Send(msg);
  return Verdict::Ok();
}

Verdict CmService::Establish(Id& id) {
  if (id.state != CmState::kRepRcvd) {
    return Verdict::Fail(EINVAL, IdName(id.handle) +
                                     " has no connection response to complete "
                                     "(state " +
                                     CmStateName(id.state) + ")");
  }
  id.state = CmState::kEstablished;
  Send(MessageFrom(id, CmMsgKind::kRtu));
  return Verdict::Ok();
}

Verdict CmService::Disconnect(Id& id) {
  switch (id.state) {
    case CmState::kEstablished:
    case CmState::kRepSent:
    case CmState::kRepRcvd:
      id.state = CmState::kDreqSent;
      Answered(id);  // a REP still waiting for its RTU is answered by the DREQ
      if (GoesToAnotherHost(id.route.dgid)) {
        // Sent again until the DREP comes; DISCONNECTED after the last try.
        SendUntilAnswered(id, MessageFrom(id, CmMsgKind::kDreq), kCmResponseTime, kCmReqRetries);
      } else {
        id.timer = true;
        id.deadline = Clock::now() + kDreqTimeout;
        Send(MessageFrom(id, CmMsgKind::kDreq));
      }
      return Verdict::Ok();
    case CmState::kDreqRcvd:
      id.state = CmState::kDisconnected;
      Send(MessageFrom(id, CmMsgKind::kDrep));
      return Verdict::Ok();
    case CmState::kReqSent:
    case CmState::kReqRcvd:
    case CmState::kDreqSent:
    case CmState::kDisconnected:
    case CmState::kRejected:
    case CmState::kSidrReqSent:
    case CmState::kSidrReqRcvd:
    case CmState::kSidrDone:
      // A connection exists or existed: nothing to send, as rdma_cm answers
      // when neither a DREQ nor a DREP can go out.
      return Verdict::Ok();
    default:
      return Verdict::Fail(
          EINVAL, IdName(id.handle) + " is not connected (state " + CmStateName(id.state) + ")");
  }
}

// As the kernel's ib_cm_notify: COMM_EST establishes a connection whose
// REP went out (the RTU may still come, or was lost), is EISCONN on an
// established one and EINVAL otherwise; PATH_MIG needs an established
// connection (there is no alternate path to load: nothing changes); any
// other event is EINVAL.
Verdict CmService::Notify(Id& id, uint32_t event) {
  const std::string where = IdName(id.handle) + " (state " + CmStateName(id.state) + ")";
  if (event == IBV_EVENT_COMM_EST) {
    if (id.state == CmState::kEstablished) {
      return Verdict::Fail(EISCONN, "rdma_notify(COMM_EST): " + where + " is established");
    }
    if (id.state != CmState::kRepSent) {
      return Verdict::Fail(EINVAL, "rdma_notify(COMM_EST): " + where + " has sent no REP");
    }
    Answered(id);  // the REP is not sent again
    id.state = CmState::kEstablished;
    PushEvent(id, EventFor(id, RDMA_CM_EVENT_ESTABLISHED, 0));
    return Verdict::Ok();
  }
  if (event == IBV_EVENT_PATH_MIG) {
    if (id.state != CmState::kEstablished) {
      return Verdict::Fail(EINVAL, "rdma_notify(PATH_MIG): " + where + " is not established");
    }
    return Verdict::Ok();
  }
  return Verdict::Fail(EINVAL, "rdma_notify: event " + std::to_string(event) +
                                   " is neither IBV_EVENT_COMM_EST nor IBV_EVENT_PATH_MIG");
}

Verdict CmService::JoinMcast(Id& id, const CmAddr& group, uint64_t token) {
  if (!id.route.on_device ||
      (id.state != CmState::kAddrBound && id.state != CmState::kAddrResolved &&
       id.state != CmState::kRouteResolved)) {
    return Verdict::Fail(EINVAL, IdName(id.handle) + " is not bound to the device (state " +
                                     CmStateName(id.state) + "): bind or resolve an address first");
  }
  if (!IsMulticast(group)) {
    return Verdict::Fail(EINVAL, FormatAddr(group) + " is not a multicast address");
  }
  for (const CmAddr& g : id.groups) {
    if (SameIp(g, group)) {
      return Verdict::Fail(EADDRINUSE, IdName(id.handle) + " already joined " + FormatAddr(group));
    }
  }
  id.groups.push_back(group);
  CmEventRecord rec = EventFor(id, RDMA_CM_EVENT_MULTICAST_JOIN, 0);
  rec.token = token;
  rec.conn.qp_num = 0xffffff;
  rec.conn.qkey = RDMA_UDP_QKEY;
  MulticastGid(group, rec.ah_dgid);
  rec.ah_sgid_index = id.route.sgid_index;
  rec.ah_traffic_class = id.traffic_class;
  PushEvent(id, rec);
  return Verdict::Ok();
}

Verdict CmService::LeaveMcast(Id& id, const CmAddr& group) {
  for (auto it = id.groups.begin(); it != id.groups.end(); ++it) {
    if (SameIp(*it, group)) {
      id.groups.erase(it);
      return Verdict::Ok();
    }
  }
  return Verdict::Fail(EADDRNOTAVAIL, IdName(id.handle) + " has not joined " + FormatAddr(group));
}

CmEventRecord CmService::EventFor(const Id& id, uint32_t event, int32_t status) const {
  CmEventRecord rec{};
  rec.event = event;
  rec.status = status;
  rec.id = id.handle;
  rec.route = id.route;
  return rec;
}

void CmService::PushEvent(const Id& id, CmEventRecord rec) {
  // A connect request is its listener's event.
  const uint32_t whose = rec.event == RDMA_CM_EVENT_CONNECT_REQUEST ? rec.listen_id : id.handle;
  if (auto it = ids_.find(whose); it != ids_.end() && it->second.holding) {
    it->second.held.push_back(rec);
    return;
  }
  auto ch = channels_.find(id.channel);
  if (ch == channels_.end() || !event_sink_) return;  // the channel was closed: nobody to tell
  event_sink_(ch->second.fd, rec);
}

Verdict CmService::MigrateDone(ClientId c, const protocol::CmMigrateDone& done,
                               const CmEventRecord* records) {
  Id* id = Find(done.id);
  if (!id || id->owner != c) {
    return Verdict::Fail(EINVAL, IdName(done.id) + " is not an id of this process");
  }
  auto deliver = [&](uint32_t channel, const CmEventRecord& rec) {
    auto ch = channels_.find(channel);
    if (ch != channels_.end() && ch->second.owner == c && event_sink_) {
      event_sink_(ch->second.fd, rec);
    }
  };
  auto whose = [](const CmEventRecord& rec) {
    return rec.event == RDMA_CM_EVENT_CONNECT_REQUEST ? rec.listen_id : rec.id;
  };
  // The id's events in their order: those the old channel held, then those
  // that came since the migration began.
  for (uint32_t i = 0; i < done.count; ++i) {
    if (whose(records[i]) == done.id) deliver(id->channel, records[i]);
  }
  for (const CmEventRecord& rec : id->held) deliver(id->channel, rec);
  id->held.clear();
  id->holding = false;
  for (uint32_t i = 0; i < done.count; ++i) {
    if (whose(records[i]) != done.id) deliver(done.old_channel, records[i]);
  }
  return Verdict::Ok();
}

int CmService::MsUntilNextTimer() const {
  int best = -1;
  const auto now = Clock::now();
  for (const auto& [deadline, msg] : parked_reqs_) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    int m = ms < 0 ? 0 : static_cast<int>(std::min<long long>(ms + 1, 1 << 30));
    if (best < 0 || m < best) best = m;
  }
  for (const auto& [h, id] : ids_) {
    if (!id.timer) continue;
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(id.deadline - now).count();
    int m = ms < 0 ? 0 : static_cast<int>(std::min<long long>(ms + 1, 1 << 30));
    if (best < 0 || m < best) best = m;
  }
  return best;
}

void CmService::RunTimers() {
  const auto now = Clock::now();
  for (auto& [h, id] : ids_) {
    if (!id.timer || id.deadline > now) continue;
    id.timer = false;
    if (id.state == CmState::kAddrQuery) {
      id.state = CmState::kAddrBound;
      PushEvent(id, EventFor(id, RDMA_CM_EVENT_ADDR_ERROR, -ETIMEDOUT));
    } else if (id.unanswered) {
      if (id.resends < id.resend_limit) {
        id.resends++;
        counters_.resent++;
        id.timer = true;
        id.deadline = now + id.resend_interval;
        Send(*id.unanswered);
      } else {
        ResendsExhausted(id);
      }
    } else if (id.state == CmState::kDreqSent) {
      id.state = CmState::kDisconnected;
      PushEvent(id, EventFor(id, RDMA_CM_EVENT_DISCONNECTED, 0));
    }
  }
  RetryParkedRequests();
  Pump();
}

}  // namespace softverbs::daemon
