// The lifetime rule of events that name an object (issue 9; the kernel's
// uverbs contract as libibverbs keeps it with events_reported /
// events_completed):
//   - an event read by the application carries a valid object pointer;
//   - ibv_destroy_qp / ibv_destroy_cq do not return while an event reported
//     for the object is not acknowledged (ibv_ack_async_event /
//     ibv_ack_cq_events);
//   - events not yet read when the object is destroyed are dropped.
// UCX's rc_verbs async thread crashed (element.qp == NULL) when it read an
// IBV_EVENT_QP_LAST_WQE_REACHED while ibv_destroy_qp of that QP ran.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <thread>

#include "test_env.h"

namespace softverbs::it {
namespace {

using namespace std::chrono_literals;

// Long enough for a destroy that does not wait to have returned even on a
// loaded machine; a destroy that waits never returns without the ack.
constexpr auto kDestroyWouldHaveReturned = 300ms;
constexpr auto kBound = 30s;  // every wait of this file is bounded

class EventLifetimeTest : public ContextTest {
 protected:
  void SetUp() override {
    ContextTest::SetUp();
    ibv_srq_init_attr sa{};
    sa.attr.max_wr = 16;
    sa.attr.max_sge = 1;
    srq_ = ibv_create_srq(pd_, &sa);
    ASSERT_NE(srq_, nullptr) << strerror(errno);
  }
  void TearDown() override {
    if (srq_) {
      EXPECT_EQ(ibv_destroy_srq(srq_), 0);
    }
    ContextTest::TearDown();
  }

  // An RC QP on the SRQ, in INIT.
  ibv_qp* QpOnSrq(void* qp_context = nullptr) {
    ibv_qp_init_attr init{};
    init.qp_context = qp_context;
    init.send_cq = cq_;
    init.recv_cq = cq_;
    init.srq = srq_;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = 1;
    init.cap.max_send_sge = 1;
    ibv_qp* qp = ibv_create_qp(pd_, &init);
    EXPECT_NE(qp, nullptr) << strerror(errno);
    if (qp) ToInit(qp);
    return qp;
  }

  static void ToInit(ibv_qp* qp) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    EXPECT_EQ(
        ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
        0);
  }

  // To ERR: a QP on an SRQ reports IBV_EVENT_QP_LAST_WQE_REACHED.
  static void ToErr(ibv_qp* qp) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    EXPECT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
  }

  bool AsyncEventPending(int ms) {
    pollfd p{ctx_->async_fd, POLLIN, 0};
    return poll(&p, 1, ms) == 1;
  }

  ibv_srq* srq_ = nullptr;
};

// Runs destroy() on a thread; the future says when it returned.
std::future<int> DestroyInBackground(std::function<int()> destroy) {
  return std::async(std::launch::async, std::move(destroy));
}

TEST_F(EventLifetimeTest, DestroyQpWaitsForTheAckOfAReportedEvent) {
  ibv_qp* qp = QpOnSrq();
  ASSERT_NE(qp, nullptr);
  ToErr(qp);
  ASSERT_TRUE(AsyncEventPending(5000)) << "no IBV_EVENT_QP_LAST_WQE_REACHED";
  ibv_async_event ev{};
  ASSERT_EQ(ibv_get_async_event(ctx_, &ev), 0);
  ASSERT_EQ(ev.event_type, IBV_EVENT_QP_LAST_WQE_REACHED);
  ASSERT_EQ(ev.element.qp, qp);

  std::future<int> destroyed = DestroyInBackground([qp] { return ibv_destroy_qp(qp); });
  EXPECT_EQ(destroyed.wait_for(kDestroyWouldHaveReturned), std::future_status::timeout)
      << "ibv_destroy_qp returned while a reported event was not acknowledged";
  // The QP is still whole while the destroy waits: the event's pointer is good.
  EXPECT_EQ(ev.element.qp->qp_num, qp->qp_num);
  ibv_ack_async_event(&ev);
  ASSERT_EQ(destroyed.wait_for(kBound), std::future_status::ready)
      << "ibv_destroy_qp did not return after the ack";
  EXPECT_EQ(destroyed.get(), 0);
}

TEST_F(EventLifetimeTest, UnreadQpEventIsDroppedWhenTheQpIsDestroyed) {
  ibv_qp* qp = QpOnSrq();
  ASSERT_NE(qp, nullptr);
  ToErr(qp);
  ASSERT_TRUE(AsyncEventPending(5000)) << "no IBV_EVENT_QP_LAST_WQE_REACHED";
  // Not read: the destroy has nothing to wait for and the event goes.
  std::future<int> destroyed = DestroyInBackground([qp] { return ibv_destroy_qp(qp); });
  ASSERT_EQ(destroyed.wait_for(kBound), std::future_status::ready)
      << "ibv_destroy_qp waited for an event that was never read";
  EXPECT_EQ(destroyed.get(), 0);
  EXPECT_FALSE(AsyncEventPending(200)) << "the async fd is readable for a dropped event";
  const int flags = fcntl(ctx_->async_fd, F_GETFL);
  ASSERT_EQ(fcntl(ctx_->async_fd, F_SETFL, flags | O_NONBLOCK), 0);
  ibv_async_event ev{};
  errno = 0;
  EXPECT_EQ(ibv_get_async_event(ctx_, &ev), -1) << "an event of a destroyed QP was delivered";
  EXPECT_EQ(errno, EAGAIN);
  ASSERT_EQ(fcntl(ctx_->async_fd, F_SETFL, flags), 0);

  // Events of live objects still come, behind a dropped one too.
  ibv_qp* gone = QpOnSrq();
  ibv_qp* live = QpOnSrq();
  ASSERT_NE(gone, nullptr);
  ASSERT_NE(live, nullptr);
  ToErr(gone);
  ToErr(live);
  ASSERT_TRUE(AsyncEventPending(5000));
  EXPECT_EQ(ibv_destroy_qp(gone), 0);  // its event is unread: dropped
  ASSERT_TRUE(AsyncEventPending(5000)) << "the live QP's event was lost";
  ASSERT_EQ(ibv_get_async_event(ctx_, &ev), 0);
  EXPECT_EQ(ev.event_type, IBV_EVENT_QP_LAST_WQE_REACHED);
  EXPECT_EQ(ev.element.qp, live);
  ibv_ack_async_event(&ev);
  EXPECT_EQ(ibv_destroy_qp(live), 0);
}

// What UCX does: an async thread reads and acknowledges events while the
// main thread moves QPs to ERR and destroys them at once. Every event read
// names a live QP (its qp_context is readable and is ours), and every destroy
// returns.
TEST_F(EventLifetimeTest, EventsReadWhileQpsAreDestroyedNameLiveQps) {
  constexpr int kRounds = 200;
  int tag = 0x5eed;
  const int flags = fcntl(ctx_->async_fd, F_GETFL);
  ASSERT_EQ(fcntl(ctx_->async_fd, F_SETFL, flags | O_NONBLOCK), 0);
  std::atomic<bool> stop{false};
  std::atomic<int> delivered{0}, bad{0};
  std::thread reader([&] {
    while (!stop.load()) {
      if (!AsyncEventPending(10)) continue;
      // Now and then late, so that some destroys come first and drop.
      std::this_thread::sleep_for(std::chrono::microseconds(500 * (delivered.load() % 4)));
      ibv_async_event ev{};
      if (ibv_get_async_event(ctx_, &ev) != 0) continue;  // EAGAIN: dropped meanwhile
      if (ev.event_type != IBV_EVENT_QP_LAST_WQE_REACHED || ev.element.qp == nullptr ||
          ev.element.qp->qp_context != &tag) {
        bad++;
      }
      delivered++;
      ibv_ack_async_event(&ev);
    }
  });
  for (int i = 0; i < kRounds; ++i) {
    ibv_qp* qp = QpOnSrq(&tag);
    if (!qp) break;
    ToErr(qp);
    if (i % 2) std::this_thread::yield();
    EXPECT_EQ(ibv_destroy_qp(qp), 0);
  }
  stop = true;
  reader.join();
  ASSERT_EQ(fcntl(ctx_->async_fd, F_SETFL, flags), 0);
  EXPECT_EQ(bad.load(), 0) << "events with a NULL or foreign QP pointer";
  EXPECT_LE(delivered.load(), kRounds);
  std::printf("%d of %d LAST_WQE_REACHED events were read before their QP was destroyed\n",
              delivered.load(), kRounds);
}

// Completion channels: a CQ event handed out by ibv_get_cq_event holds
// ibv_destroy_cq until ibv_ack_cq_events; an unread one is dropped.
class CompChannelLifetimeTest : public ContextTest {
 protected:
  void SetUp() override {
    ContextTest::SetUp();
    channel_ = ibv_create_comp_channel(ctx_);
    ASSERT_NE(channel_, nullptr) << strerror(errno);
  }
  void TearDown() override {
    if (channel_) {
      EXPECT_EQ(ibv_destroy_comp_channel(channel_), 0);
    }
    ContextTest::TearDown();
  }

  // A CQ on the channel with one completion event raised: a receive flushed
  // by a QP in ERR, with the CQ armed.
  ibv_cq* CqWithOneEvent() {
    ibv_cq* cq = ibv_create_cq(ctx_, 4, nullptr, channel_, 0);
    EXPECT_NE(cq, nullptr) << strerror(errno);
    if (!cq) return nullptr;
    ibv_qp_init_attr init{};
    init.send_cq = cq;
    init.recv_cq = cq;
    init.qp_type = IBV_QPT_RC;
    init.cap = {1, 1, 1, 1, 0};
    ibv_qp* qp = ibv_create_qp(pd_, &init);
    EXPECT_NE(qp, nullptr) << strerror(errno);
    if (!qp) return cq;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    EXPECT_EQ(
        ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
        0);
    a.qp_state = IBV_QPS_ERR;
    EXPECT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
    EXPECT_EQ(ibv_req_notify_cq(cq, 0), 0);
    static char buf[8];
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf), sizeof(buf), 0};
    ibv_recv_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    EXPECT_EQ(ibv_post_recv(qp, &wr, &bad), 0);  // flushed at once: one event
    ibv_wc wc{};
    int n = 0;
    for (int i = 0; i < 1000 && n == 0; ++i) n = ibv_poll_cq(cq, 1, &wc);
    EXPECT_EQ(n, 1);
    EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
    EXPECT_EQ(ibv_destroy_qp(qp), 0);
    return cq;
  }

  bool ChannelReadable(int ms) {
    pollfd p{channel_->fd, POLLIN, 0};
    return poll(&p, 1, ms) == 1;
  }

  ibv_comp_channel* channel_ = nullptr;
};

TEST_F(CompChannelLifetimeTest, DestroyCqWaitsForTheAckOfAReportedEvent) {
  ibv_cq* cq = CqWithOneEvent();
  ASSERT_NE(cq, nullptr);
  ASSERT_TRUE(ChannelReadable(5000)) << "no completion event";
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  ASSERT_EQ(ibv_get_cq_event(channel_, &ev_cq, &ev_ctx), 0);
  ASSERT_EQ(ev_cq, cq);
  std::future<int> destroyed = DestroyInBackground([cq] { return ibv_destroy_cq(cq); });
  EXPECT_EQ(destroyed.wait_for(kDestroyWouldHaveReturned), std::future_status::timeout)
      << "ibv_destroy_cq returned while a completion event was not acknowledged";
  ibv_ack_cq_events(ev_cq, 1);
  ASSERT_EQ(destroyed.wait_for(kBound), std::future_status::ready)
      << "ibv_destroy_cq did not return after ibv_ack_cq_events";
  EXPECT_EQ(destroyed.get(), 0);
}

TEST_F(CompChannelLifetimeTest, UnreadCompletionEventIsDroppedWhenTheCqIsDestroyed) {
  ibv_cq* cq = CqWithOneEvent();
  ASSERT_NE(cq, nullptr);
  ASSERT_TRUE(ChannelReadable(5000)) << "no completion event";
  std::future<int> destroyed = DestroyInBackground([cq] { return ibv_destroy_cq(cq); });
  ASSERT_EQ(destroyed.wait_for(kBound), std::future_status::ready)
      << "ibv_destroy_cq waited for an event that was never read";
  EXPECT_EQ(destroyed.get(), 0);
  const int flags = fcntl(channel_->fd, F_GETFL);
  ASSERT_EQ(fcntl(channel_->fd, F_SETFL, flags | O_NONBLOCK), 0);
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  errno = 0;
  EXPECT_EQ(ibv_get_cq_event(channel_, &ev_cq, &ev_ctx), -1)
      << "an event of a destroyed CQ was delivered";
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_EQ(ev_cq, nullptr);
  ASSERT_EQ(fcntl(channel_->fd, F_SETFL, flags), 0);
}

}  // namespace
}  // namespace softverbs::it
