// The receiving half of the CM state machine: what an id does with each CM
// message (IBTA 12.6, as ib_cm and rdma_cm act on it), and the local
// carrier that delivers messages between ids of this daemon.
#include <errno.h>
#include <rdma/rdma_cma.h>

#include <algorithm>
#include <cstring>

#include "daemon/cm_service.h"

namespace softverbs::daemon {

using protocol::CmEventRecord;

namespace {

// IBTA 12.6.7 REJ reasons and 16.7 SIDR REP statuses rdma_cm reports.
constexpr uint32_t kRejTimeout = 1;
constexpr uint32_t kRejInvalidServiceId = 8;
constexpr uint32_t kRejConsumerDefined = 28;
constexpr uint32_t kSidrUnsupported = 1;

}  // namespace

std::chrono::nanoseconds CmTimeOfCode(uint8_t code) {
  return std::chrono::nanoseconds(4096ull << std::min<uint8_t>(code, 31));
}

CmMessage CmService::MessageFrom(const Id& id, CmMsgKind kind) const {
  CmMessage msg{};
  msg.kind = kind;
  msg.local_comm_id = id.handle;
  msg.remote_comm_id = id.peer;
  msg.src = id.route.src;
  msg.dst = id.route.dst;
  memcpy(msg.sgid, id.route.sgid, 16);
  memcpy(msg.dgid, id.route.dgid, 16);
  msg.qp_type = id.qp_type;
  msg.remote_qpn = id.remote.qp_num;
  msg.starting_psn = id.local_psn;
  msg.traffic_class = id.traffic_class;
  msg.conn = id.local;
  msg.conn.private_data_len = 0;
  return msg;
}

// The local carrier: a message is delivered after the request that sent it
// has been answered, as a message on the wire would be. A message for
// another host's GID goes on the wire.
bool CmService::GoesToAnotherHost(const uint8_t dgid[16]) const {
  static constexpr uint8_t kNoGid[16] = {};
  return wire_sink_ && memcmp(dgid, kNoGid, 16) != 0 && !IsMulticastGid(dgid) &&
         !GidTableHas(gids_, dgid);
}

void CmService::Send(CmMessage msg) {
  if (GoesToAnotherHost(msg.dgid)) return wire_sink_(msg);
  in_flight_.push_back(msg);
}

void CmService::ReceiveFromWire(const CmMessage& msg) {
  Deliver(msg);
  Pump();
}

void CmService::Pump() {
  // Every delivery may send more (a REQ without a listener answers a REJ);
  // bounded, since no handler answers a REJ, DREP, RTU or SIDR REP.
  for (int budget = 4096; !in_flight_.empty() && budget > 0; --budget) {
    CmMessage msg = in_flight_.front();
    in_flight_.pop_front();
    Deliver(msg);
  }
}

void CmService::Deliver(const CmMessage& msg) {
  if (msg.kind == CmMsgKind::kReq && msg.from_wire && OnDuplicateReq(msg)) return;
  if (msg.kind == CmMsgKind::kReq) return OnReq(msg);
  if (msg.kind == CmMsgKind::kSidrReq) return OnSidrReq(msg);
  Id* id = Find(msg.remote_comm_id);
  // A message for an id that is gone is dropped (on the wire: a stale
  // connection, answered by nobody).
  if (!id) return;
  if (id->peer && id->peer != msg.local_comm_id) return;
  switch (msg.kind) {
    case CmMsgKind::kRep:
      return OnRep(*id, msg);
    case CmMsgKind::kRtu:
      return OnRtu(*id);
    case CmMsgKind::kRej:
      return OnRej(*id, msg);
    case CmMsgKind::kDreq:
      return OnDreq(*id, msg);
    case CmMsgKind::kDrep:
      return OnDrep(*id);
    case CmMsgKind::kSidrRep:
      return OnSidrRep(*id, msg);
    case CmMsgKind::kMra:
      return OnMra(*id, msg);
    default:
      return;
  }
}

void CmService::SendRejectTo(const CmMessage& req, uint32_t reason) {
  CmMessage rej{};
  rej.kind = req.kind == CmMsgKind::kSidrReq ? CmMsgKind::kSidrRep : CmMsgKind::kRej;
  rej.remote_comm_id = req.local_comm_id;
  rej.src = req.dst;
  rej.dst = req.src;
  memcpy(rej.sgid, req.dgid, 16);
  memcpy(rej.dgid, req.sgid, 16);
  rej.status = rej.kind == CmMsgKind::kSidrRep ? kSidrUnsupported : reason;
  rej.conn.private_data_len = CmUserPrivateData(rej.kind);
  Send(rej);
}

// How long a REQ that finds no listener waits for one before it is
// rejected (IB_CM_REJ_INVALID_SERVICE_ID). Programs that exchange
// parameters over one connection and then listen again for the next -
// perftest -R, whose client connects right after the exchange - race the
// listen; on a fabric the REQ's flight and the CM's processing give the
// server that moment, on one host the daemon answers in microseconds. A
// listener that appears within the grace gets the REQ as if it had been
// there; otherwise the REJ comes as before, a second later.
constexpr auto kListenGrace = std::chrono::seconds(1);

void CmService::OnReq(const CmMessage& msg) {
  Id* listener = FindListener(msg.port_space, msg.dst);
  if (!listener) {
    parked_reqs_.push_back({Clock::now() + kListenGrace, msg});
    return;
  }
  if (listener->qp_type == IBV_QPT_UD) return SendRejectTo(msg, kRejInvalidServiceId);
  if (listener->pending >= listener->backlog) return SendRejectTo(msg, kRejConsumerDefined);
  Id child;
  child.handle = next_handle_++;
  child.owner = listener->owner;
  child.channel = listener->channel;
  child.port_space = listener->port_space;
  child.qp_type = listener->qp_type;
  child.state = CmState::kReqRcvd;
  child.flags = listener->flags;
  child.route.pkey = 0xffff;
  child.route.path_mtu = active_mtu_;
  child.route.src = msg.dst;
  child.route.dst = msg.src;
  child.listener = listener->handle;
  child.peer = msg.local_comm_id;
  child.remote = msg.conn;
  child.remote_psn = msg.starting_psn;
  child.peer_response_time = CmTimeOfCode(msg.local_cm_response_timeout);
  child.peer_max_retries = msg.max_cm_retries;
  child.local_psn = RandomPsn();  // before the accept: the QP reaches RTS first
  // What the REQ offers seen from this side: its initiator depth is what
  // this QP must answer, its responder resources what this QP may issue.
  child.responder_resources = msg.conn.initiator_depth;
  child.initiator_depth = msg.conn.responder_resources;
  memcpy(child.remote_gid, msg.sgid, 16);
  child.traffic_class = msg.traffic_class;  // the kernel's cm_format_path_from_req
  SetRouteFromAddrs(child);
  memcpy(child.route.dgid, msg.sgid, 16);
  listener->pending++;
  const uint32_t listen_handle = listener->handle;
  ids_[child.handle] = child;
  CmEventRecord rec = EventFor(child, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
  rec.listen_id = listen_handle;
  rec.conn = msg.conn;
  PushEvent(child, rec);
}

void CmService::RetryParkedRequests() {
  if (parked_reqs_.empty()) return;
  const auto now = Clock::now();
  std::vector<std::pair<Clock::time_point, CmMessage>> parked;
  parked.swap(parked_reqs_);
  for (const auto& [deadline, msg] : parked) {
    // The connecting id is gone (a local one; another host's is not known).
    if (!msg.from_wire && !Find(msg.local_comm_id)) continue;
    if (FindListener(msg.port_space, msg.dst)) {
      msg.kind == CmMsgKind::kSidrReq ? OnSidrReq(msg) : OnReq(msg);
    } else if (deadline <= now) {
      SendRejectTo(msg, kRejInvalidServiceId);
    } else {
      parked_reqs_.push_back({deadline, msg});
    }
  }
}

void CmService::OnSidrReq(const CmMessage& msg) {
  // A SIDR REQ sent again while the first waits for the application: the
  // same request (ib_cm drops it too).
  for (const auto& [h, id] : ids_) {
    if (msg.from_wire && id.state == CmState::kSidrReqRcvd && id.peer == msg.local_comm_id &&
        memcmp(id.route.dgid, msg.sgid, 16) == 0) {
      counters_.duplicates++;
      return;
    }
  }
  Id* listener = FindListener(msg.port_space, msg.dst);
  // As a REQ: one that finds no listener waits for one a moment (perftest
  // -R -c UD's client resolves its second connection while its server
  // listens again).
  if (!listener) {
    parked_reqs_.push_back({Clock::now() + kListenGrace, msg});
    return;
  }
  if (listener->qp_type != IBV_QPT_UD) return SendRejectTo(msg, 0);
  if (listener->pending >= listener->backlog) return SendRejectTo(msg, 0);
  Id child;
  child.handle = next_handle_++;
  child.owner = listener->owner;
  child.channel = listener->channel;
  child.port_space = listener->port_space;
  child.qp_type = IBV_QPT_UD;
  child.state = CmState::kSidrReqRcvd;
  child.route.pkey = 0xffff;
  child.route.path_mtu = active_mtu_;
  child.route.src = msg.dst;
  child.route.dst = msg.src;
  child.listener = listener->handle;
  child.peer = msg.local_comm_id;
  SetRouteFromAddrs(child);
  memcpy(child.route.dgid, msg.sgid, 16);
  child.traffic_class = msg.traffic_class;  // the SIDR REQ's (its packet's)
  listener->pending++;
  const uint32_t listen_handle = listener->handle;
  ids_[child.handle] = child;
  CmEventRecord rec = EventFor(child, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
  rec.listen_id = listen_handle;
  rec.conn = msg.conn;
  memcpy(rec.ah_dgid, msg.sgid, 16);
  rec.ah_sgid_index = child.route.sgid_index;
  rec.ah_traffic_class = child.traffic_class;
  PushEvent(child, rec);
}

void CmService::OnRep(Id& id, const CmMessage& msg) {
  // A REP the other host sent again (IBA 12.9.8.2, ib_cm's
  // cm_dup_rep_handler): the application has not moved its QP yet - tell
  // the passive side to wait (MRA); already established - our RTU was lost.
  if (msg.from_wire && id.active && id.state == CmState::kRepRcvd) {
    counters_.duplicates++;
    return SendMra(id, /*mraed=*/1);
  }
  if (msg.from_wire && id.active && id.state == CmState::kEstablished) {
    counters_.duplicates++;
    counters_.rtus_resent++;
    return Send(MessageFrom(id, CmMsgKind::kRtu));
  }
  if (id.state != CmState::kReqSent) return;
  Answered(id);
  id.peer = msg.local_comm_id;
  id.remote = msg.conn;
  id.remote_psn = msg.starting_psn;
  memcpy(id.remote_gid, msg.sgid, 16);
  // The REP's answer bounds what this side asked for.
  id.responder_resources = std::min(id.responder_resources, msg.conn.initiator_depth);
  id.initiator_depth = std::min(id.initiator_depth, msg.conn.responder_resources);
  id.state = CmState::kRepRcvd;
  CmEventRecord rec = EventFor(id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0);
  rec.conn = msg.conn;
  PushEvent(id, rec);
}

void CmService::OnRtu(Id& id) {
  if (id.state != CmState::kRepSent) return;
  Answered(id);
  id.state = CmState::kEstablished;
  PushEvent(id, EventFor(id, RDMA_CM_EVENT_ESTABLISHED, 0));
}

void CmService::OnRej(Id& id, const CmMessage& msg) {
  switch (id.state) {
    case CmState::kReqSent:
    case CmState::kReqRcvd:
    case CmState::kRepSent:
    case CmState::kRepRcvd:
      break;
    default:
      return;
  }
  ReleaseRequest(id);
  Answered(id);
  id.state = CmState::kRejected;
  CmEventRecord rec = EventFor(id, RDMA_CM_EVENT_REJECTED, static_cast<int32_t>(msg.status));
  rec.conn = msg.conn;
  PushEvent(id, rec);
}

void CmService::OnDreq(Id& id, const CmMessage& msg) {
  (void)msg;
  switch (id.state) {
    case CmState::kEstablished:
    case CmState::kRepSent:
    case CmState::kRepRcvd:
      id.state = CmState::kDreqRcvd;
      PushEvent(id, EventFor(id, RDMA_CM_EVENT_DISCONNECTED, 0));
      return;
    case CmState::kDreqSent:
      // Both sides disconnected at once: answer, and wait for the peer's DREP.
      Send(MessageFrom(id, CmMsgKind::kDrep));
      return;
    case CmState::kDisconnected:
      Send(MessageFrom(id, CmMsgKind::kDrep));
      return;
    default:
      return;
  }
}

void CmService::OnDrep(Id& id) {
  if (id.state != CmState::kDreqSent) return;
  Answered(id);
  id.state = CmState::kDisconnected;
  PushEvent(id, EventFor(id, RDMA_CM_EVENT_DISCONNECTED, 0));
}

void CmService::OnSidrRep(Id& id, const CmMessage& msg) {
  if (id.state != CmState::kSidrReqSent) return;
  Answered(id);
  if (msg.status != 0) {
    id.state = CmState::kRejected;
    CmEventRecord rec = EventFor(id, RDMA_CM_EVENT_UNREACHABLE, static_cast<int32_t>(msg.status));
    rec.conn = msg.conn;
    PushEvent(id, rec);
    return;
  }
  id.peer = msg.local_comm_id;
  id.state = CmState::kSidrDone;
  memcpy(id.remote_gid, msg.sgid, 16);
  memcpy(id.route.dgid, msg.sgid, 16);
  CmEventRecord rec = EventFor(id, RDMA_CM_EVENT_ESTABLISHED, 0);
  rec.conn = msg.conn;
  memcpy(rec.ah_dgid, msg.sgid, 16);
  rec.ah_sgid_index = id.route.sgid_index;
  rec.ah_traffic_class = id.traffic_class;
  PushEvent(id, rec);
}

// IBA 12.6.6: the receiver of an MRA waits the service timeout it names
// (plus a response time) before it sends its message again.
void CmService::OnMra(Id& id, const CmMessage& msg) {
  counters_.mras_received++;
  const bool for_req = msg.mraed == 0 && id.state == CmState::kReqSent;
  const bool for_rep = msg.mraed == 1 && id.state == CmState::kRepSent;
  if ((!for_req && !for_rep) || !id.unanswered) return;
  id.timer = true;
  id.deadline = Clock::now() + CmTimeOfCode(msg.service_timeout) + id.resend_interval;
}

bool CmService::OnDuplicateReq(const CmMessage& msg) {
  for (auto& [h, id] : ids_) {
    if (id.active || id.peer != msg.local_comm_id || memcmp(id.remote_gid, msg.sgid, 16) != 0)
      continue;
    switch (id.state) {
      case CmState::kReqRcvd:
        // The application has not accepted yet: the other side is to wait
        // (as ib_cm's prepared MRA, sent for a duplicate REQ).
        counters_.duplicates++;
        SendMra(id, /*mraed=*/0);
        return true;
      case CmState::kRepSent:
      case CmState::kEstablished:
      case CmState::kDreqSent:
      case CmState::kDreqRcvd:
        // The REP goes again on its own timer; later, the REQ is stale.
        counters_.duplicates++;
        return true;
      default:
        continue;  // an old connection's id: this is a new request
    }
  }
  for (const auto& [deadline, parked] : parked_reqs_) {
    if (parked.from_wire && parked.local_comm_id == msg.local_comm_id &&
        memcmp(parked.sgid, msg.sgid, 16) == 0) {
      counters_.duplicates++;
      return true;
    }
  }
  return false;
}

void CmService::SendMra(const Id& id, uint8_t mraed) {
  CmMessage mra = MessageFrom(id, CmMsgKind::kMra);
  mra.mraed = mraed;
  mra.service_timeout = kCmMraServiceTimeoutCode;
  counters_.mras_sent++;
  Send(mra);
}

void CmService::SendUntilAnswered(Id& id, const CmMessage& msg, std::chrono::nanoseconds interval,
                                  int limit) {
  id.unanswered = msg;
  id.resends = 0;
  id.resend_limit = limit;
  id.resend_interval = interval;
  id.timer = true;
  id.deadline = Clock::now() + interval;
  Send(msg);
}

void CmService::Answered(Id& id) {
  id.unanswered.reset();
  id.resends = 0;
  id.timer = false;
}

// The last try of a message went unanswered (the kernel's ib_cm reports
// REQ_ERROR, REP_ERROR, DREQ_ERROR; rdma_cm turns them into these events).
void CmService::ResendsExhausted(Id& id) {
  const CmState state = id.state;
  Answered(id);
  switch (state) {
    case CmState::kReqSent:
    case CmState::kSidrReqSent:
      id.state = CmState::kRejected;
      PushEvent(id, EventFor(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT));
      return;
    case CmState::kRepSent: {
      // No RTU: the connection is refused with reason Timeout, so that an
      // active side whose RTUs were lost learns it too.
      CmMessage rej = MessageFrom(id, CmMsgKind::kRej);
      rej.status = kRejTimeout;
      rej.rejected = 1;  // the REP
      rej.conn.private_data_len = CmUserPrivateData(CmMsgKind::kRej);
      Send(rej);
      id.state = CmState::kRejected;
      PushEvent(id, EventFor(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT));
      return;
    }
    case CmState::kDreqSent:
      id.state = CmState::kDisconnected;
      PushEvent(id, EventFor(id, RDMA_CM_EVENT_DISCONNECTED, -ETIMEDOUT));
      return;
    default:
      return;
  }
}

// A request leaves its listener's backlog (accepted, rejected or gone).
void CmService::ReleaseRequest(Id& id) {
  if (!id.listener) return;
  if (Id* l = Find(id.listener); l && l->pending > 0) l->pending--;
  id.listener = 0;
}

// What destroying an id (or its process dying) tells the other side.
void CmService::LeaveConnection(Id& id) {
  switch (id.state) {
    case CmState::kReqSent: {
      CmMessage rej = MessageFrom(id, CmMsgKind::kRej);
      rej.status = kRejTimeout;
      rej.conn.private_data_len = CmUserPrivateData(CmMsgKind::kRej);
      if (id.peer) Send(rej);
      // Not yet answered: the REQ may still be with a listener. Tell the
      // request's id there, found by our comm id.
      for (auto& [h, other] : ids_) {
        if (other.peer == id.handle && other.state == CmState::kReqRcvd) {
          rej.remote_comm_id = h;
          Send(rej);
        }
      }
      break;
    }
    case CmState::kReqRcvd:
    case CmState::kRepSent:
    case CmState::kRepRcvd: {
      CmMessage rej = MessageFrom(id, CmMsgKind::kRej);
      rej.status = id.state == CmState::kReqRcvd ? kRejConsumerDefined : kRejTimeout;
      rej.conn.private_data_len = CmUserPrivateData(CmMsgKind::kRej);
      Send(rej);
      break;
    }
    case CmState::kEstablished:
      Send(MessageFrom(id, CmMsgKind::kDreq));
      break;
    case CmState::kDreqRcvd:
      Send(MessageFrom(id, CmMsgKind::kDrep));
      break;
    default:
      break;
  }
}

}  // namespace softverbs::daemon
