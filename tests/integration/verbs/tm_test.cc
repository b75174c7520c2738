// Tag-matching SRQs (IBV_SRQT_TM, ibv_post_srq_ops(3)): the device's
// capabilities and creation rules, the tag list operations and their
// completions, eager messages matched or unexpected (with the phase
// synchronisation), untagged messages, and rendezvous - the device reads the
// sender's buffer into the tag's, sends the FIN, then reports the data - and
// a rendezvous whose read fails.
#include <endian.h>
#include <errno.h>
#include <infiniband/tm_types.h>
#include <string.h>
#include <unistd.h>

#include <vector>

#include "test_env.h"

namespace softverbs::it {
namespace {

constexpr unsigned kAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
constexpr uint32_t kTags = 4;
constexpr size_t kBuf = 4096;

struct Seen {
  ibv_wc_status status;
  ibv_wc_opcode opcode;
  unsigned flags;
  uint64_t wr_id;
  uint32_t byte_len;
  ibv_wc_tm_info tm;
};

class TmTest : public ContextTest {
 protected:
  void SetUp() override {
    ContextTest::SetUp();
    ibv_cq_init_attr_ex ca{};
    ca.cqe = 64;
    ca.wc_flags = static_cast<uint64_t>(IBV_WC_STANDARD_FLAGS) | IBV_WC_EX_WITH_TM_INFO;
    server_cq_ = ibv_create_cq_ex(ctx_, &ca);
    ASSERT_NE(server_cq_, nullptr) << strerror(errno);
    srq_ = CreateTmSrq(kTags, ibv_cq_ex_to_cq(server_cq_));
    ASSERT_NE(srq_, nullptr) << strerror(errno);
    ibv_qp_init_attr init{};
    init.qp_type = IBV_QPT_RC;
    init.send_cq = init.recv_cq = ibv_cq_ex_to_cq(server_cq_);
    init.srq = srq_;
    init.cap = {4, 0, 1, 0, 0};
    server_ = ibv_create_qp(pd_, &init);
    ASSERT_NE(server_, nullptr) << strerror(errno);
    init.send_cq = init.recv_cq = cq_;
    init.srq = nullptr;
    init.cap = {16, 16, 1, 1, 0};
    client_ = ibv_create_qp(pd_, &init);
    ASSERT_NE(client_, nullptr);
    ASSERT_TRUE(ConnectRc(ctx_, server_, client_->qp_num));
    ASSERT_TRUE(ConnectRc(ctx_, client_, server_->qp_num));
    for (auto* b : {&send_buf_, &tag_buf_, &unexp_buf_, &fin_buf_}) b->assign(kBuf, 0);
    send_mr_ = ibv_reg_mr(pd_, send_buf_.data(), kBuf, kAccess);
    tag_mr_ = ibv_reg_mr(pd_, tag_buf_.data(), kBuf, kAccess);
    unexp_mr_ = ibv_reg_mr(pd_, unexp_buf_.data(), kBuf, kAccess);
    fin_mr_ = ibv_reg_mr(pd_, fin_buf_.data(), kBuf, kAccess);
    ASSERT_TRUE(send_mr_ && tag_mr_ && unexp_mr_ && fin_mr_);
  }
  void TearDown() override {
    if (client_) EXPECT_EQ(ibv_destroy_qp(client_), 0);
    if (server_) EXPECT_EQ(ibv_destroy_qp(server_), 0);
    if (srq_) EXPECT_EQ(ibv_destroy_srq(srq_), 0);
    for (ibv_mr* mr : {send_mr_, tag_mr_, unexp_mr_, fin_mr_}) {
      if (mr) EXPECT_EQ(ibv_dereg_mr(mr), 0);
    }
    if (server_cq_) EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(server_cq_)), 0);
    ContextTest::TearDown();
  }
  ibv_srq* CreateTmSrq(uint32_t tags, ibv_cq* cq, uint32_t comp_extra = 0) {
    ibv_srq_init_attr_ex a{};
    a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_CQ |
                  IBV_SRQ_INIT_ATTR_TM | comp_extra;
    a.srq_type = IBV_SRQT_TM;
    a.pd = pd_;
    a.cq = cq;
    a.attr.max_wr = 16;
    a.attr.max_sge = 1;
    a.tm_cap.max_num_tags = tags;
    a.tm_cap.max_ops = 8;
    return ibv_create_srq_ex(ctx_, &a);
  }
  // Posts an ordinary receive of the SRQ (a buffer for unexpected messages).
  void PostUnexpectedBuffer(uint64_t wr_id) {
    ibv_sge sge{reinterpret_cast<uint64_t>(unexp_buf_.data()), kBuf, unexp_mr_->lkey};
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ASSERT_EQ(ibv_post_srq_recv(srq_, &wr, &bad), 0);
  }
  void PostClientRecv(uint64_t wr_id) {
    ibv_sge sge{reinterpret_cast<uint64_t>(fin_buf_.data()), kBuf, fin_mr_->lkey};
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ASSERT_EQ(ibv_post_recv(client_, &wr, &bad), 0);
  }
  int AddTag(uint64_t wr_id, uint64_t tag, uint32_t* handle, int flags = IBV_OPS_SIGNALED) {
    ibv_sge sge{reinterpret_cast<uint64_t>(tag_buf_.data()), kBuf, tag_mr_->lkey};
    ibv_ops_wr op{};
    ibv_ops_wr* bad = nullptr;
    op.wr_id = wr_id;
    op.opcode = IBV_WR_TAG_ADD;
    op.flags = flags;
    op.tm.add.recv_wr_id = wr_id;
    op.tm.add.sg_list = &sge;
    op.tm.add.num_sge = 1;
    op.tm.add.tag = tag;
    op.tm.add.mask = 0xffff;
    int err = ibv_post_srq_ops(srq_, &op, &bad);
    if (handle) *handle = op.tm.handle;
    return err;
  }
  // opcode is an integer: a bad one is stored as the bytes an application
  // would put there (loading it as the enum would be undefined).
  int ListOp(uint32_t opcode, uint64_t wr_id, uint32_t handle, uint32_t unexpected, int flags) {
    ibv_ops_wr op{};
    ibv_ops_wr* bad = nullptr;
    op.wr_id = wr_id;
    memcpy(&op.opcode, &opcode, sizeof(opcode));
    op.flags = flags;
    op.tm.handle = handle;
    op.tm.unexpected_cnt = unexpected;
    return ibv_post_srq_ops(srq_, &op, &bad);
  }
  // Writes a TMH (and an RVH) at the start of send_buf_ and sends `len` bytes.
  void SendTagged(uint8_t opcode, uint64_t tag, uint32_t app_ctx, uint32_t len,
                  const ibv_rvh* rvh = nullptr) {
    ibv_tmh tmh{};
    tmh.opcode = opcode;
    tmh.app_ctx = htobe32(app_ctx);
    tmh.tag = htobe64(tag);
    memcpy(send_buf_.data(), &tmh, sizeof(tmh));
    if (rvh) memcpy(send_buf_.data() + sizeof(tmh), rvh, sizeof(*rvh));
    ibv_sge sge{reinterpret_cast<uint64_t>(send_buf_.data()), len, send_mr_->lkey};
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.wr_id = 0x5e;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ASSERT_EQ(ibv_post_send(client_, &wr, &bad), 0);
  }
  bool PollServer(Seen* s) {
    ibv_poll_cq_attr pa{};
    for (int spins = 0; spins < 20000000; ++spins) {
      if (ibv_start_poll(server_cq_, &pa) != 0) continue;
      s->status = server_cq_->status;
      s->wr_id = server_cq_->wr_id;
      s->opcode = ibv_wc_read_opcode(server_cq_);
      s->flags = ibv_wc_read_wc_flags(server_cq_);
      s->byte_len = ibv_wc_read_byte_len(server_cq_);
      ibv_wc_read_tm_info(server_cq_, &s->tm);
      ibv_end_poll(server_cq_);
      return true;
    }
    return false;
  }
  bool PollClient(ibv_wc* wc) { return PollOne(cq_, wc) == 1; }

  ibv_cq_ex* server_cq_ = nullptr;
  ibv_srq* srq_ = nullptr;
  ibv_qp* server_ = nullptr;
  ibv_qp* client_ = nullptr;
  std::vector<uint8_t> send_buf_, tag_buf_, unexp_buf_, fin_buf_;
  ibv_mr* send_mr_ = nullptr;
  ibv_mr* tag_mr_ = nullptr;
  ibv_mr* unexp_mr_ = nullptr;
  ibv_mr* fin_mr_ = nullptr;
};

TEST_F(TmTest, CapabilitiesAndCreationRules) {
  ibv_device_attr_ex dev{};
  ASSERT_EQ(ibv_query_device_ex(ctx_, nullptr, &dev), 0);
  EXPECT_EQ(dev.tm_caps.flags, static_cast<uint32_t>(IBV_TM_CAP_RC));
  EXPECT_EQ(dev.tm_caps.max_num_tags, 63u);
  EXPECT_EQ(dev.tm_caps.max_sge, 1u);
  EXPECT_EQ(dev.tm_caps.max_rndv_hdr_size, 64u);
  const size_t srqs = MyObjectCount("srq");
  ibv_cq* cq = ibv_cq_ex_to_cq(server_cq_);
  errno = 0;
  EXPECT_EQ(CreateTmSrq(0, cq), nullptr);
  EXPECT_EQ(errno, EINVAL) << "max_num_tags 0";
  errno = 0;
  EXPECT_EQ(CreateTmSrq(64, cq), nullptr);
  EXPECT_EQ(errno, EINVAL) << "max_num_tags above tm_caps";
  errno = 0;
  EXPECT_EQ(CreateTmSrq(4, nullptr), nullptr);
  EXPECT_EQ(errno, EINVAL) << "no CQ";
  ibv_srq_init_attr_ex a{};
  a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_CQ;
  a.srq_type = IBV_SRQT_TM;
  a.pd = pd_;
  a.cq = cq;
  a.attr.max_wr = 4;
  a.attr.max_sge = 1;
  errno = 0;
  EXPECT_EQ(ibv_create_srq_ex(ctx_, &a), nullptr);
  EXPECT_EQ(errno, EINVAL) << "no IBV_SRQ_INIT_ATTR_TM";
  EXPECT_EQ(MyObjectCount("srq"), srqs) << "refused creations leave nothing";
  // Only RC QPs take a tag-matching SRQ.
  ibv_qp_init_attr init{};
  init.qp_type = IBV_QPT_UD;
  init.send_cq = init.recv_cq = cq;
  init.srq = srq_;
  init.cap = {1, 0, 1, 0, 0};
  errno = 0;
  EXPECT_EQ(ibv_create_qp(pd_, &init), nullptr);
  EXPECT_EQ(errno, EINVAL);
  // A basic SRQ has no tag list.
  ibv_srq_init_attr basic{};
  basic.attr.max_wr = 4;
  basic.attr.max_sge = 1;
  ibv_srq* plain = ibv_create_srq(pd_, &basic);
  ASSERT_NE(plain, nullptr);
  ibv_ops_wr op{};
  op.opcode = IBV_WR_TAG_SYNC;
  ibv_ops_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_srq_ops(plain, &op, &bad), EINVAL);
  EXPECT_EQ(bad, &op);
  EXPECT_EQ(ibv_destroy_srq(plain), 0);
}

TEST_F(TmTest, TagListOperations) {
  uint32_t handles[kTags];
  for (uint32_t i = 0; i < kTags; ++i) ASSERT_EQ(AddTag(100 + i, i + 1, &handles[i]), 0);
  Seen s{};
  for (uint32_t i = 0; i < kTags; ++i) {
    ASSERT_TRUE(PollServer(&s));
    EXPECT_EQ(s.opcode, IBV_WC_TM_ADD);
    EXPECT_EQ(s.status, IBV_WC_SUCCESS);
    EXPECT_EQ(s.wr_id, 100 + i);
    EXPECT_EQ(s.flags & IBV_WC_TM_SYNC_REQ, 0u);
  }
  EXPECT_EQ(AddTag(200, 9, nullptr), ENOMEM) << "the list holds max_num_tags";
  ASSERT_EQ(ListOp(IBV_WR_TAG_DEL, 300, handles[1], 0, IBV_OPS_SIGNALED), 0);
  ASSERT_TRUE(PollServer(&s));
  EXPECT_EQ(s.opcode, IBV_WC_TM_DEL);
  EXPECT_EQ(s.status, IBV_WC_SUCCESS);
  EXPECT_EQ(s.wr_id, 300u);
  // Removing it again fails, signalled or not.
  ASSERT_EQ(ListOp(IBV_WR_TAG_DEL, 301, handles[1], 0, 0), 0);
  ASSERT_TRUE(PollServer(&s));
  EXPECT_EQ(s.opcode, IBV_WC_TM_DEL);
  EXPECT_EQ(s.status, IBV_WC_TM_ERR);
  EXPECT_EQ(s.wr_id, 301u);
  // The freed slot takes a new tag, under a new handle.
  uint32_t again = 0;
  ASSERT_EQ(AddTag(400, 42, &again, 0), 0);
  EXPECT_NE(again, handles[1]) << "a stale handle must not name the new tag";
  ASSERT_EQ(ListOp(IBV_WR_TAG_DEL, 302, handles[1], 0, 0), 0);
  ASSERT_TRUE(PollServer(&s));
  EXPECT_EQ(s.status, IBV_WC_TM_ERR) << "the old handle misses the reused slot";
  ASSERT_EQ(ListOp(IBV_WR_TAG_SYNC, 500, 0, 0, IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC), 0);
  ASSERT_TRUE(PollServer(&s));
  EXPECT_EQ(s.opcode, IBV_WC_TM_SYNC);
  EXPECT_EQ(s.wr_id, 500u);
  // Bad operations stop at the bad WR.
  EXPECT_EQ(ListOp(7, 600, 0, 0, 0), EINVAL);
  EXPECT_EQ(ListOp(IBV_WR_TAG_SYNC, 601, 0, 0, 1 << 5), EINVAL) << "unknown flag";
  ibv_sge two[2] = {};
  ibv_ops_wr op{};
  ibv_ops_wr* bad = nullptr;
  op.opcode = IBV_WR_TAG_ADD;
  op.tm.add.sg_list = two;
  op.tm.add.num_sge = 2;
  EXPECT_EQ(ibv_post_srq_ops(srq_, &op, &bad), EINVAL) << "max_sge is 1";
  EXPECT_EQ(bad, &op);
}

// Eager messages: unmatched ones take an ordinary receive whole and suspend
// matching until software reports them (IBV_OPS_TM_SYNC); matched ones land
// in the tag's buffer without their header.
TEST_F(TmTest, EagerMatchedUnexpectedAndSync) {
  PostUnexpectedBuffer(0xaa);
  PostUnexpectedBuffer(0xab);
  uint32_t h = 0;
  ASSERT_EQ(AddTag(5, 5, &h, 0), 0);
  for (size_t i = 16; i < 200; ++i) send_buf_[i] = static_cast<uint8_t>(i);
  ibv_wc wc{};
  Seen s{};
  SendTagged(IBV_TMH_EAGER, 7, 0x77, 200);  // no tag 7: unexpected
  ASSERT_TRUE(PollClient(&wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  ASSERT_TRUE(PollServer(&s));
  EXPECT_EQ(s.opcode, IBV_WC_TM_RECV);
  EXPECT_EQ(s.status, IBV_WC_SUCCESS);
  EXPECT_EQ(s.flags & (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID), 0u);
  EXPECT_EQ(s.wr_id, 0xaau);
  EXPECT_EQ(s.byte_len, 200u) << "the whole message, header included";
  EXPECT_EQ(s.tm.tag, 0u);
  EXPECT_EQ(memcmp(unexp_buf_.data(), send_buf_.data(), 200), 0);
  // Software has not reported the unexpected message: tag 5 does not match.
  uint32_t h2 = 0;
  ASSERT_EQ(AddTag(9, 9, &h2), 0);
  ASSERT_TRUE(PollServer(&s));
  EXPECT_EQ(s.opcode, IBV_WC_TM_ADD);
  EXPECT_NE(s.flags & IBV_WC_TM_SYNC_REQ, 0u) << "the device asks for a sync";
  SendTagged(IBV_TMH_EAGER, 5, 0x55, 200);
  ASSERT_TRUE(PollClient(&wc));
  ASSERT_TRUE(PollServer(&s));
  EXPECT_EQ(s.wr_id, 0xabu) << "unexpected while out of sync";
  EXPECT_EQ(s.flags & IBV_WC_TM_MATCH, 0u);
  ASSERT_EQ(ListOp(IBV_WR_TAG_SYNC, 27, 0, 2, IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC), 0);
  ASSERT_TRUE(PollServer(&s));
  EXPECT_EQ(s.opcode, IBV_WC_TM_SYNC);
  EXPECT_EQ(s.flags & IBV_WC_TM_SYNC_REQ, 0u);
  // In sync: tag 5 matches; the payload after the 16-byte header lands in
  // the tag's buffer.
  SendTagged(IBV_TMH_EAGER, 5, 0x55, 200);
  ASSERT_TRUE(PollClient(&wc));
  ASSERT_TRUE(PollServer(&s));
  EXPECT_EQ(s.opcode, IBV_WC_TM_RECV);
  EXPECT_EQ(s.flags & (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID),
            static_cast<unsigned>(IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID));
  EXPECT_EQ(s.wr_id, 5u);
  EXPECT_EQ(s.tm.tag, 5u);
  EXPECT_EQ(s.tm.priv, 0x55u);
  EXPECT_EQ(s.byte_len, 184u);
  EXPECT_EQ(memcmp(tag_buf_.data(), send_buf_.data() + 16, 184), 0);
  // The tag was consumed: removing it fails.
  ASSERT_EQ(ListOp(IBV_WR_TAG_DEL, 31, h, 0, IBV_OPS_SIGNALED), 0);
  ASSERT_TRUE(PollServer(&s));
  EXPECT_EQ(s.status, IBV_WC_TM_ERR);
}

TEST_F(TmTest, UntaggedMessagesAreNotUnexpected) {
  PostUnexpectedBuffer(0xcc);
  uint32_t h = 0;
  ASSERT_EQ(AddTag(3, 3, &h, 0), 0);
  ibv_wc wc{};
  Seen s{};
  SendTagged(IBV_TMH_NO_TAG, 3, 0, 64);
  ASSERT_TRUE(PollClient(&wc));
  ASSERT_TRUE(PollServer(&s));
  EXPECT_EQ(s.opcode, IBV_WC_TM_NO_TAG);
  EXPECT_EQ(s.wr_id, 0xccu);
  EXPECT_EQ(s.flags & (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID), 0u);
  // Still in sync: the tagged message that follows matches.
  SendTagged(IBV_TMH_EAGER, 3, 0, 64);
  ASSERT_TRUE(PollClient(&wc));
  ASSERT_TRUE(PollServer(&s));
  EXPECT_EQ(s.opcode, IBV_WC_TM_RECV);
  EXPECT_NE(s.flags & IBV_WC_TM_MATCH, 0u);
  EXPECT_EQ(s.wr_id, 3u);
}

// Rendezvous: the match is reported, the sender completes, the device reads
// the sender's buffer, the sender receives the FIN, then the data is
// reported; a read the sender's key does not allow is reported incomplete.
TEST_F(TmTest, RendezvousReadsTheSendersBuffer) {
  std::vector<uint8_t> source(3000);
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<uint8_t>(i * 13 + 1);
  ibv_mr* src_mr = ibv_reg_mr(pd_, source.data(), source.size(), kAccess);
  ASSERT_NE(src_mr, nullptr);
  PostClientRecv(0xf1);
  uint32_t h = 0;
  ASSERT_EQ(AddTag(11, 11, &h, 0), 0);
  ibv_rvh rvh{htobe64(reinterpret_cast<uint64_t>(source.data())), htobe32(src_mr->rkey),
              htobe32(static_cast<uint32_t>(source.size()))};
  SendTagged(IBV_TMH_RNDV, 11, 0x1111, 64, &rvh);
  Seen s{};
  ASSERT_TRUE(PollServer(&s));
  EXPECT_EQ(s.opcode, IBV_WC_TM_RECV);
  EXPECT_EQ(s.flags & (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID),
            static_cast<unsigned>(IBV_WC_TM_MATCH));
  EXPECT_EQ(s.wr_id, 11u);
  EXPECT_EQ(s.tm.tag, 11u);
  ibv_wc wc{};
  ASSERT_TRUE(PollClient(&wc));
  EXPECT_EQ(wc.opcode, IBV_WC_SEND) << "the sender's completion comes before the FIN";
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  ASSERT_TRUE(PollClient(&wc));
  EXPECT_EQ(wc.opcode, IBV_WC_RECV);
  EXPECT_EQ(wc.wr_id, 0xf1u);
  EXPECT_EQ(wc.byte_len, 16u);
  ibv_tmh fin{};
  memcpy(&fin, fin_buf_.data(), sizeof(fin));
  EXPECT_EQ(fin.opcode, IBV_TMH_FIN);
  EXPECT_EQ(be64toh(fin.tag), 11u);
  ASSERT_TRUE(PollServer(&s));
  EXPECT_EQ(s.opcode, IBV_WC_TM_RECV);
  EXPECT_EQ(s.status, IBV_WC_SUCCESS);
  EXPECT_EQ(s.flags & (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID),
            static_cast<unsigned>(IBV_WC_TM_DATA_VALID));
  EXPECT_EQ(s.wr_id, 11u);
  EXPECT_EQ(s.byte_len, source.size());
  EXPECT_EQ(memcmp(tag_buf_.data(), source.data(), source.size()), 0);

  // A key without remote read: the read fails, no FIN. (Over the network the
  // sender's QP answers the read as a responder answers a bad rkey - a
  // remote access error, its QP in ERR, its receive flushed - after its
  // SEND completed.)
  ibv_mr* local_only = ibv_reg_mr(pd_, source.data(), source.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(local_only, nullptr);
  PostClientRecv(0xf2);
  ASSERT_EQ(AddTag(12, 12, &h, 0), 0);
  rvh.rkey = htobe32(local_only->rkey);
  SendTagged(IBV_TMH_RNDV, 12, 0, 64, &rvh);
  ASSERT_TRUE(PollServer(&s));
  EXPECT_EQ(s.flags & IBV_WC_TM_MATCH, static_cast<unsigned>(IBV_WC_TM_MATCH));
  ASSERT_TRUE(PollClient(&wc));
  EXPECT_EQ(wc.opcode, IBV_WC_SEND);
  ASSERT_TRUE(PollServer(&s));
  EXPECT_EQ(s.status, IBV_WC_TM_RNDV_INCOMPLETE);
  EXPECT_EQ(s.wr_id, 12u);
  usleep(20000);
  while (ibv_poll_cq(cq_, 1, &wc) == 1) {
    EXPECT_FALSE(wc.opcode == IBV_WC_RECV && wc.status == IBV_WC_SUCCESS)
        << "a FIN for a read that failed";
  }
  EXPECT_EQ(ibv_dereg_mr(local_only), 0);
  EXPECT_EQ(ibv_dereg_mr(src_mr), 0);
}

// The network transport matches tags too (wire_tag_matching.cc; this file's
// traffic runs over it as it_tm_wire_loopback): a QP on a TM SRQ whose path
// leaves the host connects (until session 42, EOPNOTSUPP).
TEST_F(TmTest, AcrossHostsTheQpConnects) {
  ibv_qp_init_attr init{};
  init.qp_type = IBV_QPT_RC;
  init.send_cq = init.recv_cq = ibv_cq_ex_to_cq(server_cq_);
  init.srq = srq_;
  init.cap = {4, 0, 1, 0, 0};
  ibv_qp* qp = ibv_create_qp(pd_, &init);
  ASSERT_NE(qp, nullptr);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  ASSERT_EQ(
      ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
      0);
  a.qp_state = IBV_QPS_RTR;
  a.ah_attr = LoopbackAh(ctx_);
  const uint8_t remote[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 51, 100, 77};
  memcpy(a.ah_attr.grh.dgid.raw, remote, 16);  // TEST-NET-2: not this host's
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = 0x123;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  EXPECT_EQ(ibv_modify_qp(qp, &a,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                              IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
            0);
  ibv_qp_init_attr got_init{};
  ibv_qp_attr got{};
  ASSERT_EQ(ibv_query_qp(qp, &got, IBV_QP_STATE, &got_init), 0);
  EXPECT_EQ(got.qp_state, IBV_QPS_RTR);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
}

}  // namespace
}  // namespace softverbs::it
