// Bad input on the network doorbell (docs/roce.md, "The network transport"):
// a client that writes malformed records into its doorbell ring - a
// nonzero reserved field, for a QP it does not own, too many SGEs, an
// unknown opcode, inline data longer than the device allows - gets nothing
// done for them, and the device goes on: it counts each in `softverbs
// status` (roce.bad_posts), answers verbs, and a well-formed post on the
// same doorbell still goes through. A ring whose count claims more posts
// than it has slots is closed (counted too), and the device still answers.
//
// usage (on host A of tests/common/two_hosts.sh, under `softverbs run`):
//   wire_bad_posts SOFTVERBS_CLI
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <atomic>
#include <mutex>
#include <string>

#include "abi/ibverbs/provider.h"
#include "datapath/wire_post.h"
#include "unanswered_peer.h"

namespace {

[[noreturn]] void Die(const char* what) {
  fprintf(stderr, "wire_bad_posts: FAIL: %s\n", what);
  exit(1);
}

#define CHECK(cond)                           \
  do {                                        \
    if (!(cond)) Die("check failed: " #cond); \
  } while (0)

long BadPosts(const char* cli) {
  std::string cmd = std::string(cli) +
                    " status --json | python3 -c 'import json,sys; "
                    "print(json.load(sys.stdin)[\"roce\"][\"bad_posts\"])'";
  FILE* p = popen(cmd.c_str(), "r");
  CHECK(p);
  long n = -1;
  if (fscanf(p, "%ld", &n) != 1) n = -1;
  pclose(p);
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) Die("usage: wire_bad_posts SOFTVERBS_CLI");
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
  init.cap.max_send_wr = init.cap.max_recv_wr = 16;
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(pd, &init);
  CHECK(qp);
  // The path leaves the host, so posts go through the doorbell.
  CHECK(softverbs::test::ConnectToUnansweredPeer(qp, /*timeout=*/1) == 0);
  ibv_sge sge{reinterpret_cast<uint64_t>(buf), 64, mr->lkey};
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_SEND;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_send_wr* bad = nullptr;
  CHECK(ibv_post_send(qp, &wr, &bad) == 0);  // opens the doorbell
  const int fd = softverbs::provider::Context::From(ctx)->wire_fd.load();
  CHECK(fd >= 0);
  CHECK(BadPosts(argv[1]) == 0);

  using softverbs::datapath::WirePostRecord;
  softverbs::provider::Context* sv = softverbs::provider::Context::From(ctx);
  CHECK(sv->wire_ring);
  // What PostToWire does, with a record of our own.
  auto post_record = [&](const WirePostRecord& rec) {
    std::lock_guard lock(sv->wire_mutex);
    softverbs::datapath::WirePostRing& ring = *sv->wire_ring;
    const uint32_t p = sv->wire_produced;
    ring.slots[p % softverbs::datapath::kWirePostRingSlots] = rec;
    sv->wire_produced = p + 1;
    ring.produced.store(p + 1, std::memory_order_release);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (ring.device_asleep.exchange(0) != 0) CHECK(send(fd, "k", 1, MSG_NOSIGNAL) == 1);
  };
  WirePostRecord good{};
  good.qpn = qp->qp_num;
  good.wr.opcode = IBV_WR_SEND;
  WirePostRecord r = good;
  r.reserved = 7;
  post_record(r);
  r = good;
  r.qpn = 0xabcdef;  // not this client's QP
  post_record(r);
  r = good;
  r.wr.num_sge = 1000;
  post_record(r);
  r = good;
  r.wr.opcode = 99;
  post_record(r);
  r = good;
  r.wr.send_flags = IBV_SEND_INLINE;
  r.wr.inline_len = 100000;
  post_record(r);

  // The device took them all, refused them all, and goes on.
  long refused = -1;
  for (int i = 0; i < 100 && refused != 5; ++i) refused = BadPosts(argv[1]);
  printf("bad_posts = %ld\n", refused);
  CHECK(refused == 5);
  ibv_device_attr attr;
  CHECK(ibv_query_device(ctx, &attr) == 0);
  CHECK(ibv_post_send(qp, &wr, &bad) == 0);
  CHECK(BadPosts(argv[1]) == 5);

  // A count far ahead of what the ring can hold: the device closes this
  // doorbell, counts it, and still answers.
  {
    std::lock_guard lock(sv->wire_mutex);
    sv->wire_ring->produced.fetch_add(softverbs::datapath::kWirePostRingSlots + 1);
    send(fd, "k", 1, MSG_NOSIGNAL);
  }
  refused = -1;
  for (int i = 0; i < 100 && refused != 6; ++i) refused = BadPosts(argv[1]);
  printf("bad_posts after the broken ring = %ld\n", refused);
  CHECK(refused == 6);
  CHECK(ibv_query_device(ctx, &attr) == 0);
  ibv_destroy_qp(qp);
  ibv_dereg_mr(mr);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  printf("OK\n");
  return 0;
}
