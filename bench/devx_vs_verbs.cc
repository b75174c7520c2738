// DEVX data path cost next to verbs (issue 17's bench row): between two
// processes on softverbs0, the same two measurements over a DEVX RC QP pair
// (mlx5 WQEs, doorbell records, mlx5 CQEs; tests/integration/devx/
// devx_queue.h) and over a verbs RC QP pair:
//   send_lat   8-byte SEND ping-pong, half the round trip (us, median)
//   write_rate 8-byte RDMA_WRITE, every one signaled, 32 in flight (M msg/s)
// Prints one line per measurement: "<path> <metric> <value>".
// Run under `softverbs run --personality mlx5` (bench/run.py --only devx).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "devx_queue.h"

namespace {

using Clock = std::chrono::steady_clock;
using devx_it::DataSeg;
using devx_it::DevxQueue;
using devx_it::RaddrSeg;

int g_iters = 20000;

struct Info {
  uint32_t qpn;
  uint32_t rkey;
  uint64_t addr;
};

bool ReadAll(int fd, void* buf, size_t len) {
  auto* p = static_cast<uint8_t*>(buf);
  while (len) {
    ssize_t n = read(fd, p, len);
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

// One side's memory and protection domain, on a DEVX context (which also
// serves verbs).
struct Side {
  Side() {
    ctx = devx_it::OpenDevx();
    if (!ctx) return;
    pd = ibv_alloc_pd(ctx);
    buf.assign(1 << 16, 0);
    mr = ibv_reg_mr(pd, buf.data(), buf.size(),
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  }
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_mr* mr = nullptr;
  std::vector<uint8_t> buf;
};

// A verbs RC QP with its CQ, brought to RTS against `remote`.
struct VerbsQp {
  explicit VerbsQp(Side& s) : side(s) {
    cq = ibv_create_cq(s.ctx, 256, nullptr, nullptr, 0);
    ibv_qp_init_attr init{};
    init.send_cq = init.recv_cq = cq;
    init.qp_type = IBV_QPT_RC;
    init.cap = {64, 64, 1, 1, 64};
    qp = ibv_create_qp(s.pd, &init);
  }
  bool ToRts(uint32_t remote) {
    return devx_it::ConnectVerbsRc(side.ctx, qp, remote,
                                   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  }
  void PostRecv() {
    ibv_sge sge{reinterpret_cast<uintptr_t>(side.buf.data() + 4096), 64, side.mr->lkey};
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_post_recv(qp, &wr, &bad);
  }
  void Post(ibv_wr_opcode op, uint64_t raddr = 0, uint32_t rkey = 0) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(side.buf.data()), 8, side.mr->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    ibv_post_send(qp, &wr, &bad);
  }
  ibv_wc Poll() {
    ibv_wc wc{};
    while (ibv_poll_cq(cq, 1, &wc) == 0) {
    }
    return wc;
  }
  Side& side;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The echo side: answers every SEND with a SEND, g_iters times, then exits.
int RunEcho(bool devx, int up, int down) {
  Side side;
  if (!side.mr) return 10;
  std::unique_ptr<DevxQueue> dq;
  std::unique_ptr<VerbsQp> vq;
  Info me{0, side.mr->rkey, reinterpret_cast<uintptr_t>(side.buf.data())};
  if (devx) {
    dq = std::make_unique<DevxQueue>(side.ctx, devx_it::PdnOf(side.pd));
    if (!dq->ok()) return 11;
    me.qpn = dq->qpn();
  } else {
    vq = std::make_unique<VerbsQp>(side);
    if (!vq->qp) return 11;
    me.qpn = vq->qp->qp_num;
  }
  uint32_t remote = 0;
  if (write(up, &me, sizeof(me)) != sizeof(me) || !ReadAll(down, &remote, sizeof(remote)))
    return 12;
  if (devx ? !dq->ToRts(remote) : !vq->ToRts(remote)) return 13;
  for (int i = 0; i < 32; ++i) {  // after RTS: post_recv in RESET is EINVAL
    if (devx)
      dq->PostRecv(side.mr->lkey, side.buf.data() + 4096, 64);
    else
      vq->PostRecv();
  }
  if (write(up, "r", 1) != 1) return 14;
  for (int i = 0; i < g_iters; ++i) {
    if (devx) {
      // The ping, and the completion of the previous answer, in either order.
      while (dq->Poll().opcode != MLX5_CQE_RESP_SEND) {
      }
      dq->PostRecv(side.mr->lkey, side.buf.data() + 4096, 64);
      dq->PostSend(MLX5_OPCODE_SEND, {DataSeg(8, side.mr->lkey, side.buf.data())});
    } else {
      ibv_wc wc;
      do {
        wc = vq->Poll();
        if (wc.status != IBV_WC_SUCCESS) return 20;
      } while (wc.opcode != IBV_WC_RECV);
      vq->PostRecv();
      vq->Post(IBV_WR_SEND);
    }
  }
  char done;
  ReadAll(down, &done, 1);  // the parent's writes are over
  return 0;
}

int Measure(bool devx) {
  const char* path = devx ? "devx" : "verbs";
  int up[2], down[2];
  if (pipe(up) || pipe(down)) return 1;
  pid_t child = fork();
  if (child == 0) _exit(RunEcho(devx, up[1], down[0]));
  Side side;
  if (!side.mr) return 1;
  std::unique_ptr<DevxQueue> dq;
  std::unique_ptr<VerbsQp> vq;
  uint32_t my_qpn;
  if (devx) {
    dq = std::make_unique<DevxQueue>(side.ctx, devx_it::PdnOf(side.pd));
    my_qpn = dq->qpn();
  } else {
    vq = std::make_unique<VerbsQp>(side);
    my_qpn = vq->qp->qp_num;
  }
  Info peer{};
  char ready;
  if (!ReadAll(up[0], &peer, sizeof(peer)) || write(down[1], &my_qpn, 4) != 4) return 1;
  if (devx ? !dq->ToRts(peer.qpn) : !vq->ToRts(peer.qpn)) return 1;
  for (int i = 0; i < 32; ++i) {
    if (devx)
      dq->PostRecv(side.mr->lkey, side.buf.data() + 4096, 64);
    else
      vq->PostRecv();
  }
  if (!ReadAll(up[0], &ready, 1)) return 1;

  // Ping-pong.
  std::vector<double> half_rtt;
  half_rtt.reserve(static_cast<size_t>(g_iters));
  for (int i = 0; i < g_iters; ++i) {
    const auto t0 = Clock::now();
    // Our send's completion and the answer, in either order.
    if (devx) {
      dq->PostSend(MLX5_OPCODE_SEND, {DataSeg(8, side.mr->lkey, side.buf.data())});
      for (int got = 0; got < 2; ++got) {
        const uint8_t op = dq->Poll().opcode;
        if (op != MLX5_CQE_REQ && op != MLX5_CQE_RESP_SEND) return 2;
      }
      dq->PostRecv(side.mr->lkey, side.buf.data() + 4096, 64);
    } else {
      vq->Post(IBV_WR_SEND);
      for (int got = 0; got < 2; ++got) {
        if (vq->Poll().status != IBV_WC_SUCCESS) return 2;
      }
      vq->PostRecv();
    }
    half_rtt.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / 2);
  }
  printf("%s send_lat_8B_us %.2f\n", path, Median(half_rtt));

  // Write rate: 32 in flight, each signaled (a CQE per WQE).
  const int writes = g_iters * 5;
  int posted = 0, completed = 0;
  const auto t0 = Clock::now();
  while (completed < writes) {
    while (posted < writes && posted - completed < 32) {
      if (devx)
        dq->PostSend(MLX5_OPCODE_RDMA_WRITE,
                     {RaddrSeg(peer.addr, peer.rkey), DataSeg(8, side.mr->lkey, side.buf.data())});
      else
        vq->Post(IBV_WR_RDMA_WRITE, peer.addr, peer.rkey);
      ++posted;
    }
    if (devx) {
      if (dq->Poll().opcode != MLX5_CQE_REQ) return 3;
    } else if (vq->Poll().status != IBV_WC_SUCCESS) {
      return 3;
    }
    ++completed;
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  printf("%s write_rate_8B_Mmsgs %.3f\n", path, writes / secs / 1e6);
  fflush(stdout);
  if (write(down[1], "d", 1) != 1) return 1;
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 4;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc > 1) g_iters = std::max(100, atoi(argv[1]));
  if (!devx_it::FindSoftverbs()) {
    fprintf(stderr, "softverbs0 not found (run under softverbs run)\n");
    return 2;
  }
  int rc = Measure(false);
  if (rc == 0) rc = Measure(true);
  if (rc) fprintf(stderr, "devx_vs_verbs: a measurement failed (%d)\n", rc);
  return rc;
}
