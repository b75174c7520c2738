// Restating a QP and the queue limits, as rdma-core's tests meet them on
// mlx5: a QP moved to RESET (or destroyed) leaves none of its completions in
// its CQs (test_mr_rereg_pd / test_mr_rereg_addr restate QPs after an
// error, then expect clean traffic), ibv_post_recv in RESET is EINVAL, and
// an SRQ reports the max_wr it really holds.
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <vector>

#include "case_checks.h"

namespace {

constexpr int kGidIndex = 1;  // a RoCE v2 GID, as the pingpong tests use

int ToInit(ibv_qp* qp) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  return ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

void ToRts(ibv_qp* qp, uint32_t dest) {
  if (ToInit(qp)) Die("INIT");
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = dest;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.hop_limit = 1;
  a.ah_attr.grh.sgid_index = kGidIndex;
  ibv_query_gid(qp->context, 1, kGidIndex, &a.ah_attr.grh.dgid);
  if (ibv_modify_qp(qp, &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
    Die("RTR");
  }
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  if (ibv_modify_qp(qp, &a,
                    IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                        IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC)) {
    Die("RTS");
  }
}

void ToState(ibv_qp* qp, ibv_qp_state state) {
  ibv_qp_attr a{};
  a.qp_state = state;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE)) Die("modify state");
}

ibv_qp* MakeQp(ibv_pd* pd, ibv_cq* cq, ibv_srq* srq = nullptr) {
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = cq;
  ia.srq = srq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap = {16, srq ? 0u : 16u, 1, 1, 0};
  ibv_qp* qp = ibv_create_qp(pd, &ia);
  if (!qp) Die("create_qp");
  return qp;
}

// Everything the CQ holds now (the producers are this thread: complete).
std::vector<ibv_wc> Drain(ibv_cq* cq) {
  std::vector<ibv_wc> out;
  ibv_wc wc;
  while (ibv_poll_cq(cq, 1, &wc) == 1) out.push_back(wc);
  return out;
}

struct Env {
  ibv_context* ctx;
  ibv_pd* pd;
  char* buf;
  ibv_mr* mr;
};

int Send(ibv_qp* qp, const Env& e, uint64_t wr_id, ibv_wr_opcode op = IBV_WR_SEND,
         uint32_t rkey = 0) {
  ibv_sge sge{reinterpret_cast<uint64_t>(e.buf), 64, e.mr->lkey};
  ibv_send_wr wr{}, *bad;
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(e.buf) + 4096;
  wr.wr.rdma.rkey = rkey;
  return ibv_post_send(qp, &wr, &bad);
}

int Recv(ibv_qp* qp, const Env& e, uint64_t wr_id, ibv_recv_wr** bad = nullptr) {
  ibv_sge sge{reinterpret_cast<uint64_t>(e.buf) + 8192, 64, e.mr->lkey};
  ibv_recv_wr wr{}, *ignored;
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  return ibv_post_recv(qp, &wr, bad ? bad : &ignored);
}

// rdma-core's restate_qps after an error: the QPs' FLUSH_ERR completions
// are still in the CQ when they go RESET -> RTS; the traffic after it must
// poll its own completions, and other QPs' completions stay, in order.
void ResetCleansCq(const Env& e) {
  ibv_cq* cq = ibv_create_cq(e.ctx, 64, nullptr, nullptr, 0);
  if (!cq) Die("cq");
  ibv_qp *a = MakeQp(e.pd, cq), *b = MakeQp(e.pd, cq);
  ibv_qp *c = MakeQp(e.pd, cq), *d = MakeQp(e.pd, cq);
  ToRts(a, b->qp_num);
  ToRts(b, a->qp_num);
  ToRts(c, d->qp_num);
  ToRts(d, c->qp_num);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Recv(b, e, 100 + i), 0);
  // A bad rkey: REM_ACCESS_ERR at a, both QPs to ERR, b's receives flushed.
  EXPECT_EQ(Send(a, e, 1, IBV_WR_RDMA_WRITE, 0xdead00), 0);
  EXPECT_EQ(Send(a, e, 2), 0);  // flushed: a is in ERR
  // Another pair's completions in the same CQ, after a's and b's.
  EXPECT_EQ(Recv(d, e, 300), 0);
  EXPECT_EQ(Send(c, e, 200), 0);
  ToState(a, IBV_QPS_RESET);
  ToState(b, IBV_QPS_RESET);
  std::vector<ibv_wc> left = Drain(cq);
  EXPECT_EQ(left.size(), 2u);
  for (const ibv_wc& wc : left) {
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc.qp_num == c->qp_num || wc.qp_num == d->qp_num, true);
  }
  // Restated: the first completions polled are the new traffic's.
  ToRts(a, b->qp_num);
  ToRts(b, a->qp_num);
  EXPECT_EQ(Recv(b, e, 400), 0);
  EXPECT_EQ(Send(a, e, 401), 0);
  std::vector<ibv_wc> got = Drain(cq);
  EXPECT_EQ(got.size(), 2u);
  for (const ibv_wc& wc : got) {
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc.wr_id == (wc.qp_num == a->qp_num ? 401u : 400u), true);
  }
  for (ibv_qp* qp : {a, b, c, d}) ibv_destroy_qp(qp);
  ibv_destroy_cq(cq);
}

// ibv_destroy_qp cleans too (mlx5_destroy_qp calls mlx5_cq_clean).
void DestroyCleansCq(const Env& e) {
  ibv_cq* cq = ibv_create_cq(e.ctx, 64, nullptr, nullptr, 0);
  if (!cq) Die("cq");
  ibv_qp *gone = MakeQp(e.pd, cq), *stays = MakeQp(e.pd, cq);
  for (ibv_qp* qp : {gone, stays}) {
    if (ToInit(qp)) Die("INIT");
    EXPECT_EQ(Recv(qp, e, qp->qp_num), 0);
    EXPECT_EQ(Recv(qp, e, qp->qp_num), 0);
    ToState(qp, IBV_QPS_ERR);  // flushes both receives
  }
  const uint32_t stays_qpn = stays->qp_num;
  EXPECT_EQ(ibv_destroy_qp(gone), 0);
  std::vector<ibv_wc> left = Drain(cq);
  EXPECT_EQ(left.size(), 2u);
  for (const ibv_wc& wc : left) {
    EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
    EXPECT_EQ(wc.qp_num, stays_qpn);
  }
  ibv_destroy_qp(stays);
  ibv_destroy_cq(cq);
}

// A QP on an SRQ: its sends' completions go, the receive it completed from
// the SRQ stays (the SRQ WQE is consumed; docs/datapath.md).
void ResetKeepsSrqReceives(const Env& e) {
  ibv_cq* cq = ibv_create_cq(e.ctx, 64, nullptr, nullptr, 0);
  ibv_cq* peer_cq = ibv_create_cq(e.ctx, 64, nullptr, nullptr, 0);
  ibv_srq_init_attr sa{};
  sa.attr = {8, 1, 0};
  ibv_srq* srq = ibv_create_srq(e.pd, &sa);
  if (!cq || !peer_cq || !srq) Die("cq/srq");
  ibv_qp *on_srq = MakeQp(e.pd, cq, srq), *peer = MakeQp(e.pd, peer_cq);
  ToRts(on_srq, peer->qp_num);
  ToRts(peer, on_srq->qp_num);
  ibv_sge sge{reinterpret_cast<uint64_t>(e.buf) + 8192, 64, e.mr->lkey};
  ibv_recv_wr rwr{}, *bad;
  rwr.wr_id = 77;
  rwr.sg_list = &sge;
  rwr.num_sge = 1;
  EXPECT_EQ(ibv_post_srq_recv(srq, &rwr, &bad), 0);
  EXPECT_EQ(Send(peer, e, 1), 0);
  EXPECT_EQ(Recv(peer, e, 2), 0);
  EXPECT_EQ(Send(on_srq, e, 3), 0);
  ToState(on_srq, IBV_QPS_RESET);
  std::vector<ibv_wc> left = Drain(cq);
  EXPECT_EQ(left.size(), 1u);
  if (!left.empty()) {
    EXPECT_EQ(left[0].wr_id, 77u);
    EXPECT_EQ(left[0].opcode, IBV_WC_RECV);
  }
  ibv_destroy_qp(on_srq);
  ibv_destroy_qp(peer);
  ibv_destroy_srq(srq);
  ibv_destroy_cq(cq);
  ibv_destroy_cq(peer_cq);
}

// rdma-core's post_rq_state_bad_flow: RESET refuses, INIT on accepts.
void PostRecvNeedsInit(const Env& e) {
  ibv_cq* cq = ibv_create_cq(e.ctx, 16, nullptr, nullptr, 0);
  if (!cq) Die("cq");
  ibv_qp* qp = MakeQp(e.pd, cq);
  ibv_recv_wr* bad = nullptr;
  EXPECT_EQ(Recv(qp, e, 1, &bad), EINVAL);
  EXPECT_EQ(bad != nullptr && bad->wr_id == 1, true);
  EXPECT_EQ(ToInit(qp), 0);
  EXPECT_EQ(Recv(qp, e, 2), 0);
  ToState(qp, IBV_QPS_RESET);
  EXPECT_EQ(Recv(qp, e, 3), EINVAL);
  EXPECT_EQ(Drain(cq).size(), 0u);
  ibv_destroy_qp(qp);
  ibv_destroy_cq(cq);
}

// The SRQ reports what it holds (a power of two >= the asked max_wr), and
// one WQE past the reported max_wr is ENOMEM.
void SrqReportsCapacity(const Env& e) {
  ibv_srq_init_attr sa{};
  sa.attr = {100, 1, 0};
  ibv_srq* srq = ibv_create_srq(e.pd, &sa);
  if (!srq) Die("srq");
  EXPECT_EQ(sa.attr.max_wr, 128u);
  ibv_srq_attr q{};
  EXPECT_EQ(ibv_query_srq(srq, &q), 0);
  EXPECT_EQ(q.max_wr, 128u);
  ibv_sge sge{reinterpret_cast<uint64_t>(e.buf), 64, e.mr->lkey};
  ibv_recv_wr wr{}, *bad = nullptr;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  for (uint32_t i = 0; i < q.max_wr; ++i) {
    wr.wr_id = i;
    EXPECT_EQ(ibv_post_srq_recv(srq, &wr, &bad), 0);
  }
  wr.wr_id = 999;
  EXPECT_EQ(ibv_post_srq_recv(srq, &wr, &bad), ENOMEM);
  EXPECT_EQ(bad == &wr, true);
  // A resize reports the new ring's size the same way.
  ibv_srq_attr grow{};
  grow.max_wr = 200;
  EXPECT_EQ(ibv_modify_srq(srq, &grow, IBV_SRQ_MAX_WR), 0);
  EXPECT_EQ(ibv_query_srq(srq, &q), 0);
  EXPECT_EQ(q.max_wr, 256u);
  ibv_destroy_srq(srq);
}

}  // namespace

int main() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n == 0) Die("no device");
  Env e{};
  e.ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  if (!e.ctx) Die("open");
  e.pd = ibv_alloc_pd(e.ctx);
  e.buf = static_cast<char*>(aligned_alloc(4096, 16384));
  memset(e.buf, 0, 16384);
  e.mr = ibv_reg_mr(e.pd, e.buf, 16384, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!e.pd || !e.mr) Die("pd/mr");
  Run("reset_cleans_cq", ResetCleansCq, e);
  Run("destroy_cleans_cq", DestroyCleansCq, e);
  Run("reset_keeps_srq_receives", ResetKeepsSrqReceives, e);
  Run("post_recv_needs_init", PostRecvNeedsInit, e);
  Run("srq_reports_capacity", SrqReportsCapacity, e);
  ibv_dereg_mr(e.mr);
  ibv_dealloc_pd(e.pd);
  free(e.buf);
  ibv_close_device(e.ctx);
  printf("%d failure(s)\n", g_failures);
  return g_failures ? 1 : 0;
}
