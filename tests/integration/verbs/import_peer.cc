// The other process of ImportTest.AnotherProcessJoinsTheConnection: it gets
// a context's cmd_fd over a Unix socket (SCM_RIGHTS), imports the device,
// the PD and the MR, and moves data with the importer's keys and its own:
//   1. RDMA READ of the exporter's MR into an MR of its own on the imported PD,
//   2. RDMA WRITE into the second half of the exporter's MR,
//   3. a SEND whose source is the imported MR's lkey (the exporter's memory).
// argv[1]: the socket. Exit status 0 when every step checked out.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "test_env.h"

namespace {

using softverbs::it::ConnectRc;
using softverbs::it::PollOne;

struct Exported {
  uint32_t pd_handle, mr_handle, rkey, qpn;
  uint64_t addr, length;
};

int ReceiveFd(int sock, Exported* ex) {
  char control[CMSG_SPACE(sizeof(int))] = {};
  iovec iov{ex, sizeof(*ex)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  if (recvmsg(sock, &msg, 0) != static_cast<ssize_t>(sizeof(*ex))) return -1;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (!c || c->cmsg_type != SCM_RIGHTS) return -1;
  int fd;
  memcpy(&fd, CMSG_DATA(c), sizeof(fd));
  return fd;
}

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "import_peer: %s failed: %s\n", #cond, strerror(errno)); \
      return 1;                                                                \
    }                                                                          \
  } while (0)

bool Run(ibv_qp* qp, ibv_cq* cq, ibv_wr_opcode op, uint64_t laddr, uint32_t len, uint32_t lkey,
         uint64_t raddr, uint32_t rkey) {
  ibv_sge sge{laddr, len, lkey};
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  if (ibv_post_send(qp, &wr, &bad)) return false;
  ibv_wc wc{};
  if (PollOne(cq, &wc) != 1) return false;
  if (wc.status != IBV_WC_SUCCESS) {
    fprintf(stderr, "import_peer: opcode %d completed with %s\n", op, ibv_wc_status_str(wc.status));
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const int sock = atoi(argv[1]);
  Exported ex{};
  const int cmd_fd = ReceiveFd(sock, &ex);
  CHECK(cmd_fd >= 0);
  ibv_context* ctx = ibv_import_device(cmd_fd);
  CHECK(ctx != nullptr);
  ibv_pd* pd = ibv_import_pd(ctx, ex.pd_handle);
  CHECK(pd != nullptr);
  ibv_mr* theirs = ibv_import_mr(pd, ex.mr_handle);
  CHECK(theirs != nullptr);
  CHECK(theirs->rkey == ex.rkey && theirs->length == ex.length);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  CHECK(cq != nullptr);
  ibv_qp_init_attr init{};
  init.qp_type = IBV_QPT_RC;
  init.send_cq = init.recv_cq = cq;
  init.cap = {8, 8, 1, 1, 0};
  ibv_qp* qp = ibv_create_qp(pd, &init);
  CHECK(qp != nullptr);
  CHECK(ConnectRc(ctx, qp, ex.qpn));
  const uint32_t my_qpn = qp->qp_num;
  CHECK(write(sock, &my_qpn, sizeof(my_qpn)) == sizeof(my_qpn));
  char go = 0;
  CHECK(read(sock, &go, 1) == 1);

  const uint32_t half = static_cast<uint32_t>(ex.length / 2);
  std::vector<uint8_t> mine(ex.length, 0);
  ibv_mr* my_mr = ibv_reg_mr(pd, mine.data(), mine.size(), IBV_ACCESS_LOCAL_WRITE);
  CHECK(my_mr != nullptr);
  // 1. Read the exporter's first half.
  CHECK(Run(qp, cq, IBV_WR_RDMA_READ, reinterpret_cast<uint64_t>(mine.data()), half, my_mr->lkey,
            ex.addr, ex.rkey));
  for (uint32_t i = 0; i < half; ++i) CHECK(mine[i] == static_cast<uint8_t>(i * 7 + 3));
  // 2. Write our bytes into its second half.
  for (uint32_t i = 0; i < half; ++i) mine[i] = static_cast<uint8_t>(0xff - i);
  CHECK(Run(qp, cq, IBV_WR_RDMA_WRITE, reinterpret_cast<uint64_t>(mine.data()), half, my_mr->lkey,
            ex.addr + half, ex.rkey));
  // 3. Send from the exporter's memory, by the imported MR's lkey.
  CHECK(Run(qp, cq, IBV_WR_SEND, ex.addr, 64, theirs->lkey, 0, 0));
  CHECK(write(sock, &go, 1) == 1);
  return 0;
}
