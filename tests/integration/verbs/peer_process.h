// Helpers of the tests that run a peer in a forked process: whole reads
// from a pipe, a plain RC QP (connected with test_env.h's ConnectRc), and a
// peer's usual start.
#pragma once

#include <infiniband/verbs.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

#include "test_env.h"

namespace softverbs::it {

// What a target publishes to its peer (through a pipe).
struct RemoteMr {
  uint32_t qpn;
  uint32_t rkey;
  uint64_t addr;
};

inline bool ReadAll(int fd, void* buf, size_t len) {
  auto* p = static_cast<uint8_t*>(buf);
  while (len) {
    ssize_t n = read(fd, p, len);
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

inline ibv_qp* RcQp(ibv_pd* pd, ibv_cq* cq) {
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap = {4, 4, 1, 1, 0};
  return ibv_create_qp(pd, &init);
}

// A peer process's side: an RC QP on its own CQ and an 8-byte word of its
// heap registered for local write (a source or a result).
struct PeerSide {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  uint64_t* word = nullptr;
  ibv_mr* mr = nullptr;
};

// Makes the side, sends its QP number up, reads the target down and
// connects to it. Ends the process (exit 10-12) if any of it fails.
inline PeerSide StartPeerSide(int up, int down, RemoteMr* target) {
  PeerSide s;
  s.ctx = OpenDevice();
  s.pd = s.ctx ? ibv_alloc_pd(s.ctx) : nullptr;
  s.cq = s.pd ? ibv_create_cq(s.ctx, 8, nullptr, nullptr, 0) : nullptr;
  s.qp = s.cq ? RcQp(s.pd, s.cq) : nullptr;
  s.word = new uint64_t[1]();
  s.mr = s.qp ? ibv_reg_mr(s.pd, s.word, 8, IBV_ACCESS_LOCAL_WRITE) : nullptr;
  if (!s.mr) _exit(10);
  if (write(up, &s.qp->qp_num, 4) != 4 || !ReadAll(down, target, sizeof(*target))) _exit(11);
  if (!ConnectRc(s.ctx, s.qp, target->qpn)) _exit(12);
  return s;
}

}  // namespace softverbs::it
