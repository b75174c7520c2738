// The shared-memory transport engine: what a NIC's requester, responder and
// completer do for one send work request, run by the process that posted
// it (docs/datapath.md, "The engine"). Shared memory is its carrier: the
// requester reaches the target's rings and memory directly, so a "packet"
// and its response are one call.
//
//   requester  (shm_requester.cc)  a WR -> local key checks, the bytes it
//              carries (inline or gathered), the target it goes to;
//   responder  (shm_responder.cc)  the target's checks and work: its state,
//              Q_Key, access flags, rkey and bounds, a receive WQE (RNR),
//              placing the bytes, atomics, the receive completion; it
//              answers as a responder on the wire would (Response);
//   completer  (shm_completer.h)   the response -> the local completion,
//              RNR and no-answer retries within the QP's budget, errors;
//   send queue (shm_send_queue.h)  the WRs that wait (RNR, no answer, held
//              in SQD), in order, and the requester's named states.
//
// The network transport (wire_qp.h) has the same three parts over packets
// and asks the same opcode table (opcodes.h) and keyed access.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <vector>

#include "datapath/cq_ring.h"
#include "datapath/device_table.h"
#include "datapath/layout.h"
#include "datapath/memory.h"
#include "datapath/opcodes.h"
#include "datapath/recv_queue.h"
#include "datapath/timers.h"
#include "roce/ip_udp.h"

namespace softverbs::datapath {

// A work request's bounds are the device's (common/device_limits.h): what
// ibv_query_device advertises is what a SendWr holds.
inline constexpr uint32_t kMaxSendSge = static_cast<uint32_t>(limits::kMaxSge);
inline constexpr uint32_t kMaxInline = limits::kMaxInlineData;
// Receive WQEs are copied into arrays of kMaxSendSge entries.
static_assert(limits::kMaxSrqSge <= limits::kMaxSge && limits::kMaxSgeRd <= limits::kMaxSge);
inline constexpr uint32_t kGrhBytes = 40;

// Why an error completion happened, in ibv_wc.vendor_err (docs/datapath.md).
enum VendorError : uint32_t {
  kVendorNone = 0,
  kVendorBadLkey = 0x101,
  kVendorLkeyAccess = 0x102,
  kVendorLkeyRange = 0x103,
  kVendorMwBind = 0x104,      // BIND_MW refused (the daemon's log says why)
  kVendorInvalidate = 0x105,  // LOCAL_INV refused: no type 2 window with that rkey here
  kVendorLocalCopy = 0x106,   // DMA memcpy: a page of an on-demand MR could not be reached
  kVendorUmr = 0x107,         // UMR refused (the daemon's log says why)
  kVendorBadRkey = 0x201,
  kVendorRkeyAccess = 0x202,
  kVendorRkeyRange = 0x203,
  kVendorQpAccess = 0x204,
  kVendorMisaligned = 0x205,
  kVendorXrcSrq = 0x206,            // XRC: no XRC SRQ with that number in the target's domain
  kVendorRemoteInvalidate = 0x207,  // SEND_WITH_INV: the responder may not invalidate that rkey
  kVendorRecvTooSmall = 0x301,
  kVendorRecvBadLkey = 0x302,
  kVendorRnrExceeded = 0x401,
  kVendorNoResponse = 0x402,
  kVendorFlushed = 0x501,
  kVendorMessageTooLong = 0x601,
  kVendorNotOnTheWire = 0x602,  // the network transport has no packet for the operation
  kVendorOwnerGone = 0x701,
  // The responder on the network answered with a NAK: 0x800 + its NAK code
  // (IBA table 43: 1 invalid request, 2 remote access, 3 remote operational).
  kVendorRemoteNak = 0x800,
};

// A send work request, copied out of the application's ibv_send_wr (or built
// by the ibv_wr_* API) so that it can wait in the send queue.
struct SendWr {
  uint64_t wr_id = 0;
  uint32_t opcode = 0;  // ibv_wr_opcode
  uint32_t send_flags = 0;
  // Network order; LOCAL_INV and SEND_WITH_INV: the rkey to invalidate
  // (ibv_send_wr.invalidate_rkey, its union partner, copied as is).
  uint32_t imm_data = 0;
  uint32_t rkey = 0;  // BIND_MW: the window's new rkey (its low 8 bits count)
  uint64_t remote_addr = 0;
  // Atomics' operands. mlx5's UMR (kWrMlx5Umr) uses them, imm_data,
  // bind_access and the inline bytes as datapath/mkey_layout.h says.
  uint64_t compare_add = 0;
  uint64_t swap = 0;
  // UD
  uint32_t remote_qpn = 0;
  uint32_t remote_qkey = 0;
  uint8_t dgid[16] = {};
  uint8_t sgid[16] = {};
  uint8_t sl = 0;
  // The AH's GRH traffic class and hop limit, as the packet carries them
  // (roce::HopLimitOnTheWire applied at the post).
  roce::PathIpFields path;
  // UD: the AH's path leaves the host (the device's network transport
  // carries it; docs/roce.md).
  bool off_host = false;
  // XRC: the SRQ the message is for (wr.qp_type.xrc.remote_srqn, or
  // ibv_wr_set_xrc_srqn, which sets srqn_set: it is mandatory there).
  uint32_t remote_srqn = 0;
  bool srqn_set = false;
  // mlx5's DCI: mlx5dv_wr_set_dc_addr named the target DCT (remote_qpn), its
  // access key and the path (the AH's, as for UD); mandatory there.
  bool dc_addr_set = false;
  uint64_t dc_key = 0;
  // mlx5's DMA memcpy (kWrMlx5Memcpy): the destination, a range of the QP's
  // PD named by address and lkey; the source is sge[0], whose length is the
  // copy's.
  uint64_t memcpy_dest_addr = 0;
  uint32_t memcpy_dest_lkey = 0;
  // mlx5's DCI with streams: the stream the WR belongs to
  // (mlx5dv_wr_set_dc_addr_stream; 0 by mlx5dv_wr_set_dc_addr).
  uint16_t dci_stream = 0;
  // Not 0: an mlx5 WQE posted with mlx5dv_wr_raw_wqe, whose completion's
  // opcode is IBV_WC_DRIVER2, as libmlx5 reports a raw WQE's
  // (RequesterWcOpcode). Before the SGEs: the network transport's copy
  // (CopyUsedSendWr) carries it.
  uint8_t raw_wqe = 0;
  // Not 0: the QP was created with MLX5DV_QP_CREATE_SIG_PIPELINING, whose
  // fenced WRs after a bad signature stop the send queue (the network
  // transport's copy carries it, as raw_wqe).
  uint8_t sig_pipelining = 0;
  // BIND_MW: the window (the device's handle of it), the MR it is bound to
  // (its lkey; 0 unbinds), the range (remote_addr, bind_length) and the
  // window's access flags.
  uint32_t mw_handle = 0;
  uint32_t bind_lkey = 0;
  uint64_t bind_length = 0;
  uint32_t bind_access = 0;
  // Data: inline bytes (IBV_SEND_INLINE), then the scatter/gather entries.
  // A verbs WR has one or the other; an mlx5 WQE may carry an inline
  // segment before its data segments (UCX sends a header so).
  uint32_t num_sge = 0;
  RecvSge sge[kMaxSendSge];
  uint32_t inline_len = 0;
  uint8_t inline_data[kMaxInline];
  // Retry bookkeeping of the send queue.
  uint64_t first_attempt_ns = 0;
  uint64_t next_attempt_ns = 0;
  uint32_t rnr_retries = 0;
  // Posted while the QP was in SQD: not started until the QP is back in RTS
  // (IBA 10.3.1). Set on the send queue's copy only; SendWr is process-local.
  bool held = false;
  // mlx5dv_qp_cancel_posted_send_wrs turned it into a NOP: it completes
  // (with its own opcode) without running. On the send queue's copy only.
  bool canceled = false;
};

// The opcode of a send WR's own completion.
inline ibv_wc_opcode RequesterWcOpcode(const SendWr& wr) {
  return wr.raw_wqe != 0 ? IBV_WC_DRIVER2 : WrOpcode(wr.opcode).send_wc;
}

// The bytes a send work request carries: its inline data and the sum of its
// SGEs (an atomic's 8 bytes are the caller's to count).
inline uint32_t WrBytes(const SendWr& wr) {
  uint64_t n = (wr.send_flags & IBV_SEND_INLINE) ? wr.inline_len : 0;
  for (uint32_t i = 0; i < wr.num_sge; ++i) n += wr.sge[i].length;
  return static_cast<uint32_t>(n);
}

// How the executing process reaches a target QP's receive side.
struct PeerQp {
  uint32_t qpn = 0;
  uint32_t generation = 0;
  uint32_t owner = 0;
  RecvQueue rq;          // the QP's own receive queue, or its SRQ's
  uint32_t srqn = 0;     // != 0: rq is an SRQ
  CqRing recv_cq;        // where its receive completions go
  int cq_event_fd = -1;  // its completion channel (eventfd), or -1
  // XRC SRQs (reached by SRQ number): the receive side's PD, whose MRs the
  // responder may touch, and the XRC domain the SRQ belongs to.
  uint32_t pdn = 0;
  uint32_t xrcd = 0;
};

// A requester's last target, reused while its QP number and generation
// match and the host has retired nothing since (`epoch`, Host::PeerEpoch):
// a retired PeerQp may be freed once no execution is in progress.
struct PeerQpCache {
  PeerQp* peer = nullptr;
  uint64_t epoch = 0;
};

struct LocalQp;
struct SigError;  // block_signature.h

// What the engine needs from the process it runs in (the provider).
class Host {
 public:
  virtual ~Host() = default;
  // Monotonic nanoseconds (timers.h NowNs); a fake host may step it.
  virtual uint64_t Now() { return NowNs(); }
  // The client group whose keys this host uses (its own client id unless a
  // context was imported across processes: MrEntry::owner, QpEntry::owner).
  virtual uint32_t client_id() const = 0;
  virtual const DeviceTable& table() const = 0;
  // Every Execute runs between these two calls: what Find* returned stays
  // valid until the execution that got it leaves. A host may release the
  // mappings of peers that are gone once no execution is in progress.
  virtual void EnterExecution() {}
  virtual void LeaveExecution() {}
  // Bumped whenever the host retires a PeerQp: a PeerQpCache filled in an
  // older epoch is not used.
  virtual uint64_t PeerEpoch() const { return 0; }
  // Rings of QP qpn as currently published, or nullptr (gone / unknown).
  // Valid during the execution that asked (and while cached, see
  // PeerQpCache); not const because producers keep state in it (CqRing's
  // cached head).
  virtual PeerQp* FindPeerQp(uint32_t qpn, uint32_t generation) = 0;
  // How to reach the MR in slot e (whose key was just checked).
  virtual const MrMapping* FindMrMapping(uint32_t key, const MrEntry& e) = 0;
  // Whether the MR (or window) of slot e is memory of this host's process
  // (its accesses may go uncounted, below): the key's owner is this host,
  // unless the host's group has other processes (then its registrant is).
  virtual bool OwnsMemory(const MrEntry& e) const {
    return e.owner.load(std::memory_order_relaxed) == client_id();
  }
  // Whether this host's accesses to its own MRs need no in-flight count:
  // every execution is announced (EnterExecution) and the owner's dereg
  // waits for the executions of its process in progress (the provider's
  // execution gate). Otherwise they count in the access record like a
  // peer's.
  virtual bool OwnAccessesFenced() const { return false; }
  // Whether this host is the device: the only writer of the key lines (every
  // dereg, invalidation and release of a dead owner's MRs is a request the
  // device serves), in the thread that runs all its accesses, each within
  // one call. So no access of its is in progress when a key is cleared, and
  // every later one sees it cleared: its accesses take no in-flight count,
  // whoever's memory they reach.
  virtual bool ChangesKeysBetweenAccesses() const { return false; }
  // This host's count of its accesses in progress of MR slot `key`, in its
  // access record (datapath/layout.h kAccessRecordSize; MrGuards counts
  // there): the device sums the slot over the live records when the MR is
  // deregistered, and forgets a host's record when the host is gone, as the
  // kernel fences a dead process's DMA. Never nullptr for a host whose
  // accesses take counts (not ChangesKeysBetweenAccesses).
  virtual std::atomic<uint32_t>* AccessRecord(uint32_t key) {
    (void)key;
    return nullptr;
  }
  // Moves QP qpn to the error state (via the daemon, which publishes it).
  virtual void SetQpError(uint32_t qpn) = 0;
  // An SRQ dropped below its armed limit.
  virtual void SrqLimitReached(uint32_t srqn) = 0;
  // The receive side of XRC SRQ srqn (its ring, CQ, PD and domain), or
  // nullptr when no XRC SRQ has that number.
  virtual PeerQp* FindXrcSrq(uint32_t srqn) = 0;
  // Raises an affiliated async event of QP qpn at every handle of it
  // (IBV_EVENT_COMM_EST, IBV_EVENT_QP_ACCESS_ERR).
  virtual void RaiseQpEvent(uint32_t qpn, ibv_event_type event) = 0;
  // QPs attached to a multicast group.
  virtual void McastMembers(const uint8_t gid[16], std::vector<uint32_t>* qpns) = 0;
  // The raw packet QPs the device's flow rules steer a frame from raw packet
  // QP `sender` to, by its first head_bytes (at most verbs::kFlowHeadBytes).
  // None where the host keeps no rules (the device's own engine).
  virtual void FlowTargets(uint32_t sender, const uint8_t* head, uint32_t head_bytes,
                           std::vector<uint32_t>* qpns) {
    (void)sender;
    (void)head;
    (void)head_bytes;
    qpns->clear();
  }
  // Memory windows live in the device's tables, which the device writes.
  // Binds wr's window (a BIND_MW of QP qp) as the device checks it;
  // kVendorNone or kVendorMwBind.
  virtual VendorError BindWindow(const LocalQp& qp, const SendWr& wr) {
    (void)qp;
    (void)wr;
    return kVendorMwBind;
  }
  // Indirect memory keys live there too: gives the key wr names (imm_data,
  // its lkey) the layout and access of wr (a UMR of QP qp, kWrMlx5Umr) as
  // the device checks them; kVendorNone or kVendorUmr.
  virtual VendorError ConfigureMkey(const LocalQp& qp, const SendWr& wr) {
    (void)qp;
    (void)wr;
    return kVendorUmr;
  }
  // An access through signature key `key` found a bad signature (the first
  // of the access; sig_access.h): the device keeps it for the key's owner
  // (mlx5dv_mkey_check), as mlx5 reports one in a signature error CQE.
  virtual void ReportSigError(uint32_t key, const SigError& err) = 0;
  // Invalidates the type 2 window of rkey for QP qpn - or the indirect
  // memory key of that key (an mkey's lkey too, for a LOCAL_INV) -: a
  // LOCAL_INV posted on it, or (remote) a SEND_WITH_INV that arrived on it.
  // False if refused.
  virtual bool InvalidateWindow(uint32_t qpn, uint32_t rkey, bool remote) {
    (void)qpn;
    (void)rkey;
    (void)remote;
    return false;
  }
};

// The initiating QP as the engine needs it.
struct LocalQp {
  uint32_t qpn;
  uint32_t type;  // ibv_qp_type (the legacy IBV_QPT_XRC arrives as IBV_QPT_XRC_SEND)
  uint32_t pdn;
  uint32_t dest_qpn;  // RC/UC (a DCI's target is each WR's remote_qpn)
  uint32_t qkey;      // UD: used when remote_qkey has the high bit set
  uint32_t mtu_bytes;
  uint8_t sl;
  // The requester's last target (a FindPeerQp result), reused while its
  // QP number and generation match: the common case costs a compare, not
  // a locked map lookup. Owned by the caller, which serialises executions
  // on this QP (the send queue lock); nullptr: no cache.
  PeerQpCache* peer_cache = nullptr;
};

// How the responder answered a request, as a responder on the wire would
// (IBA 9.7.5.2). The requester's completer acts on it (shm_completer.h).
enum class Response : uint8_t {
  kNone,      // no responder was asked: a local operation, or the requester's own error
  kAck,       // executed (SEND, WRITE with immediate: a receive completion was written)
  kRnrNak,    // RC: no receive WQE; retry after Outcome::rnr_timer_ns (the min_rnr_timer code)
  kNoAnswer,  // RC: no such QP or not in a receive state; retry until the ACK timeout budget
  kDropped,   // UC, UD: discarded by the responder (no QP, Q_Key, no WQE, an error there)
  kNak,       // RC: an error NAK; the completion's status says which
};
const char* ResponseName(Response r);

// A rendezvous message matched a tag (tag_matching.h) and its data was
// read: what follows the sender's completion, as on a NIC whose FIN comes
// after its ACK - the FIN to the sender and the data's completion.
struct RendezvousFinish {
  bool pending = false;
  uint32_t target_qpn = 0;
  uint32_t target_generation = 0;
  uint64_t recv_wr_id = 0;  // the tag's
  uint32_t len = 0;
  ibv_wc_status status = IBV_WC_SUCCESS;  // IBV_WC_TM_RNDV_INCOMPLETE: the read failed
  uint32_t app_ctx = 0;
  uint64_t tag = 0;
};

struct Outcome {
  Response response = Response::kNone;
  Completion completion{};      // status / opcode / byte_len of the local completion
  uint64_t rnr_timer_ns = 0;    // kRnrNak: the responder's min_rnr_timer code
  RendezvousFinish rendezvous;  // pending: call FinishRendezvous after `completion`
};

// The requester: executes wr on behalf of qp (shm_requester.cc).
Outcome Execute(Host& host, const LocalQp& qp, const SendWr& wr);

// The rest of a matched rendezvous (Outcome::rendezvous), after the
// sender's completion was written.
void FinishRendezvous(Host& host, const LocalQp& qp, const RendezvousFinish& f);

// Writes a completion to a CQ ring and signals its channel if it was armed
// (shm_completer.cc).
// A message's receive completion names the WQE it consumed, `consumed`
// (CqEntry::recv_wqe), for the owner of the WQE's queue.
// Returns whether the completion went into the ring (CqRing::Push; its
// on_reserved ran then).
bool Complete(CqRing& cq, int event_fd, const Completion& c, const ClaimedRecv* consumed = nullptr,
              const CqRing::OnReserved* on_reserved = nullptr);

// Claims every WQE left in rq and completes it with IBV_WC_WR_FLUSH_ERR on
// cq (a QP in the error state). Safe against concurrent claimers.
void FlushRecvQueue(RecvQueue& rq, CqRing& cq, int event_fd, uint32_t qpn);

}  // namespace softverbs::datapath
