// The connection manager's part of the control channel (librdmacm <->
// softverbsd), docs/rdmacm.md.
//
// Requests (Op::kCm*) travel on the context connection of the ibv_context
// librdmacm opened for the process; every one carries a CmRequest and is
// answered with a CmReply. Events travel the other way on an event channel
// connection (Role::kCmEvents), one CmEventRecord per message: the fd of that
// connection is rdma_event_channel.fd, so it polls like the kernel's
// /dev/infiniband/rdma_cm file.
//
// Addresses are sockaddr_in or sockaddr_in6 stored in a sockaddr_in6 (the
// larger of the two; sin6_family says which). Ids and channels are numbered by
// the daemon, never 0, never reused while it runs.
#pragma once

#include <infiniband/verbs.h>
#include <netinet/in.h>

#include <cstdint>

namespace softverbs::protocol {

// The largest private data any CM message carries (DREP/RTU: 224 bytes).
inline constexpr uint32_t kCmMaxPrivateData = 224;

// Connection parameters of a REQ or REP (rdma_conn_param without its
// pointer), and of a SIDR REP (qp_num, qkey).
struct CmConnParam {
  uint32_t qp_num;              // the sender's QP number
  uint32_t qkey;                // UD: the sender's Q_Key
  uint8_t responder_resources;  // max_dest_rd_atomic the sender offers
  uint8_t initiator_depth;      // max_rd_atomic the sender will use
  uint8_t flow_control;         // 0 or 1
  uint8_t retry_count;          // 0..7
  uint8_t rnr_retry_count;      // 0..7
  uint8_t srq;                  // the sender's QP takes receives from an SRQ
  uint8_t private_data_len;     // bytes of private_data that are meaningful
  uint8_t reject_reason;        // kCmReject: the REJ's IBTA reason (0: 28, consumer defined)
  uint8_t private_data[kCmMaxPrivateData];
};
static_assert(sizeof(CmConnParam) == 16 + kCmMaxPrivateData);

// What an id is bound to, as rdma_cm_id.route shows it.
struct CmRoute {
  sockaddr_in6 src;    // local address and port (family 0: unbound)
  sockaddr_in6 dst;    // remote address and port (family 0: none yet)
  uint8_t sgid[16];    // GID of the local address on the device
  uint8_t dgid[16];    // GID of the remote address (resolved ids)
  uint16_t pkey;       // 0xffff (the default P_Key)
  uint8_t sgid_index;  // index of sgid in the port's GID table
  uint8_t on_device;   // 1: the id is bound to softverbs0 (id->verbs set)
  uint32_t path_mtu;   // enum ibv_mtu of the route
};
static_assert(sizeof(CmRoute) == 96);

// Flags of CmRequest::flags.
inline constexpr uint32_t kCmReuseAddr = 1u << 0;  // RDMA_OPTION_ID_REUSEADDR
inline constexpr uint32_t kCmAfOnly = 1u << 1;     // RDMA_OPTION_ID_AFONLY

// The one request body of every Op::kCm* (fields an op does not use are 0).
struct CmRequest {
  uint32_t id;          // the id the op acts on (0 for kCmCreateId)
  uint32_t channel;     // kCmCreateId, kCmMigrateId: the event channel
  uint32_t port_space;  // kCmCreateId: enum rdma_port_space
  uint32_t qp_type;     // kCmCreateId: enum ibv_qp_type
  int32_t timeout_ms;   // kCmResolveAddr, kCmResolveRoute
  int32_t backlog;      // kCmListen
  uint32_t qp_state;    // kCmInitQpAttr: enum ibv_qp_state; kCmNotify: ibv_event_type
  uint32_t flags;       // kCmBindAddr, kCmResolveAddr, kCmListen: kCm* flags
  uint64_t token;       // kCmJoinMcast: echoed in the MULTICAST_JOIN event
  sockaddr_in6 src;     // kCmBindAddr, kCmResolveAddr (optional), kCm*Mcast
  sockaddr_in6 dst;     // kCmResolveAddr
  CmConnParam conn;     // kCmConnect, kCmAccept, kCmReject (private data only)
  // Every op: the id's RDMA_OPTION_ID_TOS when tos_set (the traffic class
  // of the paths it resolves and the connection's REQ; librdmacm's tos).
  uint8_t tos;
  uint8_t tos_set;
  uint8_t reserved[6];
};
static_assert(sizeof(CmRequest) == 104 + sizeof(CmConnParam));

struct CmReply {
  uint32_t id;           // kCmCreateId: the new id
  int32_t qp_attr_mask;  // kCmInitQpAttr
  CmRoute route;         // the id's route after the op
  ibv_qp_attr qp_attr;   // kCmInitQpAttr
};

// One event (enum rdma_cm_event_type) for an id.
struct CmEventRecord {
  uint32_t event;       // enum rdma_cm_event_type
  int32_t status;       // 0, -errno, or the REJ reason / SIDR status
  uint32_t id;          // the id the event is for (CONNECT_REQUEST: the new id)
  uint32_t listen_id;   // CONNECT_REQUEST: the listening id
  uint64_t token;       // MULTICAST_JOIN/ERROR: the join's token
  CmRoute route;        // the id's route after the event
  CmConnParam conn;     // the peer's parameters and private data
  uint8_t ah_dgid[16];  // UD events: where the peer (or group) is
  uint8_t ah_sgid_index;
  uint8_t ah_traffic_class;  // UD events: the route's traffic class (the id's TOS)
  uint8_t reserved[6];
};
static_assert(sizeof(CmEventRecord) == 24 + sizeof(CmRoute) + sizeof(CmConnParam) + 24);

// rdma_migrate_id moves the id's pending events to the new channel, as the
// kernel's ucma does. kCmMigrateId points the id at the new channel and holds
// its new events; the library then reads what the old channel's socket
// already held and sends it back with kCmMigrateDone: `count` records, the
// id's first delivered to its new channel (then the held ones, in order),
// the others' returned to `old_channel`.
struct CmMigrateDone {
  uint32_t id;
  uint32_t old_channel;
  uint32_t count;
  uint32_t reserved;
  // CmEventRecord records[count];
};
static_assert(sizeof(CmMigrateDone) == 16);

}  // namespace softverbs::protocol
