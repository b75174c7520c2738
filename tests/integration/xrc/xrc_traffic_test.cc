// XRC traffic with the rdma-core API across processes: one process creates
// the receive QP, another holds the XRC SRQs (and a handle of the QP) in the
// same domain, reached through one file; the sender (this process) names an
// SRQ in every message. Checks that each message lands on the SRQ and CQ it
// named, the error of an SRQ number that does not exist or is of another
// domain (status, sender QP state, receive QP state and events at every
// handle), RDMA under the SRQ's PD, and the receive QP outliving its creator.
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <string.h>

#include <string>

#include "process_helpers.h"
#include "xrc_fixture.h"

namespace softverbs::it {
namespace {

constexpr int kMessages = 8;
constexpr uint32_t kMsgBytes = 64;
constexpr uint32_t kNoSuchSrq = 0xfffff0;
constexpr uint32_t kVendorXrcSrq = 0x206;  // datapath::kVendorXrcSrq

// Text of message i addressed to SRQ `which` (1 or 2).
std::string Payload(int which, int i) {
  return "to srq" + std::to_string(which) + " #" + std::to_string(i);
}

// Parent side of a child: a pipe each way.
struct Peer {
  Pipe to;
  Pipe from;
};

// Child A: creates the receive QP in the file's domain, brings it to RTR
// towards the sender and waits for `events` async events on its handle.
int RunCreator(const std::string& file, Peer& p, ibv_event_type event, bool exit_early) {
  ibv_context* ctx = OpenSoftverbs();
  CHILD_CHECK(ctx, 10);
  ibv_xrcd* xrcd = OpenXrcd(ctx, file, O_CREAT);
  CHILD_CHECK(xrcd, 11);
  ibv_qp* qp = CreateRecvQp(ctx, xrcd);
  CHILD_CHECK(qp, 12);
  p.from.Send(qp->qp_num);
  CHILD_CHECK(ReceiveToRtr(qp, p.to.Receive()) == 0, 13);
  p.from.Send(1);            // ready
  if (exit_early) return 0;  // exit without destroying: the daemon drops the handle
  ibv_async_event ev{};
  CHILD_CHECK(NextAsyncEvent(ctx, &ev), 14);
  CHILD_CHECK(ev.event_type == event, 15);
  CHILD_CHECK(ev.element.qp == qp, 16);
  p.from.Send(QueryState(qp));
  p.to.Receive();  // done
  return 0;
}

// Child B: attaches to the domain, makes SRQ 1 and 2 (own CQs), opens a
// handle of the receive QP and reports both SRQ numbers.
struct Holder {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq[2] = {};
  ibv_srq* srq[2] = {};
  ibv_qp* qp = nullptr;
  Buffer buf;
};

int SetUpHolder(const std::string& file, uint32_t qpn, Holder* h) {
  h->ctx = OpenSoftverbs();
  CHILD_CHECK(h->ctx, 20);
  h->pd = ibv_alloc_pd(h->ctx);
  ibv_xrcd* xrcd = OpenXrcd(h->ctx, file, 0);  // attach: the creator made it
  CHILD_CHECK(xrcd, 21);
  h->buf = RegisterBuffer(h->pd, 2 * kMessages * kMsgBytes);
  CHILD_CHECK(h->buf.mr, 22);
  for (int s = 0; s < 2; ++s) {
    h->cq[s] = ibv_create_cq(h->ctx, 64, nullptr, nullptr, 0);
    h->srq[s] = CreateXrcSrq(h->ctx, h->pd, xrcd, h->cq[s]);
    CHILD_CHECK(h->srq[s], 23);
    for (int i = 0; i < kMessages; ++i) {
      const size_t slot = (s * kMessages + i) * kMsgBytes;
      CHILD_CHECK(PostSrqReceive(h->srq[s], h->buf, slot, kMsgBytes, slot) == 0, 24);
    }
  }
  ibv_qp_open_attr oa{};
  oa.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
  oa.qp_num = qpn;
  oa.xrcd = xrcd;
  oa.qp_type = IBV_QPT_XRC_RECV;
  h->qp = ibv_open_qp(h->ctx, &oa);
  CHILD_CHECK(h->qp, 25);
  return 0;
}

// Each of `count` completions on SRQ s's CQ is a message addressed to it.
int ExpectMessages(Holder& h, int s, int first, int count, uint32_t qpn) {
  for (int i = first; i < first + count; ++i) {
    ibv_wc wc{};
    CHILD_CHECK(PollOne(h.cq[s], &wc), 30);
    CHILD_CHECK(wc.status == IBV_WC_SUCCESS, 31);
    CHILD_CHECK(wc.opcode == IBV_WC_RECV, 32);
    CHILD_CHECK(wc.qp_num == qpn, 33);
    const std::string want = Payload(s + 1, i);
    CHILD_CHECK(wc.byte_len == want.size() + 1, 34);
    CHILD_CHECK(strcmp(h.buf.data + wc.wr_id, want.c_str()) == 0, 35);
  }
  return 0;
}

// The sender: this process.
struct Sender {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  Buffer buf;
  void Open(bool with_wr_api) {
    ctx = OpenSoftverbs();
    ASSERT_NE(ctx, nullptr);
    pd = ibv_alloc_pd(ctx);
    cq = ibv_create_cq(ctx, 128, nullptr, nullptr, 0);
    qp = CreateSendQp(ctx, pd, cq, with_wr_api);
    ASSERT_NE(qp, nullptr) << strerror(errno);
    buf = RegisterBuffer(pd, 2 * kMessages * kMsgBytes);
  }
  // Message i to SRQ `which` through ibv_post_send.
  int Send(int which, int i, uint32_t srqn) {
    const size_t slot = ((which - 1) * kMessages + i) * kMsgBytes;
    const std::string text = Payload(which, i);
    memcpy(buf.data + slot, text.c_str(), text.size() + 1);
    return PostXrcSend(qp, buf, slot, text.size() + 1, srqn, slot);
  }
  ~Sender() {
    if (ctx) ibv_close_device(ctx);
  }
};

TEST(XrcTraffic, EachMessageLandsOnTheSrqAndCqItNames) {
  DomainFile file;
  Peer a, b;
  pid_t creator =
      Spawn([&] { return RunCreator(file.path(), a, IBV_EVENT_COMM_EST, /*exit_early=*/false); });
  const uint32_t rqpn = a.from.Receive();
  pid_t holder = Spawn([&] {
    Holder h;
    if (int rc = SetUpHolder(file.path(), rqpn, &h)) return rc;
    b.from.Send(SrqNumber(h.srq[0]));
    b.from.Send(SrqNumber(h.srq[1]));
    b.to.Receive();  // sent
    if (int rc = ExpectMessages(h, 0, 0, kMessages, rqpn)) return rc;
    if (int rc = ExpectMessages(h, 1, 0, kMessages, rqpn)) return rc;
    CHILD_CHECK(StaysEmpty(h.cq[0], 50) && StaysEmpty(h.cq[1], 50), 40);
    // COMM_EST reached this handle too, not only the creator's.
    ibv_async_event ev{};
    CHILD_CHECK(NextAsyncEvent(h.ctx, &ev), 41);
    CHILD_CHECK(ev.event_type == IBV_EVENT_COMM_EST && ev.element.qp == h.qp, 42);
    return 0;
  });
  const uint32_t srqn1 = b.from.Receive();
  const uint32_t srqn2 = b.from.Receive();
  ASSERT_NE(srqn1, 0u);
  ASSERT_NE(srqn1, srqn2);

  Sender s;
  ASSERT_NO_FATAL_FAILURE(s.Open(/*with_wr_api=*/true));
  ASSERT_EQ(SendToRts(s.qp, rqpn), 0);
  a.to.Send(s.qp->qp_num);
  ASSERT_EQ(a.from.Receive(), 1u);
  // Interleaved: SRQ 1 through ibv_post_send, SRQ 2 through ibv_wr_*.
  ibv_qp_ex* qpx = ibv_qp_to_qp_ex(s.qp);
  ASSERT_NE(qpx, nullptr);
  for (int i = 0; i < kMessages; ++i) {
    ASSERT_EQ(s.Send(1, i, srqn1), 0);
    const size_t slot = (kMessages + i) * kMsgBytes;
    const std::string text = Payload(2, i);
    memcpy(s.buf.data + slot, text.c_str(), text.size() + 1);
    ibv_wr_start(qpx);
    qpx->wr_id = slot;
    qpx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send(qpx);
    ibv_wr_set_xrc_srqn(qpx, srqn2);
    ibv_wr_set_sge(qpx, s.buf.mr->lkey, reinterpret_cast<uint64_t>(s.buf.data + slot),
                   text.size() + 1);
    ASSERT_EQ(ibv_wr_complete(qpx), 0);
  }
  for (int i = 0; i < 2 * kMessages; ++i) {
    ibv_wc wc{};
    ASSERT_TRUE(PollOne(s.cq, &wc));
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  }
  // ibv_wr_set_xrc_srqn is mandatory on an XRC_SEND QP.
  ibv_wr_start(qpx);
  ibv_wr_send(qpx);
  ibv_wr_set_sge(qpx, s.buf.mr->lkey, reinterpret_cast<uint64_t>(s.buf.data), 8);
  EXPECT_EQ(ibv_wr_complete(qpx), EINVAL);

  b.to.Send(1);
  EXPECT_EQ(Reap(holder), 0);
  EXPECT_EQ(a.from.Receive(), static_cast<uint32_t>(IBV_QPS_RTR));
  a.to.Send(1);
  EXPECT_EQ(Reap(creator), 0);
}

TEST(XrcTraffic, UnknownSrqNumberIsARemoteAccessErrorSeenByEveryHandle) {
  DomainFile file;
  Peer a, b;
  pid_t creator = Spawn(
      [&] { return RunCreator(file.path(), a, IBV_EVENT_QP_ACCESS_ERR, /*exit_early=*/false); });
  const uint32_t rqpn = a.from.Receive();
  pid_t holder = Spawn([&] {
    Holder h;
    if (int rc = SetUpHolder(file.path(), rqpn, &h)) return rc;
    b.from.Send(1);
    ibv_async_event ev{};
    CHILD_CHECK(NextAsyncEvent(h.ctx, &ev), 50);
    CHILD_CHECK(ev.event_type == IBV_EVENT_QP_ACCESS_ERR && ev.element.qp == h.qp, 51);
    CHILD_CHECK(QueryState(h.qp) == IBV_QPS_ERR, 52);
    // Nothing was consumed from the SRQs.
    CHILD_CHECK(StaysEmpty(h.cq[0], 20) && StaysEmpty(h.cq[1], 20), 53);
    return 0;
  });
  ASSERT_EQ(b.from.Receive(), 1u);
  Sender s;
  ASSERT_NO_FATAL_FAILURE(s.Open(false));
  ASSERT_EQ(SendToRts(s.qp, rqpn), 0);
  a.to.Send(s.qp->qp_num);
  ASSERT_EQ(a.from.Receive(), 1u);

  ASSERT_EQ(s.Send(1, 0, kNoSuchSrq), 0);
  ibv_wc wc{};
  ASSERT_TRUE(PollOne(s.cq, &wc));
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.vendor_err, kVendorXrcSrq);
  EXPECT_EQ(QueryState(s.qp), IBV_QPS_ERR);
  EXPECT_EQ(Reap(holder), 0);
  EXPECT_EQ(a.from.Receive(), static_cast<uint32_t>(IBV_QPS_ERR));
  a.to.Send(1);
  EXPECT_EQ(Reap(creator), 0);
}

// One process, one context: the domain rule and the PD rule of the responder.
class XrcOneProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_ = OpenSoftverbs();
    ASSERT_NE(ctx_, nullptr);
    srq_pd_ = ibv_alloc_pd(ctx_);
    send_pd_ = ibv_alloc_pd(ctx_);
    cq_ = ibv_create_cq(ctx_, 64, nullptr, nullptr, 0);
    xrcd_ = OpenXrcd(ctx_, file_.path(), O_CREAT);
    ASSERT_NE(xrcd_, nullptr);
    srq_ = CreateXrcSrq(ctx_, srq_pd_, xrcd_, cq_);
    ASSERT_NE(srq_, nullptr);
    recv_qp_ = CreateRecvQp(ctx_, xrcd_);
    send_qp_ = CreateSendQp(ctx_, send_pd_, cq_, false);
    ASSERT_NE(send_qp_, nullptr);
    ASSERT_EQ(ReceiveToRtr(recv_qp_, send_qp_->qp_num), 0);
    ASSERT_EQ(SendToRts(send_qp_, recv_qp_->qp_num), 0);
    src_ = RegisterBuffer(send_pd_, 4096);
  }
  void TearDown() override { ibv_close_device(ctx_); }

  // One signaled RDMA WRITE of 16 bytes to (mr, offset 0), naming srqn.
  ibv_wc Write(ibv_mr* mr, uint32_t srqn) {
    strcpy(src_.data, "written over XRC");
    ibv_sge sge{reinterpret_cast<uint64_t>(src_.data), 16, src_.mr->lkey};
    ibv_send_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(mr->addr);
    wr.wr.rdma.rkey = mr->rkey;
    wr.qp_type.xrc.remote_srqn = srqn;
    ibv_send_wr* bad = nullptr;
    ibv_wc wc{};
    if (ibv_post_send(send_qp_, &wr, &bad) != 0 || !PollOne(cq_, &wc))
      wc.status = IBV_WC_GENERAL_ERR;
    return wc;
  }

  DomainFile file_;
  ibv_context* ctx_ = nullptr;
  ibv_pd* srq_pd_ = nullptr;
  ibv_pd* send_pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_xrcd* xrcd_ = nullptr;
  ibv_srq* srq_ = nullptr;
  ibv_qp* recv_qp_ = nullptr;
  ibv_qp* send_qp_ = nullptr;
  Buffer src_;
};

TEST_F(XrcOneProcess, SrqOfAnotherDomainIsARemoteAccessError) {
  ibv_xrcd_init_attr pa{};
  pa.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  pa.fd = -1;
  pa.oflags = O_CREAT;
  ibv_xrcd* other = ibv_open_xrcd(ctx_, &pa);
  ASSERT_NE(other, nullptr);
  ibv_srq* foreign = CreateXrcSrq(ctx_, srq_pd_, other, cq_);
  ASSERT_NE(foreign, nullptr);
  Buffer dst = RegisterBuffer(srq_pd_, 4096);
  ASSERT_EQ(PostSrqReceive(foreign, dst, 0, 64, 7), 0);
  Buffer msg = RegisterBuffer(send_pd_, 4096);
  ASSERT_EQ(PostXrcSend(send_qp_, msg, 0, 16, SrqNumber(foreign), 1), 0);
  ibv_wc wc{};
  ASSERT_TRUE(PollOne(cq_, &wc));
  EXPECT_EQ(wc.wr_id, 1u);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.vendor_err, kVendorXrcSrq);
  EXPECT_EQ(QueryState(send_qp_), IBV_QPS_ERR);
  EXPECT_EQ(QueryState(recv_qp_), IBV_QPS_ERR);
  EXPECT_TRUE(StaysEmpty(cq_, 20)) << "the foreign SRQ's WQE was not consumed";
  ibv_async_event ev{};
  ASSERT_TRUE(NextAsyncEvent(ctx_, &ev));
  EXPECT_EQ(ev.event_type, IBV_EVENT_QP_ACCESS_ERR);
  EXPECT_EQ(ev.element.qp, recv_qp_);
}

TEST_F(XrcOneProcess, RdmaChecksKeysAgainstTheSrqsPd) {
  Buffer in_srq_pd = RegisterBuffer(srq_pd_, 4096);
  ibv_wc wc = Write(in_srq_pd.mr, SrqNumber(srq_));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_STREQ(in_srq_pd.data, "written over XRC");
  EXPECT_TRUE(StaysEmpty(cq_, 10)) << "a WRITE consumes no receive WQE";
  // The sender's own PD is not the responder's: the rkey does not match.
  Buffer in_send_pd = RegisterBuffer(send_pd_, 4096);
  wc = Write(in_send_pd.mr, SrqNumber(srq_));
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(in_send_pd.data[0], 0);
  EXPECT_EQ(QueryState(send_qp_), IBV_QPS_ERR);
  EXPECT_EQ(QueryState(recv_qp_), IBV_QPS_ERR);
}

TEST(XrcTraffic, ReceiveQpOutlivesItsCreatorAndGoesWithTheLastHandle) {
  DomainFile file;
  Peer a, b;
  pid_t creator = Spawn([&] { return RunCreator(file.path(), a, IBV_EVENT_COMM_EST, true); });
  const uint32_t rqpn = a.from.Receive();
  pid_t holder = Spawn([&] {
    Holder h;
    if (int rc = SetUpHolder(file.path(), rqpn, &h)) return rc;
    b.from.Send(SrqNumber(h.srq[0]));
    b.to.Receive();  // the creator is gone, a message was sent
    if (int rc = ExpectMessages(h, 0, 0, 1, rqpn)) return rc;
    CHILD_CHECK(QueryState(h.qp) == IBV_QPS_RTR, 60);
    CHILD_CHECK(ibv_destroy_qp(h.qp) == 0, 61);  // the last handle
    b.from.Send(1);
    b.to.Receive();
    return 0;
  });
  const uint32_t srqn = b.from.Receive();
  Sender s;
  ASSERT_NO_FATAL_FAILURE(s.Open(false));
  // timeout 8: 4.096 us * 2^8 * (retry_cnt 1 + 1) ~ 2 ms without response.
  ASSERT_EQ(SendToRts(s.qp, rqpn, 8, 1), 0);
  a.to.Send(s.qp->qp_num);
  ASSERT_EQ(a.from.Receive(), 1u);
  ASSERT_EQ(Reap(creator), 0);  // exited holding its handle: the daemon drops it

  ASSERT_EQ(s.Send(1, 0, srqn), 0);
  ibv_wc wc{};
  ASSERT_TRUE(PollOne(s.cq, &wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  b.to.Send(1);
  ASSERT_EQ(b.from.Receive(), 1u);

  ASSERT_EQ(s.Send(1, 1, srqn), 0);
  ASSERT_TRUE(PollOne(s.cq, &wc));
  EXPECT_EQ(wc.status, IBV_WC_RETRY_EXC_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(QueryState(s.qp), IBV_QPS_ERR);
  b.to.Send(1);
  EXPECT_EQ(Reap(holder), 0);
}

}  // namespace
}  // namespace softverbs::it
