// The connection manager of softverbs0 (what the kernel's rdma_cm and ib_cm
// are for a RoCE device), docs/rdmacm.md.
//
// It holds the rdma_cm ids of every process (state, bound address, port
// space and port, the connection's parameters), the port table, the event
// channels, and the CM state machine. Connection establishment is a dialogue
// of IBTA CM messages (REQ, REP, RTU, REJ, DREQ, DREP, SIDR REQ/REP) between
// two ids, each message a CmMessage handed to a carrier. Two carriers: the
// local one, when both ids live in this daemon (the message is queued and
// delivered to the other id after the current request), and the wire, when
// the receiver's GID is another host's: the message goes as a CM MAD on QP1
// over RoCE v2 (daemon/cm_wire.h, roce/cm_mad.h; the rdma_cm IP header in
// the REQ's private data), and a MAD that arrives enters at ReceiveFromWire.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/gid_table.h"
#include "daemon/cm_addresses.h"
#include "daemon/objects.h"
#include "daemon/verdict.h"
#include "protocol/cm_messages.h"
#include "protocol/messages.h"

namespace softverbs::daemon {

// IBTA 12.6 message kinds (the MADs' attribute ids on the wire). MRA only
// travels between hosts: on one host nothing is lost, nothing is resent.
enum class CmMsgKind : uint8_t { kReq, kRep, kRtu, kRej, kDreq, kDrep, kSidrReq, kSidrRep, kMra };

// The bytes of private data a message of this kind carries for the
// application: its MAD's (IBA tables 106-119, roce/cm_mad.h) less rdma_cm's
// IP header in a REQ and SIDR REQ - REQ 56, REP 196, REJ 148, SIDR REQ 180,
// SIDR REP 136 (cm_wire.cc).
uint8_t CmUserPrivateData(CmMsgKind kind);

// One CM message, with the fields of its MAD that rdma_cm uses.
struct CmMessage {
  CmMsgKind kind;
  uint32_t local_comm_id;   // the sender's id
  uint32_t remote_comm_id;  // the receiver's id (0 in REQ / SIDR REQ)
  uint32_t port_space;      // REQ, SIDR REQ: service id = port space << 16 | port
  CmAddr src;               // rdma_cm IP header: the sender's IP and port
  CmAddr dst;               // ... and the IP and port it asks for
  uint8_t sgid[16];         // the sender's GID (the GRH's SGID on the wire)
  uint8_t dgid[16];         // the receiver's GID: one of this device's, or another host's
  uint32_t qp_type;         // REQ: the sender's QP type (IBV_QPT_RC or IBV_QPT_UC)
  uint32_t remote_qpn;      // DREQ: the receiver's QP number
  bool from_wire;           // arrived as a MAD (its comm ids are another host's)
  uint32_t starting_psn;    // REQ, REP
  uint32_t status;          // REJ reason, SIDR REP status
  uint8_t rejected;         // REJ: the message it answers (0 REQ, 1 REP)
  uint8_t mraed;            // MRA: the message it acknowledges (0 REQ, 1 REP)
  uint8_t service_timeout;  // MRA: the sender answers within 4.096 us * 2^this
  // REQ (IBA 12.6.5): how long the active side takes to answer a REP (the
  // passive side's REP resend interval, 4.096 us * 2^code) and how often
  // the connection's messages are sent again.
  uint8_t local_cm_response_timeout;
  uint8_t max_cm_retries;
  uint8_t traffic_class;  // REQ: the primary path's traffic class
  protocol::CmConnParam conn;
};

// The state of an id: rdma_cm's states up to ROUTE_RESOLVED and LISTEN, then
// ib_cm's for the connection.
enum class CmState : uint8_t {
  kIdle,
  kAddrBound,
  kAddrQuery,
  kAddrResolved,
  kRouteResolved,
  kListen,
  kReqSent,
  kReqRcvd,
  kRepSent,
  kRepRcvd,
  kEstablished,
  kDreqSent,
  kDreqRcvd,
  kDisconnected,
  kRejected,
  kSidrReqSent,
  kSidrReqRcvd,
  kSidrDone,
};
const char* CmStateName(CmState s);

// What this CM proposes in its REQs (IBA 12.6.5: the CM response timeout
// code, 4.096 us * 2^code, and max CM retries) and waits by when a REQ to
// another host is not answered: 1.07 s, 3 times more, then UNREACHABLE
// (-ETIMEDOUT). The kernel's rdma_cm proposes 2^20 (4.3 s) and 15.
inline constexpr uint8_t kCmResponseTimeoutCode = 18;
inline constexpr int kCmReqRetries = 3;
inline constexpr std::chrono::nanoseconds kCmResponseTime{4096ull << kCmResponseTimeoutCode};
// What an MRA says this CM needs to answer (the kernel's rdma_cm: 24, 68.7 s):
// the application has not accepted yet, or not yet moved its QP after a REP.
inline constexpr uint8_t kCmMraServiceTimeoutCode = 24;
// 4.096 us * 2^code (IBA 12.6.5's time codes), code capped at 31.
std::chrono::nanoseconds CmTimeOfCode(uint8_t code);

// A random starting PSN (24 bits) for a connection's send queue.
uint32_t RandomPsn();

class CmService {
 public:
  using Clock = std::chrono::steady_clock;

  // Delivers one event on an event channel connection (the server's outbox).
  using EventSink = std::function<void(int fd, const protocol::CmEventRecord&)>;
  // Sends one message to another host (the wire carrier).
  using WireSink = std::function<void(const CmMessage&)>;

  CmService(const GidTable& gids, ibv_mtu active_mtu) : gids_(gids), active_mtu_(active_mtu) {}
  void set_event_sink(EventSink sink) { event_sink_ = std::move(sink); }
  void set_wire_sink(WireSink sink) { wire_sink_ = std::move(sink); }
  // Called when an id starts listening: MADs from other hosts may come.
  void set_listen_hook(std::function<void()> hook) { listen_hook_ = std::move(hook); }
  // A message another host's CM sent (decoded from its MAD).
  void ReceiveFromWire(const CmMessage& msg);

  // Event channels: the connection fd the server accepted (the server closes
  // it). Returns the channel's number.
  uint32_t AddChannel(ClientId owner, int fd);
  void RemoveChannel(int fd);
  // Every id of a client that went away is destroyed as rdma_destroy_id
  // would (its peers see DISCONNECTED or REJECTED); its channels' fds are
  // returned for the server to close.
  std::vector<int> RemoveClient(ClientId c);

  // One request (op is one of Op::kCm*).
  Verdict Handle(ClientId c, protocol::Op op, const protocol::CmRequest& req,
                 protocol::CmReply* out);

  // rdma_migrate_id's second step (protocol/cm_messages.h CmMigrateDone).
  Verdict MigrateDone(ClientId c, const protocol::CmMigrateDone& done,
                      const protocol::CmEventRecord* records);

  // The ids as a JSON array, for `softverbs status` (cm_status.cc).
  std::string StatusJson() const;
  // What the CM did to cross lossy links (a JSON object, cm_status.cc).
  std::string CountersJson() const;

  // Timers: resolution timeouts, DREQ timeouts. Milliseconds until the next
  // one (-1: none), and run those that are due.
  int MsUntilNextTimer() const;
  void RunTimers();

 private:
  struct Id {
    uint32_t handle = 0;
    ClientId owner = 0;
    uint32_t channel = 0;
    uint32_t port_space = 0;
    uint32_t qp_type = 0;
    CmState state = CmState::kIdle;
    protocol::CmRoute route{};
    bool holds_port = false;
    uint32_t flags = 0;     // kCmReuseAddr, kCmAfOnly
    int backlog = 0;        // listener: pending requests allowed
    int pending = 0;        // listener: requests not yet accepted or rejected
    uint32_t listener = 0;  // a request's id: its listener while pending
    uint32_t peer = 0;      // the remote comm id
    bool active = false;    // this side sent the REQ
    protocol::CmConnParam local{};
    protocol::CmConnParam remote{};
    uint32_t local_psn = 0;
    uint32_t remote_psn = 0;
    uint8_t responder_resources = 0;  // what this side's QP answers (RTR)
    uint8_t initiator_depth = 0;      // what this side's QP issues (RTS)
    uint8_t remote_gid[16] = {};
    // The traffic class of the id's paths: its TOS (RDMA_OPTION_ID_TOS) on
    // the active side, the REQ's on the passive side (the kernel's
    // path_rec traffic_class; 0 unless set).
    uint8_t traffic_class = 0;
    bool timer = false;
    Clock::time_point deadline{};
    // A message to another host that is sent again until it is answered
    // (IBA 12.6: REQ and SIDR REQ until REP / REJ / SIDR REP, REP until RTU,
    // DREQ until DREP): every resend_interval, resend_limit times, then the
    // state's timeout (RunTimers). An MRA for it pushes the next resend out.
    std::optional<CmMessage> unanswered;
    int resends = 0;
    int resend_limit = 0;
    std::chrono::nanoseconds resend_interval{};
    // A request from another host: how long its CM takes to answer our REP
    // and how often it wants messages sent again (its REQ's fields).
    std::chrono::nanoseconds peer_response_time{};
    int peer_max_retries = 0;
    std::vector<CmAddr> groups;  // joined multicast groups
    // rdma_migrate_id in progress (kCmMigrateId .. kCmMigrateDone): the id's
    // new events wait here, behind those the old channel already held.
    bool holding = false;
    std::vector<protocol::CmEventRecord> held;
  };
  struct Channel {
    ClientId owner;
    int fd;
  };

  // The ops (cm_service.cc).
  Verdict CreateId(ClientId c, const protocol::CmRequest& req, protocol::CmReply* out);
  Verdict DestroyId(Id& id);
  Verdict BindAddr(Id& id, const CmAddr& addr, uint32_t flags);
  Verdict ResolveAddr(Id& id, const protocol::CmRequest& req);
  Verdict ResolveRoute(Id& id);
  Verdict Listen(Id& id, int backlog);
  Verdict Connect(Id& id, const protocol::CmConnParam& conn);
  Verdict Accept(Id& id, const protocol::CmConnParam& conn);
  Verdict Reject(Id& id, const protocol::CmConnParam& conn);
  Verdict Establish(Id& id);
  Verdict Disconnect(Id& id);
  Verdict Notify(Id& id, uint32_t event);
  Verdict JoinMcast(Id& id, const CmAddr& group, uint64_t token);
  Verdict LeaveMcast(Id& id, const CmAddr& group);
  // cm_qp_attr.cc
  Verdict InitQpAttr(const Id& id, uint32_t qp_state, protocol::CmReply* out) const;

  // The port table (cm_ports.cc).
  Verdict ReservePort(Id& id, CmAddr addr, uint32_t flags);
  bool Overlaps(const Id& a, const Id& b) const;
  Id* FindListener(uint32_t port_space, const CmAddr& dst);

  // The state machine's receiving half (cm_messages.cc): one handler per kind.
  void Send(CmMessage msg);
  // Whether a message to dgid goes on the wire (another host's GID).
  bool GoesToAnotherHost(const uint8_t dgid[16]) const;
  void Pump();
  void Deliver(const CmMessage& msg);
  void OnReq(const CmMessage& msg);
  void OnSidrReq(const CmMessage& msg);
  void OnRep(Id& id, const CmMessage& msg);
  void OnRtu(Id& id);
  void OnRej(Id& id, const CmMessage& msg);
  void OnDreq(Id& id, const CmMessage& msg);
  void OnDrep(Id& id);
  void OnSidrRep(Id& id, const CmMessage& msg);
  void OnMra(Id& id, const CmMessage& msg);
  // A REQ another host sent again: the id it made, or a parked REQ. True
  // when msg is such a duplicate (and has been answered as IBA 12.9.8.1 says).
  bool OnDuplicateReq(const CmMessage& msg);
  // Sends msg (to another host) and keeps it to send again until answered.
  void SendUntilAnswered(Id& id, const CmMessage& msg, std::chrono::nanoseconds interval,
                         int limit);
  void Answered(Id& id);
  // The timeout of an unanswered message after its last resend.
  void ResendsExhausted(Id& id);
  void SendMra(const Id& id, uint8_t mraed);
  CmMessage MessageFrom(const Id& id, CmMsgKind kind) const;
  void SendRejectTo(const CmMessage& req, uint32_t reason);
  // REQs that found no listener wait for one a moment (kListenGrace) before
  // they are rejected; delivered as soon as a listener appears.
  void RetryParkedRequests();
  void LeaveConnection(Id& id);
  void ReleaseRequest(Id& id);

  void PushEvent(const Id& id, protocol::CmEventRecord rec);
  protocol::CmEventRecord EventFor(const Id& id, uint32_t event, int32_t status) const;
  void SetRouteFromAddrs(Id& id);
  Id* Find(uint32_t handle);

  const GidTable& gids_;
  ibv_mtu active_mtu_;
  EventSink event_sink_;
  WireSink wire_sink_;
  std::function<void()> listen_hook_;
  uint32_t next_handle_ = 1;
  uint32_t next_channel_ = 1;
  std::map<uint32_t, Id> ids_;
  std::vector<std::pair<Clock::time_point, CmMessage>> parked_reqs_;
  std::map<uint32_t, Channel> channels_;
  std::deque<CmMessage> in_flight_;  // the local carrier
  struct Counters {
    uint64_t resent = 0;      // REQ, SIDR REQ, REP, DREQ sent again after a timeout
    uint64_t duplicates = 0;  // REQs and REPs that came again
    uint64_t mras_sent = 0;
    uint64_t mras_received = 0;
    uint64_t rtus_resent = 0;  // for a REP that came again
  } counters_;
};

}  // namespace softverbs::daemon
