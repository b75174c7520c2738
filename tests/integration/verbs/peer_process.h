// Helpers of the tests that run a peer in a forked process: whole reads
// from a pipe and a plain RC QP (connected with test_env.h's ConnectRc).
#pragma once

#include <infiniband/verbs.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

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

}  // namespace softverbs::it
