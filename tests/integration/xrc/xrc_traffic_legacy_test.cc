// XRC traffic with the legacy OFED API (include/softverbs/xrc_legacy.h):
// a send QP of type IBV_QPT_XRC created through ibv_create_qp with the
// legacy init attributes, messages addressed with wr.xrc_remote_srq_num to
// SRQs of ibv_create_xrc_srq, a receive QP of ibv_create_xrc_rcv_qp
// registered by a second process; events carry IBV_XRC_QP_EVENT_FLAG.
#define SOFTVERBS_LEGACY_XRC_WR_FIELD  // wr.xrc_remote_srq_num, as OFED code writes it
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <string.h>

#include "process_helpers.h"
#include "softverbs/xrc_legacy.h"
#include "xrc_fixture.h"

namespace softverbs::it {
namespace {

constexpr uint32_t kLegacyQptXrc = 5;

ibv_xrc_domain* OpenLegacyDomain(ibv_context* ctx, const std::string& path, int oflag) {
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return nullptr;
  ibv_xrc_domain* d = ibv_open_xrc_domain(ctx, fd, oflag);
  close(fd);
  return d;
}

int LegacyToRtr(ibv_xrc_domain* d, uint32_t qpn, uint32_t dest_qpn) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  if (int err = ibv_modify_xrc_rcv_qp(
          d, qpn, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
    return err;
  }
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = dest_qpn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.hop_limit = 1;
  ibv_query_gid(d->context, 1, 0, &a.ah_attr.grh.dgid);
  return ibv_modify_xrc_rcv_qp(d, qpn, &a,
                               IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                                   IBV_QP_MIN_RNR_TIMER);
}

ibv_qp_state LegacyState(ibv_xrc_domain* d, uint32_t qpn) {
  ibv_qp_attr attr{};
  ibv_xrc_qp_init_attr init{};
  if (ibv_query_xrc_rcv_qp(d, qpn, &attr, IBV_QP_STATE, &init) != 0) return IBV_QPS_UNKNOWN;
  return attr.qp_state;
}

// The legacy send side: ibv_create_qp with the OFED attributes.
ibv_qp* CreateLegacySendQp(ibv_pd* pd, ibv_cq* cq, ibv_xrc_domain* d) {
  ibv_xrc_qp_init_attr a{};
  a.send_cq = a.recv_cq = cq;
  a.cap.max_send_wr = 16;
  a.cap.max_send_sge = 1;
  a.qp_type = IBV_QPT_XRC;
  a.xrc_domain = d;
  return ibv_create_qp(pd, IBV_XRC_QP_INIT_ATTR(&a));
}

int LegacySend(ibv_qp* qp, const Buffer& b, uint32_t length, uint32_t srq_num, uint64_t wr_id) {
  ibv_sge sge{reinterpret_cast<uint64_t>(b.data), length, b.mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.xrc_remote_srq_num = srq_num;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(qp, &wr, &bad);
}

// event_type as the integer it holds: the flag puts it outside the enum,
// which C++ may not load through the enum type (the sanitizer build checks).
uint32_t RawEventType(const ibv_async_event& ev) {
  uint32_t raw;
  memcpy(&raw, &ev.event_type, sizeof(raw));
  return raw;
}

// The event of a legacy receive QP: flagged, named by number.
bool IsFlaggedEvent(const ibv_async_event& ev, ibv_event_type type, uint32_t qpn) {
  const uint32_t raw = RawEventType(ev);
  return (raw & IBV_XRC_QP_EVENT_FLAG) &&
         (raw & ~static_cast<uint32_t>(IBV_XRC_QP_EVENT_FLAG)) == static_cast<uint32_t>(type) &&
         IBV_XRC_EVENT_QP_NUM(&ev) == qpn;
}

TEST(XrcLegacyTraffic, RegisteredProcessReceivesAndOutlivesTheCreator) {
  DomainFile file;
  Pipe to_a, from_a, to_b, from_b;
  // A: creates the receive QP (registered implicitly), brings it to RTR,
  // sees COMM_EST flagged, then exits without unregistering.
  pid_t creator = Spawn([&] {
    ibv_context* ctx = OpenSoftverbs();
    CHILD_CHECK(ctx, 10);
    ibv_xrc_domain* d = OpenLegacyDomain(ctx, file.path(), O_CREAT);
    CHILD_CHECK(d, 11);
    ibv_xrc_qp_init_attr init{};
    init.xrc_domain = d;
    uint32_t qpn = 0;
    CHILD_CHECK(ibv_create_xrc_rcv_qp(&init, &qpn) == 0, 12);
    from_a.Send(qpn);
    CHILD_CHECK(LegacyToRtr(d, qpn, to_a.Receive()) == 0, 13);
    from_a.Send(1);
    ibv_async_event ev{};
    CHILD_CHECK(NextAsyncEvent(ctx, &ev), 14);
    CHILD_CHECK(IsFlaggedEvent(ev, IBV_EVENT_COMM_EST, qpn), 15);
    return 0;
  });
  const uint32_t qpn = from_a.Receive();
  // B: registers with the QP, holds two SRQs of the domain.
  pid_t holder = Spawn([&] {
    ibv_context* ctx = OpenSoftverbs();
    CHILD_CHECK(ctx, 20);
    ibv_pd* pd = ibv_alloc_pd(ctx);
    ibv_xrc_domain* d = OpenLegacyDomain(ctx, file.path(), 0);
    CHILD_CHECK(d, 21);
    CHILD_CHECK(ibv_reg_xrc_rcv_qp(d, qpn) == 0, 22);
    Buffer buf = RegisterBuffer(pd, 4096);
    ibv_cq* cq[2];
    for (int s = 0; s < 2; ++s) {
      cq[s] = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
      ibv_srq_init_attr sa{};
      sa.attr = {16, 1, 0};
      ibv_srq* srq = ibv_create_xrc_srq(pd, d, cq[s], &sa);
      CHILD_CHECK(srq, 23);
      for (int i = 0; i < 2; ++i) {
        CHILD_CHECK(PostSrqReceive(srq, buf, (2 * s + i) * 64, 64, 2 * s + i) == 0, 24);
      }
      from_b.Send(SrqNumber(srq));
    }
    to_b.Receive();  // one message to each SRQ was sent
    for (int s = 0; s < 2; ++s) {
      ibv_wc wc{};
      CHILD_CHECK(PollOne(cq[s], &wc), 30);
      CHILD_CHECK(wc.status == IBV_WC_SUCCESS && wc.qp_num == qpn, 31);
      CHILD_CHECK(strcmp(buf.data + wc.wr_id * 64, s == 0 ? "first" : "second") == 0, 32);
    }
    ibv_async_event ev{};
    CHILD_CHECK(NextAsyncEvent(ctx, &ev), 33);
    CHILD_CHECK(IsFlaggedEvent(ev, IBV_EVENT_COMM_EST, qpn), 34);
    from_b.Send(1);
    to_b.Receive();  // the creator exited; one more message to SRQ 1
    ibv_wc wc{};
    CHILD_CHECK(PollOne(cq[0], &wc) && wc.status == IBV_WC_SUCCESS, 35);
    CHILD_CHECK(strcmp(buf.data + wc.wr_id * 64, "after the creator") == 0, 36);
    CHILD_CHECK(ibv_close_xrc_domain(d) == EBUSY, 37);   // still registered
    CHILD_CHECK(ibv_unreg_xrc_rcv_qp(d, qpn) == 0, 38);  // the last registration
    from_b.Send(1);
    to_b.Receive();
    return 0;
  });
  const uint32_t srq1 = from_b.Receive();
  const uint32_t srq2 = from_b.Receive();

  ibv_context* ctx = OpenSoftverbs();
  ASSERT_NE(ctx, nullptr);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  ibv_xrc_domain* d = OpenLegacyDomain(ctx, file.path(), 0);
  ASSERT_NE(d, nullptr);
  ibv_qp* qp = CreateLegacySendQp(pd, cq, d);
  ASSERT_NE(qp, nullptr) << strerror(errno);
  EXPECT_EQ(static_cast<uint32_t>(qp->qp_type), kLegacyQptXrc);
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(ibv_query_qp(qp, &attr, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(static_cast<uint32_t>(init.qp_type), kLegacyQptXrc);
  ASSERT_EQ(SendToRts(qp, qpn, 8, 1), 0);
  to_a.Send(qp->qp_num);
  ASSERT_EQ(from_a.Receive(), 1u);

  Buffer msg = RegisterBuffer(pd, 4096);
  ibv_wc wc{};
  const char* texts[] = {"first", "second"};
  const uint32_t srqs[] = {srq1, srq2};
  for (int s = 0; s < 2; ++s) {
    strcpy(msg.data, texts[s]);
    ASSERT_EQ(LegacySend(qp, msg, strlen(texts[s]) + 1, srqs[s], s), 0);
    ASSERT_TRUE(PollOne(cq, &wc));
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  }
  to_b.Send(1);
  ASSERT_EQ(from_b.Receive(), 1u);
  EXPECT_EQ(Reap(creator), 0);  // exited registered: the daemon unregistered it

  strcpy(msg.data, "after the creator");
  ASSERT_EQ(LegacySend(qp, msg, 18, srq1, 3), 0);
  ASSERT_TRUE(PollOne(cq, &wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  to_b.Send(1);
  ASSERT_EQ(from_b.Receive(), 1u);  // unregistered: the QP is gone
  EXPECT_EQ(ibv_reg_xrc_rcv_qp(d, qpn), EINVAL);
  ASSERT_EQ(LegacySend(qp, msg, 18, srq1, 4), 0);
  ASSERT_TRUE(PollOne(cq, &wc));
  EXPECT_EQ(wc.status, IBV_WC_RETRY_EXC_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(QueryState(qp), IBV_QPS_ERR);
  to_b.Send(1);
  EXPECT_EQ(Reap(holder), 0);
  ibv_close_device(ctx);
}

TEST(XrcLegacyTraffic, UnknownSrqNumberFailsTheSenderAndFlagsTheReceiveQpEvent) {
  DomainFile file;
  ibv_context* ctx = OpenSoftverbs();
  ASSERT_NE(ctx, nullptr);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  ibv_xrc_domain* d = OpenLegacyDomain(ctx, file.path(), O_CREAT);
  ASSERT_NE(d, nullptr);
  ibv_xrc_qp_init_attr init{};
  init.xrc_domain = d;
  uint32_t qpn = 0;
  ASSERT_EQ(ibv_create_xrc_rcv_qp(&init, &qpn), 0);
  ibv_qp* qp = CreateLegacySendQp(pd, cq, d);
  ASSERT_NE(qp, nullptr);
  ASSERT_EQ(LegacyToRtr(d, qpn, qp->qp_num), 0);
  ASSERT_EQ(SendToRts(qp, qpn), 0);
  Buffer msg = RegisterBuffer(pd, 4096);
  ASSERT_EQ(LegacySend(qp, msg, 8, 0xfffff0, 9), 0);
  ibv_wc wc{};
  ASSERT_TRUE(PollOne(cq, &wc));
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(QueryState(qp), IBV_QPS_ERR);
  EXPECT_EQ(LegacyState(d, qpn), IBV_QPS_ERR);
  ibv_async_event ev{};
  ASSERT_TRUE(NextAsyncEvent(ctx, &ev));
  EXPECT_TRUE(IsFlaggedEvent(ev, IBV_EVENT_QP_ACCESS_ERR, qpn)) << std::hex << RawEventType(ev);
  // A legacy send QP needs its domain.
  ibv_xrc_qp_init_attr bad{};
  bad.send_cq = bad.recv_cq = cq;
  bad.cap.max_send_wr = 1;
  bad.qp_type = IBV_QPT_XRC;
  errno = 0;
  EXPECT_EQ(ibv_create_qp(pd, IBV_XRC_QP_INIT_ATTR(&bad)), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_close_device(ctx);
}

}  // namespace
}  // namespace softverbs::it
