// max_send_wr holds across hosts (ibv_post_send(3): ENOMEM when the send
// queue is full): an RC QP whose path leaves the host, with max_send_wr 16
// and an infinite local ACK timeout, posts 16 SENDs to a host that never
// answers; the 17th is refused with ENOMEM and *bad_wr naming it. Moved to
// ERR, the 16 complete with IBV_WC_WR_FLUSH_ERR and the queue is empty
// again: after RESET and a new connection 16 more are taken, and the 17th
// is refused again (the device's count of finished WRs and the library's
// count of posted ones agree across the reset).
//
// usage (on host A of tests/common/two_hosts.sh, under `softverbs run`):
//   wire_send_queue_full
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unanswered_peer.h"

namespace {

[[noreturn]] void Die(const char* what) {
  fprintf(stderr, "wire_send_queue_full: FAIL: %s\n", what);
  exit(1);
}

#define CHECK(cond)                           \
  do {                                        \
    if (!(cond)) Die("check failed: " #cond); \
  } while (0)

constexpr uint32_t kDepth = 16;

// Waits for an ACK forever (timeout 0): the WRs stay in the send queue.
void Connect(ibv_qp* qp) {
  CHECK(softverbs::test::ConnectToUnansweredPeer(qp, 0) == 0);
}

// Posts kDepth SENDs (each taken), then one more (refused with ENOMEM).
void FillAndOverflow(ibv_qp* qp, ibv_mr* mr, char* buf, uint64_t first_id) {
  ibv_sge sge{reinterpret_cast<uint64_t>(buf), 64, mr->lkey};
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_SEND;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  for (uint32_t i = 0; i < kDepth; ++i) {
    wr.wr_id = first_id + i;
    CHECK(ibv_post_send(qp, &wr, &bad) == 0);
  }
  wr.wr_id = first_id + kDepth;
  bad = nullptr;
  const int err = ibv_post_send(qp, &wr, &bad);
  printf("post %u of max_send_wr %u: %s\n", kDepth + 1, kDepth, strerror(err));
  CHECK(err == ENOMEM);
  CHECK(bad == &wr);
}

// Moves qp to ERR and polls the kDepth flushed completions.
void FlushAll(ibv_qp* qp, ibv_cq* cq, uint64_t first_id) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0);
  uint32_t got = 0;
  for (long spins = 0; got < kDepth && spins < 50000000; ++spins) {
    ibv_wc wc;
    const int n = ibv_poll_cq(cq, 1, &wc);
    CHECK(n >= 0);
    if (n == 0) continue;
    CHECK(wc.status == IBV_WC_WR_FLUSH_ERR);
    CHECK(wc.wr_id == first_id + got);
    got++;
  }
  printf("flushed %u\n", got);
  CHECK(got == kDepth);
}

}  // namespace

int main() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  CHECK(list && n > 0);
  ibv_context* ctx = ibv_open_device(list[0]);
  CHECK(ctx);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
  static char buf[4096];
  ibv_mr* mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
  CHECK(pd && cq && mr);
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = kDepth;
  init.cap.max_recv_wr = 1;
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(pd, &init);
  CHECK(qp);
  CHECK(init.cap.max_send_wr == kDepth);  // softverbs gives what was asked

  Connect(qp);
  FillAndOverflow(qp, mr, buf, 100);
  FlushAll(qp, cq, 100);

  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RESET;
  CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0);
  Connect(qp);
  FillAndOverflow(qp, mr, buf, 200);
  FlushAll(qp, cq, 200);

  CHECK(ibv_destroy_qp(qp) == 0);
  CHECK(ibv_dereg_mr(mr) == 0);
  CHECK(ibv_destroy_cq(cq) == 0);
  CHECK(ibv_dealloc_pd(pd) == 0);
  CHECK(ibv_close_device(ctx) == 0);
  ibv_free_device_list(list);
  printf("OK\n");
  return 0;
}
