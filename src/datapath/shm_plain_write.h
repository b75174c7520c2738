// The success path of an RDMA WRITE on the shared-memory engine, without
// the general engine's bookkeeping: no copy of the work request, no piece
// lists, no responder outcome to judge. It asks the same questions as the
// requester and responder (shm_requester.cc, shm_responder.cc) - the same
// key checks (CheckMrAccess), the same in-flight counts (MrGuards), the
// same peer cache - but only where every answer leads to a plain ACK; any
// other answer sends the WR to the general engine before anything has
// changed, and that engine reports it (docs/datapath.md, "The plain WRITE
// path").
#pragma once

#include <cstdint>

#include "datapath/engine.h"

namespace softverbs::datapath {

// One RC or UC RDMA WRITE of `bytes` (> 0) contiguous bytes.
struct PlainWrite {
  uint64_t src_addr;  // this process's address of the bytes (an SGE's addr)
  uint32_t lkey;      // the SGE's lkey; ignored when the bytes are inline
  bool inline_src;    // IBV_SEND_INLINE: the bytes need no key
  uint32_t bytes;
  uint64_t remote_addr;
  uint32_t rkey;
};

// Executes w for qp when its success path is certain: the source is inline
// or lies in an MR of this process reached directly; the target QP is of
// the matching type, in a receive state past its first message (RTR's
// IBV_EVENT_COMM_EST is the general engine's to raise) and allows remote
// writes; the rkey names an MR (not a window) of the target's PD that
// grants remote write and covers the range, which is mapped here in whole
// (no page reached through the owner's /proc/<pid>/mem, no on-demand MR).
// True: the bytes are written, and the WR's completion is the plain
// success one. False: nothing happened (no byte moved, no count left, no
// state changed); run the WR through Execute.
bool TryPlainWrite(Host& host, const LocalQp& qp, const PlainWrite& w);

}  // namespace softverbs::datapath
