// The control channel between the drop-in libraries and softverbsd.
//
// Transport: one SOCK_SEQPACKET connection per ibv_context (the "context
// connection"), one more per context for asynchronous events (its fd is the
// context's async_fd), and short-lived ones for the CLI. Each request is a
// RequestHeader followed by the op's request body; each reply a ReplyHeader,
// the op's reply body, then reason_len bytes of explanation text when err != 0.
// Bodies are plain structs of fixed size; both ends are built from this header,
// and kProtocolVersion changes whenever a layout does.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>

#include "common/gid_table.h"
#include "datapath/block_signature.h"
#include "datapath/layout.h"
#include "verbs/flow_rule.h"

namespace softverbs::protocol {

inline constexpr uint32_t kProtocolVersion = 28;
inline constexpr size_t kMaxMessageSize = 64 * 1024;

enum class Op : uint16_t {
  kHello = 1,
  kAllocPd,
  kDeallocPd,
  kRegMr,
  kDeregMr,
  kReregMr,
  kCreateCq,
  kResizeCq,
  kDestroyCq,
  kCreateSrq,
  kModifySrq,
  kQuerySrq,
  kDestroySrq,
  kCreateQp,
  kModifyQp,
  kQueryQp,
  kDestroyQp,
  kOpenQp,
  kCreateAh,
  kDestroyAh,
  kAttachMcast,
  kDetachMcast,
  kOpenXrcd,
  kCloseXrcd,
  kStatus,
  kShutdown,
  kDevxOpen,  // DEVX requests: bodies in protocol/devx_messages.h
  kDevxCommand,
  kDevxDestroy,
  kDevxUmemReg,
  kDevxUmemDereg,
  kRegMrBacked,  // data path ops: bodies at the end of this file
  kMapQp,
  kMapMr,
  kQpError,
  kSrqLimitReached,
  kMcastMembers,
  kMapSrq,  // XRC data path
  kQpEvent,
  kAllocDm,  // device memory: bodies at the end of this file
  kFreeDm,
  kRegDmMr,
  kCmCreateId,  // the connection manager (librdmacm): bodies in protocol/cm_messages.h
  kCmDestroyId,
  kCmBindAddr,
  kCmResolveAddr,
  kCmResolveRoute,
  kCmListen,
  kCmConnect,
  kCmAccept,
  kCmReject,
  kCmEstablish,
  kCmDisconnect,
  kCmInitQpAttr,
  kCmMigrateId,
  kCmNotify,
  kCmJoinMcast,
  kCmLeaveMcast,
  kDevxQueueFiles,  // DEVX data path: body in protocol/devx_messages.h
  kMrPeersInside,
  kWireDoorbell,  // the network data path: body WireDoorbellRequest, two fds
  kAllocMw,       // memory windows: bodies at the end of this file
  kDeallocMw,
  kBindMw,
  kInvalidateMw,
  kQueryPd,  // object import (ibv_import_pd/mr/dm): bodies at the end of this file
  kQueryMr,
  kQueryDm,
  kCmMigrateDone,   // rdma_migrate_id's second step: body CmMigrateDone (protocol/cm_messages.h)
  kForgetBackings,  // the library dropped memfds the device kept for it: ForgetBackingsRequest
  kCallDoorbell,    // look at the call page (protocol/call_page.h): no body, no reply
  // A registration's new memfd, sent ahead of the registration that names
  // it (kBackingMemfdKept): keep it for this connection. No body (the memfd
  // is the one fd), no reply: a memfd the device does not take is named in
  // vain, told ESTALE, and passed with the registration again.
  kOfferBacking,
  kSetQpUdpSport,  // mlx5dv_modify_qp_udp_sport: SetQpUdpSportRequest, empty reply
  // mlx5dv_reserved_qpn_alloc: no body, ReservedQpn reply; _dealloc:
  // ReservedQpn, empty reply.
  kAllocReservedQpn,
  kFreeReservedQpn,
  // mlx5's indirect memory keys (mlx5dv_create_mkey, mlx5dv_destroy_mkey,
  // a UMR at the head of its send queue): bodies at the end of this file.
  kCreateMkey,
  kDestroyMkey,
  kConfigureMkey,
  // Signature keys: an access met a bad signature (ReportSigErrorRequest,
  // empty reply); mlx5dv_mkey_check (HandleRequest, CheckMkeyReply).
  kReportSigError,
  kCheckMkey,
  // mlx5dv_qp_cancel_posted_send_wrs for the WRs the network transport holds
  // (CancelSendsRequest, CancelSendsReply).
  kCancelSends,
  // Flow steering of raw packet QPs (ibv_create_flow: CreateFlowRequest,
  // CreateFlowReply; ibv_destroy_flow: HandleRequest, empty reply), and the
  // device's rules for a library to steer its raw frames by
  // (FlowRulesRequest; FlowRulesReply, then its `count` rules).
  kCreateFlow,
  kDestroyFlow,
  kFlowRules,
  // Receive work queue indirection tables (ibv_create_rwq_ind_table:
  // CreateRwqIndTableRequest, CreateRwqIndTableReply; destroy:
  // HandleRequest), and how an RSS QP spreads frames (RssTableRequest,
  // RssTableReply). A receive work queue is a raw packet QP of the library's
  // own that receives only.
  kCreateRwqIndTable,
  kDestroyRwqIndTable,
  kRssTable,
  kCount
};

const char* OpName(Op op);

struct RequestHeader {
  uint32_t version;    // kProtocolVersion
  uint16_t op;         // Op
  uint16_t flags;      // RequestFlag bits (0: none)
  uint32_t body_size;  // bytes of request body that follow
  uint32_t seq;        // echoed in the reply
};
static_assert(sizeof(RequestHeader) == 16);

// RequestHeader::flags.
enum RequestFlag : uint16_t {
  // A request that came over the socket (it carries descriptors) wants its
  // reply through the connection's call page (protocol/call_page.h), or,
  // if the reply carries descriptors, the page's word that it went over
  // the socket.
  kReplyThroughPage = 1u << 0,
};

struct ReplyHeader {
  uint32_t seq;         // the request's seq
  int32_t err;          // 0 or a positive errno, as the verbs return it
  uint32_t body_size;   // bytes of reply body that follow
  uint16_t reason_len;  // bytes of explanation after the body (err != 0)
  uint16_t reserved;
};
static_assert(sizeof(ReplyHeader) == 16);

// Object handles are daemon-wide, never reused while the daemon lives, never 0.
using Handle = uint32_t;

// kCmEvents: a librdmacm event channel (protocol/cm_messages.h); its hello
// names the context (HelloRequest::context_token = that context's client_id)
// and gets the channel's number back in HelloReply::context_token.
enum class Role : uint32_t { kContext = 1, kEvents = 2, kCli = 3, kCmEvents = 4 };

// The files a kContext hello carries, in this order, each present when its
// bit is set in HelloRequest::files.
enum HelloFile : uint32_t {
  kHelloMemFd = 1u << 0,         // the process's /proc/self/mem (not if non-dumpable)
  kHelloAccessRecord = 1u << 1,  // its access record (datapath/layout.h kAccessRecordSize)
  kHelloSelf = 1u << 2,          // the connection's own socket (names it to ibv_import_device)
  // ibv_import_device of another process's context: a descriptor of that
  // context's connection; this client joins its group (the kernel's ufile).
  kHelloJoin = 1u << 3,
};

struct HelloRequest {
  uint32_t role;           // Role
  uint32_t pid;            // informational; the daemon trusts SO_PEERCRED
  uint64_t context_token;  // kEvents: the token the context connection got
  uint32_t files;          // kContext: HelloFile bits of the fds sent along
  uint32_t reserved;
};
static_assert(sizeof(HelloRequest) == 24);

struct HelloReply {
  uint64_t context_token;  // identifies this context for its event connection
  uint32_t client_id;      // daemon-wide id of this context
  uint32_t active_mtu;     // enum ibv_mtu of port 1
  GidTable gids;           // port 1's GID table
  uint32_t group_id;       // the group its objects and keys belong to (client_id unless joined)
  // Bit i: a send to a multicast group from GID i goes on the link (groups
  // span hosts, SOFTVERBS_ROCE_MCAST=link, and the device has a carrier on
  // that address); 0 keeps every group on the host.
  uint32_t multicast_gids;
};

struct HandleRequest {
  Handle handle;
  uint32_t reserved;
};
static_assert(sizeof(HandleRequest) == 8);

struct EmptyReply {
  uint32_t reserved;
};

struct AllocPdReply {
  Handle handle;
  uint32_t pdn;
};
static_assert(sizeof(AllocPdReply) == 8);

struct RegMrRequest {
  Handle pd;
  uint32_t access;  // ibv_access_flags
  uint64_t addr;    // start of the registered range in the owner's address space
  uint64_t length;
  uint64_t iova;  // the address peers use (== addr unless reg_mr_iova)
};
static_assert(sizeof(RegMrRequest) == 32);

struct RegMrReply {
  Handle handle;
  uint32_t lkey;
  uint32_t rkey;
  uint32_t flags;  // reg_mr_backed: kRegMrBackingKept; else 0
};
static_assert(sizeof(RegMrReply) == 16);

// dereg_mr (request: HandleRequest). The keys are cleared when the reply
// comes; `peers_inside` is how many accesses of the MR other contexts were
// still inside then, by their access records (datapath/layout.h): the owner
// waits until mr_peers_inside says 0.
struct DeregMrReply {
  uint32_t peers_inside;
  uint32_t reserved;
};
static_assert(sizeof(DeregMrReply) == 8);

struct ReregMrRequest {
  Handle mr;
  uint32_t flags;   // ibv_rereg_mr_flags
  Handle pd;        // valid with IBV_REREG_MR_CHANGE_PD
  uint32_t access;  // valid with IBV_REREG_MR_CHANGE_ACCESS
  uint64_t addr;    // valid with IBV_REREG_MR_CHANGE_TRANSLATION
  uint64_t length;
};
static_assert(sizeof(ReregMrRequest) == 32);

struct CreateCqRequest {
  uint32_t cqe;
  uint32_t comp_vector;
  uint64_t wc_flags;
};
static_assert(sizeof(CreateCqRequest) == 16);

struct CreateCqReply {
  Handle handle;
  uint32_t cqn;
  uint32_t cqe;  // actual size, >= requested
  uint32_t reserved;
};
static_assert(sizeof(CreateCqReply) == 16);

struct ResizeCqRequest {
  Handle handle;
  uint32_t cqe;
};
static_assert(sizeof(ResizeCqRequest) == 8);

struct ResizeCqReply {
  uint32_t cqe;
  uint32_t reserved;
};

struct CreateSrqRequest {
  Handle pd;
  uint32_t srq_type;  // ibv_srq_type
  Handle xrcd;        // IBV_SRQT_XRC
  Handle cq;          // IBV_SRQT_XRC
  uint32_t max_wr;
  uint32_t max_sge;
  uint32_t srq_limit;
  uint32_t max_num_tags;  // IBV_SRQT_TM: its tag list's size (tm_cap.max_num_tags)
};
static_assert(sizeof(CreateSrqRequest) == 32);

struct CreateSrqReply {
  Handle handle;
  uint32_t srqn;
  uint32_t max_wr;
  uint32_t max_sge;
};
static_assert(sizeof(CreateSrqReply) == 16);

struct ModifySrqRequest {
  Handle handle;
  uint32_t mask;  // ibv_srq_attr_mask
  uint32_t max_wr;
  uint32_t srq_limit;
};
static_assert(sizeof(ModifySrqRequest) == 16);

struct QuerySrqReply {
  uint32_t max_wr;
  uint32_t max_sge;
  uint32_t srq_limit;
  uint32_t reserved;
};

struct CreateQpRequest {
  uint32_t qp_type;  // ibv_qp_type, or a DC type (verbs/qp_names.h)
  Handle pd;
  Handle send_cq;
  Handle recv_cq;
  Handle srq;
  Handle xrcd;
  uint32_t sq_sig_all;
  uint32_t create_flags;
  ibv_qp_cap cap;
  // An RSS QP (raw packet): the indirection table of the receive work
  // queues it spreads frames over (0: none), and its hash.
  Handle ind_table;
  uint64_t dc_access_key;   // a DCT: the key DCIs must name (mlx5dv_dc_init_attr)
  uint64_t rx_hash_fields;  // ibv_rx_hash_fields (verbs::kRssHashFields)
  uint8_t rx_hash_key[verbs::kRssKeyBytes];
};
static_assert(sizeof(CreateQpRequest) == 112);

struct CreateQpReply {
  Handle handle;
  uint32_t qpn;
  ibv_qp_cap cap;
  uint32_t reserved;
};
static_assert(sizeof(CreateQpReply) == 32);

struct ModifyQpRequest {
  Handle handle;
  uint32_t mask;  // ibv_qp_attr_mask
  ibv_qp_attr attr;
};

// The UDP source port of an RC or UC QP's RoCE v2 packets from now on
// (mlx5dv_modify_qp_udp_sport; the QP in RTS). A modify that sets the path
// (IBV_QP_AV) or a RESET returns the QP to the port derived from its number.
struct SetQpUdpSportRequest {
  Handle handle;
  uint16_t udp_sport;  // not 0
  uint16_t reserved;
};
static_assert(sizeof(SetQpUdpSportRequest) == 8);

// A QP number reserved for the context: no QP is ever given it while it is.
struct ReservedQpn {
  uint32_t qpn;
  uint32_t reserved;
};
static_assert(sizeof(ReservedQpn) == 8);

struct QueryQpReply {
  ibv_qp_attr attr;
  ibv_qp_cap init_cap;
  uint32_t sq_sig_all;
  uint32_t qp_type;
};

struct OpenQpRequest {
  Handle xrcd;
  uint32_t qpn;
  uint32_t qp_type;
  uint32_t reserved;
};
static_assert(sizeof(OpenQpRequest) == 16);

struct OpenQpReply {
  Handle handle;
  uint32_t qpn;
  uint32_t state;
  uint32_t reserved;
};

struct CreateAhRequest {
  Handle pd;
  uint32_t reserved;
  ibv_ah_attr attr;
};

struct CreateAhReply {
  Handle handle;
  uint32_t reserved;
};

struct McastRequest {
  Handle qp;
  uint16_t lid;
  uint16_t reserved;
  uint8_t gid[16];
};
static_assert(sizeof(McastRequest) == 24);

// The fd of the file whose inode names the domain travels as SCM_RIGHTS.
struct OpenXrcdRequest {
  uint32_t has_fd;
  uint32_t oflags;
};
static_assert(sizeof(OpenXrcdRequest) == 8);

struct OpenXrcdReply {
  Handle handle;
  uint32_t reserved;
};

// Pushed on the event connection, never a reply.
enum class EventElement : uint32_t {
  kNone = 0,
  kCq = 1,
  kQp = 2,
  kSrq = 3,
  kPort = 4,
  kDevice = 5
};

struct AsyncEventRecord {
  uint32_t event_type;  // ibv_event_type
  uint32_t element;     // EventElement
  Handle handle;        // the object's handle in this context
  uint32_t number;      // port number, or QP number for XRC events
  // Events of this context dropped just before this one because it had not
  // read kMaxQueuedEvents (src/daemon/outbox.h) of them.
  uint32_t dropped_before;
};
static_assert(sizeof(AsyncEventRecord) == 20);

// ---- the shared-memory data path (docs/datapath.md) ------------------------
// fds: kHello (context role) sends the client's /proc/self/mem and gets the
// device table back; kCreateCq sends the completion channel's eventfd (if
// any) and gets the CQ ring; kCreateQp / kCreateSrq get the receive queue.

// What backs an MR's whole pages (RegMrBackedRequest, MapMrReply).
inline constexpr uint32_t kBackingNone = 0;
inline constexpr uint32_t kBackingMemfd = 1;    // a memfd, passed as an fd
inline constexpr uint32_t kBackingSysvShm = 2;  // a SysV segment, by id: peers attach it
// A memfd this connection passed before and the device kept (RegMrReply
// flag kRegMrBackingKept, until ForgetBackings or the connection's end),
// named by its (st_dev, st_ino): no fd. Request only.
inline constexpr uint32_t kBackingMemfdKept = 3;

// The name of a memfd the device keeps: what fstat says of it.
struct BackingName {
  uint64_t dev;  // st_dev
  uint64_t ino;  // st_ino
};
static_assert(sizeof(BackingName) == 16);

// reg_mr with what backs the MR's whole pages, when backed_end >
// backed_begin: a memfd (SCM_RIGHTS), one the device kept for this
// connection (kBackingMemfdKept, no fd), or the SysV shared memory segment
// the application mapped there (kBackingSysvShm, no fd).
struct RegMrBackedRequest {
  RegMrRequest reg;
  uint64_t backed_begin;   // owner va of the first backed page
  uint64_t backed_end;     // owner va past the last backed page
  uint64_t backed_offset;  // offset of backed_begin in the memfd or segment
  uint32_t backing_kind;   // kBackingSysvShm, kBackingMemfdKept, or 0 (a memfd comes as the fd)
  uint32_t shmid;          // kBackingSysvShm: the segment's id
  // kBackingSysvShm: the inode of the owner's IPC namespace
  // (/proc/self/ns/ipc): an id names a segment only within one.
  uint64_t ipc_ns;
  BackingName kept;  // kBackingMemfdKept: which memfd
};
static_assert(sizeof(RegMrBackedRequest) == 88);

// RegMrReply::flags of a reg_mr_backed that passed a memfd: the device keeps
// it for this connection after the MR is gone, and a later registration on
// the same connection may name it (kBackingMemfdKept) instead of passing it.
inline constexpr uint32_t kRegMrBackingKept = 1;

// forget_backings: the library no longer keeps these memfds (its cache of
// converted ranges dropped them); the device lets go of those it kept for
// this connection alone and no MR uses. Names it does not keep for the
// connection are skipped. No reply body.
struct ForgetBackingsRequest {
  static constexpr uint32_t kMaxNames = 16;
  uint32_t count;  // <= kMaxNames
  uint32_t reserved;
  BackingName names[kMaxNames];
};
static_assert(sizeof(ForgetBackingsRequest) == 264);

// A peer asks for the receive side of QP qpn. Reply fds, in order: the
// receive queue (the QP's, or its SRQ's when srqn != 0), the receive CQ
// ring, then the CQ's channel eventfd when has_event_fd.
struct MapQpRequest {
  uint32_t qpn;
  uint32_t reserved;
};
struct MapQpReply {
  uint32_t qpn;
  uint32_t generation;  // QpEntry::generation the fds belong to
  uint32_t owner;       // client id of the QP's creator
  uint32_t srqn;
  uint32_t has_event_fd;
  uint32_t reserved;
};
static_assert(sizeof(MapQpReply) == 24);

// A peer asks how to reach the MR with this lkey or rkey. Reply fds: the
// owner's /proc/self/mem, then the backing memfd when has_backing is
// kBackingMemfd; kBackingSysvShm: the peer attaches segment `shmid`.
struct MapMrRequest {
  uint32_t key;
  uint32_t reserved;
};

// mr_peers_inside: how many accesses of the MR slot of `key` live contexts
// are inside now, by their access records (datapath/layout.h). Asked by an
// owner whose dereg found peers inside (DeregMrReply), until it is 0.
struct MrPeersInsideRequest {
  uint32_t key;
  uint32_t reserved;
};
struct MrPeersInsideReply {
  uint32_t inside;  // sum over live clients' records of the slot
  uint32_t reserved;
};

// wire_doorbell: a context hands the device one end of a SOCK_SEQPACKET
// socket pair and its doorbell ring (the request's two fds: socket, ring
// memfd). It posts the work requests of its QPs whose path leaves the host
// into the ring (datapath/wire_post.h; docs/roce.md, "The network
// transport") and sends a byte on its end of the socket when the device
// sleeps. Asked once per context, at its first such post.
struct WireDoorbellRequest {
  uint32_t reserved0;
  uint32_t reserved1;
};
struct MapMrReply {
  uint32_t owner;
  uint32_t generation;
  uint32_t has_backing;  // kBackingNone, kBackingMemfd, kBackingSysvShm
  uint32_t has_mem_fd;   // 0: the owner is not dumpable; only the backing comes
  uint32_t shmid;        // kBackingSysvShm: the segment
  uint32_t reserved;
  uint64_t ipc_ns;  // kBackingSysvShm: its IPC namespace's inode (attach only within it)
};
static_assert(sizeof(MapMrReply) == 32);

// The data path found an error at QP qpn (any client's): move it to
// `state`. IBV_QPS_SQE is a requester error on an unreliable QP (UD, UC),
// entered from RTS or SQD only: the receive side keeps working. IBV_QPS_ERR
// (or 0, what older clients sent in this field) is every other error.
struct QpErrorRequest {
  uint32_t qpn;
  uint32_t state;  // ibv_qp_state: IBV_QPS_SQE or IBV_QPS_ERR
};

// An initiator took SRQ srqn below its armed limit: raise
// IBV_EVENT_SRQ_LIMIT_REACHED at the owner.
struct SrqLimitRequest {
  uint32_t srqn;
  uint32_t reserved;
};

// The QPs attached to a multicast group: reply body is uint32_t qpn[].
struct McastMembersRequest {
  uint8_t gid[16];
};

// ---- XRC on the data path (docs/xrc.md) --------------------------------------

// An XRC initiator asks for the receive side of XRC SRQ srqn (ENOENT if no
// XRC SRQ has that number). Reply fds, in order: the SRQ's receive queue,
// its CQ's ring, then the CQ's channel eventfd when has_event_fd.
struct MapSrqRequest {
  uint32_t srqn;
  uint32_t reserved;
};
struct MapSrqReply {
  uint32_t srqn;
  uint32_t owner;  // client id of the SRQ's creator
  uint32_t xrcd;   // the SRQ's XRC domain (== QpEntry::xrcd of its receive QPs)
  uint32_t pdn;    // the SRQ's PD: XRC responders check keys against it
  uint32_t has_event_fd;
  uint32_t reserved;
};
static_assert(sizeof(MapSrqReply) == 24);

// The data path raises an affiliated event of QP qpn at every handle of it
// (only IBV_EVENT_COMM_EST, IBV_EVENT_QP_ACCESS_ERR, IBV_EVENT_QP_REQ_ERR,
// and IBV_EVENT_SQ_DRAINED, which the library that runs the QP's send queue
// raises when a drain asked with en_sqd_async_notify finds it empty).
struct QpEventRequest {
  uint32_t qpn;
  uint32_t event_type;  // ibv_event_type
};

// Device memory: the daemon owns the device's capacity (limits::kMaxDmSize,
// shared by every context); the bytes live in the allocating process.
struct AllocDmRequest {
  uint64_t length;     // bytes asked for (ibv_alloc_dm_attr.length)
  uint32_t log_align;  // ibv_alloc_dm_attr.log_align_req
  uint32_t reserved;   // 0
};
static_assert(sizeof(AllocDmRequest) == 16);

struct AllocDmReply {
  Handle handle;
  uint32_t reserved;
  uint64_t size;  // bytes taken from the device: length rounded up to the allocation granule
};
static_assert(sizeof(AllocDmReply) == 16);

// ibv_reg_dm_mr: a zero-based MR (mr.reg.iova 0) over [dm_offset,
// +mr.reg.length) of the device memory `dm`, whose bytes the owner holds at
// mr.reg.addr; the backing fields as for kRegMrBacked.
struct RegDmMrRequest {
  RegMrBackedRequest mr;
  Handle dm;
  uint32_t reserved;  // 0
  uint64_t dm_offset;
};
static_assert(sizeof(RegDmMrRequest) == 104);

// ibv_alloc_mw.
struct AllocMwRequest {
  Handle pd;
  uint32_t type;  // ibv_mw_type
};
static_assert(sizeof(AllocMwRequest) == 8);

struct AllocMwReply {
  Handle handle;
  uint32_t rkey;  // the window's key (no access until a bind publishes it)
};
static_assert(sizeof(AllocMwReply) == 8);

// A BIND_MW of QP qpn reached the head of its send queue (ibv_bind_mw for
// type 1, IBV_WR_BIND_MW for type 2): bind window `mw` to [addr, +length)
// of the MR of lkey mr_lkey with `access`, under the key whose low 8 bits
// are those of `rkey`. mr_lkey 0 with length 0 unbinds a type 1 window.
struct BindMwRequest {
  Handle mw;
  uint32_t qpn;
  uint32_t mr_lkey;
  uint32_t rkey;
  uint64_t addr;
  uint64_t length;
  uint32_t access;  // IBV_ACCESS_REMOTE_* (and IBV_ACCESS_ZERO_BASED, refused)
  uint32_t reserved;
};
static_assert(sizeof(BindMwRequest) == 40);

struct BindMwReply {
  uint32_t rkey;  // the window's key now
  uint32_t reserved;
};
static_assert(sizeof(BindMwReply) == 8);

// Invalidate the type 2 window of rkey: a LOCAL_INV posted on QP qpn
// (remote 0), or a SEND_WITH_INV that arrived on QP qpn (remote 1).
struct InvalidateMwRequest {
  uint32_t qpn;
  uint32_t rkey;
  uint32_t remote;
  uint32_t reserved;
};
static_assert(sizeof(InvalidateMwRequest) == 16);

// ibv_import_pd / ibv_import_mr / ibv_import_dm: what a context sharing the
// importer's connection (ibv_import_device) learns of an object it names by
// handle (request: HandleRequest). As the kernel's QUERY methods.
struct QueryPdReply {
  uint32_t pdn;
  uint32_t reserved;
};
static_assert(sizeof(QueryPdReply) == 8);

struct QueryMrReply {
  uint32_t lkey;
  uint32_t rkey;
  uint64_t length;
};
static_assert(sizeof(QueryMrReply) == 16);

struct QueryDmReply {
  uint64_t length;  // bytes the allocation was asked for
};
static_assert(sizeof(QueryDmReply) == 8);

// mlx5dv_create_mkey of an indirect key: a key of PD pd that addresses
// nothing until a UMR gives it a layout (kConfigureMkey). flags:
// kMkeyRemoteInvalidate (MLX5DV_MKEY_INIT_ATTR_FLAGS_REMOTE_INVALIDATE, a
// SEND_WITH_INV may invalidate it), kMkeySignature (_BLOCK_SIGNATURE, a UMR
// may give it a block signature). max_entries: the most entries a layout of
// it may have, as libmlx5 rounded it (a multiple of 4, at most
// kMaxMkeyEntries).
inline constexpr uint32_t kMkeyRemoteInvalidate = 1;
inline constexpr uint32_t kMkeySignature = 2;
struct CreateMkeyRequest {
  Handle pd;
  uint32_t max_entries;
  uint32_t flags;
};
static_assert(sizeof(CreateMkeyRequest) == 12);

struct CreateMkeyReply {
  Handle handle;
  uint32_t lkey;
  uint32_t rkey;
};
static_assert(sizeof(CreateMkeyReply) == 12);

// A UMR of QP qpn reached the head of its send queue: give the indirect key
// of lkey mkey (it is in use from now on) the layout entry[0..num_entries)
// repeated repeat_count times (a list: 1) if sets has kUmrSetsLayout, and
// `access` (IBV_ACCESS_LOCAL_WRITE and IBV_ACCESS_REMOTE_*) if it has
// kUmrSetsAccess (datapath/mkey_layout.h); what it does not set stays.
// A memory window's rkey in `mkey` (a UMR WQE that binds it): the bind of
// entry[0]'s range with `access` under the key whose low 8 bits are new_tag.
// With kUmrSetsSig the key's block signature becomes `sig`; with
// kUmrResetsSig it has none; else it keeps the one it had.
struct ConfigureMkeyRequest {
  uint32_t qpn;
  uint32_t mkey;
  uint32_t sets;
  uint32_t access;
  uint32_t repeat_count;
  uint32_t num_entries;
  uint32_t new_tag;
  uint32_t reserved;
  datapath::UmrEntry entry[limits::kMaxMkeyEntries];
  datapath::SigAttr sig;
};
static_assert(sizeof(ConfigureMkeyRequest) == 32 + 24 * limits::kMaxMkeyEntries + 32);

// An access through signature key `key` (its lkey or rkey) found a bad
// signature: kept for the key's owner until mlx5dv_mkey_check reads it, the
// first since the key's last UMR (as an mlx5 key reports one error until a
// UMR arms it again).
struct ReportSigErrorRequest {
  uint32_t key;
  uint32_t reserved;
  datapath::SigError error;
};
static_assert(sizeof(ReportSigErrorRequest) == 40);

// The WRs of wr_id that QP qpn (the caller's, served by the network
// transport) has not started become NOPs; `canceled` counts them.
struct CancelSendsRequest {
  uint32_t qpn;
  uint32_t reserved;
  uint64_t wr_id;
};
static_assert(sizeof(CancelSendsRequest) == 16);
struct CancelSendsReply {
  uint32_t canceled;
  uint32_t reserved;
};
static_assert(sizeof(CancelSendsReply) == 8);

// mlx5dv_mkey_check: the error kept for the key, if any (then forgotten).
struct CheckMkeyReply {
  uint32_t has_error;  // 1: `error` is one
  uint32_t reserved;
  datapath::SigError error;
};
static_assert(sizeof(CheckMkeyReply) == 40);

// ---- Flow steering (docs/raw_packet.md) -------------------------------------

// A rule the library checked (verbs::ParseFlowAttr) for raw packet QP `qp`.
struct CreateFlowRequest {
  Handle qp;
  uint32_t reserved;
  verbs::FlowRule rule;
};
static_assert(sizeof(CreateFlowRequest) == 8 + sizeof(verbs::FlowRule));
struct CreateFlowReply {
  Handle handle;
  uint32_t reserved;
};
static_assert(sizeof(CreateFlowReply) == 8);

// The device's rules from the `first`-th on (in the device's order), at
// most kFlowRulesPerReply of them: the reply says how many rules the device
// has (`total`) and the flow epoch (DeviceTableHeader) they are of, then
// `count` verbs::SteeredFlow follow.
inline constexpr uint32_t kFlowRulesPerReply = 256;
struct FlowRulesRequest {
  uint32_t first;
  uint32_t reserved;
};
static_assert(sizeof(FlowRulesRequest) == 8);
struct FlowRulesReply {
  uint32_t epoch;
  uint32_t total;
  uint32_t count;
  uint32_t reserved;
};
static_assert(sizeof(FlowRulesReply) == 16);
static_assert(sizeof(ReplyHeader) + sizeof(FlowRulesReply) +
                  kFlowRulesPerReply * sizeof(verbs::SteeredFlow) <=
              kMaxMessageSize);

// ---- RSS (docs/raw_packet.md) -----------------------------------------------

// The table's 2^log_size entries: handles of the caller's receive work
// queues (their raw packet QPs), in order.
struct CreateRwqIndTableRequest {
  uint32_t log_size;
  uint32_t reserved;
  Handle wq[limits::kMaxRwqIndTableSize];
};
static_assert(sizeof(CreateRwqIndTableRequest) == 8 + 4 * limits::kMaxRwqIndTableSize);
struct CreateRwqIndTableReply {
  Handle handle;
  uint32_t number;  // ibv_rwq_ind_table.ind_tbl_num
};
static_assert(sizeof(CreateRwqIndTableReply) == 8);

struct RssTableRequest {
  uint32_t qpn;  // an RSS QP's number
  uint32_t reserved;
};
static_assert(sizeof(RssTableRequest) == 8);
// The QP's hash and the receive work queues' QP numbers, `size` of them.
struct RssTableReply {
  uint64_t fields;
  uint8_t key[verbs::kRssKeyBytes];
  uint32_t size;
  uint32_t reserved;
  uint32_t wqn[limits::kMaxRwqIndTableSize];
};
static_assert(sizeof(RssTableReply) == 56 + 4 * limits::kMaxRwqIndTableSize);

}  // namespace softverbs::protocol
