// Raw packet QPs and flow steering (docs/raw_packet.md): the QP's states,
// where the frames a raw packet QP sends go (the rules' specs, priorities,
// DONT_TRAP, the default and sniffer rules, never back to the sender), what
// a receiver sees, the rules' lifetime (they hold their QP; a dead process's
// go with it), and every refusal with the errno the kernel gives.
#include <errno.h>
#include <netinet/in.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <set>
#include <vector>

#include "peer_process.h"
#include "raw_frames.h"
#include "test_env.h"

namespace softverbs::it {
namespace {

using namespace softverbs::test;

class RawPacketTest : public ContextTest {
 protected:
  void SetUp() override {
    if (!HasNetRaw()) GTEST_SKIP() << "raw packet QPs need CAP_NET_RAW, as on hardware";
    ContextTest::SetUp();
    ASSERT_TRUE(MakeRawQp(ctx_, pd_, &a_)) << strerror(errno);
    ASSERT_TRUE(MakeRawQp(ctx_, pd_, &b_)) << strerror(errno);
    ASSERT_TRUE(MakeRawQp(ctx_, pd_, &c_)) << strerror(errno);
    for (RawQp* r : {&a_, &b_, &c_}) ASSERT_EQ(PostReceive(*r, 7), 0);
  }
  void TearDown() override {
    for (ibv_flow* f : flows_) EXPECT_EQ(ibv_destroy_flow(f), 0);
    for (RawQp* r : {&a_, &b_, &c_}) FreeRawQp(r);
    ContextTest::TearDown();
  }
  ibv_flow* Flow(ibv_qp* qp, ibv_flow_attr* attr) {
    ibv_flow* f = ibv_create_flow(qp, attr);
    if (f) flows_.push_back(f);
    return f;
  }

  RawQp a_, b_, c_;
  std::vector<ibv_flow*> flows_;
};

TEST_F(RawPacketTest, AQpGoesToRtsWithThePortAloneAndQueriesAsRawPacket) {
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(ibv_query_qp(a_.qp, &attr, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(attr.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(init.qp_type, IBV_QPT_RAW_PACKET);
  EXPECT_EQ(a_.qp->qp_type, IBV_QPT_RAW_PACKET);
}

TEST_F(RawPacketTest, AFrameReachesTheQpWhoseRuleMatchesItsDestinationMac) {
  EthRule rule = MacRule(kMacB);
  ASSERT_NE(Flow(b_.qp, &rule.attr), nullptr) << strerror(errno);
  const std::vector<uint8_t> frame = Frame(kMacB, 5000, 300, 0x5a);
  ASSERT_EQ(SendFrame(a_, frame), IBV_WC_SUCCESS);
  ibv_wc wc{};
  ASSERT_TRUE(Received(b_, &wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV);
  EXPECT_EQ(wc.wr_id, 7u);
  EXPECT_EQ(wc.byte_len, frame.size());
  EXPECT_EQ(wc.qp_num, b_.qp->qp_num);
  EXPECT_EQ(wc.src_qp, 0u);
  EXPECT_EQ(wc.wc_flags & IBV_WC_GRH, 0u);
  EXPECT_EQ(memcmp(b_.buf.data() + kFrameRoom, frame.data(), frame.size()), 0);
  EXPECT_FALSE(Received(c_, &wc));
}

TEST_F(RawPacketTest, AFrameNoRuleMatchesIsSentAndGoesNowhere) {
  EthRule rule = MacRule(kMacB);
  ASSERT_NE(Flow(b_.qp, &rule.attr), nullptr);
  ASSERT_EQ(SendFrame(a_, Frame(kMulticastMac, 5000, 64, 1)), IBV_WC_SUCCESS);
  ibv_wc wc{};
  EXPECT_FALSE(Received(b_, &wc));
  EXPECT_FALSE(Received(c_, &wc));
}

TEST_F(RawPacketTest, IpAndUdpSpecsMatchOnTheirFields) {
  struct {
    ibv_flow_attr attr;
    ibv_flow_spec_ipv4 ip;
    ibv_flow_spec_tcp_udp udp;
  } rule{};
  rule.attr = DefaultRule(IBV_FLOW_ATTR_NORMAL);
  rule.attr.size = sizeof(rule);
  rule.attr.num_of_specs = 2;
  rule.ip.type = IBV_FLOW_SPEC_IPV4;
  rule.ip.size = sizeof(rule.ip);
  const uint8_t dst_ip[4] = {10, 0, 0, 2};
  memcpy(&rule.ip.val.dst_ip, dst_ip, 4);
  rule.ip.mask.dst_ip = 0xffffffff;
  rule.udp.type = IBV_FLOW_SPEC_UDP;
  rule.udp.size = sizeof(rule.udp);
  rule.udp.val.dst_port = htons(5000);
  rule.udp.mask.dst_port = 0xffff;
  ASSERT_NE(Flow(b_.qp, &rule.attr), nullptr) << strerror(errno);
  ibv_wc wc{};
  ASSERT_EQ(SendFrame(a_, Frame(kMacB, 5001, 100, 2)), IBV_WC_SUCCESS);
  EXPECT_FALSE(Received(b_, &wc)) << "another UDP port";
  ASSERT_EQ(SendFrame(a_, Frame(kMacB, 5000, 100, 3)), IBV_WC_SUCCESS);
  EXPECT_TRUE(Received(b_, &wc)) << "the rule's UDP port";
}

TEST_F(RawPacketTest, TheFirstPriorityThatMatchesTakesTheFrameUnlessItsRulesDontTrap) {
  EthRule first = MacRule(kMacB, 0);
  EthRule second = MacRule(kMacB, 1);
  ibv_flow* f = Flow(b_.qp, &first.attr);
  ASSERT_NE(f, nullptr);
  ASSERT_NE(Flow(c_.qp, &second.attr), nullptr);
  ibv_wc wc{};
  ASSERT_EQ(SendFrame(a_, Frame(kMacB, 5000, 64, 4)), IBV_WC_SUCCESS);
  EXPECT_TRUE(Received(b_, &wc));
  EXPECT_FALSE(Received(c_, &wc)) << "a later priority";
  ASSERT_EQ(PostReceive(b_, 8), 0);
  // The same rule with DONT_TRAP: the frame goes on to priority 1 as well.
  ASSERT_EQ(ibv_destroy_flow(f), 0);
  flows_.erase(flows_.begin());
  EthRule passing = MacRule(kMacB, 0, IBV_FLOW_ATTR_FLAGS_DONT_TRAP);
  ASSERT_NE(Flow(b_.qp, &passing.attr), nullptr) << strerror(errno);
  ASSERT_EQ(SendFrame(a_, Frame(kMacB, 5000, 64, 5)), IBV_WC_SUCCESS);
  EXPECT_TRUE(Received(b_, &wc));
  EXPECT_TRUE(Received(c_, &wc));
}

TEST_F(RawPacketTest, DefaultRulesTakeWhatNoRuleTrappedAndASnifferSeesEverything) {
  EthRule to_b = MacRule(kMacB);
  ASSERT_NE(Flow(b_.qp, &to_b.attr), nullptr);
  ibv_flow_attr mc_default = DefaultRule(IBV_FLOW_ATTR_MC_DEFAULT);
  ASSERT_NE(Flow(c_.qp, &mc_default), nullptr) << strerror(errno);
  ibv_flow_attr sniffer = DefaultRule(IBV_FLOW_ATTR_SNIFFER);
  ASSERT_NE(Flow(a_.qp, &sniffer), nullptr) << strerror(errno);
  ibv_wc wc{};
  // Trapped by b's rule: not c's (multicast default), though the sniffer's
  // QP sent it - it never comes back to its sender.
  ASSERT_EQ(SendFrame(a_, Frame(kMacB, 5000, 64, 6)), IBV_WC_SUCCESS);
  EXPECT_TRUE(Received(b_, &wc));
  EXPECT_FALSE(Received(c_, &wc));
  EXPECT_FALSE(Received(a_, &wc));
  // Multicast that no rule trapped: c's. And b, sending it, is seen by the
  // sniffer on a.
  ASSERT_EQ(PostReceive(b_, 9), 0);
  ASSERT_EQ(SendFrame(b_, Frame(kMulticastMac, 5000, 64, 7)), IBV_WC_SUCCESS);
  EXPECT_TRUE(Received(c_, &wc));
  EXPECT_TRUE(Received(a_, &wc));
  EXPECT_FALSE(Received(b_, &wc));
}

TEST_F(RawPacketTest, AFrameWithoutAReceiveWqeIsDroppedAndTheSendStillCompletes) {
  EthRule rule = MacRule(kMacB);
  ASSERT_NE(Flow(b_.qp, &rule.attr), nullptr);
  ibv_wc wc{};
  ASSERT_EQ(SendFrame(a_, Frame(kMacB, 5000, 64, 8)), IBV_WC_SUCCESS);
  ASSERT_TRUE(Received(b_, &wc));
  ASSERT_EQ(SendFrame(a_, Frame(kMacB, 5000, 64, 9)), IBV_WC_SUCCESS);
  EXPECT_FALSE(Received(b_, &wc)) << "b had one receive WQE";
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(ibv_query_qp(b_.qp, &attr, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(attr.qp_state, IBV_QPS_RTS);
}

TEST_F(RawPacketTest, FrameLengthsOutsideAnEthernetFramesAreRefused) {
  std::vector<uint8_t> runt(17, 0);
  memcpy(runt.data(), kMacB, 6);
  EXPECT_EQ(PostFrame(a_, runt), EINVAL) << "below the 18-byte header mlx5 inlines";
  EXPECT_EQ(PostFrame(a_, Frame(kMacB, 5000, 64, 0), 1, IBV_SEND_SIGNALED | IBV_SEND_IP_CSUM),
            EINVAL)
      << "no checksum offload";
  std::vector<uint8_t> giant(9019, 0);
  ibv_mr* big = ibv_reg_mr(pd_, giant.data(), giant.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(big, nullptr);
  ibv_sge sge{reinterpret_cast<uint64_t>(giant.data()), static_cast<uint32_t>(giant.size()),
              big->lkey};
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a_.qp, &wr, &bad), 0);
  ibv_wc wc{};
  ASSERT_EQ(PollOne(a_.cq, &wc), 1);
  EXPECT_EQ(wc.status, IBV_WC_LOC_LEN_ERR);
  EXPECT_EQ(ibv_dereg_mr(big), 0);
  wr.opcode = IBV_WR_RDMA_WRITE;
  EXPECT_EQ(ibv_post_send(c_.qp, &wr, &bad), EINVAL) << "SEND is a raw QP's only opcode";
}

TEST_F(RawPacketTest, AQpJoinsAnEthernetMulticastGroupByTheMacInItsGid) {
  // As mlx5 (and perftest's --raw_mcast): the MAC is the gid's last 6 bytes.
  ibv_gid gid{};
  memcpy(gid.raw + 10, kMulticastMac, 6);
  ASSERT_EQ(ibv_attach_mcast(b_.qp, &gid, 0), 0) << strerror(errno);
  ASSERT_EQ(ibv_attach_mcast(c_.qp, &gid, 0), 0) << strerror(errno);
  ibv_wc wc{};
  ASSERT_EQ(SendFrame(a_, Frame(kMulticastMac, 5000, 64, 1)), IBV_WC_SUCCESS);
  EXPECT_TRUE(Received(b_, &wc));
  EXPECT_TRUE(Received(c_, &wc)) << "every member gets a copy";
  EXPECT_EQ(ibv_destroy_qp(b_.qp), EBUSY) << "attached";
  ASSERT_EQ(ibv_detach_mcast(b_.qp, &gid, 0), 0);
  ASSERT_EQ(ibv_detach_mcast(c_.qp, &gid, 0), 0);
  ASSERT_EQ(PostReceive(b_, 2), 0);
  ASSERT_EQ(SendFrame(a_, Frame(kMulticastMac, 5000, 64, 2)), IBV_WC_SUCCESS);
  EXPECT_FALSE(Received(b_, &wc)) << "detached";
  ibv_gid unicast{};
  memcpy(unicast.raw + 10, kMacB, 6);
  EXPECT_EQ(ibv_attach_mcast(b_.qp, &unicast, 0), EINVAL);
}

TEST_F(RawPacketTest, ARuleHoldsItsQpUntilItIsDestroyed) {
  RawQp d;
  ASSERT_TRUE(MakeRawQp(ctx_, pd_, &d));
  EthRule rule = MacRule(kMacB);
  ibv_flow* f = ibv_create_flow(d.qp, &rule.attr);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(ibv_destroy_qp(d.qp), EBUSY);
  ASSERT_EQ(ibv_destroy_flow(f), 0);
  EXPECT_EQ(ibv_destroy_qp(d.qp), 0);
  d.qp = nullptr;
  FreeRawQp(&d);
}

TEST_F(RawPacketTest, RulesTheKernelRefusesAreRefusedWithItsErrnoAndSteerNothing) {
  ibv_wc wc{};
  auto refused = [&](ibv_qp* qp, ibv_flow_attr* attr, int err) {
    errno = 0;
    ibv_flow* f = Flow(qp, attr);
    EXPECT_EQ(f, nullptr);
    EXPECT_EQ(errno, err);
  };
  EthRule r = MacRule(kMacB);
  r.attr.comp_mask = 1;
  refused(b_.qp, &r.attr, EINVAL);
  r = MacRule(kMacB);
  r.attr.port = 2;
  refused(b_.qp, &r.attr, EINVAL);
  r = MacRule(kMacB, 16);
  refused(b_.qp, &r.attr, EINVAL);
  r = MacRule(kMacB, 0, IBV_FLOW_ATTR_FLAGS_EGRESS);
  refused(b_.qp, &r.attr, EOPNOTSUPP);
  r = MacRule(kMacB, 0, 1u << 7);
  refused(b_.qp, &r.attr, EINVAL);
  ibv_flow_attr all = DefaultRule(IBV_FLOW_ATTR_ALL_DEFAULT);
  all.flags = IBV_FLOW_ATTR_FLAGS_DONT_TRAP;
  refused(b_.qp, &all, EINVAL);
  r = MacRule(kMacB);
  r.eth.size = sizeof(r.eth) - 2;
  refused(b_.qp, &r.attr, EINVAL);
  r = MacRule(kMacB);
  r.eth.type = static_cast<ibv_flow_spec_type>(0x77);
  refused(b_.qp, &r.attr, EINVAL);
  r = MacRule(kMacB);
  r.eth.type = IBV_FLOW_SPEC_VXLAN_TUNNEL;
  refused(b_.qp, &r.attr, EOPNOTSUPP);
  struct {
    ibv_flow_attr attr;
    ibv_flow_spec_eth eth[2];
  } twice{};
  twice.attr = MacRule(kMacB).attr;
  twice.attr.num_of_specs = 2;
  twice.eth[0] = twice.eth[1] = MacRule(kMacB).eth;
  refused(b_.qp, &twice.attr, EINVAL);
  // Flows steer to raw packet (and, in the kernel, UD) QPs only.
  ibv_qp* rc = RcQp(pd_, cq_);
  ASSERT_NE(rc, nullptr);
  r = MacRule(kMacB);
  refused(rc, &r.attr, EINVAL);
  EXPECT_EQ(ibv_destroy_qp(rc), 0);
  // No rule came of them: the device holds none, and the frame goes nowhere.
  EXPECT_EQ(MyObjectCount("flow"), 0u);
  ASSERT_EQ(SendFrame(a_, Frame(kMacB, 5000, 64, 10)), IBV_WC_SUCCESS);
  EXPECT_FALSE(Received(b_, &wc));
}

TEST_F(RawPacketTest, WithoutCapNetRawNeitherAQpNorARuleIsMade) {
  ASSERT_TRUE(SetNetRawEffective(false));
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = cq_;
  init.qp_type = IBV_QPT_RAW_PACKET;
  init.cap = {1, 1, 1, 1, 0};
  errno = 0;
  ibv_qp* qp = ibv_create_qp(pd_, &init);
  const int qp_err = errno;
  EthRule r = MacRule(kMacB);
  errno = 0;
  ibv_flow* f = ibv_create_flow(b_.qp, &r.attr);
  const int flow_err = errno;
  ASSERT_TRUE(SetNetRawEffective(true));
  EXPECT_EQ(qp, nullptr);
  EXPECT_EQ(qp_err, EPERM);
  EXPECT_EQ(f, nullptr);
  EXPECT_EQ(flow_err, EPERM);
}

TEST_F(RawPacketTest, ADeadProcesssRulesGoWithIt) {
  ibv_flow_attr all = DefaultRule(IBV_FLOW_ATTR_ALL_DEFAULT);
  ASSERT_NE(Flow(c_.qp, &all), nullptr) << strerror(errno);
  int up[2], down[2];
  ASSERT_EQ(pipe(up), 0);
  ASSERT_EQ(pipe(down), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // A process with a rule for kMacB, which ends without destroying it.
    ibv_context* ctx = OpenDevice();
    ibv_pd* pd = ctx ? ibv_alloc_pd(ctx) : nullptr;
    RawQp r;
    EthRule rule = MacRule(kMacB);
    const char ok = pd && MakeRawQp(ctx, pd, &r) && ibv_create_flow(r.qp, &rule.attr) ? 1 : 0;
    if (write(up[1], &ok, 1) != 1) _exit(2);
    char go;
    if (read(down[0], &go, 1) != 1) _exit(3);
    _exit(ok ? 0 : 1);
  }
  char ok = 0;
  ASSERT_TRUE(ReadAll(up[0], &ok, 1));
  ASSERT_EQ(ok, 1);
  ibv_wc wc{};
  ASSERT_EQ(SendFrame(a_, Frame(kMacB, 5000, 64, 11)), IBV_WC_SUCCESS);
  EXPECT_FALSE(Received(c_, &wc)) << "the child's rule trapped it";
  EXPECT_EQ(Status()["objects"]["flow"].get<size_t>(), 2u) << "c's and the child's";
  ASSERT_EQ(write(down[1], "g", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // The device releases a dead process's objects as it notices the death:
  // within a bounded wait the frame is no longer trapped.
  bool reached = false;
  for (int i = 0; i < 200 && !reached; ++i) {
    ASSERT_EQ(SendFrame(a_, Frame(kMacB, 5000, 64, 12)), IBV_WC_SUCCESS);
    reached = Received(c_, &wc);
    if (!reached) usleep(10000);
  }
  EXPECT_TRUE(reached);
  EXPECT_EQ(Status()["objects"]["flow"].get<size_t>(), 1u) << "the child's rule is gone";
  for (int fd : {up[0], up[1], down[0], down[1]}) close(fd);
}

// RSS: receive work queues, their indirection table and an RSS QP over it.
class RssTest : public RawPacketTest {
 protected:
  static constexpr int kWqs = 4;
  static constexpr uint32_t kSlots = 16;
  void SetUp() override {
    RawPacketTest::SetUp();
    if (IsSkipped()) return;
    rss_cq_ = ibv_create_cq(ctx_, kWqs * kSlots, nullptr, nullptr, 0);
    ASSERT_NE(rss_cq_, nullptr);
    rx_.resize(kWqs * kSlots * kFrameRoom);
    rx_mr_ = ibv_reg_mr(pd_, rx_.data(), rx_.size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(rx_mr_, nullptr);
    for (int i = 0; i < kWqs; ++i) {
      ibv_wq_init_attr init{};
      init.wq_type = IBV_WQT_RQ;
      init.max_wr = kSlots;
      init.max_sge = 1;
      init.pd = pd_;
      init.cq = rss_cq_;
      wqs_[i] = ibv_create_wq(ctx_, &init);
      ASSERT_NE(wqs_[i], nullptr) << strerror(errno);
      EXPECT_EQ(wqs_[i]->state, IBV_WQS_RESET);
      EXPECT_GE(init.max_wr, kSlots);
    }
  }
  void TearDown() override {
    if (flow_) {
      EXPECT_EQ(ibv_destroy_flow(flow_), 0);
    }
    if (rss_qp_) {
      EXPECT_EQ(ibv_destroy_qp(rss_qp_), 0);
    }
    if (table_) {
      EXPECT_EQ(ibv_destroy_rwq_ind_table(table_), 0);
    }
    for (ibv_wq* wq : wqs_) {
      if (wq) {
        EXPECT_EQ(ibv_destroy_wq(wq), 0);
      }
    }
    if (rx_mr_) {
      EXPECT_EQ(ibv_dereg_mr(rx_mr_), 0);
    }
    if (rss_cq_) {
      EXPECT_EQ(ibv_destroy_cq(rss_cq_), 0);
    }
    RawPacketTest::TearDown();
  }
  // Posts a receive on work queue i (wr_id i).
  void PostOn(int i, uint32_t slot) {
    uint8_t* at = rx_.data() + (i * kSlots + slot % kSlots) * kFrameRoom;
    ibv_sge sge{reinterpret_cast<uint64_t>(at), kFrameRoom, rx_mr_->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = static_cast<uint64_t>(i);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_wq_recv(wqs_[i], &wr, &bad), 0);
  }
  // Every WQ ready, kSlots receives each, then the table and the QP.
  void MakeRss(uint64_t fields) {
    for (int i = 0; i < kWqs; ++i) {
      ibv_wq_attr attr{};
      attr.attr_mask = IBV_WQ_ATTR_STATE;
      attr.wq_state = IBV_WQS_RDY;
      ASSERT_EQ(ibv_modify_wq(wqs_[i], &attr), 0);
      for (uint32_t j = 0; j < kSlots; ++j) PostOn(i, j);
    }
    ibv_rwq_ind_table_init_attr tinit{};
    tinit.log_ind_tbl_size = 2;
    tinit.ind_tbl = wqs_;
    table_ = ibv_create_rwq_ind_table(ctx_, &tinit);
    ASSERT_NE(table_, nullptr) << strerror(errno);
    ibv_qp_init_attr_ex init = RssInit(fields);
    rss_qp_ = ibv_create_qp_ex(ctx_, &init);
    ASSERT_NE(rss_qp_, nullptr) << strerror(errno);
    EthRule rule = MacRule(kMacB);
    flow_ = ibv_create_flow(rss_qp_, &rule.attr);
    ASSERT_NE(flow_, nullptr) << strerror(errno);
  }
  ibv_qp_init_attr_ex RssInit(uint64_t fields) {
    ibv_qp_init_attr_ex init{};
    init.qp_type = IBV_QPT_RAW_PACKET;
    init.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH;
    init.pd = pd_;
    init.rwq_ind_tbl = table_;
    init.rx_hash_conf.rx_hash_function = IBV_RX_HASH_FUNC_TOEPLITZ;
    init.rx_hash_conf.rx_hash_key_len = sizeof(key_);
    init.rx_hash_conf.rx_hash_key = key_;
    init.rx_hash_conf.rx_hash_fields_mask = fields;
    return init;
  }
  // A frame to kMacB from 10.0.0.<host> port <port>.
  static std::vector<uint8_t> FlowFrame(int host, int port) {
    std::vector<uint8_t> f = Frame(kMacB, 5000, 128, static_cast<uint8_t>(host));
    f[14 + 15] = static_cast<uint8_t>(host);
    const uint16_t sport = htons(static_cast<uint16_t>(port));
    memcpy(&f[34], &sport, 2);
    return f;
  }

  ibv_cq* rss_cq_ = nullptr;
  std::vector<uint8_t> rx_;
  ibv_mr* rx_mr_ = nullptr;
  ibv_wq* wqs_[kWqs] = {};
  ibv_rwq_ind_table* table_ = nullptr;
  ibv_qp* rss_qp_ = nullptr;
  ibv_flow* flow_ = nullptr;
  uint8_t key_[40] = {0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67,
                      0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb,
                      0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30,
                      0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};
};

TEST_F(RssTest, TheDeviceReportsItsRssCaps) {
  ibv_device_attr_ex attr{};
  ASSERT_EQ(ibv_query_device_ex(ctx_, nullptr, &attr), 0);
  EXPECT_EQ(attr.rss_caps.supported_qpts, 1u << IBV_QPT_RAW_PACKET);
  EXPECT_EQ(attr.rss_caps.max_rwq_indirection_table_size, 256u);
  EXPECT_EQ(attr.rss_caps.rx_hash_function, IBV_RX_HASH_FUNC_TOEPLITZ);
  EXPECT_NE(attr.rss_caps.rx_hash_fields_mask & IBV_RX_HASH_SRC_IPV4, 0u);
  EXPECT_GT(attr.max_wq_type_rq, 0u);
}

TEST_F(RssTest, FramesSpreadOverTheWorkQueuesAndOneFlowKeepsToOne) {
  MakeRss(IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4 | IBV_RX_HASH_SRC_PORT_UDP |
          IBV_RX_HASH_DST_PORT_UDP);
  // 24 flows (Toeplitz is linear: flows that differ by small steps hash
  // alike, so these are spread out), each sent twice; every receive taken is
  // posted again on its queue.
  std::vector<uint32_t> first_wq;
  for (int round = 0; round < 2; ++round) {
    for (int i = 1; i <= 24; ++i) {
      ASSERT_EQ(SendFrame(a_, FlowFrame(i * 73 % 250 + 1, (1000 + i * 977) % 60000)),
                IBV_WC_SUCCESS);
      ibv_wc wc{};
      ASSERT_EQ(ibv_poll_cq(rss_cq_, 1, &wc), 1) << "flow " << i;
      EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
      EXPECT_EQ(wc.byte_len, 128u);
      ASSERT_LT(wc.wr_id, static_cast<uint64_t>(kWqs));
      EXPECT_EQ(wc.qp_num, wqs_[wc.wr_id]->wq_num) << "the completion names its queue";
      PostOn(static_cast<int>(wc.wr_id), i);
      if (round == 0) {
        first_wq.push_back(wc.qp_num);
      } else {
        EXPECT_EQ(wc.qp_num, first_wq[i - 1]) << "flow " << i << " moved";
      }
    }
  }
  std::set<uint32_t> used(first_wq.begin(), first_wq.end());
  EXPECT_GE(used.size(), 3u) << "24 flows over 4 queues";
  for (uint32_t wqn : used) {
    bool known = false;
    for (ibv_wq* wq : wqs_) known = known || wq->wq_num == wqn;
    EXPECT_TRUE(known) << wqn;
  }
  ibv_wc wc{};
  EXPECT_FALSE(Received(b_, &wc)) << "no other QP took them";
}

TEST_F(RssTest, AnRssQpInAMulticastGroupSpreadsItsFramesToo) {
  MakeRss(IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4);
  ibv_gid gid{};
  memcpy(gid.raw + 10, kMulticastMac, 6);
  ASSERT_EQ(ibv_attach_mcast(rss_qp_, &gid, 0), 0) << strerror(errno);
  ASSERT_EQ(SendFrame(a_, Frame(kMulticastMac, 5000, 128, 9)), IBV_WC_SUCCESS);
  ibv_wc wc{};
  ASSERT_EQ(ibv_poll_cq(rss_cq_, 1, &wc), 1) << "a work queue took it";
  ASSERT_LT(wc.wr_id, static_cast<uint64_t>(kWqs));
  EXPECT_EQ(wc.qp_num, wqs_[wc.wr_id]->wq_num);
  EXPECT_EQ(ibv_detach_mcast(rss_qp_, &gid, 0), 0);
}

TEST_F(RssTest, ObjectsInUseAreBusyAndBadAttributesAreRefused) {
  MakeRss(IBV_RX_HASH_SRC_IPV4);
  EXPECT_EQ(ibv_destroy_wq(wqs_[0]), EBUSY);
  EXPECT_EQ(ibv_destroy_rwq_ind_table(table_), EBUSY);
  auto refused = [&](ibv_qp_init_attr_ex init, int err, const char* what) {
    errno = 0;
    ibv_qp* qp = ibv_create_qp_ex(ctx_, &init);
    EXPECT_EQ(qp, nullptr) << what;
    EXPECT_EQ(errno, err) << what;
    if (qp) ibv_destroy_qp(qp);
  };
  ibv_qp_init_attr_ex init = RssInit(IBV_RX_HASH_SRC_IPV4);
  init.comp_mask &= ~IBV_QP_INIT_ATTR_RX_HASH;
  refused(init, EINVAL, "no hash");
  init = RssInit(IBV_RX_HASH_SRC_IPV4);
  init.rx_hash_conf.rx_hash_key_len = 16;
  refused(init, EINVAL, "a 16-byte key");
  init = RssInit(IBV_RX_HASH_SRC_IPV4);
  init.rx_hash_conf.rx_hash_function = 0;
  refused(init, EOPNOTSUPP, "no function");
  init = RssInit(IBV_RX_HASH_IPSEC_SPI);
  refused(init, EOPNOTSUPP, "SPI");
  init = RssInit(IBV_RX_HASH_SRC_IPV4);
  init.qp_type = IBV_QPT_UD;
  refused(init, EINVAL, "UD");
  ibv_rwq_ind_table_init_attr tinit{};
  tinit.log_ind_tbl_size = 9;
  tinit.ind_tbl = wqs_;
  errno = 0;
  EXPECT_EQ(ibv_create_rwq_ind_table(ctx_, &tinit), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_wq_attr attr{};
  attr.attr_mask = IBV_WQ_ATTR_STATE | IBV_WQ_ATTR_CURR_STATE;
  attr.curr_wq_state = IBV_WQS_RESET;
  attr.wq_state = IBV_WQS_ERR;
  EXPECT_EQ(ibv_modify_wq(wqs_[1], &attr), EINVAL) << "it is RDY, not RESET";
  attr.attr_mask = IBV_WQ_ATTR_STATE;
  ASSERT_EQ(ibv_modify_wq(wqs_[1], &attr), 0);
  EXPECT_EQ(wqs_[1]->state, IBV_WQS_ERR);
  attr.wq_state = IBV_WQS_RDY;
  EXPECT_EQ(ibv_modify_wq(wqs_[1], &attr), EINVAL) << "ERR goes back through RESET";
  attr.wq_state = IBV_WQS_RESET;
  ASSERT_EQ(ibv_modify_wq(wqs_[1], &attr), 0);
  EXPECT_EQ(wqs_[1]->state, IBV_WQS_RESET);
}

}  // namespace
}  // namespace softverbs::it
