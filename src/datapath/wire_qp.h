// The network transport of one QP: RoCE v2 (IBTA Annex A17) on the packet
// carrier, as the device (softverbsd) runs it for QPs whose path leaves the
// host (docs/roce.md, "The network transport"). The three parts of
// Soft-RoCE's engine, each a loop over named states:
//
//   requester  (wire_requester.cc)  work requests -> request packets: PSNs,
//              segmentation by path MTU, the send window, go-back-N
//              retransmission on a NAK or the local ACK timeout, RNR waits;
//   completer  (wire_completer.cc)  ACKs, NAKs, READ responses and atomic
//              ACKs -> send completions, errors, retries;
//   responder  (wire_responder.cc)  request packets -> memory and receive
//              queues: PSN checks, duplicates (re-ACKed, READs re-read,
//              atomics replayed), RNR NAKs, keys and access, ACK coalescing.
//
// Owner waits (wire_owner_wait.cc). Bytes of an MR that no shared memory
// backs are reached through the owner's /proc/<pid>/mem, and while the
// owner's own registration converts their page (owner_memory.h) they cannot
// be reached - for microseconds to milliseconds. A NIC never meets such a
// moment, so the transport hides it, without holding up the device's other
// QPs: the responder keeps the packet (kOwnerWait), drops what arrives
// meanwhile and runs the packet again from its timer - then, if it dropped
// anything, a PSN-sequence NAK brings the requester back to it (RC; a
// requester that timed out meanwhile and sends the kept packet again gets
// an RNR NAK, as from a NIC's page fault on an on-demand MR, which does not
// spend its retry count); the
// requester stops sending at a payload it cannot read and goes on from its
// timer; a READ response or atomic result it cannot place is dropped and
// asked again (the gap or the ACK timeout). Each gives up after
// kOwnerMemorySettleMs, as the library's executors do, and fails as before.
//
// What an opcode means comes from the opcode tables (opcodes.h for work
// requests, ibta_opcode.h for packets); memory is reached through the same
// keyed access as on shared memory (keyed_access.h).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "common/ring_queue.h"
#include "datapath/engine.h"
#include "datapath/owner_memory.h"
#include "roce/flow.h"
#include "roce/packet.h"
#include "roce/transport.h"

namespace softverbs::datapath {

class MrGuards;    // keyed_access.h
struct PieceList;  // memory.h

// A QP's attributes as the transport uses them, as the device last applied
// them (the modify mask is applied once, by the device).
struct WireQpConfig {
  uint32_t qpn = 0;
  uint32_t type = 0;        // ibv_qp_type
  uint32_t generation = 0;  // its QpEntry generation
  uint32_t owner = 0;       // client id of its creator (whose lkeys it uses)
  uint32_t pdn = 0;
  uint32_t dest_qpn = 0;  // RC/UC/XRC
  uint32_t qkey = 0;      // UD
  uint32_t sq_psn = 0;
  uint32_t rq_psn = 0;
  uint32_t mtu_bytes = 1024;  // path MTU (UD: the port's active MTU)
  uint8_t timeout = 0;        // local ACK timeout code (datapath/timers.h)
  uint8_t retry_cnt = 0;
  uint8_t rnr_retry = 0;  // 7: forever
  uint8_t min_rnr_timer = 0;
  uint8_t max_rd_atomic = 1;  // READs/atomics the requester has outstanding
  uint8_t sl = 0;
  bool sq_sig_all = false;
  uint8_t sgid[16] = {};    // our address: the port's GID at the path's sgid_index
  uint8_t dgid[16] = {};    // RC/UC/XRC: the path's destination
  roce::PathIpFields path;  // RC/UC/XRC: the path's traffic class and hop limit (on the wire)
  // The UDP source port of its packets: 0 derives it from qpn
  // (roce::SourcePortOfQpn); mlx5dv_modify_qp_udp_sport sets one.
  uint16_t udp_sport = 0;
};

inline uint16_t SourcePortOf(const WireQpConfig& config) {
  return config.udp_sport != 0 ? config.udp_sport : roce::SourcePortOfQpn(config.qpn);
}

// What the transport needs from where it runs: the device's memory and rings
// (Host) and the packet carrier.
class WireHost : public Host {
 public:
  // Sends one packet from sgid's address and flow source port src_port to
  // dgid, with the path's IP header fields.
  virtual void SendPacket(const uint8_t sgid[16], const uint8_t dgid[16], uint16_t src_port,
                          const roce::PathIpFields& path, const roce::TransportFields& fields,
                          std::span<const uint8_t> payload) = 0;
  // QP qpn's send CQ (its ring and completion channel), or false.
  virtual bool SendCq(uint32_t qpn, CqRing** ring, int* event_fd) = 0;
  // Moves unreliable QP qpn's send queue to SQE (a local requester error).
  virtual void SetSendQueueError(uint32_t qpn) = 0;
  // Monotonic nanoseconds (timers.h NowNs; a fake host may step it).
  virtual uint64_t Now() = 0;
  // n work requests of QP qpn left its send queue (QpEntry::wire_retired);
  // told before their completions are written.
  virtual void SendWrsRetired(uint32_t qpn, uint32_t n) {
    (void)qpn;
    (void)n;
  }
  // Signature pipelining stopped QP qpn's send queue: RTS -> SQD and
  // IBV_EVENT_SQ_DRAINED.
  virtual void DrainOnSigError(uint32_t qpn) = 0;
};

// Transport counters of one QP, in the spirit of `rdma statistic`
// (`softverbs status`).
struct WireCounters {
  uint64_t packets_sent = 0;
  uint64_t packets_received = 0;
  uint64_t retransmitted = 0;  // request packets sent again
  uint64_t timeouts = 0;       // local ACK timeouts that fired
  uint64_t naks_sent = 0;      // NAKs of any code but RNR
  uint64_t naks_received = 0;
  uint64_t rnr_naks_sent = 0;
  uint64_t rnr_naks_received = 0;
  uint64_t duplicates = 0;       // duplicate requests the responder saw
  uint64_t sequence_errors = 0;  // requests after a gap (NAK PSN sequence error)
  uint64_t dropped = 0;          // packets discarded (bad opcode sequence, UC gap, Q_Key)
  uint64_t read_gaps = 0;        // READs asked again at once after a gap in their responses
  uint64_t owner_waits = 0;      // packets held back while their memory's owner converted it

  WireCounters& operator+=(const WireCounters& k) {
    packets_sent += k.packets_sent;
    packets_received += k.packets_received;
    retransmitted += k.retransmitted;
    timeouts += k.timeouts;
    naks_sent += k.naks_sent;
    naks_received += k.naks_received;
    rnr_naks_sent += k.rnr_naks_sent;
    rnr_naks_received += k.rnr_naks_received;
    duplicates += k.duplicates;
    sequence_errors += k.sequence_errors;
    dropped += k.dropped;
    read_gaps += k.read_gaps;
    owner_waits += k.owner_waits;
    return *this;
  }
};

// How long memory an owner converts has been out of reach (owner waits).
struct OwnerWait {
  static constexpr uint64_t kRetryNs = 100'000;  // the next try
  bool waiting = false;
  uint64_t since = 0;  // the first failure
  // After a failed access with `error` (its errno): whether to try again
  // later - it may clear, and kOwnerMemorySettleMs have not passed.
  bool MayRetry(int error, uint64_t now) {
    if (!OwnerAccessMayClear(error)) return false;
    if (!waiting) {
      waiting = true;
      since = now;
    }
    return Active(now);
  }
  void End() { waiting = false; }
  // Waiting still, within kOwnerMemorySettleMs of the first failure.
  bool Active(uint64_t now) const {
    return waiting && now - since < static_cast<uint64_t>(kOwnerMemorySettleMs) * 1'000'000;
  }
};

// A packet for this QP, as the carrier received and parsed it.
struct WirePacket {
  roce::TransportFields fields;
  std::span<const uint8_t> payload;
  const roce::Endpoints* ends = nullptr;  // the IP header it came with (UD GRH)
  size_t roce_bytes = 0;                  // BTH up to the ICRC (UD GRH length)
};

// The requester's states (printed in traces and status).
enum class RequesterState : uint8_t {
  kIdle,        // nothing outstanding
  kSending,     // packets to send, window open
  kWindowFull,  // waiting for ACKs before sending more
  kRnrWait,     // the responder had no receive WQE: waiting for the RNR timer
  kError,       // the QP is in ERR: every WR is flushed
};
const char* RequesterStateName(RequesterState s);

// The responder's states.
enum class ResponderState : uint8_t {
  kIdle,       // expecting the first packet of a message
  kInMessage,  // inside a multi-packet SEND or WRITE
  kAfterGap,   // a PSN gap was NAKed; waiting for the expected PSN
  kOwnerWait,  // a packet waits for its memory's owner (owner waits, above)
  kError,      // the QP is in ERR
};
const char* ResponderStateName(ResponderState s);

class WireQp {
 public:
  WireQp(WireHost& host, const WireQpConfig& config);
  WireQp(const WireQp&) = delete;
  WireQp& operator=(const WireQp&) = delete;

  const WireQpConfig& config() const { return config_; }
  // The device changed attributes (RTR->RTS sets sq_psn, timeout, retries).
  // rq_psn / sq_psn restart the responder / requester only when given anew.
  void Reconfigure(const WireQpConfig& config, bool rq_psn_set, bool sq_psn_set);

  // Requester: a work request the owner posted (already checked by the
  // library's posting checks).
  void Post(const SendWr& wr);
  // A packet for this QP: a request (responder) or a response (completer).
  void Receive(const WirePacket& packet);
  // Runs the timers due at `now` (ACK timeout, RNR wait) and sends what the
  // window allows.
  void OnTimer(uint64_t now);
  // Sends the ACK the packets received since the last call asked for (one
  // ACK for a batch: the carrier calls it when its batch is done).
  void FlushAck();
  // When OnTimer wants to run next (UINT64_MAX: no timer).
  uint64_t NextDeadline() const;
  // The QP is in ERR: outstanding and waiting WRs complete with
  // IBV_WC_WR_FLUSH_ERR; later packets are dropped.
  void Flush();
  // An unreliable QP's send queue entered SQE (FlushSendQueue: its WRs are
  // flushed, its receive side keeps working) and left it for RTS again.
  void FlushSendQueue();
  void ResumeSendQueue();
  // SQD: WRs posted from now on are held (not started) until Hold(false),
  // the QP's return to RTS (IBA 10.3.1).
  void Hold(bool on);
  // mlx5dv_qp_cancel_posted_send_wrs: the WRs of wr_id not started yet
  // complete successfully without a packet; how many.
  int Cancel(uint64_t wr_id);
  // Every WR started before SQD has completed (those left, if any, are
  // held): when IBV_EVENT_SQ_DRAINED is due.
  bool SendQueueDrained() const { return sq_.empty() || sq_.front().wr.held; }

  RequesterState requester_state() const;
  ResponderState responder_state() const { return rsp_state_; }
  const WireCounters& counters() const { return counters_; }
  size_t outstanding() const { return sq_.size(); }
  uint32_t expected_psn() const { return epsn_; }        // the responder's next request PSN
  uint32_t unacked_psn() const { return unacked_psn_; }  // the requester's oldest unanswered PSN
  uint32_t next_psn() const { return next_psn_; }        // the requester's next new PSN

 private:
  // ---- requester (wire_requester.cc)
  // What the requester knows of a WR besides the WR itself (Post resets it
  // in place).
  // A WR of the device's own on this QP's send queue (tag matching's
  // rendezvous, wire_tag_matching.cc): no completion of its own, not one
  // the owner posted.
  enum class Internal : uint8_t {
    kNone,
    kRendezvousRead,  // reads a tagged message's data from its sender
    kRendezvousFin,   // tells the sender its buffer was read
  };
  struct RendezvousInfo {
    uint64_t recv_wr_id = 0;  // the tag's
    uint64_t tag = 0;
    uint32_t app_ctx = 0;
    uint32_t len = 0;
  };
  struct PendingProgress {
    Internal internal = Internal::kNone;
    RendezvousInfo rendezvous;
    const WrOpcodeInfo* info = nullptr;
    uint32_t bytes = 0;          // message length (atomics: 8)
    uint32_t first_psn = 0;      // PSN of its first packet
    uint32_t packets = 0;        // request packets
    uint32_t psn_span = 0;       // PSNs it takes (READ: its response packets)
    uint32_t next_packet = 0;    // request packet to send next (READ: 0 or done)
    uint32_t read_received = 0;  // READ: response packets placed so far
    uint64_t read_bytes = 0;     // READ: bytes placed so far
  };
  struct Pending : PendingProgress {
    SendWr wr;
  };
  bool Reliable() const;
  // What became of a request packet SendRequestPacket was asked for.
  enum class PacketSent {
    kSent,
    kOwnerWaits,  // its payload cannot be read now (owner waits); nothing sent
    kLocalError,  // its local MR was deregistered since the WR's check; nothing sent
  };
  // Packet index of p, the WR at sq_ position pos. kLocalError sets *why.
  PacketSent SendRequestPacket(Pending& p, size_t pos, uint32_t index, VendorError* why);
  bool InWindow(uint32_t psn) const;  // the send window holds a request packet of PSN psn
  bool WindowOpen(const Pending& p) const;
  // Whether another request packet goes right after packet index of p.
  bool MoreToSendAfter(const Pending& p, size_t pos, uint32_t index) const;
  void Pump();  // sends what the window allows
  void GoBackTo(uint32_t psn);
  void StartAckTimer();
  // ---- completer (wire_completer.cc)
  void OnResponse(const WirePacket& packet);
  void OnAck(uint32_t psn, uint8_t syndrome);
  void OnReadResponse(const WirePacket& packet);
  void OnAtomicAck(const WirePacket& packet);
  // Completes the WRs wholly before psn (implicitly acknowledged). Returns
  // false if a READ/atomic among them still lacks its response (it was lost:
  // the requester goes back to it).
  bool CompleteBefore(uint32_t psn);
  void CompleteFront(ibv_wc_status status, uint32_t vendor_err);
  void RequesterError(ibv_wc_status status, uint32_t vendor_err);
  // A reliable QP in ERR: its own receive queue's WQEs complete with
  // IBV_WC_WR_FLUSH_ERR (an SRQ's stay, for its other QPs).
  void FlushOwnReceives();
  // Whether the completion went into the QP's send CQ (on_reserved ran).
  bool PushSendCompletion(const Completion& c, const CqRing::OnReserved* on_reserved = nullptr);
  // ---- responder (wire_responder.cc)
  void OnRequest(const WirePacket& packet);
  void OnUdRequest(const WirePacket& packet);
  void OnUcRequest(const WirePacket& packet);
  // Executes one in-sequence request packet; false if it was answered with a
  // NAK (RNR or error) and must not advance the expected PSN.
  bool Execute(const WirePacket& packet);
  bool ReceiveSide(const WirePacket& packet);
  bool PlaceSend(const WirePacket& packet, IbtaOperation op);
  bool PlaceWrite(const WirePacket& packet, IbtaOperation op);
  bool AnswerRead(const roce::TransportFields& f, bool duplicate);
  bool ExecuteAtomic(const WirePacket& packet);
  bool ExecuteAtomicWrite(const WirePacket& packet);
  // The 8 bytes at the request's address through its rkey with `access`, in
  // one piece; false after a remote access error NAK.
  bool AtomicTarget(const roce::TransportFields& f, uint32_t access, MrGuards& guards,
                    PieceList* remote);
  struct AtomicResult;
  // An atomic or ATOMIC WRITE executed: the PSN and MSN move on, its answer
  // is kept for a duplicate and sent.
  void AnswerAtomic(const roce::TransportFields& f, IbtaOperation answer, uint64_t orig);
  void SendAtomicAnswer(const roce::TransportFields& request, const AtomicResult& r);
  bool ClaimWqe();
  void CompleteReceive(const roce::TransportFields& f, uint32_t byte_len, ibv_wc_status status,
                       uint32_t vendor_err);
  // ---- tag matching (wire_tag_matching.cc): a SEND to a tag-matching SRQ.
  // Where the message whose first packet this is goes: a posted tag's
  // buffer (eager), a read of the sender's buffer (rendezvous), or an
  // ordinary receive of the SRQ (unexpected, or untagged). False: no receive
  // for it (an RNR NAK is due).
  bool StartTaggedMessage(const WirePacket& packet);
  // A WR into the send queue's next slot (Post, QueueInternal), and its
  // length, packets and PSNs.
  Pending& Enqueue(const SendWr& wr);
  void Number(Pending& p);
  // Queues a WR of the device's own (the caller pumps).
  void QueueInternal(const SendWr& wr, Internal kind, const RendezvousInfo& rendezvous);
  // An internal WR of `kind` is done (status: its READ's): the rendezvous'
  // FIN and its data's completion.
  void FinishInternal(Internal kind, const RendezvousInfo& info, ibv_wc_status status);
  // A rendezvous' receive completion, before its flags and status.
  Completion RendezvousCompletion(const RendezvousInfo& info) const;
  void SendAck(uint32_t psn);
  void SendNak(uint32_t psn, uint8_t syndrome);
  // A receive the failed message consumed, completed with its error inside
  // ResponderError (after the QP entered the error state).
  struct FailedReceive {
    const roce::TransportFields& f;
    uint32_t byte_len;
    ibv_wc_status status;
    uint32_t vendor_err;
  };
  void ResponderError(uint32_t psn, uint8_t nak_syndrome, bool access_error,
                      const FailedReceive* failed_receive = nullptr);
  void SendResponse(roce::TransportFields& f, std::span<const uint8_t> payload);
  // ---- owner waits (wire_owner_wait.cc)
  // After a copy or atomic of the responder failed: whether the packet waits
  // (the failure may clear) - then the execution returns false and the
  // packet is kept (Park) instead of failing the QP.
  bool DeferForOwner();
  void Park(const WirePacket& packet);
  void WhileParked(const WirePacket& packet);
  void RetryParked();
  // The transport of the ACKs this QP sends (XRC for an XRC receive QP).
  IbtaTransport ResponseTransport() const;

  WireHost& host_;
  WireQpConfig config_;
  WireCounters counters_;
  bool error_ = false;
  bool hold_ = false;  // SQD: new WRs wait (Hold)
  // Signature pipelining: a WR's access met a bad signature since the send
  // queue last stopped for one.
  bool sig_error_seen_ = false;

  // requester
  RingQueue<Pending> sq_;     // posted, not completed, in order
  size_t next_send_ = 0;      // sq_ index of the WR whose packets go next
  uint32_t next_psn_ = 0;     // PSN of the next WR posted
  uint32_t unacked_psn_ = 0;  // oldest PSN not acknowledged
  uint64_t ack_deadline_ = UINT64_MAX;
  uint32_t retries_ = 0;  // timeouts since the last progress
  // A READ was asked again from its first missing response because the
  // response read_gap_psn_ came first; no other such request until the
  // responses reach that PSN, the READ completes or the ACK timer fires
  // (OnReadResponse).
  bool read_gap_asked_ = false;
  uint32_t read_gap_psn_ = 0;
  // The requester went back to a READ or atomic whose response never came
  // while later PSNs were answered (CompleteBefore); no other such going
  // back until a WR completes or the ACK timer fires.
  bool lost_response_asked_ = false;
  uint32_t rnr_retries_ = 0;       // RNR NAKs of the front WR
  uint64_t rnr_until_ = 0;         // kRnrWait until then
  uint32_t highest_sent_psn_ = 0;  // for counting retransmissions
  bool sent_any_ = false;
  OwnerWait send_wait_;         // a payload that could not be read
  uint64_t send_retry_at_ = 0;  // the requester sends again then (0: not waiting)
  OwnerWait place_wait_;        // a READ response or atomic result that could not be placed

  // responder
  ResponderState rsp_state_ = ResponderState::kIdle;
  uint32_t epsn_ = 0;  // expected PSN
  uint32_t msn_ = 0;   // messages completed (AETH MSN)
  IbtaOperation last_op_ = IbtaOperation::kNone;
  bool ack_pending_ = false;  // a packet asked for an ACK not yet sent
  uint32_t ack_psn_ = 0;      // the PSN that ACK acknowledges
  // The message in progress: its receive WQE (SEND, WRITE with immediate)
  // or its RDMA target (WRITE).
  PeerQp* rx_ = nullptr;  // receive side (own RQ, its SRQ or an XRC SRQ)
  uint32_t rx_pdn_ = 0;
  bool have_wqe_ = false;
  // A UD receive's completion sl: the packet's type (datapath/ud_receive.h).
  uint8_t ud_sl_ = 0;
  ClaimedRecv wqe_{};
  uint64_t rx_offset_ = 0;  // bytes of the message placed so far
  // The message in progress goes to a tag-matching SRQ: what its completion
  // says, and the bytes of it not placed (an eager message's TMH; all of a
  // rendezvous request, whose data is read).
  struct TaggedMessage {
    bool active = false;
    bool matched = false;  // a posted tag's buffer: no SRQ WQE consumed
    bool discard = false;  // a rendezvous request: nothing placed, no completion here
    uint8_t opcode = 0;    // ibv_wc_opcode: IBV_WC_TM_RECV or IBV_WC_TM_NO_TAG
    uint32_t wc_flags = 0;
    uint32_t skip = 0;
    uint64_t tag = 0;
    uint32_t app_ctx = 0;
  } tm_;
  bool pump_after_request_ = false;  // a rendezvous read waits for its request's ACK
  uint64_t write_va_ = 0;
  uint32_t write_rkey_ = 0;
  uint32_t write_len_ = 0;
  // Atomic results by PSN, replayed for duplicates (max_dest_rd_atomic).
  // The answer to an atomic or an ATOMIC WRITE, replayed for a duplicate
  // (never executed twice).
  struct AtomicResult {
    uint32_t psn = 0;
    bool valid = false;
    uint64_t orig = 0;
    uint8_t syndrome = 0;
    IbtaOperation answer = IbtaOperation::kAtomicAcknowledge;  // or kReadResponseOnly
  };
  std::array<AtomicResult, 16> atomics_{};
  size_t atomics_next_ = 0;
  // The packet kOwnerWait keeps, in its own storage (the carrier's buffer
  // is reused).
  struct ParkedPacket {
    roce::TransportFields fields;
    std::vector<uint8_t> payload;
    roce::Endpoints ends;
    bool has_ends = false;
    size_t roce_bytes = 0;
    ResponderState state = ResponderState::kIdle;  // the responder's state before it
    bool dropped_since = false;                    // packets were dropped meanwhile
    bool retrying = false;                         // RetryParked runs it
  };
  ParkedPacket parked_;
  OwnerWait rsp_wait_;
  uint64_t parked_retry_at_ = 0;
  bool owner_deferred_ = false;  // the execution that just failed waits (DeferForOwner)
  uint32_t read_resume_ = 0;     // a kept READ goes on at this response packet
};

}  // namespace softverbs::datapath
