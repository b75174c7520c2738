// The responder of the shared-memory engine (engine.h): what the target's
// NIC does with a request the requester (shm_requester.cc) hands it. It
// runs in the requester's process, on the target's shared rings and memory:
// finds the target QP (or the XRC SRQ a request names), checks its state,
// Q_Key, access flags, alignment, rkey and bounds, claims a receive WQE,
// places the bytes or does the atomic, writes the receive completion, and
// answers in Outcome::response what a responder on the wire would (ACK,
// RNR NAK, error NAK, or nothing). A responder error on an RC QP moves the
// target to the error state, as the IBA's responder does (an mlx5 DCT,
// which serves every DCI that knows its key, stays in RTR).
#pragma once

#include <atomic>

#include "datapath/engine.h"
#include "datapath/memory.h"

namespace softverbs::datapath {

// The requester's own error (a bad lkey, a message too long): no responder
// was asked.
inline void FailLocally(Outcome* out, ibv_wc_status status, VendorError why) {
  out->response = Response::kNone;
  out->completion.status = status;
  out->completion.vendor_err = why;
}

// The responder's error NAK: the requester completes with `status`.
inline void Nak(Outcome* out, ibv_wc_status status, VendorError why) {
  out->response = Response::kNak;
  out->completion.status = status;
  out->completion.vendor_err = why;
}

// The QP a connected requester's WR goes to: an RC/UC/XRC QP's connected
// QP, a DCI's the DCT its WR names (mlx5dv_wr_set_dc_addr).
inline uint32_t ConnectedTargetOf(const LocalQp& qp, const SendWr& wr) {
  return qp.type == verbs::kQptDcIni ? wr.remote_qpn : qp.dest_qpn;
}

// SEND, SEND_WITH_IMM, SEND_WITH_INV of `bytes` bytes (src) to QP
// target_qpn: ConnectedTargetOf, or for UD the WR's remote QPN or one
// member of a multicast group.
void RespondToSend(Host& host, const LocalQp& qp, const SendWr& wr, const WrOpcodeInfo& info,
                   const PieceList& src, uint32_t bytes, uint32_t target_qpn, Outcome* out);

// RDMA WRITE (with immediate), RDMA READ, the atomics and ATOMIC WRITE of
// `bytes` bytes at wr.remote_addr of ConnectedTargetOf. `local` is the
// requester's side, already checked: a WRITE's source, a READ's
// destination, an atomic's 8-byte result buffer.
void RespondToRdma(Host& host, const LocalQp& qp, const SendWr& wr, const WrOpcodeInfo& info,
                   const PieceList& local, uint32_t bytes, Outcome* out);

// The receive completion of a message of qp (a SEND, or a WRITE with
// immediate) that took receive WQE recv_wr_id of QP target_qpn, before
// its byte_len and any error are known: sl is the QP's (UD: the WR's
// address handle's), the send's IBV_SEND_SOLICITED, its immediate data or
// the rkey it invalidated.
inline Completion MessageReceiveCompletion(uint64_t recv_wr_id, uint32_t target_qpn,
                                           uint32_t src_qpn, uint8_t sl, uint32_t send_flags,
                                           uint32_t imm_data, const WrOpcodeInfo& info) {
  Completion rc{};
  rc.wr_id = recv_wr_id;
  rc.status = IBV_WC_SUCCESS;
  rc.opcode = info.recv_wc;
  rc.qp_num = target_qpn;
  rc.src_qp = src_qpn;
  rc.sl = sl;
  rc.solicited = (send_flags & IBV_SEND_SOLICITED) ? 1 : 0;
  if (info.immediate) {
    rc.imm_data = imm_data;
    rc.wc_flags |= IBV_WC_WITH_IMM;
  } else if (info.invalidate) {
    rc.imm_data = imm_data;  // wc.invalidated_rkey
    rc.wc_flags |= IBV_WC_WITH_INV;
  }
  return rc;
}

// The receive side of QP target_qpn of that generation: the requester's
// cached target (LocalQp::peer_cache) while it is still that QP, else the
// host's lookup, which then fills the cache. nullptr: gone or unknown.
// A template on the host so that the provider's plain path
// (shm_plain_post.h) calls its host's methods directly.
template <typename H>
PeerQp* ReachPeerQp(H& host, const LocalQp& qp, uint32_t target_qpn, uint32_t generation) {
  // The epoch is read before the lookup: a retirement after it makes the
  // cached pointer unusable next time.
  const uint64_t epoch = host.PeerEpoch();
  PeerQp* p = qp.peer_cache && qp.peer_cache->epoch == epoch ? qp.peer_cache->peer : nullptr;
  if (p && p->qpn == target_qpn && p->generation == generation) return p;
  p = host.FindPeerQp(target_qpn, generation);
  if (p && qp.peer_cache) *qp.peer_cache = {p, epoch};
  return p;
}

// Test hook (docs/datapath.md, "A peer that dies inside an access"):
// SOFTVERBS_TEST_STALL_IN_ACCESS_US=<n> makes this process sleep n us while
// it holds an MR's in-flight count, so a test can kill it there. Read once,
// at the first access (a test sets it in a child forked after the library
// loaded). Inline: every post passes here.
extern std::atomic<long> stall_in_access_us;  // -1: not read yet
void StallInsideAccessSlow();
inline void StallInsideAccessForTests() {
  if (stall_in_access_us.load(std::memory_order_relaxed) != 0) [[unlikely]] {
    StallInsideAccessSlow();
  }
}

// An execution in progress, as the host counts them (Host::EnterExecution).
template <typename H>
class ExecutionScope {
 public:
  explicit ExecutionScope(H& host) : host_(host) { host_.EnterExecution(); }
  ExecutionScope(const ExecutionScope&) = delete;
  ExecutionScope& operator=(const ExecutionScope&) = delete;
  ~ExecutionScope() { host_.LeaveExecution(); }

 private:
  H& host_;
};

}  // namespace softverbs::datapath
