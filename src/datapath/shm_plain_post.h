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

#include <algorithm>
#include <cstdint>

#include "datapath/engine.h"
#include "datapath/keyed_access.h"
#include "datapath/placement_order.h"
#include "datapath/plain_route.h"
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

// Keeps a check of `key` that succeeded - `generation` read before it, e
// its slot, m its mapping here, record the access record's slot its
// accesses count in (nullptr: not counted) - in kept, if no publish came
// in between (else kept stays empty: key 0).
inline void Keep(KeptKey* kept, uint32_t key, uint32_t generation, const MrEntry& e,
                 const MrMapping& m, std::atomic<uint32_t>* record) {
  kept->key = 0;
  if (e.generation.load(std::memory_order_acquire) != generation) return;
  const uint64_t iova = e.iova.load(std::memory_order_relaxed);
  const uint64_t va = e.addr.load(std::memory_order_relaxed);
  // The owner's addresses [first, last) reached directly: the whole MR in
  // this process's own memory, the memfd-backed pages of a peer's.
  uint64_t first = va;
  uint64_t last = va + e.length.load(std::memory_order_relaxed);
  uint64_t here = va;  // this process's address of owner address va
  if (!m.local) {
    first = std::max(first, m.backed_begin);
    last = std::min(last, m.backed_end);
    here = reinterpret_cast<uint64_t>(m.backed) + (va - m.backed_begin);
  }
  if (first >= last) return;
  *kept = {key, generation, &e, record, iova + (first - va), iova + (last - va), here - iova};
}

// This process's address of the `bytes` at key address addr, if kept still
// answers for `key` (a peer's memory: the caller counts itself in
// kept.record first). nullptr: check again.
inline uint8_t* Reuse(const KeptKey& kept, uint32_t key, bool remote, uint64_t addr,
                      uint32_t bytes) {
  if (kept.key == 0 || key != kept.key) return nullptr;
  const MrEntry& e = *kept.entry;
  // The key (seq_cst, after the caller's count, as CheckMrAccess reads it),
  // then the generation, which a publish bumps before it publishes keys.
  const uint32_t published =
      remote ? e.rkey.load(std::memory_order_seq_cst) : e.lkey.load(std::memory_order_seq_cst);
  if (published != key || e.generation.load(std::memory_order_acquire) != kept.generation) {
    return nullptr;
  }
  if (addr < kept.begin || addr > kept.end || bytes > kept.end - addr) return nullptr;
  return reinterpret_cast<uint8_t*>(addr + kept.delta);
}

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
// keep (may be nullptr): where to keep the check for a route.
template <typename H>
uint8_t* Local(H& host, const LocalQp& qp, const PlainPost& p, uint32_t bytes, uint32_t need,
               KeptKey* keep) {
  if (p.inline_src) return reinterpret_cast<uint8_t*>(p.local_addr);
  const MrEntry& e = *host.table().MrSlot(p.lkey);
  const uint32_t generation = e.generation.load(std::memory_order_acquire);
  if (!host.OwnAccessesFenced() || !host.OwnsMemory(e)) return nullptr;
  uint64_t va = 0;
  if (CheckMrAccess(e, p.lkey, false, qp.pdn, host.client_id(), need, p.local_addr, bytes, &va) !=
      MrCheck::kOk) {
    return nullptr;
  }
  const MrMapping* m = host.FindMrMapping(p.lkey, e);
  if (!m || !m->local) return nullptr;
  if (keep) Keep(keep, p.lkey, generation, e, *m, nullptr);
  return reinterpret_cast<uint8_t*>(va);
}

// This process's address of `bytes` at addr of the target's MR `key` (a
// WRITE's or SEND's destination, a READ's source, an atomic's word;
// AddKeyedPieces): the range [addr, addr + checked) passes the key check
// under an in-flight count taken in guards (not for memory of this
// process), and the first `bytes` of it are mapped here in whole.
// nullptr: not plain.
// keep (may be nullptr; not for an atomic, whose own-memory case is
// narrower): where to keep the check for a route.
template <typename H>
uint8_t* Destination(H& host, MrGuards& guards, uint32_t key, bool remote, uint32_t pdn,
                     uint32_t owner, uint32_t need, uint64_t addr, uint64_t checked, uint32_t bytes,
                     KeptKey* keep = nullptr) {
  MrEntry* e = host.table().MrSlot(key);
  const uint32_t generation = e->generation.load(std::memory_order_acquire);
  if (remote && e->window_of.load(std::memory_order_acquire) != 0) return nullptr;
  const bool own = owner == host.client_id() && host.OwnAccessesFenced() && host.OwnsMemory(*e);
  const bool counted = !own && !host.ChangesKeysBetweenAccesses();
  if (counted) guards.Enter(host.AccessRecord(key));
  uint64_t va = 0;
  if (CheckMrAccess(*e, key, remote, pdn, owner, need, addr, checked, &va) != MrCheck::kOk) {
    return nullptr;
  }
  const MrMapping* m = host.FindMrMapping(key, *e);
  if (!m) return nullptr;
  if (keep) Keep(keep, key, generation, *e, *m, counted ? host.AccessRecord(key) : nullptr);
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

// A SEND of `bytes` from src: peer's oldest receive WQE is checked -
// reach(guards, sge) gives this process's address of its one SGE's
// buffer, counted in guards where a peer's memory, or nullptr - then taken
// (if another claimer took it meanwhile, nothing was taken), filled and
// completed on the receive side. False: nothing happened.
template <typename H, typename Reach>
bool DeliverSend(H& host, PeerQp& peer, uint32_t dest_qpn, uint32_t src_qpn, uint8_t sl,
                 const uint8_t* src, uint32_t bytes, uint32_t send_flags, uint32_t imm_data,
                 const WrOpcodeInfo& info, Reach reach) {
  if (!peer.rq.valid() || TagList(peer.rq.header()).valid()) return false;
  ClaimedRecv r;
  uint64_t ticket = 0;
  if (!peer.rq.Peek(&r, &ticket) || r.num_sge != 1 || r.sge[0].length < bytes) return false;
  MrGuards guards;
  uint8_t* dst = reach(guards, r.sge[0]);
  if (!dst || !peer.rq.ClaimPeeked(ticket)) return false;
  NoteReceiveClaimed(host, peer);
  StallInsideAccessForTests();
  PlaceInOrder(dst, src, bytes);
  guards.Leave();
  Completion recv =
      MessageReceiveCompletion(r.wr_id, dest_qpn, src_qpn, sl, send_flags, imm_data, info);
  recv.byte_len = bytes;
  Complete(peer.recv_cq, peer.cq_event_fd, recv, &r);
  return true;
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
// route (may be nullptr): where to keep the way a WRITE, READ or SEND
// that succeeds went, for TryRoutedPost (emptied first).
template <typename H>
bool TryPlainPost(H& host, const LocalQp& qp, const PlainPost& p, PlainRoute* route = nullptr) {
  if (route) route->valid = false;
  if (!HasPlainPath(p.opcode) || (qp.type != IBV_QPT_RC && qp.type != IBV_QPT_UC)) return false;
  const WrOpcodeInfo& info = WrOpcode(p.opcode);
  const bool atomic = info.action == WrAction::kAtomic;
  // An atomic: 8 bytes of one SGE of at least 8, at an aligned address
  // (else LOC_LEN_ERR, or the responder's invalid request).
  if (atomic && (p.bytes < 8 || (p.remote_addr & 7))) return false;
  const uint32_t bytes = atomic ? 8 : p.bytes;
  ExecutionScope scope(host);
  const bool into_local = atomic || info.action == WrAction::kRead;
  // A route is kept for a WRITE, READ or SEND (the epoch read before any
  // lookup: a retirement after it makes the route unusable).
  const bool routed = route && !atomic;
  const uint64_t epoch = routed ? host.PeerEpoch() : 0;
  KeptKey kept_local;
  KeptKey kept_remote;
  uint8_t* local = plain::Local(host, qp, p, bytes, into_local ? IBV_ACCESS_LOCAL_WRITE : 0,
                                routed ? &kept_local : nullptr);
  if (!local) return false;
  // The responder's side (ReachTarget, RespondToRdma, RespondToSend).
  const QpEntry* te = host.table().FindQp(qp.dest_qpn);
  if (!te || te->type.load() != qp.type || !plain::Established(*te)) return false;
  if (info.remote_access && !(te->access.load() & info.remote_access)) return false;
  const uint32_t generation = te->generation.load();
  PeerQp* peer = ReachPeerQp(host, qp, qp.dest_qpn, generation);
  if (!peer) return false;
  const uint32_t pdn = te->pdn.load();
  if (info.action != WrAction::kSend) {
    MrGuards guards;
    uint8_t* remote =
        plain::Destination(host, guards, p.rkey, true, pdn, peer->owner, info.remote_access,
                           p.remote_addr, bytes, bytes, routed ? &kept_remote : nullptr);
    if (!remote) return false;
    if (routed && kept_remote.key != 0 && (p.inline_src || kept_local.key != 0)) {
      *route = {true, p.opcode, p.inline_src, qp.dest_qpn, generation,
                te,   epoch,    peer,         kept_local,  kept_remote};
    }
    StallInsideAccessForTests();
    if (info.action == WrAction::kWrite) {
      PlaceInOrder(remote, local, bytes);
    } else if (info.action == WrAction::kRead) {
      PlaceInOrder(local, remote, bytes);
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
  // A SEND: the oldest receive WQE (if another claimer took it meanwhile,
  // the general engine claims the next).
  KeptKey kept_receive;
  const bool sent = plain::DeliverSend(
      host, *peer, qp.dest_qpn, qp.qpn, qp.sl, local, p.bytes, p.send_flags, p.imm_data, info,
      [&](MrGuards& receive_guards, const RecvSge& sge) {
        return plain::Destination(host, receive_guards, sge.lkey, false, pdn, peer->owner,
                                  IBV_ACCESS_LOCAL_WRITE, sge.addr, sge.length, p.bytes,
                                  routed ? &kept_receive : nullptr);
      });
  if (sent && routed && kept_receive.key != 0 && (p.inline_src || kept_local.key != 0)) {
    *route = {true, p.opcode, p.inline_src, qp.dest_qpn, generation,
              te,   epoch,    peer,         kept_local,  kept_receive};
  }
  return sent;
}

// A work request as TryRoutedPost needs it.
struct RoutedWr {
  uint32_t dest_qpn;  // the QP's destination now (QpEntry::dest_qpn)
  uint32_t src_qpn;   // the QP's own number
  uint8_t sl;         // the QP's service level now (a SEND's receive completion)
  uint32_t send_flags;
  uint32_t imm_data;
  uint64_t local_addr;  // the SGE's (or the inline bytes')
  uint32_t lkey;
  uint32_t bytes;        // > 0
  uint64_t remote_addr;  // WRITE, READ
  uint32_t rkey;
};

// Runs an RDMA WRITE, READ or SEND the way the QP's last one went (route,
// filled by TryPlainPost), if it still goes so: the caller compared the
// opcode, the inline flag, the lkey and the rkey with the route's; here
// the target must still be QP dest_qpn of the route's generation, in a
// receive state past its first message, allowing the access; nothing
// retired since (the host's epoch); each key - for a SEND, that of the
// receive WQE it takes - still published with its kept generation; and
// the bytes within what the keys reach here. Every other input of
// TryPlainPost's verdict is fixed for as long as these are
// (plain_route.h). True: the bytes moved (a SEND's receive WQE taken and
// its completion written), and the WR's completion is the plain success
// one. False: nothing happened; ask TryPlainPost.
template <typename H>
bool TryRoutedPost(H& host, const PlainRoute& route, const RoutedWr& w) {
  const WrOpcodeInfo& info = WrOpcode(route.opcode);
  ExecutionScope scope(host);
  if (!route.valid || route.epoch != host.PeerEpoch()) return false;
  const QpEntry& te = *route.target;
  if (w.dest_qpn != route.dest_qpn || te.qpn.load(std::memory_order_acquire) != w.dest_qpn ||
      te.generation.load() != route.dest_generation || !plain::Established(te) ||
      (info.remote_access && !(te.access.load() & info.remote_access))) {
    return false;
  }
  uint8_t* local = route.inline_src
                       ? reinterpret_cast<uint8_t*>(w.local_addr)
                       : plain::Reuse(route.local, w.lkey, false, w.local_addr, w.bytes);
  if (!local) return false;
  if (info.action == WrAction::kSend) {
    return plain::DeliverSend(
        host, *route.peer, w.dest_qpn, w.src_qpn, w.sl, local, w.bytes, w.send_flags, w.imm_data,
        info, [&](MrGuards& guards, const RecvSge& sge) -> uint8_t* {
          if (sge.lkey != route.remote.key) return nullptr;
          if (route.remote.record) guards.Enter(route.remote.record);
          return plain::Reuse(route.remote, sge.lkey, false, sge.addr, sge.length);
        });
  }
  if (w.rkey != route.remote.key) return false;
  MrGuard guard(route.remote.record);
  uint8_t* remote = plain::Reuse(route.remote, w.rkey, true, w.remote_addr, w.bytes);
  if (!remote) return false;
  StallInsideAccessForTests();
  if (info.action == WrAction::kWrite) {
    PlaceInOrder(remote, local, w.bytes);
  } else {
    PlaceInOrder(local, remote, w.bytes);
  }
  return true;
}

}  // namespace softverbs::datapath
