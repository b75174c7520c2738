// The send queue error state and the drain notification, as hardware
// reports them (IBA 10.3.1, 11.6.3): a send error on an unreliable QP (UD,
// UC) moves it to SQE, not ERR - the failing WR completes with its error,
// later sends are flushed, receives keep completing, and SQE->RTS resumes
// sending; a reliable QP still goes to ERR. RTS->SQD with
// en_sqd_async_notify raises IBV_EVENT_SQ_DRAINED once the WRs started
// before SQD are done; sends posted in SQD wait for SQD->RTS. Same pattern
// as error_cases.cc.
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "case_checks.h"

namespace {

constexpr uint32_t kQkey = 0x11111111;
constexpr uint32_t kGrh = 40;  // a UD receive buffer starts with the GRH

struct Pair {
  ibv_context* ctx;
  ibv_pd* pd;
  ibv_cq* cq[2];
  ibv_qp* qp[2];
  ibv_ah* ah;  // UD: the loopback address both QPs send to
  char* buf;
  ibv_mr* mr;
};

ibv_ah_attr LoopbackAh(ibv_context* ctx) {
  ibv_ah_attr ah{};
  ah.is_global = 1;
  ah.port_num = 1;
  ah.grh.hop_limit = 1;
  ibv_query_gid(ctx, 1, 0, &ah.grh.dgid);
  return ah;
}

void Modify(ibv_qp* qp, ibv_qp_attr& a, int mask, const char* what) {
  if (ibv_modify_qp(qp, &a, mask)) Die(what);
}

// Brings qp to RTS for its type (RC/UC connected to dest, UD with kQkey).
void ToRts(ibv_qp* qp, uint32_t dest, uint8_t rnr_retry) {
  const bool ud = qp->qp_type == IBV_QPT_UD;
  const bool rc = qp->qp_type == IBV_QPT_RC;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qkey = kQkey;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  Modify(qp, a,
         IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS),
         "INIT");
  a = {};
  a.qp_state = IBV_QPS_RTR;
  int mask = IBV_QP_STATE;
  if (!ud) {
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = dest;
    a.ah_attr = LoopbackAh(qp->context);
    mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  }
  if (rc) {
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 1;  // 0.01 ms
    mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  }
  Modify(qp, a, mask, "RTR");
  a = {};
  a.qp_state = IBV_QPS_RTS;
  mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
  if (rc) {
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = rnr_retry;
    a.max_rd_atomic = 1;
    mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  }
  Modify(qp, a, mask, "RTS");
}

Pair Make(ibv_context* ctx, ibv_qp_type type, uint8_t rnr_retry = 7) {
  Pair p{};
  p.ctx = ctx;
  p.pd = ibv_alloc_pd(ctx);
  p.buf = static_cast<char*>(aligned_alloc(4096, 8192));
  memset(p.buf, 0, 8192);
  p.mr = ibv_reg_mr(p.pd, p.buf, 8192, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!p.pd || !p.mr) Die("pd/mr");
  for (int i = 0; i < 2; ++i) {
    p.cq[i] = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
    ibv_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = p.cq[i];
    ia.qp_type = type;
    ia.cap = {16, 16, 1, 1, 0};
    p.qp[i] = ibv_create_qp(p.pd, &ia);
    if (!p.cq[i] || !p.qp[i]) Die("cq/qp");
  }
  ToRts(p.qp[0], p.qp[1]->qp_num, rnr_retry);
  ToRts(p.qp[1], p.qp[0]->qp_num, rnr_retry);
  if (type == IBV_QPT_UD) {
    ibv_ah_attr ah = LoopbackAh(ctx);
    p.ah = ibv_create_ah(p.pd, &ah);
    if (!p.ah) Die("ibv_create_ah");
  }
  return p;
}

void Destroy(Pair& p) {
  for (int i = 0; i < 2; ++i) {
    ibv_destroy_qp(p.qp[i]);
    ibv_destroy_cq(p.cq[i]);
  }
  if (p.ah) ibv_destroy_ah(p.ah);
  ibv_dereg_mr(p.mr);
  ibv_dealloc_pd(p.pd);
  free(p.buf);
}

uint64_t A(Pair& p, int off) {
  return reinterpret_cast<uint64_t>(p.buf + off);
}

// Sends len bytes at offset 0 from qp[from] to the other QP of the pair.
int Send(Pair& p, int from, uint32_t lkey, uint64_t wr_id) {
  ibv_sge sge{A(p, 0), 8, lkey};
  ibv_send_wr wr{}, *bad;
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (p.ah) {
    wr.wr.ud.ah = p.ah;
    wr.wr.ud.remote_qpn = p.qp[1 - from]->qp_num;
    wr.wr.ud.remote_qkey = kQkey;
  }
  return ibv_post_send(p.qp[from], &wr, &bad);
}

void PostRecv(Pair& p, int at, uint64_t wr_id) {
  ibv_sge sge{A(p, 4096 + 512 * at), 64 + kGrh, p.mr->lkey};
  ibv_recv_wr wr{}, *bad;
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  if (ibv_post_recv(p.qp[at], &wr, &bad)) Die("ibv_post_recv");
}

constexpr int kNoEvent = -1;

// The type of the next async event within ms milliseconds (kNoEvent if
// none came); *qp is the QP it names.
int NextEvent(ibv_context* ctx, int ms, ibv_qp** qp = nullptr) {
  pollfd pfd{ctx->async_fd, POLLIN, 0};
  ibv_async_event ev{};
  if (poll(&pfd, 1, ms) != 1 || ibv_get_async_event(ctx, &ev) != 0) return kNoEvent;
  if (qp) *qp = ev.element.qp;
  ibv_ack_async_event(&ev);
  return static_cast<int>(ev.event_type);
}

// ---- cases ------------------------------------------------------------------------

// A bad lkey on an unreliable QP: SQE with everything the state implies.
void SendErrorEntersSqe(ibv_context* ctx, ibv_qp_type type) {
  Pair p = Make(ctx, type);
  PostRecv(p, 0, 31);  // waits through the error
  EXPECT_EQ(Send(p, 0, p.mr->lkey + 1, 1), 0);
  ibv_wc wc = Poll(p.cq[0]);
  EXPECT_EQ(wc.status, IBV_WC_LOC_PROT_ERR);
  EXPECT_EQ(wc.wr_id, 1);
  EXPECT_EQ(State(p.qp[0]), IBV_QPS_SQE);
  EXPECT_EQ(p.qp[0]->state, IBV_QPS_SQE);  // ibv_query_qp refreshes the cache
  // The receive queue works: the peer's message completes the receive
  // posted before the error, and one posted after it.
  EXPECT_EQ(Send(p, 1, p.mr->lkey, 2), 0);
  EXPECT_EQ(Poll(p.cq[1]).status, IBV_WC_SUCCESS);
  wc = Poll(p.cq[0]);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV);
  EXPECT_EQ(wc.wr_id, 31);
  PostRecv(p, 0, 32);
  EXPECT_EQ(Send(p, 1, p.mr->lkey, 3), 0);
  EXPECT_EQ(Poll(p.cq[1]).status, IBV_WC_SUCCESS);
  wc = Poll(p.cq[0]);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.wr_id, 32);
  // Posting a send is accepted and flushed (IBA 10.3.1), nothing is sent.
  PostRecv(p, 1, 41);
  EXPECT_EQ(Send(p, 0, p.mr->lkey, 4), 0);
  wc = Poll(p.cq[0]);
  EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(wc.wr_id, 4);
  ibv_wc none;
  EXPECT_EQ(ibv_poll_cq(p.cq[1], 1, &none), 0);
  EXPECT_EQ(State(p.qp[0]), IBV_QPS_SQE);
  // SQE->RTS (CUR_STATE is optional for both types) resumes sending: the
  // receive posted at the peer gets this message.
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.cur_qp_state = IBV_QPS_SQE;
  EXPECT_EQ(ibv_modify_qp(p.qp[0], &a, IBV_QP_STATE | IBV_QP_CUR_STATE), 0);
  EXPECT_EQ(State(p.qp[0]), IBV_QPS_RTS);
  EXPECT_EQ(Send(p, 0, p.mr->lkey, 5), 0);
  wc = Poll(p.cq[0]);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.wr_id, 5);
  wc = Poll(p.cq[1]);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.wr_id, 41);
  // SQE is a device state: entering it raised no async event.
  EXPECT_EQ(NextEvent(ctx, 0), kNoEvent);
  Destroy(p);
}

void UdSendErrorEntersSqe(ibv_context* ctx) {
  SendErrorEntersSqe(ctx, IBV_QPT_UD);
}

void UcSendErrorEntersSqe(ibv_context* ctx) {
  SendErrorEntersSqe(ctx, IBV_QPT_UC);
}

// A reliable QP has no SQE: the same error moves it to ERR and flushes its
// receives.
void RcSendErrorEntersErr(ibv_context* ctx) {
  Pair p = Make(ctx, IBV_QPT_RC);
  PostRecv(p, 0, 31);
  EXPECT_EQ(Send(p, 0, p.mr->lkey + 1, 1), 0);
  EXPECT_EQ(Poll(p.cq[0]).status, IBV_WC_LOC_PROT_ERR);
  ibv_wc wc = Poll(p.cq[0]);
  EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(wc.wr_id, 31);
  EXPECT_EQ(State(p.qp[0]), IBV_QPS_ERR);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  EXPECT_EQ(ibv_modify_qp(p.qp[0], &a, IBV_QP_STATE), EINVAL);  // ERR->RTS
  Destroy(p);
}

// RTS->SQD with notification while a WR waits for RNR: no event until the
// WR completed, then exactly one.
void SqDrainedWaitsForTheSendQueue(ibv_context* ctx) {
  Pair p = Make(ctx, IBV_QPT_RC, /*rnr_retry=*/7);
  EXPECT_EQ(Send(p, 0, p.mr->lkey, 1), 0);  // no receive at the peer: RNR
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_SQD;
  a.en_sqd_async_notify = 1;
  EXPECT_EQ(ibv_modify_qp(p.qp[0], &a, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY), 0);
  EXPECT_EQ(NextEvent(ctx, 50), kNoEvent);
  ibv_wc none;
  EXPECT_EQ(ibv_poll_cq(p.cq[0], 1, &none), 0);
  PostRecv(p, 1, 7);
  ibv_wc wc = Poll(p.cq[0]);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.wr_id, 1);
  EXPECT_EQ(Poll(p.cq[1]).status, IBV_WC_SUCCESS);
  ibv_qp* named = nullptr;
  EXPECT_EQ(NextEvent(ctx, 5000, &named), IBV_EVENT_SQ_DRAINED);
  EXPECT_EQ(named == p.qp[0], true);
  EXPECT_EQ(NextEvent(ctx, 50), kNoEvent);
  EXPECT_EQ(State(p.qp[0]), IBV_QPS_SQD);
  Destroy(p);
}

// A drain that ends in an error (the QP left SQD) raises no SQ_DRAINED.
void SqDrainedNotRaisedWhenTheQpLeavesSqd(ibv_context* ctx) {
  Pair p = Make(ctx, IBV_QPT_RC, /*rnr_retry=*/7);
  EXPECT_EQ(Send(p, 0, p.mr->lkey, 1), 0);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_SQD;
  a.en_sqd_async_notify = 1;
  EXPECT_EQ(ibv_modify_qp(p.qp[0], &a, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY), 0);
  a = {};
  a.qp_state = IBV_QPS_ERR;
  EXPECT_EQ(ibv_modify_qp(p.qp[0], &a, IBV_QP_STATE), 0);
  EXPECT_EQ(Poll(p.cq[0]).status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(NextEvent(ctx, 50), kNoEvent);
  Destroy(p);
}

// Sends 8 bytes at offset off of qp[from]'s buffer; PostRecvAt receives
// into offset off of qp[at]'s (offsets below 4096 for both: one buffer).
int SendAt(Pair& p, int from, int off, uint64_t wr_id) {
  ibv_sge sge{A(p, off), 8, p.mr->lkey};
  ibv_send_wr wr{}, *bad;
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  return ibv_post_send(p.qp[from], &wr, &bad);
}

void PostRecvAt(Pair& p, int at, int off, uint64_t wr_id) {
  ibv_sge sge{A(p, off), 8, p.mr->lkey};
  ibv_recv_wr wr{}, *bad;
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  if (ibv_post_recv(p.qp[at], &wr, &bad)) Die("ibv_post_recv");
}

// Polls cq for ms milliseconds (which runs progress) and expects nothing.
void ExpectNoCompletion(ibv_cq* cq, int ms) {
  timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    ibv_wc wc{};
    if (ibv_poll_cq(cq, 1, &wc) != 0) {
      fprintf(stderr, "unexpected completion: wr_id %llu status %d\n",
              static_cast<unsigned long long>(wc.wr_id), wc.status);
      ++g_failures;
      return;
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 >= ms) {
      return;
    }
  }
}

void ToSqd(ibv_qp* qp, bool notify) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_SQD;
  a.en_sqd_async_notify = notify;
  EXPECT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | (notify ? IBV_QP_EN_SQD_ASYNC_NOTIFY : 0)), 0);
}

void SqdToRts(ibv_qp* qp) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  EXPECT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
}

// Sends posted in SQD are accepted but do not start (IBA 10.3.1, as rxe):
// nothing is delivered or completed, the drain (nothing was outstanding)
// is reported once; SQD->RTS starts them, in order, without another post.
void SendsPostedInSqdWaitForRts(ibv_context* ctx) {
  Pair p = Make(ctx, IBV_QPT_RC);
  for (int i = 0; i < 3; ++i) {
    p.buf[8 * i] = static_cast<char>('a' + i);
    PostRecvAt(p, 1, 1024 + 8 * i, 11 + i);
  }
  ToSqd(p.qp[0], /*notify=*/true);
  ibv_qp* named = nullptr;
  EXPECT_EQ(NextEvent(ctx, 5000, &named), IBV_EVENT_SQ_DRAINED);
  EXPECT_EQ(named == p.qp[0], true);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(SendAt(p, 0, 8 * i, 1 + i), 0);
  ExpectNoCompletion(p.cq[0], 50);
  ExpectNoCompletion(p.cq[1], 10);
  EXPECT_EQ(p.buf[1024], 0);
  EXPECT_EQ(NextEvent(ctx, 0), kNoEvent);  // held WRs did not re-raise it
  EXPECT_EQ(State(p.qp[0]), IBV_QPS_SQD);
  SqdToRts(p.qp[0]);
  for (int i = 0; i < 3; ++i) {
    ibv_wc wc = Poll(p.cq[0]);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc.wr_id, 1 + i);
    wc = Poll(p.cq[1]);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc.wr_id, 11 + i);
    EXPECT_EQ(p.buf[1024 + 8 * i], 'a' + i);
  }
  EXPECT_EQ(NextEvent(ctx, 0), kNoEvent);
  Destroy(p);
}

// A WR waiting for RNR when the QP enters SQD drains (SQ_DRAINED once it
// completed); one posted in SQD stays held, with a receive ready for it,
// until SQD->RTS.
void SqdDrainsStartedWrsAndHoldsNewOnes(ibv_context* ctx) {
  Pair p = Make(ctx, IBV_QPT_RC, /*rnr_retry=*/7);
  p.buf[0] = 'x';
  p.buf[8] = 'y';
  EXPECT_EQ(SendAt(p, 0, 0, 1), 0);  // no receive at the peer: RNR
  ToSqd(p.qp[0], /*notify=*/true);
  EXPECT_EQ(SendAt(p, 0, 8, 2), 0);  // held
  EXPECT_EQ(NextEvent(ctx, 50), kNoEvent);
  PostRecvAt(p, 1, 1024, 11);
  PostRecvAt(p, 1, 1032, 12);
  ibv_wc wc = Poll(p.cq[0]);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.wr_id, 1);
  wc = Poll(p.cq[1]);
  EXPECT_EQ(wc.wr_id, 11);
  EXPECT_EQ(p.buf[1024], 'x');
  ibv_qp* named = nullptr;
  EXPECT_EQ(NextEvent(ctx, 5000, &named), IBV_EVENT_SQ_DRAINED);
  EXPECT_EQ(named == p.qp[0], true);
  ExpectNoCompletion(p.cq[0], 50);
  ExpectNoCompletion(p.cq[1], 10);
  EXPECT_EQ(p.buf[1032], 0);
  EXPECT_EQ(State(p.qp[0]), IBV_QPS_SQD);
  SqdToRts(p.qp[0]);
  wc = Poll(p.cq[0]);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.wr_id, 2);
  wc = Poll(p.cq[1]);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.wr_id, 12);
  EXPECT_EQ(p.buf[1032], 'y');
  EXPECT_EQ(NextEvent(ctx, 0), kNoEvent);
  Destroy(p);
}

// SQD->ERR flushes the held WRs, in order; none was delivered.
void SqdToErrFlushesHeldWrs(ibv_context* ctx) {
  Pair p = Make(ctx, IBV_QPT_RC);
  PostRecvAt(p, 1, 1024, 11);
  PostRecvAt(p, 1, 1032, 12);
  ToSqd(p.qp[0], /*notify=*/false);
  EXPECT_EQ(SendAt(p, 0, 0, 1), 0);
  EXPECT_EQ(SendAt(p, 0, 8, 2), 0);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  EXPECT_EQ(ibv_modify_qp(p.qp[0], &a, IBV_QP_STATE), 0);
  for (uint64_t id = 1; id <= 2; ++id) {
    ibv_wc wc = Poll(p.cq[0]);
    EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
    EXPECT_EQ(wc.wr_id, id);
  }
  ExpectNoCompletion(p.cq[0], 10);
  ExpectNoCompletion(p.cq[1], 10);
  EXPECT_EQ(NextEvent(ctx, 0), kNoEvent);
  Destroy(p);
}

}  // namespace

// sqe_cases [ROUNDS]: every case ROUNDS times (default 1; the network
// transport's runs take several, its drains race the device's thread).
int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 1;
  ibv_context* ctx = OpenFirstDevice();
  for (int r = 0; r < rounds; ++r) {
    Run("ud_send_error_enters_sqe", UdSendErrorEntersSqe, ctx);
    Run("uc_send_error_enters_sqe", UcSendErrorEntersSqe, ctx);
    Run("rc_send_error_enters_err", RcSendErrorEntersErr, ctx);
    Run("sq_drained_waits_for_the_send_queue", SqDrainedWaitsForTheSendQueue, ctx);
    Run("sq_drained_not_raised_when_the_qp_leaves_sqd", SqDrainedNotRaisedWhenTheQpLeavesSqd, ctx);
    Run("sends_posted_in_sqd_wait_for_rts", SendsPostedInSqdWaitForRts, ctx);
    Run("sqd_drains_started_wrs_and_holds_new_ones", SqdDrainsStartedWrsAndHoldsNewOnes, ctx);
    Run("sqd_to_err_flushes_held_wrs", SqdToErrFlushesHeldWrs, ctx);
  }
  ibv_close_device(ctx);
  printf("%d failure(s)\n", g_failures);
  return g_failures ? 1 : 0;
}
