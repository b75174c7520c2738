// mlx5dv_create_qp(3) and mlx5dv_wr_raw_wqe: libmlx5's checks of the vendor
// attributes (what softverbs lacks is EOPNOTSUPP, and leaves no QP behind),
// and raw mlx5 WQEs running in an ibv_wr_* batch between verbs WRs, in
// order, completing as IBV_WC_DRIVER2; mlx5dv_wr_memcpy's DMA copies.
#include <string.h>

#include "dv_qp_fixture.h"

namespace devx_it {
namespace {

mlx5dv_qp_init_attr RawWqeAttr() {
  mlx5dv_qp_init_attr dv{};
  dv.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS;
  dv.send_ops_flags = MLX5DV_QP_EX_WITH_RAW_WQE;
  return dv;
}

// A SEND or RDMA_WRITE WQE of QP `qpn` with one data segment, asking for a
// CQE. Two or three 16-byte segments.
struct RawWqe {
  mlx5_wqe_ctrl_seg ctrl;
  mlx5_wqe_raddr_seg raddr;  // RDMA_WRITE only (SEND: the data segment)
  mlx5_wqe_data_seg data;
};
static_assert(sizeof(RawWqe) == 48);

RawWqe MakeRawWqe(uint8_t opcode, uint32_t qpn, const ibv_sge& sge, uint64_t raddr = 0,
                  uint32_t rkey = 0) {
  RawWqe w{};
  const bool write = opcode == MLX5_OPCODE_RDMA_WRITE;
  mlx5dv_set_ctrl_seg(&w.ctrl, 0, opcode, 0, qpn, MLX5_WQE_CTRL_CQ_UPDATE, write ? 3 : 2, 0, 0);
  auto* data = write ? &w.data : reinterpret_cast<mlx5_wqe_data_seg*>(&w.raddr);
  if (write) {
    w.raddr.raddr = htobe64(raddr);
    w.raddr.rkey = htobe32(rkey);
  }
  mlx5dv_set_data_seg(data, sge.length, sge.lkey, sge.addr);
  return w;
}

TEST_F(DvQpTest, CreateDvQpTakesLibmlx5sAttributes) {
  const auto qp_count = [] { return Status()["objects"]["qp"].get<size_t>(); };
  const size_t before = qp_count();
  mlx5dv_qp_init_attr dv{};
  dv.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS;
  dv.create_flags = MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE;
  EXPECT_NE(Create(QpAttr(), &dv), nullptr) << strerror(errno);
  dv.create_flags = MLX5DV_QP_CREATE_ALLOW_SCATTER_TO_CQE;
  EXPECT_NE(Create(QpAttr(), &dv), nullptr) << strerror(errno);
  EXPECT_NE(Create(QpAttr(IBV_QPT_UD), nullptr), nullptr) << strerror(errno);
  mlx5dv_qp_init_attr raw = RawWqeAttr();
  EXPECT_NE(Create(QpAttr(IBV_QPT_UC), &raw), nullptr) << strerror(errno);
  EXPECT_EQ(qp_count(), before + 4);

  dv.create_flags = MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE | MLX5DV_QP_CREATE_ALLOW_SCATTER_TO_CQE;
  EXPECT_EQ(Refused(QpAttr(), &dv), EINVAL);
  dv.create_flags = 1u << 30;
  EXPECT_EQ(Refused(QpAttr(), &dv), EINVAL);
  dv.create_flags = MLX5DV_QP_CREATE_TUNNEL_OFFLOADS;
  EXPECT_EQ(Refused(QpAttr(), &dv), EOPNOTSUPP);
  dv.create_flags = MLX5DV_QP_CREATE_PACKET_BASED_CREDIT_MODE;
  EXPECT_EQ(Refused(QpAttr(), &dv), EOPNOTSUPP);
  dv = {};
  dv.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS << 1;
  EXPECT_EQ(Refused(QpAttr(), &dv), EINVAL);
  dv = {};
  dv.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC;
  dv.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCI;
  EXPECT_EQ(Refused(QpAttr(), &dv), EINVAL);  // DC needs IBV_QPT_DRIVER
  ibv_qp_init_attr_ex driver = QpAttr();
  driver.qp_type = IBV_QPT_DRIVER;
  // DC QPs exist (dc_test.cc has their rules): raw WQEs are RC's and UC's,
  // and a DCT needs an SRQ.
  dv.comp_mask |= MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS;
  dv.send_ops_flags = MLX5DV_QP_EX_WITH_RAW_WQE;
  EXPECT_EQ(Refused(driver, &dv), EOPNOTSUPP);
  dv.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC;
  dv.send_ops_flags = 0;
  dv.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCT;
  driver.comp_mask = IBV_QP_INIT_ATTR_PD;
  EXPECT_EQ(Refused(driver, &dv), EINVAL);
  dv.comp_mask = 0;
  EXPECT_EQ(Refused(driver, &dv), EINVAL);
  EXPECT_EQ(Refused(driver, nullptr), EINVAL);
  // Memory-key work requests: RC QPs only (mkey_test.cc has them at work).
  raw.send_ops_flags = MLX5DV_QP_EX_WITH_MKEY_CONFIGURE;
  EXPECT_EQ(Refused(QpAttr(IBV_QPT_UC), &raw), EOPNOTSUPP);
  raw.send_ops_flags = MLX5DV_QP_EX_WITH_MR_LIST;
  EXPECT_EQ(Refused(QpAttr(IBV_QPT_UD), &raw), EOPNOTSUPP);
  // DMA memcpy: RC QPs (and DCIs, dc_test.cc) of a PD given in comp_mask.
  raw.send_ops_flags = MLX5DV_QP_EX_WITH_MEMCPY;
  EXPECT_EQ(Refused(QpAttr(IBV_QPT_UC), &raw), EOPNOTSUPP);
  EXPECT_EQ(Refused(QpAttr(IBV_QPT_UD), &raw), EOPNOTSUPP);
  ibv_qp_init_attr_ex no_pd = QpAttr();
  no_pd.comp_mask &= ~uint32_t{IBV_QP_INIT_ATTR_PD};
  EXPECT_EQ(Refused(no_pd, &raw), EINVAL);
  raw.send_ops_flags = 1ull << 40;
  EXPECT_EQ(Refused(QpAttr(), &raw), EOPNOTSUPP);
  raw = RawWqeAttr();
  EXPECT_EQ(Refused(QpAttr(IBV_QPT_UD), &raw), EOPNOTSUPP);
  EXPECT_EQ(qp_count(), before + 4);
}

// A -> B in one batch: a verbs SEND, a raw SEND, a raw RDMA_WRITE, a verbs
// SEND. B receives the three sends in order, the WRITE's bytes land, and A's
// completions say IBV_WC_SEND for the verbs WRs and IBV_WC_DRIVER2 for the
// raw ones, with the wr_id each was built under.
TEST_F(DvQpTest, RawWqesRunInOrderBetweenVerbsWrs) {
  mlx5dv_qp_init_attr raw = RawWqeAttr();
  ibv_qp *a = nullptr, *b = nullptr;
  ASSERT_TRUE(ConnectedPair(&raw, &a, &b)) << strerror(errno);
  std::vector<char> a_buf(4096, 0), b_buf(4096, 0);
  ibv_mr* a_mr = Register(a_buf.data(), a_buf.size());
  ibv_mr* b_mr = Register(b_buf.data(), b_buf.size());
  ASSERT_TRUE(a_mr && b_mr);
  for (uint32_t i = 0; i < 3; ++i) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(b_buf.data() + 64 * i), 64, b_mr->lkey};
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = 100 + i;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ASSERT_EQ(ibv_post_recv(b, &wr, &bad), 0);
  }
  const char* words[] = {"verbs one", "raw send", "raw write", "verbs two"};
  for (int i = 0; i < 4; ++i) strcpy(a_buf.data() + 512 * i, words[i]);
  const auto sge_of = [&](int i) {
    return ibv_sge{reinterpret_cast<uintptr_t>(a_buf.data() + 512 * i),
                   static_cast<uint32_t>(strlen(words[i]) + 1), a_mr->lkey};
  };
  const RawWqe raw_send = MakeRawWqe(MLX5_OPCODE_SEND, a->qp_num, sge_of(1));
  const RawWqe raw_write = MakeRawWqe(MLX5_OPCODE_RDMA_WRITE, a->qp_num, sge_of(2),
                                      reinterpret_cast<uintptr_t>(b_buf.data() + 1024), b_mr->rkey);

  ibv_qp_ex* qx = ibv_qp_to_qp_ex(a);
  mlx5dv_qp_ex* mx = mlx5dv_qp_ex_from_ibv_qp_ex(qx);
  ASSERT_NE(mx, nullptr);
  ibv_wr_start(qx);
  qx->wr_id = 1;
  qx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(qx);
  ibv_sge s0 = sge_of(0);
  ibv_wr_set_sge_list(qx, 1, &s0);
  qx->wr_id = 2;
  mlx5dv_wr_raw_wqe(mx, &raw_send);
  qx->wr_id = 3;
  mlx5dv_wr_raw_wqe(mx, &raw_write);
  qx->wr_id = 4;
  ibv_wr_send(qx);
  ibv_sge s3 = sge_of(3);
  ibv_wr_set_sge_list(qx, 1, &s3);
  ASSERT_EQ(ibv_wr_complete(qx), 0);

  std::vector<ibv_wc> sent, received;
  for (int i = 0; i < 7; ++i) {
    ibv_wc wc{};
    ASSERT_TRUE(PollOne(&wc)) << "completion " << i;
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    (wc.qp_num == a->qp_num ? sent : received).push_back(wc);
  }
  ASSERT_EQ(sent.size(), 4u);
  ASSERT_EQ(received.size(), 3u);
  const ibv_wc_opcode expected[] = {IBV_WC_SEND, IBV_WC_DRIVER2, IBV_WC_DRIVER2, IBV_WC_SEND};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(sent[i].wr_id, uint64_t(i + 1));
    EXPECT_EQ(sent[i].opcode, expected[i]) << "WR " << i + 1;
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(received[i].wr_id, uint64_t(100 + i));
    EXPECT_EQ(received[i].opcode, IBV_WC_RECV);
  }
  EXPECT_STREQ(b_buf.data(), "verbs one");
  EXPECT_STREQ(b_buf.data() + 64, "raw send");
  EXPECT_STREQ(b_buf.data() + 128, "verbs two");
  EXPECT_STREQ(b_buf.data() + 1024, "raw write");
}

// A raw SEND and a raw RDMA_WRITE whose gather list is an inline segment
// followed by a data segment (as UCX's rc_mlx5 sends a header and a
// payload) deliver the inline bytes, then the data segment's.
TEST_F(DvQpTest, AnInlineSegmentThenADataSegmentArriveAsOneMessage) {
  mlx5dv_qp_init_attr raw = RawWqeAttr();
  ibv_qp *a = nullptr, *b = nullptr;
  ASSERT_TRUE(ConnectedPair(&raw, &a, &b)) << strerror(errno);
  std::vector<char> a_buf(4096, 0), b_buf(16384, 0);
  ibv_mr* a_mr = Register(a_buf.data(), a_buf.size());
  ibv_mr* b_mr = Register(b_buf.data(), b_buf.size());
  ASSERT_TRUE(a_mr && b_mr);
  ASSERT_EQ(PostRecv(b, 200, b_buf.data(), 8192, b_mr->lkey), 0);
  const std::string header = "hdr:12345678";  // 12 bytes inline
  // Longer than a path MTU: over the network its later packets take their
  // bytes from the data segment alone.
  std::string payload;
  for (int i = 0; payload.size() < 3000; ++i) payload += "payload " + std::to_string(i) + ";";
  memcpy(a_buf.data(), payload.data(), payload.size());
  const ibv_sge data{reinterpret_cast<uintptr_t>(a_buf.data()),
                     static_cast<uint32_t>(payload.size()), a_mr->lkey};
  // ctrl, [raddr], inline (4-byte count + 12 bytes: one segment), data.
  struct alignas(16) MixedWqe {
    uint8_t seg[4][16];
  };
  const auto make = [&](uint8_t opcode, uint64_t raddr) {
    MixedWqe w{};
    const bool write = opcode == MLX5_OPCODE_RDMA_WRITE;
    const uint8_t ds = write ? 4 : 3;
    mlx5dv_set_ctrl_seg(reinterpret_cast<mlx5_wqe_ctrl_seg*>(w.seg[0]), 0, opcode, 0, a->qp_num,
                        MLX5_WQE_CTRL_CQ_UPDATE, ds, 0, 0);
    int next = 1;
    if (write) {
      auto* r = reinterpret_cast<mlx5_wqe_raddr_seg*>(w.seg[next++]);
      r->raddr = htobe64(raddr);
      r->rkey = htobe32(b_mr->rkey);
    }
    const uint32_t count = htobe32(MLX5_INLINE_SEG | static_cast<uint32_t>(header.size()));
    memcpy(w.seg[next], &count, 4);
    memcpy(w.seg[next] + 4, header.data(), header.size());
    ++next;
    mlx5dv_set_data_seg(reinterpret_cast<mlx5_wqe_data_seg*>(w.seg[next]), data.length, data.lkey,
                        data.addr);
    return w;
  };
  const MixedWqe send = make(MLX5_OPCODE_SEND, 0);
  const MixedWqe write =
      make(MLX5_OPCODE_RDMA_WRITE, reinterpret_cast<uintptr_t>(b_buf.data()) + 8192);
  ibv_qp_ex* qx = ibv_qp_to_qp_ex(a);
  mlx5dv_qp_ex* mx = mlx5dv_qp_ex_from_ibv_qp_ex(qx);
  ASSERT_NE(mx, nullptr);
  ibv_wr_start(qx);
  qx->wr_id = 1;
  mlx5dv_wr_raw_wqe(mx, &send);
  qx->wr_id = 2;
  mlx5dv_wr_raw_wqe(mx, &write);
  ASSERT_EQ(ibv_wr_complete(qx), 0);
  const std::string whole = header + payload;
  int sent = 0;
  for (int i = 0; i < 3; ++i) {
    ibv_wc wc{};
    ASSERT_TRUE(PollOne(&wc)) << "completion " << i;
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    if (wc.qp_num == a->qp_num) {
      EXPECT_EQ(wc.opcode, IBV_WC_DRIVER2);
      ++sent;
    } else {
      EXPECT_EQ(wc.wr_id, 200u);
      EXPECT_EQ(wc.byte_len, whole.size());
    }
  }
  EXPECT_EQ(sent, 2);
  EXPECT_EQ(std::string(b_buf.data(), whole.size()), whole);
  EXPECT_EQ(std::string(b_buf.data() + 8192, whole.size()), whole);
  EXPECT_EQ(b_buf[whole.size()], 0);  // nothing past the messages
  EXPECT_EQ(b_buf[8192 + whole.size()], 0);
}

// Raw RDMA_READ and ATOMIC_FA WQEs (a remote address segment, an atomic
// segment with big-endian operands) read and add as their verbs WRs do, and
// complete as IBV_WC_DRIVER2 with the bytes they moved.
TEST_F(DvQpTest, RawReadAndAtomicWqesMoveTheirBytes) {
  mlx5dv_qp_init_attr raw = RawWqeAttr();
  ibv_qp* a = Create(QpAttr(), &raw);
  ibv_qp* b = Create(QpAttr(), nullptr);
  ASSERT_TRUE(a && b) << strerror(errno);
  constexpr unsigned kAccess = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  ASSERT_TRUE(ConnectVerbsRc(ctx_, a, b->qp_num, kAccess));
  ASSERT_TRUE(ConnectVerbsRc(ctx_, b, a->qp_num, kAccess));
  alignas(8) static char a_buf[4096], b_buf[4096];
  memset(a_buf, 0, sizeof(a_buf));
  memset(b_buf, 0, sizeof(b_buf));
  ibv_mr* a_mr = Register(a_buf, sizeof(a_buf));
  ibv_mr* b_mr =
      ibv_reg_mr(pd_, b_buf, sizeof(b_buf),
                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
  ASSERT_TRUE(a_mr && b_mr) << strerror(errno);
  mrs_.push_back(b_mr);
  strcpy(b_buf + 256, "read me raw");
  const uint64_t counter = 40;
  memcpy(b_buf + 1024, &counter, sizeof(counter));

  struct {
    mlx5_wqe_ctrl_seg ctrl;
    mlx5_wqe_raddr_seg raddr;
    mlx5_wqe_data_seg data;
  } read{};
  mlx5dv_set_ctrl_seg(&read.ctrl, 0, MLX5_OPCODE_RDMA_READ, 0, a->qp_num, MLX5_WQE_CTRL_CQ_UPDATE,
                      3, 0, 0);
  read.raddr.raddr = htobe64(reinterpret_cast<uintptr_t>(b_buf + 256));
  read.raddr.rkey = htobe32(b_mr->rkey);
  mlx5dv_set_data_seg(&read.data, 32, a_mr->lkey, reinterpret_cast<uintptr_t>(a_buf));
  struct {
    mlx5_wqe_ctrl_seg ctrl;
    mlx5_wqe_raddr_seg raddr;
    mlx5_wqe_atomic_seg atomic;
    mlx5_wqe_data_seg data;
  } add{};
  mlx5dv_set_ctrl_seg(&add.ctrl, 0, MLX5_OPCODE_ATOMIC_FA, 0, a->qp_num, MLX5_WQE_CTRL_CQ_UPDATE, 4,
                      0, 0);
  add.raddr.raddr = htobe64(reinterpret_cast<uintptr_t>(b_buf + 1024));
  add.raddr.rkey = htobe32(b_mr->rkey);
  add.atomic.swap_add = htobe64(5);
  mlx5dv_set_data_seg(&add.data, 8, a_mr->lkey, reinterpret_cast<uintptr_t>(a_buf + 512));

  ibv_qp_ex* qx = ibv_qp_to_qp_ex(a);
  mlx5dv_qp_ex* mx = mlx5dv_qp_ex_from_ibv_qp_ex(qx);
  ibv_wr_start(qx);
  qx->wr_id = 11;
  mlx5dv_wr_raw_wqe(mx, &read);
  qx->wr_id = 12;
  mlx5dv_wr_raw_wqe(mx, &add);
  ASSERT_EQ(ibv_wr_complete(qx), 0);
  for (uint64_t id : {11u, 12u}) {
    ibv_wc wc{};
    ASSERT_TRUE(PollOne(&wc)) << "WR " << id;
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    EXPECT_EQ(wc.wr_id, id);
    EXPECT_EQ(wc.opcode, IBV_WC_DRIVER2);
  }
  EXPECT_STREQ(a_buf, "read me raw");
  uint64_t fetched = 0, now = 0;
  memcpy(&fetched, a_buf + 512, sizeof(fetched));
  memcpy(&now, b_buf + 1024, sizeof(now));
  EXPECT_EQ(fetched, 40u);
  EXPECT_EQ(now, 45u);
}

// A raw WQE the device cannot read, or one on a QP not created for raw
// WQEs, fails its whole batch at ibv_wr_complete: nothing of it runs; so
// does a DMA memcpy on a QP not created with MLX5DV_QP_EX_WITH_MEMCPY
// (mlx5dv_wr_post(3): the flag is needed), or memory-key WRs on a QP not
// created with their flags. The builders softverbs does not have (the
// signature and crypto setters) fail with EOPNOTSUPP.
TEST_F(DvQpTest, ABadRawWqeFailsItsBatch) {
  mlx5dv_qp_init_attr raw = RawWqeAttr();
  ibv_qp* a = Create(QpAttr(), &raw);
  ibv_qp* plain = Create(QpAttr(), nullptr);
  ibv_qp* b = Create(QpAttr(), nullptr);
  ASSERT_TRUE(a && plain && b) << strerror(errno);
  ASSERT_TRUE(ConnectVerbsRc(ctx_, a, b->qp_num));
  ASSERT_TRUE(ConnectVerbsRc(ctx_, plain, b->qp_num));
  ASSERT_TRUE(ConnectVerbsRc(ctx_, b, a->qp_num));
  std::vector<char> buf(4096, 0);
  ibv_mr* mr = Register(buf.data(), buf.size());
  ASSERT_NE(mr, nullptr);
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf.data()), 64, mr->lkey};
  ibv_recv_wr rwr{}, *rbad = nullptr;
  rwr.sg_list = &sge;
  rwr.num_sge = 1;
  ASSERT_EQ(ibv_post_recv(b, &rwr, &rbad), 0);

  const auto batch = [](ibv_qp* qp, auto&& build) {
    ibv_qp_ex* qx = ibv_qp_to_qp_ex(qp);
    ibv_wr_start(qx);
    qx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send(qx);
    ibv_wr_set_sge(qx, 0, 0, 0);  // a verbs SEND first: it must not run either
    build(mlx5dv_qp_ex_from_ibv_qp_ex(qx));
    return ibv_wr_complete(qx);
  };
  RawWqe other_qp = MakeRawWqe(MLX5_OPCODE_SEND, b->qp_num, sge);
  EXPECT_EQ(batch(a, [&](mlx5dv_qp_ex* mx) { mlx5dv_wr_raw_wqe(mx, &other_qp); }), EINVAL);
  RawWqe unknown = MakeRawWqe(MLX5_OPCODE_SEND, a->qp_num, sge);
  unknown.ctrl.opmod_idx_opcode = htobe32(0x7f);
  EXPECT_EQ(batch(a, [&](mlx5dv_qp_ex* mx) { mlx5dv_wr_raw_wqe(mx, &unknown); }), EINVAL);
  RawWqe fine = MakeRawWqe(MLX5_OPCODE_SEND, plain->qp_num, sge);
  EXPECT_EQ(batch(plain, [&](mlx5dv_qp_ex* mx) { mlx5dv_wr_raw_wqe(mx, &fine); }), EINVAL);
  EXPECT_EQ(batch(a,
                  [&](mlx5dv_qp_ex* mx) {
                    mlx5dv_wr_memcpy(mx, mr->lkey, sge.addr + 64, mr->lkey, sge.addr, 8);
                  }),
            EINVAL);
  // Memory-key WRs on a QP created without their send_ops flags.
  EXPECT_EQ(batch(a,
                  [&](mlx5dv_qp_ex* mx) {
                    mlx5dv_wr_mr_list(mx, nullptr, IBV_ACCESS_LOCAL_WRITE, 1, &sge);
                  }),
            EINVAL);
  // A block signature with no mlx5dv_wr_mkey_configure open (libmlx5: EINVAL).
  EXPECT_EQ(batch(a, [&](mlx5dv_qp_ex* mx) { mlx5dv_wr_set_mkey_sig_block(mx, nullptr); }),
            EINVAL);
  ibv_wc wc{};
  usleep(20000);
  EXPECT_EQ(ibv_poll_cq(ibv_cq_ex_to_cq(cq_), 1, &wc), 0) << "a failed batch ran";
}

mlx5dv_qp_init_attr MemcpyAttr() {
  mlx5dv_qp_init_attr dv{};
  dv.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS;
  dv.send_ops_flags = MLX5DV_QP_EX_WITH_MEMCPY;
  return dv;
}

// mlx5dv_wr_memcpy(3) in a batch before a SEND of the bytes it wrote: the
// copy runs in the send queue's order (the SEND carries the copied bytes),
// completes as MLX5DV_WC_MEMCPY, and writes its range and nothing around
// it. Over the network transport (devx_dv_qp_wire_loopback) the device
// runs both.
TEST_F(DvQpTest, DmaMemcpyCopiesInTheSendQueuesOrder) {
  mlx5dv_qp_init_attr dv = MemcpyAttr();
  ibv_qp *a = nullptr, *b = nullptr;
  ASSERT_TRUE(ConnectedPair(&dv, &a, &b)) << strerror(errno);
  constexpr size_t kLen = 40000, kAt = 100;
  std::vector<uint8_t> src(65536), dst(65536, 0), got(256, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 3);
  ibv_mr* src_mr = Register(src.data(), src.size());
  ibv_mr* dst_mr = Register(dst.data(), dst.size());
  ibv_mr* got_mr = Register(got.data(), got.size());
  ASSERT_TRUE(src_mr && dst_mr && got_mr);
  ASSERT_EQ(PostRecv(b, 300, got.data(), 256, got_mr->lkey), 0);

  ibv_qp_ex* qx = ibv_qp_to_qp_ex(a);
  mlx5dv_qp_ex* mx = mlx5dv_qp_ex_from_ibv_qp_ex(qx);
  ASSERT_NE(mx, nullptr);
  ibv_wr_start(qx);
  qx->wr_id = 1;
  qx->wr_flags = IBV_SEND_SIGNALED;
  mlx5dv_wr_memcpy(mx, dst_mr->lkey, reinterpret_cast<uintptr_t>(dst.data() + kAt), src_mr->lkey,
                   reinterpret_cast<uintptr_t>(src.data() + 7), kLen);
  qx->wr_id = 2;
  ibv_wr_send(qx);
  ibv_wr_set_sge(qx, dst_mr->lkey, reinterpret_cast<uintptr_t>(dst.data() + kAt), 256);
  ASSERT_EQ(ibv_wr_complete(qx), 0);

  std::vector<ibv_wc> sent;
  for (int i = 0; i < 3; ++i) {
    ibv_wc wc{};
    ASSERT_TRUE(PollOne(&wc)) << "completion " << i;
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    if (wc.qp_num == a->qp_num) {
      sent.push_back(wc);
    } else {
      EXPECT_EQ(wc.wr_id, 300u);
    }
  }
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].wr_id, 1u);
  EXPECT_EQ(sent[0].opcode, static_cast<ibv_wc_opcode>(MLX5DV_WC_MEMCPY));
  EXPECT_EQ(sent[1].wr_id, 2u);
  EXPECT_EQ(sent[1].opcode, IBV_WC_SEND);
  EXPECT_EQ(memcmp(dst.data() + kAt, src.data() + 7, kLen), 0);
  EXPECT_EQ(memcmp(got.data(), src.data() + 7, 256), 0) << "the SEND ran before the copy";
  for (size_t i = 0; i < dst.size(); ++i) {
    if (i >= kAt && i < kAt + kLen) continue;
    ASSERT_EQ(dst[i], 0) << "byte " << i << " outside the copy";
  }
}

// The same copy as a raw WQE (libmlx5's mlx5_mmo_wqe: control with opmod
// MMO_DMA, metadata, source, destination) on a QP created for raw WQEs:
// a raw WQE's completion, IBV_WC_DRIVER2.
TEST_F(DvQpTest, ARawDmaMmoWqeCopiesToo) {
  mlx5dv_qp_init_attr raw = RawWqeAttr();
  ibv_qp *a = nullptr, *b = nullptr;
  ASSERT_TRUE(ConnectedPair(&raw, &a, &b)) << strerror(errno);
  std::vector<uint8_t> buf(16384, 0);
  for (size_t i = 0; i < 4096; ++i) buf[i] = static_cast<uint8_t>(i * 5 + 9);
  ibv_mr* mr = Register(buf.data(), buf.size());
  ASSERT_NE(mr, nullptr);
  struct {
    mlx5_wqe_ctrl_seg ctrl;
    uint8_t metadata[16];
    mlx5_wqe_data_seg src;
    mlx5_wqe_data_seg dest;
  } mmo{};
  constexpr uint8_t kMmoDma = 0x1;  // libmlx5's MLX5_OPC_MOD_MMO_DMA
  mlx5dv_set_ctrl_seg(&mmo.ctrl, 0, MLX5_OPCODE_MMO, kMmoDma, a->qp_num, MLX5_WQE_CTRL_CQ_UPDATE, 4,
                      0, 0);
  mlx5dv_set_data_seg(&mmo.src, 4096, mr->lkey, reinterpret_cast<uintptr_t>(buf.data()));
  mlx5dv_set_data_seg(&mmo.dest, 4096, mr->lkey, reinterpret_cast<uintptr_t>(buf.data() + 8192));
  ibv_qp_ex* qx = ibv_qp_to_qp_ex(a);
  ibv_wr_start(qx);
  qx->wr_id = 21;
  mlx5dv_wr_raw_wqe(mlx5dv_qp_ex_from_ibv_qp_ex(qx), &mmo);
  ASSERT_EQ(ibv_wr_complete(qx), 0);
  ibv_wc wc{};
  ASSERT_TRUE(PollOne(&wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.wr_id, 21u);
  EXPECT_EQ(wc.opcode, IBV_WC_DRIVER2);
  EXPECT_EQ(memcmp(buf.data() + 8192, buf.data(), 4096), 0);
  EXPECT_EQ(buf[8192 + 4096], 0);
}

// The device's longest copy (max_wr_memcpy_length) runs; one byte more, or
// none, fails the batch at ibv_wr_complete with EINVAL (libmlx5's check)
// and nothing of it runs. ibv_post_send has no memcpy opcode: the number
// past IBV_WR_ATOMIC_WRITE is EINVAL there.
TEST_F(DvQpTest, DmaMemcpyLengthIsTheDevicesToChoose) {
  mlx5dv_context caps{};
  caps.comp_mask = MLX5DV_CONTEXT_MASK_WR_MEMCPY_LENGTH;
  ASSERT_EQ(mlx5dv_query_device(ctx_, &caps), 0);
  const size_t max = caps.max_wr_memcpy_length;
  ASSERT_GE(max, 4096u);
  mlx5dv_qp_init_attr dv = MemcpyAttr();
  ibv_qp *a = nullptr, *b = nullptr;
  ASSERT_TRUE(ConnectedPair(&dv, &a, &b)) << strerror(errno);
  std::vector<uint8_t> src(max + 1), dst(max + 1, 0);
  for (size_t i = 0; i < src.size(); i += 4096) src[i] = static_cast<uint8_t>(i / 4096 + 1);
  src[max - 1] = 0x5a;
  src[max] = 0x77;
  ibv_mr* src_mr = Register(src.data(), src.size());
  ibv_mr* dst_mr = Register(dst.data(), dst.size());
  ASSERT_TRUE(src_mr && dst_mr);
  ibv_qp_ex* qx = ibv_qp_to_qp_ex(a);
  mlx5dv_qp_ex* mx = mlx5dv_qp_ex_from_ibv_qp_ex(qx);
  const auto copy = [&](size_t length, uint64_t wr_id) {
    ibv_wr_start(qx);
    qx->wr_id = wr_id;
    qx->wr_flags = IBV_SEND_SIGNALED;
    mlx5dv_wr_memcpy(mx, dst_mr->lkey, reinterpret_cast<uintptr_t>(dst.data()), src_mr->lkey,
                     reinterpret_cast<uintptr_t>(src.data()), length);
    return ibv_wr_complete(qx);
  };
  EXPECT_EQ(copy(max + 1, 1), EINVAL);
  EXPECT_EQ(copy(0, 2), EINVAL);
  ibv_sge sge{reinterpret_cast<uintptr_t>(src.data()), 8, src_mr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = 3;
  wr.opcode = static_cast<ibv_wr_opcode>(IBV_WR_ATOMIC_WRITE + 1);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  EXPECT_EQ(ibv_post_send(a, &wr, &bad), EINVAL);
  EXPECT_EQ(bad, &wr);
  ibv_wc wc{};
  usleep(20000);
  ASSERT_EQ(ibv_poll_cq(ibv_cq_ex_to_cq(cq_), 1, &wc), 0) << "a refused WR ran";
  EXPECT_EQ(dst[0], 0);

  ASSERT_EQ(copy(max, 4), 0);
  ASSERT_TRUE(PollOne(&wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.wr_id, 4u);
  EXPECT_EQ(memcmp(dst.data(), src.data(), max), 0);
  EXPECT_EQ(dst[max], 0) << "the copy went past its length";
}

// A destination of another PD, or one without local write, is a local
// protection error: the WR completes with IBV_WC_LOC_PROT_ERR, the QP goes
// to ERR, and the destination keeps its bytes (rdma-core's
// test_mlx5_dma_memcpy bad flows).
TEST_F(DvQpTest, DmaMemcpyChecksTheDestinationsKey) {
  ibv_pd* other_pd = ibv_alloc_pd(ctx_);
  ASSERT_NE(other_pd, nullptr);
  std::vector<uint8_t> src(4096, 0x11), dst(4096, 0x22);
  ibv_mr* src_mr = Register(src.data(), src.size());
  ibv_mr* foreign = ibv_reg_mr(other_pd, dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* read_only = ibv_reg_mr(pd_, dst.data(), dst.size(), IBV_ACCESS_REMOTE_READ);
  ASSERT_TRUE(src_mr && foreign && read_only) << strerror(errno);
  for (ibv_mr* dest : {foreign, read_only}) {
    mlx5dv_qp_init_attr dv = MemcpyAttr();
    ibv_qp *a = nullptr, *b = nullptr;
    ASSERT_TRUE(ConnectedPair(&dv, &a, &b)) << strerror(errno);
    ibv_qp_ex* qx = ibv_qp_to_qp_ex(a);
    ibv_wr_start(qx);
    qx->wr_id = 9;
    qx->wr_flags = IBV_SEND_SIGNALED;
    mlx5dv_wr_memcpy(mlx5dv_qp_ex_from_ibv_qp_ex(qx), dest->lkey,
                     reinterpret_cast<uintptr_t>(dst.data()), src_mr->lkey,
                     reinterpret_cast<uintptr_t>(src.data()), src.size());
    ASSERT_EQ(ibv_wr_complete(qx), 0);
    ibv_wc wc{};
    ASSERT_TRUE(PollOne(&wc));
    EXPECT_EQ(wc.wr_id, 9u);
    EXPECT_EQ(wc.status, IBV_WC_LOC_PROT_ERR) << ibv_wc_status_str(wc.status);
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    ASSERT_EQ(ibv_query_qp(a, &attr, IBV_QP_STATE, &init), 0);
    EXPECT_EQ(attr.qp_state, IBV_QPS_ERR);
    EXPECT_EQ(dst, std::vector<uint8_t>(4096, 0x22)) << "a refused copy wrote";
  }
  ibv_dereg_mr(foreign);
  ibv_dereg_mr(read_only);
  ibv_dealloc_pd(other_pd);
}

// mlx5dv_modify_qp_udp_sport(3): an RC or UC QP in RTS takes the port
// (EOPNOTSUPP in another state or of another type, EINVAL for port 0), and
// its traffic goes on. Over the network transport
// (udp_sport_capture.sh), its packets after the call leave from that port
// and those before from the port derived from its number; the QP numbers
// are printed for that check.
TEST_F(DvQpTest, UdpSportIsSetOnAnRcQpInRts) {
  ibv_qp* a = Create(QpAttr(), nullptr);
  ibv_qp* b = Create(QpAttr(), nullptr);
  ibv_qp* ud = Create(QpAttr(IBV_QPT_UD), nullptr);
  ASSERT_TRUE(a && b && ud) << strerror(errno);
  EXPECT_EQ(mlx5dv_modify_qp_udp_sport(a, 55555), EOPNOTSUPP);  // RESET
  ASSERT_TRUE(ConnectVerbsRc(ctx_, a, b->qp_num));
  ASSERT_TRUE(ConnectVerbsRc(ctx_, b, a->qp_num));
  EXPECT_EQ(mlx5dv_modify_qp_udp_sport(ud, 55555), EOPNOTSUPP);
  std::vector<char> buf(8192, 0);
  ibv_mr* mr = Register(buf.data(), buf.size());
  ASSERT_NE(mr, nullptr);
  // n SENDs of 64 bytes from A to B, each received.
  const auto sends = [&](int n) {
    for (int i = 0; i < n; ++i) {
      ibv_sge rsge{reinterpret_cast<uintptr_t>(buf.data() + 4096), 64, mr->lkey};
      ibv_recv_wr rwr{}, *rbad = nullptr;
      rwr.sg_list = &rsge;
      rwr.num_sge = 1;
      ASSERT_EQ(ibv_post_recv(b, &rwr, &rbad), 0);
      ibv_sge ssge{reinterpret_cast<uintptr_t>(buf.data()), 64, mr->lkey};
      ibv_send_wr swr{}, *sbad = nullptr;
      swr.sg_list = &ssge;
      swr.num_sge = 1;
      swr.opcode = IBV_WR_SEND;
      swr.send_flags = IBV_SEND_SIGNALED;
      ASSERT_EQ(ibv_post_send(a, &swr, &sbad), 0);
      for (int c = 0; c < 2; ++c) {
        ibv_wc wc{};
        ASSERT_TRUE(PollOne(&wc));
        ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
      }
    }
  };
  sends(8);
  EXPECT_EQ(mlx5dv_modify_qp_udp_sport(a, 55555), 0);
  EXPECT_EQ(mlx5dv_modify_qp_udp_sport(a, 0), EINVAL);
  sends(8);
  printf("udp_sport qpns: a=%u b=%u\n", a->qp_num, b->qp_num);
}

}  // namespace
}  // namespace devx_it
