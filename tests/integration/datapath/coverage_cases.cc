// Data-path behaviours beyond the error cases, each as hardware shows them:
// UD multicast across processes, the SRQ limit event, LAST_WQE_REACHED,
// COMM_EST, the ibv_cq_ex poll API, solicited-only notification, inline
// limits, sq_sig_all and unsignaled WRs, a UD Q_Key mismatch, CQ/SRQ resize
// with work outstanding, and rereg_mr moving an MR that peers write to.
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <optional>

#include "case_checks.h"

namespace {

constexpr uint32_t kQkey = 0x11111111;
constexpr int kGidIndex = 1;  // a RoCE v2 GID, as the pingpong tests use

void ToRts(ibv_qp* qp, uint32_t dest, bool to_rts = true) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
  if (qp->qp_type == IBV_QPT_UD) {
    a.qkey = kQkey;
    mask |= IBV_QP_QKEY;
  } else {
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    mask |= IBV_QP_ACCESS_FLAGS;
  }
  if (ibv_modify_qp(qp, &a, mask)) Die("INIT");
  a = {};
  a.qp_state = IBV_QPS_RTR;
  mask = IBV_QP_STATE;
  if (qp->qp_type == IBV_QPT_RC) {
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = dest;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 1;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.hop_limit = 1;
    a.ah_attr.grh.sgid_index = kGidIndex;
    ibv_query_gid(qp->context, 1, kGidIndex, &a.ah_attr.grh.dgid);
    mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
            IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  }
  if (ibv_modify_qp(qp, &a, mask)) Die("RTR");
  if (!to_rts) return;
  a = {};
  a.qp_state = IBV_QPS_RTS;
  mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
  if (qp->qp_type == IBV_QPT_RC) {
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  }
  if (ibv_modify_qp(qp, &a, mask)) Die("RTS");
}

// Two QPs of one type on one context, with a CQ each and one buffer.
struct Pair {
  ibv_context* ctx;
  ibv_pd* pd;
  ibv_cq* cq[2];
  ibv_qp* qp[2];
  char* buf;
  ibv_mr* mr;
};

ibv_qp* MakeQp(ibv_pd* pd, ibv_cq* cq, ibv_qp_type type, ibv_srq* srq = nullptr, int sq_sig_all = 0,
               uint32_t max_inline = 64) {
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = cq;
  ia.srq = srq;
  ia.qp_type = type;
  ia.sq_sig_all = sq_sig_all;
  ia.cap = {16, srq ? 0u : 16u, 2, 2, max_inline};
  ibv_qp* qp = ibv_create_qp(pd, &ia);
  if (!qp) Die("create_qp");
  return qp;
}

Pair Make(ibv_context* ctx, ibv_qp_type type = IBV_QPT_RC, bool b_to_rts = true,
          int sq_sig_all = 0) {
  Pair p{};
  p.ctx = ctx;
  p.pd = ibv_alloc_pd(ctx);
  p.buf = static_cast<char*>(aligned_alloc(4096, 16384));
  memset(p.buf, 0, 16384);
  p.mr = ibv_reg_mr(p.pd, p.buf, 16384,
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (!p.pd || !p.mr) Die("pd/mr");
  for (int i = 0; i < 2; ++i) {
    p.cq[i] = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
    if (!p.cq[i]) Die("cq");
    p.qp[i] = MakeQp(p.pd, p.cq[i], type, nullptr, sq_sig_all);
  }
  ToRts(p.qp[0], p.qp[1]->qp_num);
  ToRts(p.qp[1], p.qp[0]->qp_num, b_to_rts);
  return p;
}

void Destroy(Pair& p) {
  for (int i = 0; i < 2; ++i) {
    ibv_destroy_qp(p.qp[i]);
    ibv_destroy_cq(p.cq[i]);
  }
  ibv_dereg_mr(p.mr);
  ibv_dealloc_pd(p.pd);
  free(p.buf);
}

uint64_t A(const char* p) {
  return reinterpret_cast<uint64_t>(p);
}

int PostSend(ibv_qp* qp, uint64_t addr, uint32_t len, uint32_t lkey, uint64_t wr_id, unsigned flags,
             ibv_wr_opcode op = IBV_WR_SEND, uint32_t imm = 0) {
  ibv_sge sge{addr, len, lkey};
  ibv_send_wr wr{}, *bad;
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = flags;
  wr.imm_data = imm;
  return ibv_post_send(qp, &wr, &bad);
}

int PostUd(ibv_qp* qp, ibv_ah* ah, uint32_t qpn, uint32_t qkey, uint64_t addr, uint32_t len,
           uint32_t lkey, uint64_t wr_id) {
  ibv_sge sge{addr, len, lkey};
  ibv_send_wr wr{}, *bad;
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.ud.ah = ah;
  wr.wr.ud.remote_qpn = qpn;
  wr.wr.ud.remote_qkey = qkey;
  return ibv_post_send(qp, &wr, &bad);
}

void PostRecv(ibv_qp* qp, uint64_t addr, uint32_t len, uint32_t lkey, uint64_t wr_id = 7) {
  ibv_sge sge{addr, len, lkey};
  ibv_recv_wr wr{}, *bad;
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  if (ibv_post_recv(qp, &wr, &bad)) Die("post_recv");
}

void PostSrqRecv(ibv_srq* srq, uint64_t addr, uint32_t len, uint32_t lkey, uint64_t wr_id) {
  ibv_sge sge{addr, len, lkey};
  ibv_recv_wr wr{}, *bad;
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  if (ibv_post_srq_recv(srq, &wr, &bad)) Die("post_srq_recv");
}

// The next async event within `ms` (event_type -1 if none).
// The next async event within `ms`, acknowledged; nullopt if none came.
std::optional<ibv_async_event> NextAsyncEvent(ibv_context* ctx, int ms) {
  ibv_async_event ev{};
  pollfd p{ctx->async_fd, POLLIN, 0};
  if (poll(&p, 1, ms) != 1 || ibv_get_async_event(ctx, &ev) != 0) return std::nullopt;
  ibv_ack_async_event(&ev);
  return ev;
}

ibv_ah* MakeAh(ibv_pd* pd, const ibv_gid& dgid) {
  ibv_ah_attr ah{};
  ah.is_global = 1;
  ah.port_num = 1;
  ah.grh.dgid = dgid;
  ah.grh.sgid_index = kGidIndex;
  ah.grh.hop_limit = 1;
  ibv_ah* a = ibv_create_ah(pd, &ah);
  if (!a) Die("create_ah");
  return a;
}

// ---- UD multicast across processes -----------------------------------------------

const ibv_gid kMcastGid = {{0xff, 0x0e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x34}};

// A receiving process: attaches a UD QP to the group, then reports on `out`
// one byte per step ('A' attached, 'R'/'-' received or not, 'D' detached).
void McastReceiver(int in, int out) {
  ibv_context* ctx = OpenFirstDevice();
  ibv_pd* pd = ibv_alloc_pd(ctx);
  char* buf = static_cast<char*>(aligned_alloc(4096, 4096));
  ibv_mr* mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  ibv_qp* qp = MakeQp(pd, cq, IBV_QPT_UD);
  ToRts(qp, 0);
  for (int i = 0; i < 4; ++i) PostRecv(qp, A(buf) + i * 512, 512, mr->lkey, i);
  char c = ibv_attach_mcast(qp, &kMcastGid, 0) == 0 ? 'A' : 'x';
  if (write(out, &c, 1) != 1) _exit(3);
  for (int round = 0; round < 2; ++round) {
    if (read(in, &c, 1) != 1) _exit(3);  // the sender sent
    ibv_wc wc = PollWithin(cq, round == 0 ? 5000 : 300);
    bool got = !NoCompletion(wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
               (wc.wc_flags & IBV_WC_GRH) && strcmp(buf + wc.wr_id * 512 + 40, "group") == 0;
    c = got ? 'R' : '-';
    if (write(out, &c, 1) != 1) _exit(3);
    if (round == 0) {
      c = ibv_detach_mcast(qp, &kMcastGid, 0) == 0 ? 'D' : 'x';
      if (write(out, &c, 1) != 1) _exit(3);
    }
  }
  ibv_destroy_qp(qp);
  ibv_destroy_cq(cq);
  ibv_dereg_mr(mr);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  _exit(0);
}

struct Child {
  pid_t pid;
  int to;    // parent -> child
  int from;  // child -> parent
};

Child SpawnReceiver() {
  int down[2], up[2];
  if (pipe(down) || pipe(up)) Die("pipe");
  pid_t pid = fork();
  if (pid < 0) Die("fork");
  if (pid == 0) {
    close(down[1]);
    close(up[0]);
    alarm(30);
    McastReceiver(down[0], up[1]);
  }
  close(down[0]);
  close(up[1]);
  return {pid, down[1], up[0]};
}

char ReadByte(int fd) {
  char c = '?';
  if (read(fd, &c, 1) != 1) return '?';
  return c;
}

// Receivers are forked before this process opens the device.
void Multicast(Child* kids) {
  int before = g_failures;
  for (int i = 0; i < 2; ++i) EXPECT_EQ(ReadByte(kids[i].from), 'A');
  ibv_context* ctx = OpenFirstDevice();
  ibv_pd* pd = ibv_alloc_pd(ctx);
  char* buf = static_cast<char*>(aligned_alloc(4096, 4096));
  strcpy(buf, "group");
  ibv_mr* mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  ibv_qp* qp = MakeQp(pd, cq, IBV_QPT_UD);
  ToRts(qp, 0);
  ibv_ah* ah = MakeAh(pd, kMcastGid);
  for (int round = 0; round < 2; ++round) {
    EXPECT_EQ(PostUd(qp, ah, 0xffffff, kQkey, A(buf), 6, mr->lkey, round), 0);
    EXPECT_EQ(Poll(cq).status, IBV_WC_SUCCESS);
    for (int i = 0; i < 2; ++i) {
      if (write(kids[i].to, "s", 1) != 1) Die("pipe");
    }
    // Attached: both receive; detached: neither does.
    for (int i = 0; i < 2; ++i) EXPECT_EQ(ReadByte(kids[i].from), round == 0 ? 'R' : '-');
    if (round == 0) {
      for (int i = 0; i < 2; ++i) EXPECT_EQ(ReadByte(kids[i].from), 'D');
    }
  }
  for (int i = 0; i < 2; ++i) {
    int status = 0;
    waitpid(kids[i].pid, &status, 0);
    EXPECT_EQ(WIFEXITED(status) && WEXITSTATUS(status) == 0, 1);
  }
  // A QP attached to a group cannot be destroyed (EBUSY) until detached.
  ibv_qp* attached = MakeQp(pd, cq, IBV_QPT_UD);
  EXPECT_EQ(ibv_attach_mcast(attached, &kMcastGid, 0), 0);
  EXPECT_EQ(ibv_destroy_qp(attached), EBUSY);
  EXPECT_EQ(ibv_detach_mcast(attached, &kMcastGid, 0), 0);
  EXPECT_EQ(ibv_destroy_qp(attached), 0);
  ibv_destroy_ah(ah);
  ibv_destroy_qp(qp);
  ibv_destroy_cq(cq);
  ibv_dereg_mr(mr);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  printf("%s ud_multicast_two_processes\n", g_failures == before ? "PASS" : "FAIL");
  fflush(stdout);
}

// ---- SRQ events ------------------------------------------------------------------

// An armed srq_limit fires IBV_EVENT_SRQ_LIMIT_REACHED once when the SRQ
// drops below it, and disarms (srq_limit reads back 0).
void SrqLimitEvent(ibv_context* ctx) {
  Pair p = Make(ctx);
  ibv_srq_init_attr sa{};
  sa.attr = {32, 1, 0};
  ibv_srq* srq = ibv_create_srq(p.pd, &sa);
  if (!srq) Die("srq");
  ibv_qp* target = MakeQp(p.pd, p.cq[1], IBV_QPT_RC, srq);
  ibv_qp* source = MakeQp(p.pd, p.cq[0], IBV_QPT_RC);
  ToRts(target, source->qp_num);
  ToRts(source, target->qp_num);
  for (int i = 0; i < 10; ++i) PostSrqRecv(srq, A(p.buf) + 4096 + i * 64, 64, p.mr->lkey, i);
  ibv_srq_attr attr{};
  attr.srq_limit = 5;
  EXPECT_EQ(ibv_modify_srq(srq, &attr, IBV_SRQ_LIMIT), 0);
  // 10 -> 6 WQEs: still at or above the limit, no event.
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(PostSend(source, A(p.buf), 8, p.mr->lkey, i, IBV_SEND_SIGNALED), 0);
    EXPECT_EQ(Poll(p.cq[0]).status, IBV_WC_SUCCESS);
    EXPECT_EQ(Poll(p.cq[1]).status, IBV_WC_SUCCESS);
  }
  EXPECT_FALSE(NextAsyncEvent(ctx, 100).has_value());
  // 6 -> 2: below 5, one event.
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(PostSend(source, A(p.buf), 8, p.mr->lkey, i, IBV_SEND_SIGNALED), 0);
    EXPECT_EQ(Poll(p.cq[0]).status, IBV_WC_SUCCESS);
    EXPECT_EQ(Poll(p.cq[1]).status, IBV_WC_SUCCESS);
  }
  std::optional<ibv_async_event> ev = NextAsyncEvent(ctx, 2000);
  EXPECT_TRUE(ev.has_value());
  if (ev) EXPECT_EQ(ev->event_type, IBV_EVENT_SRQ_LIMIT_REACHED);
  if (ev && ev->event_type == IBV_EVENT_SRQ_LIMIT_REACHED) EXPECT_EQ(ev->element.srq == srq, 1);
  EXPECT_FALSE(NextAsyncEvent(ctx, 200).has_value());
  ibv_srq_attr q{};
  EXPECT_EQ(ibv_query_srq(srq, &q), 0);
  EXPECT_EQ(q.srq_limit, 0);
  // A QP attached to an SRQ that goes to ERR: IBV_EVENT_QP_LAST_WQE_REACHED.
  ibv_qp_attr err{};
  err.qp_state = IBV_QPS_ERR;
  EXPECT_EQ(ibv_modify_qp(target, &err, IBV_QP_STATE), 0);
  ev = NextAsyncEvent(ctx, 2000);
  EXPECT_TRUE(ev.has_value());
  if (ev) EXPECT_EQ(ev->event_type, IBV_EVENT_QP_LAST_WQE_REACHED);
  if (ev && ev->event_type == IBV_EVENT_QP_LAST_WQE_REACHED) EXPECT_EQ(ev->element.qp == target, 1);
  ibv_destroy_qp(source);
  ibv_destroy_qp(target);
  ibv_destroy_srq(srq);
  Destroy(p);
}

// SRQ growth with WQEs posted keeps them, in order, and peers still claim
// them; fewer than posted is EINVAL.
void SrqGrowKeepsWork(ibv_context* ctx) {
  Pair p = Make(ctx);
  ibv_srq_init_attr sa{};
  sa.attr = {4, 1, 0};
  ibv_srq* srq = ibv_create_srq(p.pd, &sa);
  if (!srq) Die("srq");
  ibv_qp* target = MakeQp(p.pd, p.cq[1], IBV_QPT_RC, srq);
  ibv_qp* source = MakeQp(p.pd, p.cq[0], IBV_QPT_RC);
  ToRts(target, source->qp_num);
  ToRts(source, target->qp_num);
  for (int i = 0; i < 3; ++i) PostSrqRecv(srq, A(p.buf) + 4096 + i * 64, 64, p.mr->lkey, i);
  ibv_srq_attr attr{};
  attr.max_wr = 2;
  EXPECT_EQ(ibv_modify_srq(srq, &attr, IBV_SRQ_MAX_WR), EINVAL);
  attr.max_wr = 100;
  EXPECT_EQ(ibv_modify_srq(srq, &attr, IBV_SRQ_MAX_WR), 0);
  for (int i = 3; i < 60; ++i) PostSrqRecv(srq, A(p.buf) + 4096 + i * 64, 64, p.mr->lkey, i);
  for (int i = 0; i < 60; ++i) {
    EXPECT_EQ(PostSend(source, A(p.buf), 8, p.mr->lkey, i, IBV_SEND_SIGNALED), 0);
    EXPECT_EQ(Poll(p.cq[0]).status, IBV_WC_SUCCESS);
    ibv_wc r = Poll(p.cq[1]);
    EXPECT_EQ(r.status, IBV_WC_SUCCESS);
    EXPECT_EQ(r.wr_id, i);
  }
  ibv_destroy_qp(source);
  ibv_destroy_qp(target);
  ibv_destroy_srq(srq);
  Destroy(p);
}

// ---- CQ --------------------------------------------------------------------------

// Completions outstanding survive a CQ resize; a peer (another context)
// completes into the grown ring; shrinking below the outstanding is EINVAL.
void CqResizeKeepsCompletions(ibv_context* ctx) {
  Pair p = Make(ctx);
  for (int i = 0; i < 10; ++i) PostRecv(p.qp[1], A(p.buf) + 4096 + i * 64, 64, p.mr->lkey, i);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(PostSend(p.qp[0], A(p.buf), 8, p.mr->lkey, 100 + i, IBV_SEND_SIGNALED), 0);
  }
  usleep(1000);
  EXPECT_EQ(ibv_resize_cq(p.cq[1], 5), EINVAL);  // 6 receive completions outstanding
  EXPECT_EQ(ibv_resize_cq(p.cq[1], 2000), 0);
  EXPECT_EQ(p.cq[1]->cqe >= 2000, 1);
  for (int i = 6; i < 10; ++i) {
    EXPECT_EQ(PostSend(p.qp[0], A(p.buf), 8, p.mr->lkey, 100 + i, IBV_SEND_SIGNALED), 0);
  }
  for (int i = 0; i < 10; ++i) {
    ibv_wc r = Poll(p.cq[1]);
    EXPECT_EQ(r.status, IBV_WC_SUCCESS);
    EXPECT_EQ(r.wr_id, i);
  }
  EXPECT_EQ(ibv_resize_cq(p.cq[1], 1), 0);
  Destroy(p);
}

// The ibv_cq_ex poll API on real completions: start/next/end_poll and the
// read_* of every field asked for in wc_flags.
void CqExPoll(ibv_context* ctx) {
  Pair p = Make(ctx);
  ibv_cq_init_attr_ex ca{};
  ca.cqe = 16;
  ca.wc_flags =
      IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP;
  ibv_cq_ex* cq = ibv_create_cq_ex(ctx, &ca);
  if (!cq) Die("create_cq_ex");
  ibv_qp* target = MakeQp(p.pd, ibv_cq_ex_to_cq(cq), IBV_QPT_RC);
  ibv_qp* source = MakeQp(p.pd, p.cq[0], IBV_QPT_RC);
  ToRts(target, source->qp_num);
  ToRts(source, target->qp_num);
  ibv_poll_cq_attr pa{};
  EXPECT_EQ(ibv_start_poll(cq, &pa), ENOENT);  // empty: nothing to end
  PostRecv(target, A(p.buf) + 4096, 64, p.mr->lkey, 11);
  PostRecv(target, A(p.buf) + 4096 + 64, 64, p.mr->lkey, 12);
  EXPECT_EQ(PostSend(source, A(p.buf), 13, p.mr->lkey, 1, IBV_SEND_SIGNALED, IBV_WR_SEND_WITH_IMM,
                     htonl(0xabcd)),
            0);
  EXPECT_EQ(PostSend(source, A(p.buf), 5, p.mr->lkey, 2, IBV_SEND_SIGNALED), 0);
  EXPECT_EQ(Poll(p.cq[0]).status, IBV_WC_SUCCESS);
  EXPECT_EQ(Poll(p.cq[0]).status, IBV_WC_SUCCESS);
  int rc = ENOENT;
  for (int i = 0; i < 5000 && rc == ENOENT; ++i) {
    rc = ibv_start_poll(cq, &pa);
    if (rc == ENOENT) usleep(1000);
  }
  EXPECT_EQ(rc, 0);
  if (rc == 0) {
    EXPECT_EQ(cq->wr_id, 11);
    EXPECT_EQ(cq->status, IBV_WC_SUCCESS);
    EXPECT_EQ(ibv_wc_read_opcode(cq), IBV_WC_RECV);
    EXPECT_EQ(ibv_wc_read_byte_len(cq), 13);
    EXPECT_EQ(ntohl(ibv_wc_read_imm_data(cq)), 0xabcd);
    EXPECT_EQ(ibv_wc_read_qp_num(cq), target->qp_num);
    EXPECT_EQ(ibv_wc_read_src_qp(cq), source->qp_num);
    EXPECT_EQ(ibv_wc_read_wc_flags(cq) & IBV_WC_WITH_IMM, IBV_WC_WITH_IMM);
    EXPECT_EQ(ibv_next_poll(cq), 0);
    EXPECT_EQ(cq->wr_id, 12);
    EXPECT_EQ(ibv_wc_read_byte_len(cq), 5);
    EXPECT_EQ(ibv_wc_read_wc_flags(cq) & IBV_WC_WITH_IMM, 0);
    EXPECT_EQ(ibv_next_poll(cq), ENOENT);
    ibv_end_poll(cq);
  }
  ibv_destroy_qp(source);
  ibv_destroy_qp(target);
  ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
  Destroy(p);
}

// ibv_req_notify_cq(cq, 1) wakes only for a solicited completion.
void SolicitedOnly(ibv_context* ctx) {
  Pair p = Make(ctx);
  ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, ch, 0);
  ibv_qp* target = MakeQp(p.pd, cq, IBV_QPT_RC);
  ibv_qp* source = MakeQp(p.pd, p.cq[0], IBV_QPT_RC);
  ToRts(target, source->qp_num);
  ToRts(source, target->qp_num);
  for (int i = 0; i < 2; ++i) PostRecv(target, A(p.buf) + 4096 + i * 64, 64, p.mr->lkey, i);
  EXPECT_EQ(ibv_req_notify_cq(cq, 1), 0);
  EXPECT_EQ(PostSend(source, A(p.buf), 8, p.mr->lkey, 1, IBV_SEND_SIGNALED), 0);
  EXPECT_EQ(Poll(p.cq[0]).status, IBV_WC_SUCCESS);
  pollfd pf{ch->fd, POLLIN, 0};
  EXPECT_EQ(poll(&pf, 1, 200), 0);  // unsolicited: no event
  EXPECT_EQ(PostSend(source, A(p.buf), 8, p.mr->lkey, 2, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED),
            0);
  EXPECT_EQ(Poll(p.cq[0]).status, IBV_WC_SUCCESS);
  EXPECT_EQ(poll(&pf, 1, 2000), 1);
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  if (pf.revents & POLLIN) {
    EXPECT_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0);
    EXPECT_EQ(ev_cq == cq, 1);
    ibv_ack_cq_events(cq, 1);
  }
  ibv_wc wc[2];
  int n = 0;
  for (int i = 0; i < 100 && n < 2; ++i) n += ibv_poll_cq(cq, 2 - n, wc + n);
  EXPECT_EQ(n, 2);
  ibv_destroy_qp(source);
  ibv_destroy_qp(target);
  ibv_destroy_cq(cq);
  ibv_destroy_comp_channel(ch);
  Destroy(p);
}

// ---- send queue ------------------------------------------------------------------

// Inline data up to the QP's max_inline_data works; one byte more is EINVAL.
void InlineLimit(ibv_context* ctx) {
  Pair p = Make(ctx);
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  EXPECT_EQ(ibv_query_qp(p.qp[0], &attr, IBV_QP_CAP, &init), 0);
  const uint32_t max_inline = attr.cap.max_inline_data;
  EXPECT_EQ(max_inline >= 64, 1);
  PostRecv(p.qp[1], A(p.buf) + 4096, 4096, p.mr->lkey, 1);
  memset(p.buf, 'i', max_inline);
  // Inline data is not keyed: a bogus lkey must not matter.
  EXPECT_EQ(PostSend(p.qp[0], A(p.buf), max_inline, 0xdead, 1, IBV_SEND_SIGNALED | IBV_SEND_INLINE),
            0);
  EXPECT_EQ(Poll(p.cq[0]).status, IBV_WC_SUCCESS);
  ibv_wc r = Poll(p.cq[1]);
  EXPECT_EQ(r.status, IBV_WC_SUCCESS);
  EXPECT_EQ(r.byte_len, max_inline);
  EXPECT_EQ(p.buf[4096 + max_inline - 1], 'i');
  EXPECT_EQ(PostSend(p.qp[0], A(p.buf), max_inline + 1, p.mr->lkey, 2,
                     IBV_SEND_SIGNALED | IBV_SEND_INLINE),
            EINVAL);
  EXPECT_TRUE(NoCompletion(PollWithin(p.cq[0], 100)));  // nothing was posted
  Destroy(p);
}

// sq_sig_all: every WR completes; without it, unsignaled WRs produce no CQE.
void Signaling(ibv_context* ctx) {
  Pair all = Make(ctx, IBV_QPT_RC, true, 1);
  EXPECT_EQ(PostSend(all.qp[0], A(all.buf), 8, all.mr->lkey, 1, 0, IBV_WR_RDMA_WRITE), 0);
  EXPECT_EQ(Poll(all.cq[0]).wr_id, 1);
  Destroy(all);
  Pair p = Make(ctx);
  for (int i = 1; i <= 3; ++i) {
    ibv_sge sge{A(p.buf), 8, p.mr->lkey};
    ibv_send_wr wr{}, *bad;
    wr.wr_id = i;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = i == 3 ? IBV_SEND_SIGNALED : 0;
    wr.wr.rdma.remote_addr = A(p.buf) + 8192;
    wr.wr.rdma.rkey = p.mr->rkey;
    EXPECT_EQ(ibv_post_send(p.qp[0], &wr, &bad), 0);
  }
  ibv_wc wc = Poll(p.cq[0]);
  EXPECT_EQ(wc.wr_id, 3);
  EXPECT_TRUE(NoCompletion(PollWithin(p.cq[0], 100)));
  Destroy(p);
}

// A UD send whose Q_Key does not match the target's is dropped silently:
// the sender completes, the receiver gets nothing.
void UdWrongQkeyDropped(ibv_context* ctx) {
  Pair p = Make(ctx, IBV_QPT_UD);
  ibv_gid gid{};
  ibv_query_gid(ctx, 1, kGidIndex, &gid);
  ibv_ah* ah = MakeAh(p.pd, gid);
  PostRecv(p.qp[1], A(p.buf) + 4096, 256, p.mr->lkey, 1);
  EXPECT_EQ(PostUd(p.qp[0], ah, p.qp[1]->qp_num, kQkey + 1, A(p.buf), 8, p.mr->lkey, 1), 0);
  EXPECT_EQ(Poll(p.cq[0]).status, IBV_WC_SUCCESS);
  EXPECT_TRUE(NoCompletion(PollWithin(p.cq[1], 200)));
  // The right Q_Key still reaches it (the receive was not consumed).
  EXPECT_EQ(PostUd(p.qp[0], ah, p.qp[1]->qp_num, kQkey, A(p.buf), 8, p.mr->lkey, 2), 0);
  EXPECT_EQ(Poll(p.cq[0]).status, IBV_WC_SUCCESS);
  ibv_wc r = Poll(p.cq[1]);
  EXPECT_EQ(r.status, IBV_WC_SUCCESS);
  EXPECT_EQ(r.wr_id, 1);
  ibv_destroy_ah(ah);
  Destroy(p);
}

// The first message a QP in RTR receives raises IBV_EVENT_COMM_EST.
void CommEst(ibv_context* ctx) {
  Pair p = Make(ctx, IBV_QPT_RC, /*b_to_rts=*/false);
  PostRecv(p.qp[1], A(p.buf) + 4096, 64, p.mr->lkey, 1);
  PostRecv(p.qp[1], A(p.buf) + 4096, 64, p.mr->lkey, 2);
  EXPECT_EQ(PostSend(p.qp[0], A(p.buf), 8, p.mr->lkey, 1, IBV_SEND_SIGNALED), 0);
  EXPECT_EQ(Poll(p.cq[1]).status, IBV_WC_SUCCESS);
  std::optional<ibv_async_event> ev = NextAsyncEvent(ctx, 2000);
  EXPECT_TRUE(ev.has_value());
  if (ev) EXPECT_EQ(ev->event_type, IBV_EVENT_COMM_EST);
  if (ev && ev->event_type == IBV_EVENT_COMM_EST) EXPECT_EQ(ev->element.qp == p.qp[1], 1);
  // Once: the second message raises nothing.
  EXPECT_EQ(PostSend(p.qp[0], A(p.buf), 8, p.mr->lkey, 2, IBV_SEND_SIGNALED), 0);
  EXPECT_EQ(Poll(p.cq[1]).status, IBV_WC_SUCCESS);
  EXPECT_FALSE(NextAsyncEvent(ctx, 200).has_value());
  Destroy(p);
}

// ---- memory ----------------------------------------------------------------------

// rereg_mr with a new translation: a peer (another context, so it reaches
// the MR as a remote process does) writes to the new range with the new
// rkey; the old range is out of bounds and the old rkey is dead.
void ReregMovesTheDataPath(ibv_context* ctx) {
  ibv_context* peer_ctx = OpenFirstDevice();
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_pd* peer_pd = ibv_alloc_pd(peer_ctx);
  char* mem = static_cast<char*>(aligned_alloc(4096, 4 * 4096));
  memset(mem, 0, 4 * 4096);
  char* src = static_cast<char*>(aligned_alloc(4096, 4096));
  strcpy(src, "moved");
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  ibv_mr* mr = ibv_reg_mr(pd, mem, 4096, access);
  ibv_mr* src_mr = ibv_reg_mr(peer_pd, src, 4096, IBV_ACCESS_LOCAL_WRITE);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  ibv_cq* peer_cq = ibv_create_cq(peer_ctx, 16, nullptr, nullptr, 0);
  if (!mr || !src_mr || !cq || !peer_cq) Die("rereg setup");
  ibv_qp* target = MakeQp(pd, cq, IBV_QPT_RC);
  ibv_qp* writer = MakeQp(peer_pd, peer_cq, IBV_QPT_RC);
  ToRts(target, writer->qp_num);
  ToRts(writer, target->qp_num);
  auto write_to = [&](const char* where, uint32_t rkey, uint64_t wr_id) {
    ibv_sge sge{A(src), 6, src_mr->lkey};
    ibv_send_wr wr{}, *bad;
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = A(where);
    wr.wr.rdma.rkey = rkey;
    EXPECT_EQ(ibv_post_send(writer, &wr, &bad), 0);
    return Poll(peer_cq).status;
  };
  EXPECT_EQ(write_to(mem, mr->rkey, 1), IBV_WC_SUCCESS);
  EXPECT_EQ(strcmp(mem, "moved"), 0);
  const uint32_t old_rkey = mr->rkey;
  char* moved = mem + 2 * 4096;
  // The access stays (0: libibverbs refuses flags without CHANGE_ACCESS).
  EXPECT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, moved, 8192, 0), 0);
  EXPECT_EQ(write_to(moved + 100, mr->rkey, 2), IBV_WC_SUCCESS);
  EXPECT_EQ(strcmp(moved + 100, "moved"), 0);
  // The old range is no longer in the MR: remote access error, nothing written.
  memset(mem, 0, 4096);
  EXPECT_EQ(write_to(mem + 200, mr->rkey, 3), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(mem[200], 0);
  // Reconnect (the error moved both QPs to ERR) and try the old rkey.
  ibv_qp_attr reset{};
  reset.qp_state = IBV_QPS_RESET;
  ibv_modify_qp(target, &reset, IBV_QP_STATE);
  ibv_modify_qp(writer, &reset, IBV_QP_STATE);
  ibv_wc drain;
  while (ibv_poll_cq(peer_cq, 1, &drain) > 0) {
  }
  ToRts(target, writer->qp_num);
  ToRts(writer, target->qp_num);
  EXPECT_EQ(write_to(moved + 300, old_rkey, 4), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(moved[300], 0);
  ibv_destroy_qp(writer);
  ibv_destroy_qp(target);
  ibv_destroy_cq(cq);
  ibv_destroy_cq(peer_cq);
  ibv_dereg_mr(mr);
  ibv_dereg_mr(src_mr);
  ibv_dealloc_pd(pd);
  ibv_dealloc_pd(peer_pd);
  ibv_close_device(peer_ctx);
  free(mem);
  free(src);
}

}  // namespace

int main() {
  // The multicast receivers are forked before this process touches verbs.
  Child kids[2] = {SpawnReceiver(), SpawnReceiver()};
  Multicast(kids);
  ibv_context* ctx = OpenFirstDevice();
  Run("srq_limit_event_once_and_last_wqe_reached", SrqLimitEvent, ctx);
  Run("srq_grow_keeps_work", SrqGrowKeepsWork, ctx);
  Run("cq_resize_keeps_completions", CqResizeKeepsCompletions, ctx);
  Run("cq_ex_poll_api", CqExPoll, ctx);
  Run("solicited_only_notification", SolicitedOnly, ctx);
  Run("inline_limit", InlineLimit, ctx);
  Run("sq_sig_all_and_unsignaled", Signaling, ctx);
  Run("ud_wrong_qkey_dropped", UdWrongQkeyDropped, ctx);
  Run("comm_est_in_rtr", CommEst, ctx);
  Run("rereg_translation_moves_data_path", ReregMovesTheDataPath, ctx);
  ibv_close_device(ctx);
  printf("%d failure(s)\n", g_failures);
  return g_failures ? 1 : 0;
}
