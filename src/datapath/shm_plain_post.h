// The success path of the commonest work requests on the shared-memory
// engine - an RDMA WRITE, a SEND (with or without immediate), an RDMA READ
// or an atomic of one SGE on an RC or UC QP - without the general engine's
// bookkeeping: no copy of the work request, no piece lists, no responder
// outcome to judge. It asks the same questions as the requester and
// responder (shm_requester.cc, shm_responder.cc) - the same key checks
// (CheckMrAccess), in-flight counts (MrGuards), peer cache, receive claim,
// completions and atomics - but only where every answer leads to a plain
// ACK; any other answer sends the WR to the general engine before anything
// has changed, and that engine reports it (docs/datapath.md, "The plain
// post path"). A template on the host, as the send queue is on its port:
// the provider's post calls its host's methods directly, most of them
// inline.
#pragma once

#include <string.h>

#include <cstdint>

#include "datapath/engine.h"
#include "datapath/keyed_access.h"
#include "datapath/shm_responder.h"
#include "datapath/tag_matching.h"

namespace softverbs::datapath {

// One RC or UC work request of one SGE of `bytes` (> 0) contiguous bytes:
// the source of a WRITE or SEND, the destination of a READ, the result
// buffer of an atomic (8 of its bytes).
struct PlainPost {
  uint32_t opcode;  // HasPlainPath
  uint32_t send_flags;
  uint32_t imm_data;    // SEND_WITH_IMM, network order
  uint64_t local_addr;  // this process's address of the bytes (the SGE's addr)
  uint32_t lkey;        // the SGE's lkey; ignored when the bytes are inline
  bool inline_src;      // IBV_SEND_INLINE (WRITE, SEND): the bytes need no key
  uint32_t bytes;
  uint64_t remote_addr;  // WRITE, READ, atomics
  uint32_t rkey;         // WRITE, READ, atomics
  uint64_t compare_add;  // atomics
  uint64_t swap;         // compare and swap
};

// Whether an opcode has a plain path.
inline bool HasPlainPath(uint32_t opcode) {
  switch (opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM:
    case IBV_WR_RDMA_READ:
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      return true;
    default:
      return false;
  }
}

namespace plain {

// A receive state in which a message needs nothing of the responder but
// its work: RTR only once IBV_EVENT_COMM_EST was raised (the general
// engine raises it, ReachTarget).
inline bool Established(const QpEntry& te) {
  switch (te.state.load()) {
    case IBV_QPS_RTS:
    case IBV_QPS_SQD:
    case IBV_QPS_SQE:
      return true;
    case IBV_QPS_RTR:
      return te.comm_est.load(std::memory_order_relaxed) != 0;
    default:
      return false;
  }
}

// The requester's `bytes` (GatherSource, RequestRdma): inline, or in this
// process's own MR, which the execution gate covers without a count; a
// READ's or an atomic's need local write. nullptr: not plain.
template <typename H>
uint8_t* Local(H& host, const LocalQp& qp, const PlainPost& p, uint32_t bytes, uint32_t need) {
  if (p.inline_src) return reinterpret_cast<uint8_t*>(p.local_addr);
  const MrEntry& e = *host.table().MrSlot(p.lkey);
  if (!host.OwnAccessesFenced() || !host.OwnsMemory(e)) return nullptr;
  uint64_t va = 0;
  if (CheckMrAccess(e, p.lkey, false, qp.pdn, host.client_id(), need, p.local_addr, bytes, &va) !=
      MrCheck::kOk) {
    return nullptr;
  }
  const MrMapping* m = host.FindMrMapping(p.lkey, e);
  return m && m->local ? reinterpret_cast<uint8_t*>(va) : nullptr;
}

// This process's address of `bytes` at addr of the target's MR `key` (a
// WRITE's or SEND's destination, a READ's source, an atomic's word;
// AddKeyedPieces): the range [addr, addr + checked) passes the key check
// under an in-flight count taken in guards (not for memory of this
// process), and the first `bytes` of it are mapped here in whole.
// nullptr: not plain.
template <typename H>
uint8_t* Destination(H& host, MrGuards& guards, uint32_t key, bool remote, uint32_t pdn,
                     uint32_t owner, uint32_t need, uint64_t addr, uint64_t checked,
                     uint32_t bytes) {
  MrEntry* e = host.table().MrSlot(key);
  if (remote && e->window_of.load(std::memory_order_acquire) != 0) return nullptr;
  const bool own = owner == host.client_id() && host.OwnAccessesFenced() && host.OwnsMemory(*e);
  if (!own && !host.ChangesKeysBetweenAccesses()) guards.Enter(host.AccessRecord(key));
  uint64_t va = 0;
  if (CheckMrAccess(*e, key, remote, pdn, owner, need, addr, checked, &va) != MrCheck::kOk) {
    return nullptr;
  }
  const MrMapping* m = host.FindMrMapping(key, *e);
  if (!m) return nullptr;
  if (m->local) {
    // An atomic on a word of its own that peers reach through its
    // /proc/self/mem takes the owner's word lock: the engine's way.
    if ((need & IBV_ACCESS_REMOTE_ATOMIC) &&
        (va < e->backed_begin.load(std::memory_order_relaxed) ||
         va >= e->backed_end.load(std::memory_order_relaxed))) {
      return nullptr;
    }
    return reinterpret_cast<uint8_t*>(va);
  }
  if (va >= m->backed_begin && va < m->backed_end && bytes <= m->backed_end - va) {
    return m->backed + (va - m->backed_begin);
  }
  return nullptr;  // a partial page: through the owner's /proc/<pid>/mem
}

}  // namespace plain

// Executes p for qp when its success path is certain: the local bytes are
// inline or lie in an MR of this process reached directly (with local
// write for a READ or an atomic); the target QP is of the matching type,
// in a receive state past its first message. A WRITE, READ or atomic: the
// target allows the remote access, the rkey names an MR (not a window) of
// the target's PD that grants it and covers the range (an atomic's 8
// aligned bytes). A SEND:
// the target's receive side is not tag matching, its oldest receive WQE
// has one SGE that holds the message and passes the key check for local
// write. Either way the bytes' destination is mapped here in whole (no page
// reached through the owner's /proc/<pid>/mem, no on-demand MR). True: the
// bytes are written (a SEND's receive WQE taken and its completion
// written), and the WR's completion is the plain success one. False:
// nothing happened (no byte moved, no WQE taken, no count left, no state
// changed); run the WR through Execute.
template <typename H>
bool TryPlainPost(H& host, const LocalQp& qp, const PlainPost& p) {
  if (!HasPlainPath(p.opcode) || (qp.type != IBV_QPT_RC && qp.type != IBV_QPT_UC)) return false;
  const WrOpcodeInfo& info = WrOpcode(p.opcode);
  const bool atomic = info.action == WrAction::kAtomic;
  // An atomic: 8 bytes of one SGE of at least 8, at an aligned address
  // (else LOC_LEN_ERR, or the responder's invalid request).
  if (atomic && (p.bytes < 8 || (p.remote_addr & 7))) return false;
  const uint32_t bytes = atomic ? 8 : p.bytes;
  ExecutionScope scope(host);
  const bool into_local = atomic || info.action == WrAction::kRead;
  uint8_t* local = plain::Local(host, qp, p, bytes, into_local ? IBV_ACCESS_LOCAL_WRITE : 0);
  if (!local) return false;
  // The responder's side (ReachTarget, RespondToRdma, RespondToSend).
  const QpEntry* te = host.table().FindQp(qp.dest_qpn);
  if (!te || te->type.load() != qp.type || !plain::Established(*te)) return false;
  if (info.remote_access && !(te->access.load() & info.remote_access)) return false;
  PeerQp* peer = ReachPeerQp(host, qp, qp.dest_qpn, te->generation.load());
  if (!peer) return false;
  const uint32_t pdn = te->pdn.load();
  MrGuards guards;
  if (info.action != WrAction::kSend) {
    uint8_t* remote = plain::Destination(host, guards, p.rkey, true, pdn, peer->owner,
                                         info.remote_access, p.remote_addr, bytes, bytes);
    if (!remote) return false;
    StallInsideAccessForTests();
    if (info.action == WrAction::kWrite) {
      memcpy(remote, local, bytes);
    } else if (info.action == WrAction::kRead) {
      memcpy(local, remote, bytes);
    } else {
      // The old value back into the local buffer (AtomicCompareSwap,
      // AtomicFetchAdd: the same CPU atomics on a mapped piece).
      MemPiece piece{remote, -1, p.remote_addr, 8};
      uint64_t old = 0;
      if (info.wire_only == IbtaOperation::kCompareSwap) {
        AtomicCompareSwap(piece, p.compare_add, p.swap, &old);
      } else {
        AtomicFetchAdd(piece, p.compare_add, &old);
      }
      memcpy(local, &old, 8);
    }
    return true;
  }
  const uint8_t* src = local;
  // A SEND: the oldest receive WQE is checked, then taken (if another
  // claimer took it meanwhile, the general engine claims the next).
  if (!peer->rq.valid() || TagList(peer->rq.header()).valid()) return false;
  ClaimedRecv r;
  uint64_t ticket = 0;
  if (!peer->rq.Peek(&r, &ticket) || r.num_sge != 1 || r.sge[0].length < p.bytes) return false;
  uint8_t* dst =
      plain::Destination(host, guards, r.sge[0].lkey, false, pdn, peer->owner,
                         IBV_ACCESS_LOCAL_WRITE, r.sge[0].addr, r.sge[0].length, p.bytes);
  if (!dst || !peer->rq.ClaimPeeked(ticket)) return false;
  NoteReceiveClaimed(host, *peer);
  StallInsideAccessForTests();
  memcpy(dst, src, p.bytes);
  guards.Leave();
  Completion recv =
      MessageReceiveCompletion(r.wr_id, qp.dest_qpn, qp, qp.sl, p.send_flags, p.imm_data, info);
  recv.byte_len = p.bytes;
  Complete(peer->recv_cq, peer->cq_event_fd, recv, &r);
  return true;
}

}  // namespace softverbs::datapath
