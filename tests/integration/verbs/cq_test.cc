// Completion queues and completion channels: limits, flags, resize, the
// channel fd with poll/epoll, notification and the async fd.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "test_env.h"

namespace softverbs::it {
namespace {

class CqTest : public ContextTest {
 protected:
  ibv_device_attr dev_{};
  void SetUp() override {
    ContextTest::SetUp();
    ASSERT_EQ(ibv_query_device(ctx_, &dev_), 0);
  }
  void ExpectCreateFails(int cqe, int comp_vector, int err) {
    size_t before = MyObjectCount("cq");
    errno = 0;
    ibv_cq* cq = ibv_create_cq(ctx_, cqe, nullptr, nullptr, comp_vector);
    EXPECT_EQ(cq, nullptr) << "cqe " << cqe << " vector " << comp_vector;
    EXPECT_EQ(errno, err);
    if (cq) ibv_destroy_cq(cq);
    EXPECT_EQ(MyObjectCount("cq"), before);
  }
  // An RC QP whose send and receive CQ is cq, connected to itself (init
  // is what it was made with); nullptr if either step failed.
  ibv_qp* SelfConnectedRc(ibv_cq_ex* cq, ibv_qp_init_attr* init) {
    *init = {};
    init->send_cq = init->recv_cq = ibv_cq_ex_to_cq(cq);
    init->qp_type = IBV_QPT_RC;
    init->cap = {4, 4, 1, 1, 64};
    init->sq_sig_all = 1;
    ibv_qp* qp = ibv_create_qp(pd_, init);
    if (qp && !ConnectRc(ctx_, qp, qp->qp_num)) {
      ibv_destroy_qp(qp);
      return nullptr;
    }
    return qp;
  }
  // One inline 8-byte SEND from qp to itself into *sink, whose receive is
  // posted first: a send and a receive completion follow. Returns sink's
  // MR, or nullptr if a step failed.
  ibv_mr* SendOneToSelf(ibv_qp* qp, uint64_t* sink) {
    ibv_mr* mr = ibv_reg_mr(pd_, sink, sizeof(*sink), IBV_ACCESS_LOCAL_WRITE);
    if (!mr) return nullptr;
    ibv_sge rsge{reinterpret_cast<uint64_t>(sink), sizeof(*sink), mr->lkey};
    ibv_recv_wr rwr{};
    rwr.sg_list = &rsge;
    rwr.num_sge = 1;
    ibv_recv_wr* rbad = nullptr;
    uint64_t word = 42;
    ibv_sge sge{reinterpret_cast<uint64_t>(&word), sizeof(word), 0};
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_INLINE;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_send_wr* bad = nullptr;
    if (ibv_post_recv(qp, &rwr, &rbad) != 0 || ibv_post_send(qp, &wr, &bad) != 0) {
      ibv_dereg_mr(mr);
      return nullptr;
    }
    return mr;
  }
};

TEST_F(CqTest, CreateReturnsAtLeastTheAskedSize) {
  void* cookie = &dev_;
  ibv_cq* cq = ibv_create_cq(ctx_, 100, cookie, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  EXPECT_GE(cq->cqe, 100);
  EXPECT_EQ(cq->cq_context, cookie);
  EXPECT_EQ(cq->context, ctx_);
  EXPECT_EQ(MyObjectCount("cq"), 2u);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(MyObjectCount("cq"), 1u);
}

// The size is the next power of two above cqe, minus one, as mlx5 and rxe
// give (a program sizing its polling by cq->cqe sees the same number).
TEST_F(CqTest, SizeIsRoundedAsMlx5AndRxe) {
  for (const auto& [asked, got] : {std::pair{1, 1}, {2, 3}, {16, 31}, {31, 31}, {32, 63}}) {
    ibv_cq* cq = ibv_create_cq(ctx_, asked, nullptr, nullptr, 0);
    ASSERT_NE(cq, nullptr) << asked;
    EXPECT_EQ(cq->cqe, got) << "ibv_create_cq(" << asked << ")";
    ASSERT_EQ(ibv_resize_cq(cq, 100), 0);
    EXPECT_EQ(cq->cqe, 127);
    EXPECT_EQ(ibv_resize_cq(cq, 127), 0);  // the same size: nothing to do
    EXPECT_EQ(cq->cqe, 127);
    EXPECT_EQ(ibv_destroy_cq(cq), 0);
  }
  ibv_cq* max = ibv_create_cq(ctx_, dev_.max_cqe, nullptr, nullptr, 0);
  ASSERT_NE(max, nullptr);
  EXPECT_EQ(max->cqe, dev_.max_cqe);  // max_cqe is 2^20 - 1: itself
  EXPECT_EQ(ibv_destroy_cq(max), 0);
}

TEST_F(CqTest, MaxCqeIsEnforced) {
  ibv_cq* cq = ibv_create_cq(ctx_, dev_.max_cqe, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr) << "max_cqe itself must work: " << strerror(errno);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  ExpectCreateFails(dev_.max_cqe + 1, 0, EINVAL);
  ExpectCreateFails(0, 0, EINVAL);
  ExpectCreateFails(-1, 0, EINVAL);
}

TEST_F(CqTest, CompVectorMustBeBelowNumCompVectors) {
  ExpectCreateFails(8, ctx_->num_comp_vectors, EINVAL);
  ExpectCreateFails(8, -1, EINVAL);
}

TEST_F(CqTest, CreateCqEx) {
  ibv_cq_init_attr_ex attr{};
  attr.cqe = 32;
  attr.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM;
  ibv_cq_ex* cq = ibv_create_cq_ex(ctx_, &attr);
  ASSERT_NE(cq, nullptr) << strerror(errno);
  EXPECT_GE(cq->cqe, 32);
  EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
}

TEST_F(CqTest, CreateCqExRejectsUnsupportedWcFlagsAndCompMask) {
  size_t before = MyObjectCount("cq");
  ibv_cq_init_attr_ex attr{};
  attr.cqe = 32;
  attr.wc_flags = IBV_WC_EX_WITH_FLOW_TAG;  // no flow steering on softverbs
  errno = 0;
  EXPECT_EQ(ibv_create_cq_ex(ctx_, &attr), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  attr.wc_flags = 0;
  attr.comp_mask = 1u << 20;
  errno = 0;
  EXPECT_EQ(ibv_create_cq_ex(ctx_, &attr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  attr.comp_mask = 0;
  attr.cqe = dev_.max_cqe + 1;
  errno = 0;
  EXPECT_EQ(ibv_create_cq_ex(ctx_, &attr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(MyObjectCount("cq"), before);
}

// Completion timestamps count the device clock (hca_core_clock, 1 GHz), the
// clock ibv_query_rt_values_ex reads; the wall-clock variant is near now.
TEST_F(CqTest, CompletionTimestamps) {
  ibv_device_attr_ex dev{};
  ASSERT_EQ(ibv_query_device_ex(ctx_, nullptr, &dev), 0);
  EXPECT_EQ(dev.hca_core_clock, 1000000u) << "kHz";
  EXPECT_EQ(dev.completion_timestamp_mask, UINT64_MAX);
  ibv_cq_init_attr_ex attr{};
  attr.cqe = 8;
  attr.wc_flags = static_cast<uint64_t>(IBV_WC_STANDARD_FLAGS) |
                  IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
                  IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
  ibv_cq_ex* cq = ibv_create_cq_ex(ctx_, &attr);
  ASSERT_NE(cq, nullptr) << strerror(errno);
  ibv_qp_init_attr init;
  ibv_qp* qp = SelfConnectedRc(cq, &init);
  ASSERT_NE(qp, nullptr) << "an RC QP connected to itself";

  ibv_values_ex before{IBV_VALUES_MASK_RAW_CLOCK, {}};
  ASSERT_EQ(ibv_query_rt_values_ex(ctx_, &before), 0);
  EXPECT_EQ(before.comp_mask, static_cast<uint32_t>(IBV_VALUES_MASK_RAW_CLOCK));
  timespec wall_before;
  clock_gettime(CLOCK_REALTIME, &wall_before);
  uint64_t sink = 0;
  ibv_mr* mr = SendOneToSelf(qp, &sink);
  ASSERT_NE(mr, nullptr) << "a receive and a SEND posted";

  std::vector<uint64_t> stamps, walls;
  ibv_poll_cq_attr pa{};
  for (int spins = 0; stamps.size() < 2 && spins < 20000000; ++spins) {
    if (ibv_start_poll(cq, &pa) != 0) continue;
    do {
      EXPECT_EQ(cq->status, IBV_WC_SUCCESS);
      stamps.push_back(ibv_wc_read_completion_ts(cq));
      walls.push_back(ibv_wc_read_completion_wallclock_ns(cq));
    } while (ibv_next_poll(cq) == 0);
    ibv_end_poll(cq);
  }
  ASSERT_EQ(stamps.size(), 2u) << "the send and the receive completion";
  ibv_values_ex after{IBV_VALUES_MASK_RAW_CLOCK, {}};
  ASSERT_EQ(ibv_query_rt_values_ex(ctx_, &after), 0);
  const auto clock_of = [](const ibv_values_ex& v) {
    return static_cast<uint64_t>(v.raw_clock.tv_sec) * 1000000000ull +
           static_cast<uint64_t>(v.raw_clock.tv_nsec);
  };
  const uint64_t wall_start = static_cast<uint64_t>(wall_before.tv_sec) * 1000000000ull +
                              static_cast<uint64_t>(wall_before.tv_nsec);
  for (size_t i = 0; i < stamps.size(); ++i) {
    EXPECT_GE(stamps[i], clock_of(before)) << i;
    EXPECT_LE(stamps[i], clock_of(after)) << i;
    // Within a minute of the wall clock before the send (a loaded CI host).
    EXPECT_GE(walls[i] + 1000000, wall_start) << i;
    EXPECT_LT(walls[i], wall_start + 60000000000ull) << i;
  }
  ibv_values_ex bad_mask{1u << 7, {}};
  EXPECT_EQ(ibv_query_rt_values_ex(ctx_, &bad_mask), EINVAL);

  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
}

TEST_F(CqTest, ResizeWithinLimitsOnly) {
  const int size = cq_->cqe;
  EXPECT_EQ(ibv_resize_cq(cq_, dev_.max_cqe + 1), EINVAL);
  EXPECT_EQ(ibv_resize_cq(cq_, 0), EINVAL);
  EXPECT_EQ(cq_->cqe, size);
  auto mine = MyClients();
  ASSERT_EQ(mine.size(), 1u);
  EXPECT_EQ(mine[0]["cq"][0]["cqe"].get<int>(), size) << "daemon's view unchanged";
  // Growing far beyond the ring made at creation, shrinking, and max_cqe.
  ASSERT_EQ(ibv_resize_cq(cq_, 256), 0);
  EXPECT_GE(cq_->cqe, 256);
  ASSERT_EQ(ibv_resize_cq(cq_, dev_.max_cqe), 0);
  EXPECT_GE(cq_->cqe, dev_.max_cqe);
  ASSERT_EQ(ibv_resize_cq(cq_, 1), 0);
  EXPECT_EQ(cq_->cqe, 1);
  mine = MyClients();
  EXPECT_EQ(mine[0]["cq"][0]["cqe"].get<int>(), cq_->cqe) << "daemon's view follows";
}

TEST_F(CqTest, DestroyIsBusyWhileAQpUsesIt) {
  ibv_cq* cq = ibv_create_cq(ctx_, 8, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = cq;
  init.cap = {1, 1, 1, 1, 0};
  init.qp_type = IBV_QPT_UD;
  ibv_qp* qp = ibv_create_qp(pd_, &init);
  ASSERT_NE(qp, nullptr);
  EXPECT_EQ(ibv_destroy_cq(cq), EBUSY);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
}

// A QP made while its receive CQ is being read with the extended poll API
// (between ibv_start_poll and ibv_end_poll, in the same thread): the QP's
// receive queue joins the CQ's list without the CQ's consumer lock, which
// the poll holds (it waited for that lock for ever).
TEST_F(CqTest, AQpCanBeCreatedWhileItsCqIsBeingPolled) {
  ibv_cq_init_attr_ex attr{};
  attr.cqe = 8;
  attr.wc_flags = IBV_WC_STANDARD_FLAGS;
  ibv_cq_ex* cq = ibv_create_cq_ex(ctx_, &attr);
  ASSERT_NE(cq, nullptr) << strerror(errno);
  ibv_qp_init_attr init;
  ibv_qp* qp = SelfConnectedRc(cq, &init);
  ASSERT_NE(qp, nullptr) << "an RC QP connected to itself";
  uint64_t sink = 0;
  ibv_mr* mr = SendOneToSelf(qp, &sink);
  ASSERT_NE(mr, nullptr) << "a receive and a SEND posted";
  ibv_poll_cq_attr pa{};
  int started = ENOENT;
  for (int spins = 0; started == ENOENT && spins < 20000000; ++spins)
    started = ibv_start_poll(cq, &pa);
  ibv_qp* second = nullptr;
  if (started == 0) {
    second = ibv_create_qp(pd_, &init);
    ibv_end_poll(cq);
  }
  ASSERT_EQ(started, 0) << "no completion came";
  ASSERT_NE(second, nullptr) << strerror(errno);
  EXPECT_EQ(ibv_destroy_qp(second), 0);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
}

TEST_F(CqTest, CompChannelFdWorksWithPollAndEpoll) {
  ibv_comp_channel* ch = ibv_create_comp_channel(ctx_);
  ASSERT_NE(ch, nullptr);
  ibv_cq* cq = ibv_create_cq(ctx_, 8, nullptr, ch, 0);
  ASSERT_NE(cq, nullptr);
  EXPECT_EQ(cq->channel, ch);
  EXPECT_EQ(ibv_req_notify_cq(cq, 0), 0);
  EXPECT_EQ(ibv_req_notify_cq(cq, 1), 0);
  // Nothing completed: the fd is pollable and not readable.
  pollfd p{ch->fd, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 0), 0);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  ASSERT_GE(ep, 0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, ch->fd, &ev), 0);
  EXPECT_EQ(epoll_wait(ep, &ev, 1, 0), 0);
  close(ep);
  // Non-blocking get_cq_event on an idle channel: EAGAIN, as on uverbs.
  int flags = fcntl(ch->fd, F_GETFL);
  ASSERT_EQ(fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK), 0);
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  errno = 0;
  EXPECT_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), -1);
  EXPECT_EQ(errno, EAGAIN);
  // Destroying the channel while a CQ uses it: EBUSY, and it still works.
  EXPECT_EQ(ibv_destroy_comp_channel(ch), EBUSY);
  EXPECT_EQ(poll(&p, 1, 0), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
}

// ibv_modify_cq moderation: with cq_count 4 and cq_period 4095 us an armed
// CQ's event waits for the fourth completion, or for the period after the
// first; bad attributes are EINVAL and change nothing.
TEST_F(CqTest, ModerationHoldsTheEventForCountOrPeriod) {
  ibv_device_attr_ex dev{};
  ASSERT_EQ(ibv_query_device_ex(ctx_, nullptr, &dev), 0);
  EXPECT_EQ(dev.cq_mod_caps.max_cq_count, 0xffff);
  EXPECT_EQ(dev.cq_mod_caps.max_cq_period, 0xfff);
  ibv_comp_channel* ch = ibv_create_comp_channel(ctx_);
  ASSERT_NE(ch, nullptr);
  ibv_cq* cq = ibv_create_cq(ctx_, 64, nullptr, ch, 0);
  ASSERT_NE(cq, nullptr);
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap = {16, 1, 1, 1, 0};
  init.sq_sig_all = 1;
  ibv_qp* qp = ibv_create_qp(pd_, &init);
  ASSERT_NE(qp, nullptr);
  ASSERT_TRUE(ConnectRc(ctx_, qp, qp->qp_num));
  uint64_t target = 0, source = 7;
  ibv_mr* mr =
      ibv_reg_mr(pd_, &target, sizeof(target), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ASSERT_NE(mr, nullptr);
  auto post_writes = [&](int n) {
    for (int i = 0; i < n; ++i) {
      ibv_sge sge{reinterpret_cast<uint64_t>(&source), sizeof(source), 0};
      ibv_send_wr wr{};
      ibv_send_wr* bad = nullptr;
      wr.opcode = IBV_WR_RDMA_WRITE;
      wr.send_flags = IBV_SEND_INLINE;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(&target);
      wr.wr.rdma.rkey = mr->rkey;
      ASSERT_EQ(ibv_post_send(qp, &wr, &bad), 0);
    }
  };
  auto now_us = [] {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000ll + t.tv_nsec / 1000;
  };
  // Arms, posts n writes, waits for the event (bounded) and drains the CQ;
  // returns the microseconds from before the first post to the event, or -1.
  auto event_after = [&](int n) -> long long {
    EXPECT_EQ(ibv_req_notify_cq(cq, 0), 0);
    const long long t0 = now_us();
    post_writes(n);
    pollfd p{ch->fd, POLLIN, 0};
    if (poll(&p, 1, 5000) != 1) return -1;
    const long long elapsed = now_us() - t0;
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    EXPECT_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0);
    ibv_ack_cq_events(cq, 1);
    ibv_wc wc[16];
    int drained = 0;
    for (int spins = 0; drained < n && spins < 1000000; ++spins) {
      int got = ibv_poll_cq(cq, 16, wc);
      for (int i = 0; i < got; ++i) EXPECT_EQ(wc[i].status, IBV_WC_SUCCESS);
      drained += got;
    }
    EXPECT_EQ(drained, n);
    return elapsed;
  };

  ibv_modify_cq_attr attr{};
  EXPECT_EQ(ibv_modify_cq(cq, &attr), EINVAL) << "attr_mask 0";
  attr.attr_mask = 1u << 1;
  EXPECT_EQ(ibv_modify_cq(cq, &attr), EINVAL) << "unknown attr_mask bit";
  attr.attr_mask = IBV_CQ_ATTR_MODERATE;
  attr.moderate = {4, 4096};
  EXPECT_EQ(ibv_modify_cq(cq, &attr), EINVAL) << "cq_period above max_cq_period";
  EXPECT_GE(event_after(1), 0) << "refused modifies left the CQ unmoderated";

  attr.moderate = {4, 4095};
  ASSERT_EQ(ibv_modify_cq(cq, &attr), 0);
  // One completion: the event waits for the period (it never comes earlier).
  const long long one = event_after(1);
  ASSERT_GE(one, 0) << "the period's timer raised the event";
  EXPECT_GE(one, 4095) << "the event came before cq_period ran out";
  // Four completions: the event is due at the fourth. The period would raise
  // it too, so one round must be faster than the period; a loaded machine
  // may make many slow (each round is bounded by the 4 ms period).
  long long fastest = -1;
  for (int round = 0; round < 50 && (fastest < 0 || fastest >= 4095); ++round) {
    const long long four = event_after(4);
    ASSERT_GE(four, 0);
    fastest = fastest < 0 ? four : std::min(fastest, four);
  }
  EXPECT_LT(fastest, 4095) << "cq_count completions raised the event";
  // cq_count 0 turns moderation off.
  attr.moderate = {0, 4095};
  ASSERT_EQ(ibv_modify_cq(cq, &attr), 0);
  long long off = -1;
  for (int round = 0; round < 50 && (off < 0 || off >= 4095); ++round) off = event_after(1);
  EXPECT_GE(off, 0);
  EXPECT_LT(off, 4095) << "unmoderated: the first completion raises the event";

  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
}

TEST_F(CqTest, AsyncFdIsPollable) {
  pollfd p{ctx_->async_fd, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 0), 0) << "no event yet";
  EXPECT_EQ(p.revents & (POLLERR | POLLNVAL), 0);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  EXPECT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, ctx_->async_fd, &ev), 0);
  EXPECT_EQ(epoll_wait(ep, &ev, 1, 0), 0);
  close(ep);
}

}  // namespace
}  // namespace softverbs::it
