// One RC QP on each of the two test hosts (two_hosts.sh), connected over
// RoCE v2 by the IPv4 GID, with the endpoints exchanged over a TCP socket:
// what the roce.wire_* programs that run as `server PORT` on host A and
// `client SERVER_IPV4 PORT` on host B share.
#pragma once

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>

namespace wire_rc_pair {

// The program's name in its messages (set by main).
inline const char* program = "wire";

[[noreturn]] inline void Die(const char* what) {
  fprintf(stderr, "%s: %s\n", program, what);
  exit(1);
}

#define WIRE_CHECK(cond)                                    \
  do {                                                      \
    if (!(cond)) wire_rc_pair::Die("check failed: " #cond); \
  } while (0)

inline constexpr int kGidIndex = 3;  // the port's IPv4 RoCE v2 GID

struct Endpoint {
  uint32_t qpn;
  uint32_t psn;
  uint8_t gid[16];
};

struct Side {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_mr* mr = nullptr;
  uint8_t* mem = nullptr;
};

struct OpenOptions {
  size_t bytes = 4096;  // the registered buffer (page-aligned, zeroed)
  unsigned mr_access = IBV_ACCESS_LOCAL_WRITE;
  unsigned qp_access = 0;  // the QP's remote access flags
  int cqe = 64;            // one CQ for sends and receives
  uint32_t max_send_wr = 32;
  uint32_t max_recv_wr = 16;
};

// The first device, a PD, the CQ, the buffer and its MR, and an RC QP in
// INIT.
inline void Open(Side& s, const OpenOptions& o) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  WIRE_CHECK(list && n > 0);
  s.ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  WIRE_CHECK(s.ctx);
  s.pd = ibv_alloc_pd(s.ctx);
  s.cq = ibv_create_cq(s.ctx, o.cqe, nullptr, nullptr, 0);
  WIRE_CHECK(s.pd && s.cq);
  s.mem = static_cast<uint8_t*>(aligned_alloc(4096, o.bytes));
  WIRE_CHECK(s.mem);
  memset(s.mem, 0, o.bytes);
  s.mr = ibv_reg_mr(s.pd, s.mem, o.bytes, o.mr_access);
  WIRE_CHECK(s.mr);
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = s.cq;
  init.qp_type = IBV_QPT_RC;
  init.cap = {o.max_send_wr, o.max_recv_wr, 1, 1, 0};
  s.qp = ibv_create_qp(s.pd, &init);
  WIRE_CHECK(s.qp);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = o.qp_access;
  WIRE_CHECK(ibv_modify_qp(s.qp, &a,
                           IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) ==
             0);
}

inline void Open(Side& s, size_t bytes, unsigned mr_access, unsigned qp_access) {
  OpenOptions o;
  o.bytes = bytes;
  o.mr_access = mr_access;
  o.qp_access = qp_access;
  Open(s, o);
}

inline Endpoint Local(Side& s) {
  Endpoint e{s.qp->qp_num, 0x1234, {}};
  ibv_gid gid;
  WIRE_CHECK(ibv_query_gid(s.ctx, 1, kGidIndex, &gid) == 0);
  memcpy(e.gid, gid.raw, 16);
  return e;
}

// What a connection may set besides the remote QP.
struct PathOptions {
  uint32_t sq_psn = 0x1234;
  uint8_t timeout = 12;   // local ACK timeout, 4.096 us << 12 = 16.8 ms
  uint8_t rd_atomic = 1;  // max_rd_atomic and max_dest_rd_atomic
};

// INIT -> RTR -> RTS towards the remote QP (path MTU 1024, retry 7, RNR
// retry 7).
inline void ConnectQp(ibv_qp* qp, uint32_t remote_qpn, uint32_t remote_psn,
                      const uint8_t remote_gid[16], const PathOptions& o = {}) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = remote_qpn;
  a.rq_psn = remote_psn;
  a.max_dest_rd_atomic = o.rd_atomic;
  a.min_rnr_timer = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.sgid_index = kGidIndex;
  a.ah_attr.grh.hop_limit = 64;
  memcpy(a.ah_attr.grh.dgid.raw, remote_gid, 16);
  WIRE_CHECK(ibv_modify_qp(qp, &a,
                           IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                               IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) ==
             0);
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = o.sq_psn;
  a.timeout = o.timeout;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = o.rd_atomic;
  WIRE_CHECK(ibv_modify_qp(qp, &a,
                           IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                               IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC) == 0);
}

inline void Connect(Side& s, const Endpoint& remote) {
  ConnectQp(s.qp, remote.qpn, remote.psn, remote.gid);
}

// The next completion (bounded: a lost one ends the program).
inline ibv_wc Poll(Side& s) {
  ibv_wc wc{};
  int n;
  for (long spins = 0; (n = ibv_poll_cq(s.cq, 1, &wc)) == 0; ++spins) {
    if (spins > 2000000000L) Die("no completion");
  }
  WIRE_CHECK(n == 1);
  return wc;
}

inline ibv_wc PollOk(Side& s, const char* what) {
  ibv_wc wc = Poll(s);
  if (wc.status != IBV_WC_SUCCESS) {
    fprintf(stderr, "%s: %s: %s (vendor_err 0x%x)\n", program, what, ibv_wc_status_str(wc.status),
            wc.vendor_err);
    exit(1);
  }
  return wc;
}

inline void SendAll(int fd, const void* p, size_t n) {
  WIRE_CHECK(send(fd, p, n, 0) == static_cast<ssize_t>(n));
}
inline void RecvAll(int fd, void* p, size_t n) {
  WIRE_CHECK(recv(fd, p, n, MSG_WAITALL) == static_cast<ssize_t>(n));
}

// A TCP socket listening on port (any address).
inline int Listen(int port) {
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  WIRE_CHECK(bind(ls, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0 && listen(ls, 1) == 0);
  return ls;
}

// The server's side of the TCP socket: the first client of port.
inline int AcceptOne(int port) {
  const int ls = Listen(port);
  int fd = accept(ls, nullptr, nullptr);
  WIRE_CHECK(fd >= 0);
  close(ls);
  return fd;
}

inline int Dial(const char* host, int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  WIRE_CHECK(inet_pton(AF_INET, host, &sa.sin_addr) == 1);
  WIRE_CHECK(connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0);
  return fd;
}

// Server: sends its endpoint first; client: receives first. Then both
// connect their QP.
inline void ExchangeAndConnect(Side& s, int fd, bool server) {
  Endpoint mine = Local(s), theirs{};
  if (server) SendAll(fd, &mine, sizeof(mine));
  RecvAll(fd, &theirs, sizeof(theirs));
  if (!server) SendAll(fd, &mine, sizeof(mine));
  Connect(s, theirs);
}

}  // namespace wire_rc_pair
