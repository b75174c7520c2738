// softverbsd is SIGKILLed under a client holding objects and traffic
// (issue 10, point 5). As the kernel on a device reset, the client must see:
// IBV_EVENT_DEVICE_FATAL once on its async fd, then an fd that is no longer
// readable (a poll loop sleeps) and ibv_get_async_event failing with EIO;
// port 1 DOWN; its traffic ending in error completions and its posted
// receives flushed; every destroy verb succeeding; and a new ibv_open_device
// working (on a new daemon). Run under `softverbs run` with a private
// runtime directory (run_private.sh).
#include <errno.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "../datapath/case_checks.h"

namespace {

double NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int RoceV2GidIndex(ibv_context* ctx, ibv_gid* gid) {
  ibv_port_attr port{};
  ibv_query_port(ctx, 1, &port);
  for (int i = 0; i < port.gid_tbl_len; ++i) {
    ibv_gid_entry e{};
    if (ibv_query_gid_ex(ctx, 1, i, &e, 0) == 0 && e.gid_type == IBV_GID_TYPE_ROCE_V2) {
      *gid = e.gid;
      return i;
    }
  }
  Die("no RoCE v2 GID");
  return -1;
}

// RESET -> INIT -> RTR -> RTS, connected to remote_qpn on this host.
void Connect(ibv_qp* qp, uint32_t remote_qpn, int gid_index, const ibv_gid& gid) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
    Die("INIT");
  }
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = remote_qpn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = gid;
  a.ah_attr.grh.sgid_index = gid_index;
  a.ah_attr.grh.hop_limit = 1;
  a.ah_attr.port_num = 1;
  if (ibv_modify_qp(qp, &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
    Die("RTR");
  }
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 10;
  a.retry_cnt = 3;
  a.rnr_retry = 3;
  a.max_rd_atomic = 1;
  if (ibv_modify_qp(qp, &a,
                    IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                        IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)) {
    Die("RTS");
  }
}

int PostRecv(ibv_qp* qp, ibv_mr* mr, char* buf, uint64_t id) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf), 64, mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  return ibv_post_recv(qp, &wr, &bad);
}

int PostWrite(ibv_qp* qp, ibv_mr* mr, char* buf, uint64_t id) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf), 64, mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(buf + 4096);
  wr.wr.rdma.rkey = mr->rkey;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(qp, &wr, &bad);
}

}  // namespace

int main() {
  ibv_context* ctx = OpenFirstDevice();
  ibv_gid gid{};
  const int gid_index = RoceV2GidIndex(ctx, &gid);
  static char buf[1 << 16];
  ibv_pd* pd = ibv_alloc_pd(ctx);
  if (!pd) Die("alloc_pd");
  ibv_mr* mr =
      ibv_reg_mr(pd, buf, sizeof(buf),
                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  ibv_cq* send_cq = ibv_create_cq(ctx, 256, nullptr, nullptr, 0);
  ibv_cq* recv_cq = ibv_create_cq(ctx, 256, nullptr, nullptr, 0);
  if (!mr || !send_cq || !recv_cq) Die("mr/cq");
  ibv_qp_init_attr init{};
  init.send_cq = send_cq;
  init.recv_cq = recv_cq;
  init.cap = {64, 64, 1, 1, 0};
  init.qp_type = IBV_QPT_RC;
  ibv_qp* a = ibv_create_qp(pd, &init);
  ibv_qp* b = ibv_create_qp(pd, &init);
  if (!a || !b) Die("create_qp");
  Connect(a, b->qp_num, gid_index, gid);
  Connect(b, a->qp_num, gid_index, gid);
  // Receives that will be outstanding when the device dies.
  constexpr int kRecvs = 8;
  for (int i = 0; i < kRecvs; ++i) {
    if (PostRecv(b, mr, buf + 8192, 100 + i)) Die("post_recv");
  }

  // A fork child that closes its copy of the context leaves the parent's
  // watcher running (the parent must still see the death below).
  pid_t child = fork();
  if (child == 0) _exit(ibv_close_device(ctx) == 0 ? 0 : 1);
  int child_status = 0;
  waitpid(child, &child_status, 0);
  EXPECT_EQ(WIFEXITED(child_status) && WEXITSTATUS(child_status) == 0, 1);

  // Traffic: RDMA writes a -> b, one at a time, until one fails.
  std::atomic<bool> stop{false};
  std::atomic<long> writes_ok{0};
  std::atomic<int> first_error{-1};
  std::thread traffic([&] {
    for (uint64_t id = 1; !stop.load(); ++id) {
      if (PostWrite(a, mr, buf, id)) {
        first_error = 1000;  // the post itself failed: not what hardware does
        return;
      }
      ibv_wc wc = PollWithin(send_cq, 10000);
      if (NoCompletion(wc)) return;  // no completion at all: a hang
      if (wc.status != IBV_WC_SUCCESS) {
        first_error = wc.status;
        return;
      }
      ++writes_ok;
    }
  });
  const double t_start = NowMs();
  while (writes_ok.load() < 100 && NowMs() - t_start < 10000) usleep(1000);
  EXPECT_EQ(writes_ok.load() >= 100, 1);

  // The daemon is the peer of the control connection.
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(ctx->cmd_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) Die("SO_PEERCRED");
  printf("killing softverbsd pid %d after %ld writes\n", cred.pid, writes_ok.load());
  fflush(stdout);
  const double t_kill = NowMs();
  if (kill(cred.pid, SIGKILL) != 0) Die("kill");

  // IBV_EVENT_DEVICE_FATAL, once.
  pollfd p{ctx->async_fd, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 10000), 1);
  ibv_async_event ev{};
  EXPECT_EQ(ibv_get_async_event(ctx, &ev), 0);
  EXPECT_EQ(ev.event_type, IBV_EVENT_DEVICE_FATAL);
  ibv_ack_async_event(&ev);
  printf("DEVICE_FATAL read %.0f ms after the kill\n", NowMs() - t_kill);

  // Traffic ends with an error completion, not a hang.
  const double t_wait = NowMs();
  while (first_error.load() == -1 && NowMs() - t_wait < 10000) usleep(1000);
  stop = true;
  traffic.join();
  printf("traffic: %ld writes completed, then status %d (%s)\n", writes_ok.load(),
         first_error.load(),
         first_error.load() >= 0 && first_error.load() < 1000
             ? ibv_wc_status_str(static_cast<ibv_wc_status>(first_error.load()))
             : "-");
  EXPECT_EQ(first_error.load() > 0 && first_error.load() < 1000, 1);

  // Then the async fd sleeps: a poll loop of 1 s wakes up not once.
  int wakeups = 0;
  const double t_poll = NowMs();
  while (NowMs() - t_poll < 1000) {
    pollfd q{ctx->async_fd, POLLIN, 0};
    if (poll(&q, 1, 100) != 0) ++wakeups;
    if (wakeups > 100) break;
  }
  printf("async fd wake-ups in 1 s after DEVICE_FATAL: %d\n", wakeups);
  EXPECT_EQ(wakeups, 0);
  errno = 0;
  EXPECT_EQ(ibv_get_async_event(ctx, &ev), -1);
  EXPECT_EQ(errno, EIO);

  // The port is down.
  ibv_port_attr port{};
  EXPECT_EQ(ibv_query_port(ctx, 1, &port), 0);
  EXPECT_EQ(port.state, IBV_PORT_DOWN);

  // The receives outstanding at the death are flushed; new work flushes.
  int flushed_recvs = 0;
  for (;;) {
    ibv_wc wc = PollWithin(recv_cq, 500);
    if (NoCompletion(wc)) break;
    EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
    ++flushed_recvs;
  }
  printf("receives flushed: %d of %d\n", flushed_recvs, kRecvs);
  EXPECT_EQ(flushed_recvs, kRecvs);
  while (!NoCompletion(PollWithin(send_cq, 100))) {
  }
  EXPECT_EQ(PostWrite(a, mr, buf, 7), 0);
  EXPECT_EQ(Poll(send_cq).status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(PostRecv(b, mr, buf, 8), 0);
  EXPECT_EQ(Poll(recv_cq).status, IBV_WC_WR_FLUSH_ERR);

  // Every destroy succeeds: the resources went with the device.
  EXPECT_EQ(ibv_destroy_qp(a), 0);
  EXPECT_EQ(ibv_destroy_qp(b), 0);
  EXPECT_EQ(ibv_destroy_cq(send_cq), 0);
  EXPECT_EQ(ibv_destroy_cq(recv_cq), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
  EXPECT_EQ(ibv_close_device(ctx), 0);

  // A new open reaches a new daemon.
  ibv_context* again = OpenFirstDevice();
  ibv_pd* pd2 = ibv_alloc_pd(again);
  EXPECT_EQ(pd2 != nullptr, 1);
  EXPECT_EQ(ibv_query_port(again, 1, &port), 0);
  EXPECT_EQ(port.state, IBV_PORT_ACTIVE);
  if (pd2) EXPECT_EQ(ibv_dealloc_pd(pd2), 0);
  EXPECT_EQ(ibv_close_device(again), 0);

  printf("%s daemon_death (%d failures)\n", g_failures ? "FAIL" : "PASS", g_failures);
  return g_failures ? 1 : 0;
}
