// qperf's rc_rdma_write_poll_lat as two processes on one device: each side
// RDMA WRITEs its whole buffer into the other's and polls its own buffer's
// first and last byte for the other side's mark, then writes its own next
// mark into both and writes the buffer back. A NIC places a message in
// address order, so a side that saw the last byte has the whole message and
// no byte of it changes after. softverbs placed with libc's memcpy, which
// may store the first byte again after the last: the receiver's new mark
// was undone, and qperf's ping-pong crawled at 3-8 rounds a second at every
// size of a page or more (datapath/placement_order.h, docs/datapath.md
// "Placement order").
//
// Per size: `ends` (only the two marks change, as qperf) and `whole` (every
// byte carries the round's mark and is checked once the last byte shows it).
// Buffers page-aligned (backed pages, mapped by the peer) and at offset 100
// in a page (the partial first page goes through the owner's
// /proc/<pid>/mem). A round that does not arrive within 2 s, or arrives
// torn, fails the case.
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <initializer_list>

namespace {

constexpr int kGidIndex = 1;
constexpr int kRounds = 2000;
constexpr double kStallSeconds = 2;

struct Address {
  uint32_t qpn;
  uint32_t rkey;
  uint64_t addr;
  ibv_gid gid;
};

double Now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

[[noreturn]] void Die(const char* side, const char* what) {
  fprintf(stderr, "%s: %s failed: %m\n", side, what);
  exit(2);
}

void Exchange(int in, int out, const void* mine, void* theirs, size_t n, const char* side) {
  if (write(out, mine, n) != ssize_t(n) || read(in, theirs, n) != ssize_t(n)) {
    Die(side, "exchange");
  }
}

// One side of the case. 0: every round arrived whole, in time.
int RunSide(bool first, int in, int out, size_t size, size_t offset, bool whole) {
  const char* name = first ? "first" : "second";
  ibv_device** list = ibv_get_device_list(nullptr);
  if (!list || !list[0]) Die(name, "ibv_get_device_list");
  ibv_context* ctx = ibv_open_device(list[0]);
  if (!ctx) Die(name, "ibv_open_device");
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
  auto* page = static_cast<uint8_t*>(aligned_alloc(4096, (offset + size + 4095) / 4096 * 4096));
  if (!pd || !cq || !page) Die(name, "pd/cq/buffer");
  uint8_t* buf = page + offset;
  memset(buf, 0, size);
  ibv_mr* mr = ibv_reg_mr(pd, buf, size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap = {32, 1, 1, 1, 0};
  ibv_qp* qp = ibv_create_qp(pd, &ia);
  if (!mr || !qp) Die(name, "mr/qp");
  Address me{qp->qp_num, mr->rkey, reinterpret_cast<uintptr_t>(buf), {}}, peer;
  if (ibv_query_gid(ctx, 1, kGidIndex, &me.gid)) Die(name, "ibv_query_gid");
  Exchange(in, out, &me, &peer, sizeof(me), name);

  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
    Die(name, "INIT");
  }
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = peer.qpn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.hop_limit = 1;
  a.ah_attr.grh.sgid_index = kGidIndex;
  a.ah_attr.grh.dgid = peer.gid;
  if (ibv_modify_qp(qp, &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
    Die(name, "RTR");
  }
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  if (ibv_modify_qp(qp, &a,
                    IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                        IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)) {
    Die(name, "RTS");
  }
  char ready = 0, peer_ready;
  Exchange(in, out, &ready, &peer_ready, 1, name);

  const uint8_t self = first ? 0x80 : 0, other = first ? 0 : 0x80;
  volatile uint8_t* mine = buf;
  auto send = [&](int round) {
    const uint8_t mark = self | (round & 0x7f);
    if (whole) {
      memset(buf, mark, size);
    } else {
      mine[0] = mark;
      mine[size - 1] = mark;
    }
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf), static_cast<uint32_t>(size), mr->lkey};
    ibv_send_wr wr{}, *bad;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = peer.addr;
    wr.wr.rdma.rkey = peer.rkey;
    if (ibv_post_send(qp, &wr, &bad)) Die(name, "ibv_post_send");
    ibv_wc wc;
    int n;
    const double since = Now();
    while ((n = ibv_poll_cq(cq, 1, &wc)) == 0 && Now() - since < kStallSeconds) {
    }
    if (n != 1 || wc.status != IBV_WC_SUCCESS) Die(name, "the WRITE's completion");
  };
  if (first) send(0);
  for (int round = 0; round < kRounds; ++round) {
    const uint8_t want = other | (round & 0x7f);
    const double since = Now();
    while (!(mine[0] == want && mine[size - 1] == want)) {
      if (Now() - since > kStallSeconds) {
        fprintf(stderr, "%s: round %d never arrived: want 0x%02x, first 0x%02x, last 0x%02x\n",
                name, round, want, mine[0], mine[size - 1]);
        return 1;
      }
    }
    for (size_t i = 0; whole && i < size; ++i) {
      if (mine[i] != want) {
        fprintf(stderr, "%s: round %d arrived torn: byte %zu is 0x%02x, want 0x%02x\n", name, round,
                i, mine[i], want);
        return 1;
      }
    }
    if (!first) {
      send(round);
    } else if (round + 1 < kRounds) {
      send(round + 1);
    }
  }
  // Both sides done before either tears its QP down.
  Exchange(in, out, &ready, &peer_ready, 1, name);
  ibv_destroy_qp(qp);
  ibv_dereg_mr(mr);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  free(page);
  return 0;
}

// One case in two processes forked before either opens the device.
bool RunCase(size_t size, size_t offset, bool whole) {
  int to_second[2], to_first[2];
  if (pipe(to_second) || pipe(to_first)) Die("main", "pipe");
  fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) Die("main", "fork");
  if (pid == 0) _exit(RunSide(false, to_second[0], to_first[1], size, offset, whole));
  const int first = RunSide(true, to_first[0], to_second[1], size, offset, whole);
  int status = 0;
  waitpid(pid, &status, 0);
  for (int fd : {to_second[0], to_second[1], to_first[0], to_first[1]}) close(fd);
  const bool ok = first == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  printf("%s: %zu bytes at page offset %zu, %s: %d rounds\n", ok ? "PASS" : "FAIL", size, offset,
         whole ? "whole messages" : "marks at both ends", kRounds);
  return ok;
}

}  // namespace

int main() {
  bool ok = true;
  for (size_t size : {size_t{8}, size_t{100}, size_t{4096}, size_t{8192}, size_t{65536}}) {
    for (size_t offset : {size_t{0}, size_t{100}}) {
      for (bool whole : {false, true}) ok = RunCase(size, offset, whole) && ok;
    }
  }
  return ok ? 0 : 1;
}
