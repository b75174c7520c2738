// Memory windows across two hosts (roce.wire_windows): the server binds a
// type 1 window (ibv_bind_mw) over the first 4 KiB of its buffer and a type
// 2 window (IBV_WR_BIND_MW) over the next 4 KiB - both binds run in its
// network QP's send queue at the device - and gives the client their keys.
// The client RDMA WRITEs through each window, then SENDs with invalidate of
// the type 2 key; the server's receive completion must carry
// IBV_WC_WITH_INV and that key, and the written bytes must be in place.
// A last WRITE through the invalidated key must end in
// IBV_WC_REM_ACCESS_ERR (the responder's NAK).
//
//   wire_windows server PORT
//   wire_windows client SERVER_IPV4 PORT
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>

namespace {

constexpr int kGidIndex = 3;  // the port's IPv4 RoCE v2 GID
constexpr uint32_t kWindow = 4096;
constexpr uint32_t kBuffer = 4 * kWindow;

[[noreturn]] void Die(const char* what) {
  fprintf(stderr, "wire_windows: %s\n", what);
  exit(1);
}

#define CHECK(cond)                           \
  do {                                        \
    if (!(cond)) Die("check failed: " #cond); \
  } while (0)

struct Endpoint {
  uint32_t qpn;
  uint32_t psn;
  uint8_t gid[16];
};

struct Windows {
  uint64_t addr1, addr2;  // the windows' first bytes
  uint32_t rkey1, rkey2;
};

struct Side {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_mr* mr = nullptr;
  uint8_t* mem = nullptr;
};

void Open(Side& s, unsigned mr_access) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  CHECK(list && n > 0);
  s.ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  CHECK(s.ctx);
  s.pd = ibv_alloc_pd(s.ctx);
  s.cq = ibv_create_cq(s.ctx, 64, nullptr, nullptr, 0);
  CHECK(s.pd && s.cq);
  s.mem = static_cast<uint8_t*>(aligned_alloc(4096, kBuffer));
  memset(s.mem, 0, kBuffer);
  s.mr = ibv_reg_mr(s.pd, s.mem, kBuffer, mr_access);
  CHECK(s.mr);
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = s.cq;
  init.qp_type = IBV_QPT_RC;
  init.cap = {16, 16, 1, 1, 0};
  s.qp = ibv_create_qp(s.pd, &init);
  CHECK(s.qp);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  CHECK(ibv_modify_qp(s.qp, &a,
                      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
}

Endpoint Local(Side& s) {
  Endpoint e{s.qp->qp_num, 0x1234, {}};
  ibv_gid gid;
  CHECK(ibv_query_gid(s.ctx, 1, kGidIndex, &gid) == 0);
  memcpy(e.gid, gid.raw, 16);
  return e;
}

void Connect(Side& s, const Endpoint& remote) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = remote.qpn;
  a.rq_psn = remote.psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.sgid_index = kGidIndex;
  a.ah_attr.grh.hop_limit = 64;
  memcpy(a.ah_attr.grh.dgid.raw, remote.gid, 16);
  CHECK(ibv_modify_qp(s.qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0);
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0x1234;
  a.timeout = 12;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  CHECK(ibv_modify_qp(s.qp, &a,
                      IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                          IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC) == 0);
}

ibv_wc Poll(Side& s) {
  ibv_wc wc{};
  int n;
  for (long spins = 0; (n = ibv_poll_cq(s.cq, 1, &wc)) == 0; ++spins) {
    if (spins > 2000000000L) Die("no completion");
  }
  CHECK(n == 1);
  return wc;
}

ibv_wc PollOk(Side& s, const char* what) {
  ibv_wc wc = Poll(s);
  if (wc.status != IBV_WC_SUCCESS) {
    fprintf(stderr, "wire_windows: %s: %s (vendor_err 0x%x)\n", what, ibv_wc_status_str(wc.status),
            wc.vendor_err);
    exit(1);
  }
  return wc;
}

void SendAll(int fd, const void* p, size_t n) {
  CHECK(send(fd, p, n, 0) == static_cast<ssize_t>(n));
}
void RecvAll(int fd, void* p, size_t n) {
  CHECK(recv(fd, p, n, MSG_WAITALL) == static_cast<ssize_t>(n));
}

int Server(int port) {
  Side s;
  Open(s, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  CHECK(bind(ls, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0 && listen(ls, 1) == 0);
  int fd = accept(ls, nullptr, nullptr);
  CHECK(fd >= 0);
  Endpoint mine = Local(s), theirs{};
  SendAll(fd, &mine, sizeof(mine));
  RecvAll(fd, &theirs, sizeof(theirs));
  Connect(s, theirs);
  ibv_sge rsge{reinterpret_cast<uint64_t>(s.mem + 3 * kWindow), 64, s.mr->lkey};
  ibv_recv_wr rwr{}, *rbad = nullptr;
  rwr.wr_id = 100;
  rwr.sg_list = &rsge;
  rwr.num_sge = 1;
  CHECK(ibv_post_recv(s.qp, &rwr, &rbad) == 0);

  ibv_mw* mw1 = ibv_alloc_mw(s.pd, IBV_MW_TYPE_1);
  ibv_mw* mw2 = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
  CHECK(mw1 && mw2);
  ibv_mw_bind bind{};
  bind.wr_id = 1;
  bind.send_flags = IBV_SEND_SIGNALED;
  bind.bind_info = {s.mr, reinterpret_cast<uint64_t>(s.mem), kWindow, IBV_ACCESS_REMOTE_WRITE};
  CHECK(ibv_bind_mw(s.qp, mw1, &bind) == 0);
  ibv_wc wc = PollOk(s, "type 1 bind");
  CHECK(wc.opcode == IBV_WC_BIND_MW && wc.wr_id == 1);
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = 2;
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.bind_mw.mw = mw2;
  wr.bind_mw.rkey = ibv_inc_rkey(mw2->rkey);
  wr.bind_mw.bind_info = {s.mr, reinterpret_cast<uint64_t>(s.mem + kWindow), kWindow,
                          IBV_ACCESS_REMOTE_WRITE};
  CHECK(ibv_post_send(s.qp, &wr, &bad) == 0);
  wc = PollOk(s, "type 2 bind");
  CHECK(wc.opcode == IBV_WC_BIND_MW && wc.wr_id == 2);
  Windows w{reinterpret_cast<uint64_t>(s.mem), reinterpret_cast<uint64_t>(s.mem + kWindow),
            mw1->rkey, wr.bind_mw.rkey};
  SendAll(fd, &w, sizeof(w));

  wc = PollOk(s, "the SEND with invalidate");
  CHECK(wc.wr_id == 100 && wc.opcode == IBV_WC_RECV);
  if (!(wc.wc_flags & IBV_WC_WITH_INV) || wc.invalidated_rkey != w.rkey2) {
    fprintf(stderr, "wire_windows: receive flags 0x%x invalidated_rkey 0x%x, want 0x%x\n",
            wc.wc_flags, wc.invalidated_rkey, w.rkey2);
    return 1;
  }
  for (uint32_t i = 0; i < 2 * kWindow; ++i) {
    if (s.mem[i] != static_cast<uint8_t>(i * 7 + 1)) Die("written bytes are not in place");
  }
  char done = 0;
  RecvAll(fd, &done, 1);  // the client's last WRITE has been refused
  printf("server: both windows written, type 2 invalidated remotely (rkey 0x%x)\n", w.rkey2);
  close(fd);
  return 0;
}

int Client(const char* host, int port) {
  Side s;
  Open(s, IBV_ACCESS_LOCAL_WRITE);
  for (uint32_t i = 0; i < 2 * kWindow; ++i) s.mem[i] = static_cast<uint8_t>(i * 7 + 1);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  CHECK(inet_pton(AF_INET, host, &sa.sin_addr) == 1);
  CHECK(connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0);
  Endpoint mine = Local(s), theirs{};
  RecvAll(fd, &theirs, sizeof(theirs));
  SendAll(fd, &mine, sizeof(mine));
  Connect(s, theirs);
  Windows w{};
  RecvAll(fd, &w, sizeof(w));
  auto write = [&](uint64_t offset, uint64_t addr, uint32_t rkey) {
    ibv_sge sge{reinterpret_cast<uint64_t>(s.mem + offset), kWindow, s.mr->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = offset;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = addr;
    wr.wr.rdma.rkey = rkey;
    CHECK(ibv_post_send(s.qp, &wr, &bad) == 0);
    return Poll(s);
  };
  ibv_wc wc = write(0, w.addr1, w.rkey1);
  CHECK(wc.status == IBV_WC_SUCCESS);
  wc = write(kWindow, w.addr2, w.rkey2);
  CHECK(wc.status == IBV_WC_SUCCESS);
  ibv_send_wr inv{}, *bad = nullptr;
  inv.wr_id = 3;
  inv.opcode = IBV_WR_SEND_WITH_INV;
  inv.send_flags = IBV_SEND_SIGNALED;
  inv.invalidate_rkey = w.rkey2;
  CHECK(ibv_post_send(s.qp, &inv, &bad) == 0);
  PollOk(s, "SEND with invalidate");
  wc = write(kWindow, w.addr2, w.rkey2);
  if (wc.status != IBV_WC_REM_ACCESS_ERR) {
    fprintf(stderr, "wire_windows: a WRITE through the invalidated key ended in %s\n",
            ibv_wc_status_str(wc.status));
    return 1;
  }
  char done = 1;
  SendAll(fd, &done, 1);
  printf("client: WRITE through the invalidated window: %s\nOK\n", ibv_wc_status_str(wc.status));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "server") == 0) return Server(atoi(argv[2]));
  if (argc == 4 && strcmp(argv[1], "client") == 0) return Client(argv[2], atoi(argv[3]));
  fprintf(stderr, "usage: wire_windows server PORT | client SERVER_IPV4 PORT\n");
  return 2;
}
