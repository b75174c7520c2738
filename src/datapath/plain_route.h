// The way a QP's last plain RDMA WRITE, READ or SEND went (shm_plain_post.h):
// the answers of its key checks and its target, kept by the QP so that its
// next WR of the same opcode and keys runs with comparisons instead of the
// checks (TryRoutedPost). Every input of TryPlainPost's verdict is, in the
// route, one of:
//   - compared at each use: the keys and their slots' MrEntry::generation
//     (bumped at every publish of a slot, with its keys cleared: a new MR,
//     a rereg, a window's bind), the target's QP number and
//     QpEntry::generation (bumped when the slot gets a new QP), the host's
//     epoch (bumped when it retires a peer's mapping);
//   - read again at each use: the states and access flags, which change
//     without a generation (ibv_modify_qp, an error), and the address
//     ranges, checked against what the keys reach;
//   - fixed for as long as the compared words are: the MRs' ranges, rights,
//     PDs, owners and window bindings, the target's type, PD and owner, and
//     this process's mappings.
// Kept and used under the QP's send queue lock.
#pragma once

#include <atomic>
#include <cstdint>

#include "datapath/layout.h"

namespace softverbs::datapath {

// One key check that succeeded: valid while the key is still published
// with `generation`, for accesses with the same rights, PD and owner.
struct KeptKey {
  uint32_t key = 0;
  uint32_t generation = 0;
  const MrEntry* entry = nullptr;  // its slot in the device table
  // A peer's memory: the slot of the host's access record an access counts
  // in (Host::AccessRecord); nullptr: this process's own memory.
  std::atomic<uint32_t>* record = nullptr;
  // The part of the key's address range whose bytes are mapped here,
  // [begin, end), and where: key address a is at this process's a + delta.
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t delta = 0;
};

struct PeerQp;  // engine.h

struct PlainRoute {
  bool valid = false;
  uint32_t opcode = 0;  // IBV_WR_RDMA_WRITE, _RDMA_READ, _SEND or _SEND_WITH_IMM
  bool inline_src = false;
  uint32_t dest_qpn = 0;  // the target and its generation
  uint32_t dest_generation = 0;
  const QpEntry* target = nullptr;
  uint64_t epoch = 0;      // Host::PeerEpoch when found
  PeerQp* peer = nullptr;  // the target's receive side (a SEND's)
  KeptKey local;           // the SGE's lkey (not for inline bytes)
  KeptKey remote;          // the rkey; a SEND's: the lkey of the receive WQE it took
};

}  // namespace softverbs::datapath
