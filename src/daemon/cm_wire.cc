#include "daemon/cm_wire.h"

#include <arpa/inet.h>
#include <rdma/rdma_cma.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <random>

#include "common/log.h"
#include "daemon/wire_service.h"
#include "roce/fault_config.h"

namespace softverbs::daemon {

namespace {

// Local ACK timeout the REQ proposes (4.096 us * 2^18, ~1 s) and the REP's
// target ACK delay (the device's local_ca_ack_delay).
constexpr uint8_t kLocalAckTimeout = 18;
constexpr uint8_t kTargetAckDelay = 15;
constexpr uint16_t kPermissiveLid = 0xffff;  // RoCE: no LIDs (the kernel's IB_LID_PERMISSIVE)

roce::CmAttr AttrOf(CmMsgKind kind) {
  switch (kind) {
    case CmMsgKind::kReq:
      return roce::CmAttr::kReq;
    case CmMsgKind::kRep:
      return roce::CmAttr::kRep;
    case CmMsgKind::kRtu:
      return roce::CmAttr::kRtu;
    case CmMsgKind::kRej:
      return roce::CmAttr::kRej;
    case CmMsgKind::kDreq:
      return roce::CmAttr::kDreq;
    case CmMsgKind::kDrep:
      return roce::CmAttr::kDrep;
    case CmMsgKind::kSidrReq:
      return roce::CmAttr::kSidrReq;
    case CmMsgKind::kSidrRep:
      return roce::CmAttr::kSidrRep;
    case CmMsgKind::kMra:
      return roce::CmAttr::kMra;
  }
  return roce::CmAttr::kMra;
}

bool KindOf(roce::CmAttr attr, CmMsgKind* kind) {
  switch (attr) {
    case roce::CmAttr::kReq:
      *kind = CmMsgKind::kReq;
      return true;
    case roce::CmAttr::kRep:
      *kind = CmMsgKind::kRep;
      return true;
    case roce::CmAttr::kRtu:
      *kind = CmMsgKind::kRtu;
      return true;
    case roce::CmAttr::kRej:
      *kind = CmMsgKind::kRej;
      return true;
    case roce::CmAttr::kDreq:
      *kind = CmMsgKind::kDreq;
      return true;
    case roce::CmAttr::kDrep:
      *kind = CmMsgKind::kDrep;
      return true;
    case roce::CmAttr::kSidrReq:
      *kind = CmMsgKind::kSidrReq;
      return true;
    case roce::CmAttr::kSidrRep:
      *kind = CmMsgKind::kSidrRep;
      return true;
    case roce::CmAttr::kMra:
      *kind = CmMsgKind::kMra;
      return true;
    default:
      return false;
  }
}

// The port space of a service id's bits 16..23 (RDMA_PS_*).
bool PortSpaceOf(uint64_t service_id, uint32_t* ps) {
  if ((service_id & 0xffffffffff000000ull) != 0x0000000001000000ull) return false;
  const uint32_t byte = (service_id >> 16) & 0xff;
  for (uint32_t known : {RDMA_PS_TCP, RDMA_PS_UDP, RDMA_PS_IB, RDMA_PS_IPOIB}) {
    if ((known & 0xff) == byte) {
      *ps = known;
      return true;
    }
  }
  return false;
}

void PutIp(const CmAddr& a, uint8_t out[16]) {
  memset(out, 0, 16);
  if (a.sin6_family == AF_INET) {
    memcpy(out + 12, &reinterpret_cast<const sockaddr_in&>(a).sin_addr, 4);
  } else {
    memcpy(out, &a.sin6_addr, 16);
  }
}

CmAddr AddrOf(bool ipv4, const uint8_t ip[16], uint16_t port) {
  CmAddr a{};
  if (ipv4) {
    auto& v4 = reinterpret_cast<sockaddr_in&>(a);
    v4.sin_family = AF_INET;
    memcpy(&v4.sin_addr, ip + 12, 4);
  } else {
    a.sin6_family = AF_INET6;
    memcpy(&a.sin6_addr, ip, 16);
  }
  SetPort(&a, port);
  return a;
}

// Bytes of the user's private data a kind carries on the wire (after
// rdma_cm's header in a REQ and SIDR REQ), as the kernel reports them.
size_t UserPrivateBytes(roce::CmAttr attr) {
  const size_t all = roce::CmPrivateDataBytes(attr);
  const bool has_ip_header = attr == roce::CmAttr::kReq || attr == roce::CmAttr::kSidrReq;
  return has_ip_header ? all - sizeof(roce::CmaIpHeader) : all;
}

}  // namespace

uint8_t CmUserPrivateData(CmMsgKind kind) {
  return static_cast<uint8_t>(UserPrivateBytes(AttrOf(kind)));
}

WireCommIds WireCommIds::Random() {
  std::random_device rd;
  return WireCommIds(static_cast<uint32_t>(rd()));
}

roce::CmMad MadOf(const CmMessage& msg, ibv_mtu path_mtu, uint64_t ca_guid,
                  const WireCommIds& ids) {
  roce::CmMad m;
  m.attr = AttrOf(msg.kind);
  m.local_comm_id = ids.ToWire(msg.local_comm_id);
  m.transaction_id = (static_cast<uint64_t>(static_cast<uint8_t>(msg.kind)) << 32) |
                     (msg.kind == CmMsgKind::kSidrRep ? msg.remote_comm_id : m.local_comm_id);
  m.remote_comm_id = msg.remote_comm_id;
  m.qkey = msg.conn.qkey;
  m.qpn = msg.kind == CmMsgKind::kDreq ? msg.remote_qpn : msg.conn.qp_num;
  m.responder_resources = msg.conn.responder_resources;
  m.initiator_depth = msg.conn.initiator_depth;
  m.flow_control = msg.conn.flow_control;
  m.starting_psn = msg.starting_psn;
  m.retry_count = msg.conn.retry_count;
  m.rnr_retry_count = msg.conn.rnr_retry_count;
  m.srq = msg.conn.srq;
  m.local_ca_guid = ca_guid;
  const roce::CmAttr attr = m.attr;
  const size_t user = UserPrivateBytes(attr);
  uint8_t* user_data = m.private_data;
  if (attr == roce::CmAttr::kReq || attr == roce::CmAttr::kSidrReq) {
    m.service_id = roce::CmaServiceId(msg.port_space, PortOf(msg.dst));
    m.pkey = 0xffff;
    roce::CmaIpHeader h{};
    h.cma_version = 0;
    h.ip_version = msg.src.sin6_family == AF_INET ? 0x40 : 0x60;
    const uint16_t port = htons(PortOf(msg.src));
    memcpy(h.port_be, &port, 2);
    PutIp(msg.src, h.src_addr);
    PutIp(msg.dst, h.dst_addr);
    memcpy(m.private_data, &h, sizeof(h));
    user_data += sizeof(h);
  }
  if (attr == roce::CmAttr::kReq) {
    // The kernel's cm_req_set_qp_type: UC 1; XRC 3 with extended type 1.
    m.transport = msg.qp_type == IBV_QPT_UC ? 1 : msg.qp_type == IBV_QPT_XRC_SEND ? 3 : 0;
    m.extended_transport = msg.qp_type == IBV_QPT_XRC_SEND ? 1 : 0;
    m.remote_cm_response_timeout = kCmResponseTimeoutCode;
    m.local_cm_response_timeout = kCmResponseTimeoutCode;
    m.max_cm_retries = kCmReqRetries;
    m.path_mtu = static_cast<uint8_t>(path_mtu);
    m.local_lid = kPermissiveLid;
    m.remote_lid = kPermissiveLid;
    memcpy(m.local_gid, msg.sgid, 16);
    memcpy(m.remote_gid, msg.dgid, 16);
    m.hop_limit = 64;
    m.traffic_class = msg.traffic_class;
    m.local_ack_timeout = kLocalAckTimeout;
  }
  if (attr == roce::CmAttr::kRep) m.target_ack_delay = kTargetAckDelay;
  if (attr == roce::CmAttr::kRej) {
    m.reason = static_cast<uint16_t>(msg.status);
    m.message_rejected = msg.rejected;  // 0 a REQ, 1 a REP that got no RTU
  }
  if (attr == roce::CmAttr::kMra) {
    m.message_mraed = msg.mraed;
    m.service_timeout = msg.service_timeout;
  }
  if (attr == roce::CmAttr::kSidrRep) {
    m.status = static_cast<uint8_t>(msg.status);
    m.service_id = roce::CmaServiceId(msg.port_space, PortOf(msg.src));
  }
  memcpy(user_data, msg.conn.private_data,
         std::min<size_t>({user, msg.conn.private_data_len, sizeof(msg.conn.private_data)}));
  return m;
}

bool MessageOf(const roce::CmMad& mad, const uint8_t sgid[16], const uint8_t dgid[16],
               const WireCommIds& ids, CmMessage* msg) {
  *msg = CmMessage{};
  if (!KindOf(mad.attr, &msg->kind)) return false;
  msg->from_wire = true;
  msg->local_comm_id = mad.local_comm_id;
  msg->remote_comm_id = ids.FromWire(mad.remote_comm_id);
  memcpy(msg->sgid, sgid, 16);
  memcpy(msg->dgid, dgid, 16);
  msg->starting_psn = mad.starting_psn;
  msg->traffic_class = mad.traffic_class;
  msg->conn.qp_num = mad.qpn;
  msg->conn.qkey = mad.qkey;
  msg->conn.responder_resources = mad.responder_resources;
  msg->conn.initiator_depth = mad.initiator_depth;
  msg->conn.flow_control = mad.flow_control;
  msg->conn.retry_count = mad.retry_count;
  msg->conn.rnr_retry_count = mad.rnr_retry_count;
  msg->conn.srq = mad.srq;
  const uint8_t* user_data = mad.private_data;
  if (mad.attr == roce::CmAttr::kReq || mad.attr == roce::CmAttr::kSidrReq) {
    if (!PortSpaceOf(mad.service_id, &msg->port_space)) return false;
    roce::CmaIpHeader h;
    memcpy(&h, mad.private_data, sizeof(h));
    const bool ipv4 = (h.ip_version >> 4) == 4;
    if (h.cma_version != 0 || (!ipv4 && (h.ip_version >> 4) != 6)) return false;
    uint16_t src_port;
    memcpy(&src_port, h.port_be, 2);
    msg->src = AddrOf(ipv4, h.src_addr, ntohs(src_port));
    msg->dst = AddrOf(ipv4, h.dst_addr, static_cast<uint16_t>(mad.service_id & 0xffff));
    user_data += sizeof(h);
    msg->qp_type = mad.transport == 1                                  ? IBV_QPT_UC
                   : mad.transport == 3 && mad.extended_transport == 1 ? IBV_QPT_XRC_SEND
                                                                       : IBV_QPT_RC;
  }
  if (mad.attr == roce::CmAttr::kSidrReq) msg->remote_comm_id = 0;
  if (mad.attr == roce::CmAttr::kRej) {
    msg->status = mad.reason;
    msg->rejected = mad.message_rejected;
  }
  if (mad.attr == roce::CmAttr::kMra) {
    msg->mraed = mad.message_mraed;
    msg->service_timeout = mad.service_timeout;
  }
  if (mad.attr == roce::CmAttr::kReq) {
    msg->local_cm_response_timeout = mad.local_cm_response_timeout;
    msg->max_cm_retries = mad.max_cm_retries;
  }
  if (mad.attr == roce::CmAttr::kSidrRep) msg->status = mad.status;
  const size_t user = std::min<size_t>(UserPrivateBytes(mad.attr), sizeof(msg->conn.private_data));
  memcpy(msg->conn.private_data, user_data, user);
  msg->conn.private_data_len = static_cast<uint8_t>(user);
  return true;
}

void ConnectCmToWire(CmService& cm, WireService& wire, ibv_mtu path_mtu, uint64_t ca_guid) {
  // SOFTVERBS_ROCE_FAULTS' cm_drop: CM MADs this device does not send (the
  // carrier has already refused a malformed setting: none then).
  roce::FaultConfig faults;
  std::string error;
  if (!roce::FaultConfigFromEnvironment(&faults, &error)) faults = roce::FaultConfig{};
  const WireCommIds ids = WireCommIds::Random();
  cm.set_wire_sink(
      [&wire, path_mtu, ca_guid, ids, drops = faults.cm_drop](const CmMessage& msg) mutable {
        const roce::CmMad m = MadOf(msg, path_mtu, ca_guid, ids);
        const size_t kind = static_cast<uint16_t>(m.attr) - roce::FaultConfig::kFirstCmAttr;
        if (kind < drops.size() && drops[kind] > 0) {
          drops[kind]--;
          Log("fault injection (cm_drop): CM MAD 0x%x not sent", static_cast<unsigned>(m.attr));
          return;
        }
        std::array<uint8_t, roce::kMadBytes> mad{};
        if (roce::EncodeCmMad(m, mad)) wire.SendGsi(msg.sgid, msg.dgid, msg.traffic_class, mad);
      });
  cm.set_listen_hook([&wire] { wire.OpenCarriers(); });
  wire.set_gsi_sink([&cm, ids](const uint8_t sgid[16], const uint8_t dgid[16],
                               uint8_t traffic_class, std::span<const uint8_t> bytes) {
    roce::CmMad mad;
    CmMessage msg;
    if (roce::DecodeCmMad(bytes, &mad) && MessageOf(mad, sgid, dgid, ids, &msg)) {
      // A SIDR REQ names no path: the responder's AH takes the packet's
      // traffic class, as the kernel's ib_init_ah_attr_from_wc takes the GRH's.
      if (mad.attr == roce::CmAttr::kSidrReq) msg.traffic_class = traffic_class;
      cm.ReceiveFromWire(msg);
    }
  });
}

}  // namespace softverbs::daemon
