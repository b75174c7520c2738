// softverbs' librdmacm, inside: the process-wide device (librdmacm's
// cma_device), the private side of an rdma_cm_id, events and event channels,
// and the daemon calls (docs/rdmacm.md).
#pragma once

#include <rdma/rdma_cma.h>

#include <condition_variable>
#include <cstdint>
#include <list>
#include <mutex>
#include <vector>

#include "abi/ibverbs/reject.h"
#include "protocol/cm_messages.h"
#include "protocol/messages.h"

namespace softverbs::rdmacm {

// The device every id binds to (softverbs0), opened on first use and kept
// open while the library is loaded, as librdmacm keeps its devices open.
struct Device {
  ibv_context* verbs = nullptr;
  ibv_pd* pd = nullptr;      // the default PD of ids and QPs created without one
  ibv_xrcd* xrcd = nullptr;  // XRC ids' domain, opened on first use (XrcdOfDevice)
  uint8_t max_responder_resources = 0;
  uint8_t max_initiator_depth = 0;
};
// 0, or -1 with errno (and a log line) when the device cannot be opened.
int InitDevice();
// The device's XRC domain for XRC_RECV QPs and XRC SRQs of ids (a private
// one, as librdmacm's ucma_get_xrcd), or nullptr with errno.
ibv_xrcd* XrcdOfDevice();
Device& TheDevice();

// An event channel: the public struct first, then its number at the daemon.
struct Channel {
  rdma_event_channel pub;
  uint32_t number;
};
inline Channel* ChannelOf(rdma_event_channel* ch) {
  return reinterpret_cast<Channel*>(ch);
}

struct Multicast {
  sockaddr_storage addr{};
  void* context = nullptr;
  uint16_t join_flags = 0;
  ibv_gid mgid{};
  uint16_t mlid = 0;
  uint64_t token = 0;
  int events_completed = 0;
  int events_reported = 0;
};

// librdmacm's cma_id_private: the public id first.
struct Id {
  rdma_cm_id id{};
  uint32_t handle = 0;
  bool sync = false;  // created without a channel: calls wait for their event
  std::mutex mut;
  std::condition_variable cond;
  int events_reported = 0;   // events handed to the user
  int events_completed = 0;  // ... and acknowledged
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  bool connect_error = false;
  uint32_t option_flags = 0;  // protocol::kCmReuseAddr, kCmAfOnly
  uint8_t tos = 0;            // RDMA_OPTION_ID_TOS (the device puts it in the paths it resolves)
  bool tos_set = false;
  // RDMA_OPTION_ID_ACK_TIMEOUT: the QP's local ACK timeout in RTS, as the
  // kernel's cma_init_qp_attr applies it (unset: the rdma_cm default).
  bool ack_timeout_set = false;
  uint8_t ack_timeout = 0;
  ibv_qp_init_attr* qp_init_attr = nullptr;  // passive endpoints: QP of each request
  std::vector<uint8_t> connect_data;         // rdma_addrinfo ai_connect
  ibv_sa_path_rec path{};
  std::list<Multicast*> groups;
};
inline Id* IdOf(rdma_cm_id* id) {
  return reinterpret_cast<Id*>(id);
}

// An event as rdma_get_cm_event hands it out.
struct Event {
  rdma_cm_event pub{};
  Id* owner = nullptr;      // the id whose event count it belongs to
  Multicast* mc = nullptr;  // MULTICAST_JOIN / ERROR
  uint8_t private_data[protocol::kCmMaxPrivateData];
};

// Ids by daemon handle, for the events.
void InsertId(Id* id);
void RemoveId(Id* id);
Id* LookupId(uint32_t handle);

// rdma_create_id with a QP type (librdmacm's rdma_create_id2).
int CreateId(rdma_event_channel* channel, rdma_cm_id** id, void* context, rdma_port_space ps,
             ibv_qp_type qp_type);
// Allocates an id (and a private channel when channel is null: sync).
Id* AllocId(rdma_event_channel* channel, void* context, rdma_port_space ps, ibv_qp_type qp_type);
void FreeId(Id* id);

// One Op::kCm* request on the device's daemon connection: 0, or -1 with
// errno (the daemon's rule is on the log channel).
int Call(protocol::Op op, const protocol::CmRequest& req, protocol::CmReply* rep);
// A request for id with its handle filled.
protocol::CmRequest RequestFor(const Id* id);

// Copies what the daemon says the id is bound to into rdma_cm_id.route
// (and binds it to the device: verbs, pd, port_num).
void ApplyRoute(Id* id, const protocol::CmRoute& route);
// The address as the protocol carries it; false when the family is neither
// AF_INET nor AF_INET6.
bool ToCmAddr(const sockaddr* addr, sockaddr_in6* out);
socklen_t AddrLen(const sockaddr* addr);

// Sync ids: waits for the id's next event (kept in id->event) and turns a
// failure event into -1 with errno, as librdmacm's ucma_complete.
int Complete(Id* id);

// QP transitions librdmacm makes for the user (qp.cc).
int ModifyQpRtr(Id* id, uint8_t responder_resources);
int ModifyQpRts(Id* id, uint8_t initiator_depth);
int ModifyQpErr(Id* id);
// The active side's answer to a REP: RTR, RTS, then RTU (connection.cc).
int ProcessConnectResponse(Id* id);

using abi::RejectMinusOne;
using abi::RejectNull;

}  // namespace softverbs::rdmacm
