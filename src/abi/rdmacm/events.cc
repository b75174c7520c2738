// Event channels and events: rdma_create_event_channel,
// rdma_destroy_event_channel, rdma_get_cm_event, rdma_ack_cm_event,
// rdma_event_str. A channel is a connection to the daemon (role kCmEvents)
// on which it pushes one CmEventRecord per event; its fd is the channel's
// fd, so poll/epoll and O_NONBLOCK work on it as on the kernel's rdma_cm
// file.
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <new>

#include "abi/ibverbs/softverbs_private.h"
#include "abi/rdmacm/cm_internal.h"
#include "common/runtime_dir.h"
#include "common/unix_socket.h"

using namespace softverbs::rdmacm;
using softverbs::protocol::CmEventRecord;

namespace softverbs::rdmacm {

namespace {

void CopyConn(Event* evt, const protocol::CmConnParam& src) {
  rdma_conn_param& dst = evt->pub.param.conn;
  uint8_t len = std::min<uint8_t>(src.private_data_len, protocol::kCmMaxPrivateData);
  dst.private_data_len = len;
  if (len) {
    memcpy(evt->private_data, src.private_data, len);
    dst.private_data = evt->private_data;
  }
  dst.responder_resources = src.responder_resources;
  dst.initiator_depth = src.initiator_depth;
  dst.flow_control = src.flow_control;
  dst.retry_count = src.retry_count;
  dst.rnr_retry_count = src.rnr_retry_count;
  dst.srq = src.srq;
  dst.qp_num = src.qp_num;
}

void CopyUd(Event* evt, const CmEventRecord& rec) {
  rdma_ud_param& dst = evt->pub.param.ud;
  uint8_t len = std::min<uint8_t>(rec.conn.private_data_len, protocol::kCmMaxPrivateData);
  dst.private_data_len = len;
  if (len) {
    memcpy(evt->private_data, rec.conn.private_data, len);
    dst.private_data = evt->private_data;
  }
  ibv_ah_attr& ah = dst.ah_attr;
  memset(&ah, 0, sizeof(ah));
  ah.is_global = 1;
  memcpy(ah.grh.dgid.raw, rec.ah_dgid, 16);
  ah.grh.sgid_index = rec.ah_sgid_index;
  ah.grh.traffic_class = rec.ah_traffic_class;
  ah.grh.hop_limit = 64;
  ah.port_num = 1;
  dst.qp_num = rec.conn.qp_num;
  dst.qkey = rec.conn.qkey;
}

bool IsUd(const Id* id) {
  return id->id.qp_type == IBV_QPT_UD;
}

// A request's new id (librdmacm's ucma_process_conn_req).
Id* NewRequestId(Id* listener, const CmEventRecord& rec) {
  Id* child =
      AllocId(listener->id.channel, listener->id.context, listener->id.ps, listener->id.qp_type);
  if (!child) return nullptr;
  child->handle = rec.id;
  InsertId(child);
  child->initiator_depth = rec.conn.initiator_depth;
  child->responder_resources = rec.conn.responder_resources;
  ApplyRoute(child, rec.route);
  if (listener->sync && rdma_migrate_id(&child->id, nullptr)) {
    rdma_destroy_id(&child->id);
    return nullptr;
  }
  return child;
}

// The join's group, found by its token.
Multicast* GroupOf(Id* id, uint64_t token) {
  std::lock_guard lock(id->mut);
  for (Multicast* mc : id->groups) {
    if (mc->token == token) return mc;
  }
  return nullptr;
}

}  // namespace

Id* AllocId(rdma_event_channel* channel, void* context, rdma_port_space ps, ibv_qp_type qp_type) {
  Id* id = new (std::nothrow) Id;
  if (!id) return nullptr;
  id->id.context = context;
  id->id.ps = ps;
  id->id.qp_type = qp_type;
  if (!channel) {
    channel = rdma_create_event_channel();
    if (!channel) {
      delete id;
      return nullptr;
    }
    id->sync = true;
  }
  id->id.channel = channel;
  return id;
}

void FreeId(Id* id) {
  RemoveId(id);
  if (id->sync) rdma_destroy_event_channel(id->id.channel);
  delete id->qp_init_attr;
  for (Multicast* mc : id->groups) delete mc;
  delete id;
}

int Complete(Id* id) {
  if (!id->sync) return 0;
  if (id->id.event) {
    rdma_ack_cm_event(id->id.event);
    id->id.event = nullptr;
  }
  if (rdma_get_cm_event(id->id.channel, &id->id.event)) return -1;
  rdma_cm_event* e = id->id.event;
  if (!e->status) return 0;
  int err =
      e->event == RDMA_CM_EVENT_REJECTED ? ECONNREFUSED : (e->status < 0 ? -e->status : e->status);
  errno = err;
  return -1;
}

}  // namespace softverbs::rdmacm

extern "C" {

__attribute__((visibility("default"))) rdma_event_channel* rdma_create_event_channel() {
  if (InitDevice()) return nullptr;
  int fd = softverbs::ConnectSeqpacket(softverbs::DaemonSocketPath(softverbs::RuntimeDirPath()));
  if (fd < 0) {
    return RejectNull(-fd, "rdma_create_event_channel: cannot reach the softverbs daemon: %s",
                      strerror(-fd));
  }
  softverbs::protocol::HelloRequest hello{};
  hello.role = static_cast<uint32_t>(softverbs::protocol::Role::kCmEvents);
  hello.pid = static_cast<uint32_t>(getpid());
  hello.context_token = softverbs_client_id(TheDevice().verbs);
  softverbs::protocol::RequestHeader hdr{softverbs::protocol::kProtocolVersion,
                                         static_cast<uint16_t>(softverbs::protocol::Op::kHello), 0,
                                         sizeof(hello), 1};
  std::vector<uint8_t> buf(softverbs::protocol::kMaxMessageSize);
  softverbs::protocol::ReplyHeader rh{};
  ssize_t n = -EPROTO;
  if (softverbs::SendMessage(fd, &hdr, sizeof(hdr), &hello, sizeof(hello)) == 0) {
    n = softverbs::ReceiveMessage(fd, buf.data(), buf.size(), nullptr);
  }
  if (n >= static_cast<ssize_t>(sizeof(rh))) memcpy(&rh, buf.data(), sizeof(rh));
  if (n < static_cast<ssize_t>(sizeof(rh) + sizeof(softverbs::protocol::HelloReply)) || rh.err) {
    close(fd);
    return RejectNull(ENODEV, "rdma_create_event_channel: the daemon refused the channel (%s)",
                      strerror(rh.err ? rh.err : EPROTO));
  }
  softverbs::protocol::HelloReply reply;
  memcpy(&reply, buf.data() + sizeof(rh), sizeof(reply));
  auto* ch = static_cast<Channel*>(calloc(1, sizeof(Channel)));
  if (!ch) {
    close(fd);
    errno = ENOMEM;
    return nullptr;
  }
  ch->pub.fd = fd;
  ch->number = static_cast<uint32_t>(reply.context_token);
  return &ch->pub;
}

__attribute__((visibility("default"))) void rdma_destroy_event_channel(
    rdma_event_channel* channel) {
  if (!channel) return;
  close(channel->fd);
  free(ChannelOf(channel));
}

__attribute__((visibility("default"))) int rdma_get_cm_event(rdma_event_channel* channel,
                                                             rdma_cm_event** event) {
  if (!event) return RejectMinusOne(EINVAL, "rdma_get_cm_event: event is NULL");
  if (!channel) return RejectMinusOne(EINVAL, "rdma_get_cm_event: channel is NULL");
  // The call reads its own descriptor of the channel, as a read of the
  // kernel's rdma_cm file holds a reference to it: a thread waiting here
  // while another destroys the channel keeps waiting (rping's CM thread at
  // exit) instead of failing with EBADF after an event it skipped, and never
  // reads a descriptor number the process has reused meanwhile.
  const int fd = fcntl(channel->fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) {
    return RejectMinusOne(errno, "rdma_get_cm_event: the channel's descriptor: %s",
                          strerror(errno));
  }
  struct CloseOnReturn {
    int fd;
    ~CloseOnReturn() { close(fd); }
  } own_fd{fd};
  for (;;) {
    CmEventRecord rec;
    ssize_t n = softverbs::ReceiveMessage(fd, &rec, sizeof(rec), nullptr);
    if (n < 0) {
      // EAGAIN on a non-blocking channel is no rejection: stay silent.
      errno = static_cast<int>(-n);
      if (errno == EAGAIN || errno == EINTR) return -1;
      return RejectMinusOne(errno, "rdma_get_cm_event: reading the channel failed: %s",
                            strerror(errno));
    }
    if (n == 0) return RejectMinusOne(ENODEV, "rdma_get_cm_event: the softverbs daemon went away");
    if (n != static_cast<ssize_t>(sizeof(rec))) continue;
    const bool request = rec.event == RDMA_CM_EVENT_CONNECT_REQUEST;
    Id* owner = LookupId(request ? rec.listen_id : rec.id);
    if (!owner) continue;  // an event of an id already destroyed
    auto* evt = new (std::nothrow) Event;
    if (!evt) return RejectMinusOne(ENOMEM, "rdma_get_cm_event: out of memory");
    evt->owner = owner;
    evt->pub.event = static_cast<rdma_cm_event_type>(rec.event);
    evt->pub.status = rec.status;
    evt->pub.id = &owner->id;
    switch (rec.event) {
      case RDMA_CM_EVENT_ADDR_RESOLVED:
      case RDMA_CM_EVENT_ROUTE_RESOLVED:
        ApplyRoute(owner, rec.route);
        if (rec.event == RDMA_CM_EVENT_ROUTE_RESOLVED) {
          ibv_sa_path_rec& p = owner->path;
          memset(&p, 0, sizeof(p));
          memcpy(p.sgid.raw, rec.route.sgid, 16);
          memcpy(p.dgid.raw, rec.route.dgid, 16);
          p.pkey = htobe16(rec.route.pkey);
          p.hop_limit = 64;
          p.reversible = 1;
          p.numb_path = 1;
          p.mtu_selector = 2;
          p.mtu = static_cast<uint8_t>(rec.route.path_mtu);
          p.rate_selector = 2;
          p.rate = 3;  // IBV_RATE_10_GBPS
          p.packet_life_time_selector = 2;
          p.packet_life_time = 16;
          owner->id.route.path_rec = &owner->path;
          owner->id.route.num_paths = 1;
        }
        break;
      case RDMA_CM_EVENT_CONNECT_REQUEST: {
        if (IsUd(owner)) {
          CopyUd(evt, rec);
        } else {
          CopyConn(evt, rec.conn);
        }
        Id* child = NewRequestId(owner, rec);
        if (!child) {
          delete evt;
          continue;
        }
        evt->pub.listen_id = &owner->id;
        evt->pub.id = &child->id;
        break;
      }
      case RDMA_CM_EVENT_CONNECT_RESPONSE:
        CopyConn(evt, rec.conn);
        if (owner->id.qp) {
          evt->pub.status = ProcessConnectResponse(owner) ? -errno : 0;
          if (!evt->pub.status) {
            evt->pub.event = RDMA_CM_EVENT_ESTABLISHED;
          } else {
            evt->pub.event = RDMA_CM_EVENT_CONNECT_ERROR;
            owner->connect_error = true;
          }
        }
        break;
      case RDMA_CM_EVENT_ESTABLISHED:
        if (IsUd(owner)) {
          CopyUd(evt, rec);
        } else {
          CopyConn(evt, rec.conn);
        }
        break;
      case RDMA_CM_EVENT_REJECTED:
      case RDMA_CM_EVENT_DISCONNECTED:
        if (owner->connect_error) {
          delete evt;
          continue;
        }
        CopyConn(evt, rec.conn);
        if (rec.event == RDMA_CM_EVENT_REJECTED) ModifyQpErr(owner);
        break;
      case RDMA_CM_EVENT_UNREACHABLE:
        if (IsUd(owner)) {
          CopyUd(evt, rec);
        } else {
          CopyConn(evt, rec.conn);
        }
        break;
      case RDMA_CM_EVENT_MULTICAST_JOIN:
      case RDMA_CM_EVENT_MULTICAST_ERROR: {
        Multicast* mc = GroupOf(owner, rec.token);
        if (!mc) {
          delete evt;
          continue;
        }
        evt->mc = mc;
        CopyUd(evt, rec);
        evt->pub.param.ud.private_data = mc->context;
        if (rec.event == RDMA_CM_EVENT_MULTICAST_JOIN) {
          mc->mgid = evt->pub.param.ud.ah_attr.grh.dgid;
          mc->mlid = evt->pub.param.ud.ah_attr.dlid;
          if (owner->id.qp && mc->join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER) {
            int err = ibv_attach_mcast(owner->id.qp, &mc->mgid, mc->mlid);
            if (err) {
              evt->pub.status = -err;
              evt->pub.event = RDMA_CM_EVENT_MULTICAST_ERROR;
            }
          }
        }
        break;
      }
      default:
        ApplyRoute(owner, rec.route);
        break;
    }
    {
      std::lock_guard lock(owner->mut);
      owner->events_reported++;
      if (evt->mc) evt->mc->events_reported++;
    }
    *event = &evt->pub;
    return 0;
  }
}

__attribute__((visibility("default"))) int rdma_ack_cm_event(rdma_cm_event* event) {
  if (!event) return RejectMinusOne(EINVAL, "rdma_ack_cm_event: event is NULL");
  Event* evt = reinterpret_cast<Event*>(event);
  {
    std::lock_guard lock(evt->owner->mut);
    if (evt->mc) evt->mc->events_completed++;
    evt->owner->events_completed++;
    evt->owner->cond.notify_all();
  }
  delete evt;
  return 0;
}

__attribute__((visibility("default"))) const char* rdma_event_str(rdma_cm_event_type event) {
  switch (event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      return "RDMA_CM_EVENT_ADDR_RESOLVED";
    case RDMA_CM_EVENT_ADDR_ERROR:
      return "RDMA_CM_EVENT_ADDR_ERROR";
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
      return "RDMA_CM_EVENT_ROUTE_RESOLVED";
    case RDMA_CM_EVENT_ROUTE_ERROR:
      return "RDMA_CM_EVENT_ROUTE_ERROR";
    case RDMA_CM_EVENT_CONNECT_REQUEST:
      return "RDMA_CM_EVENT_CONNECT_REQUEST";
    case RDMA_CM_EVENT_CONNECT_RESPONSE:
      return "RDMA_CM_EVENT_CONNECT_RESPONSE";
    case RDMA_CM_EVENT_CONNECT_ERROR:
      return "RDMA_CM_EVENT_CONNECT_ERROR";
    case RDMA_CM_EVENT_UNREACHABLE:
      return "RDMA_CM_EVENT_UNREACHABLE";
    case RDMA_CM_EVENT_REJECTED:
      return "RDMA_CM_EVENT_REJECTED";
    case RDMA_CM_EVENT_ESTABLISHED:
      return "RDMA_CM_EVENT_ESTABLISHED";
    case RDMA_CM_EVENT_DISCONNECTED:
      return "RDMA_CM_EVENT_DISCONNECTED";
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      return "RDMA_CM_EVENT_DEVICE_REMOVAL";
    case RDMA_CM_EVENT_MULTICAST_JOIN:
      return "RDMA_CM_EVENT_MULTICAST_JOIN";
    case RDMA_CM_EVENT_MULTICAST_ERROR:
      return "RDMA_CM_EVENT_MULTICAST_ERROR";
    case RDMA_CM_EVENT_ADDR_CHANGE:
      return "RDMA_CM_EVENT_ADDR_CHANGE";
    case RDMA_CM_EVENT_TIMEWAIT_EXIT:
      return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
    default:
      return "UNKNOWN EVENT";
  }
}

}  // extern "C"
