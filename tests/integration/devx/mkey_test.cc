// mlx5's indirect memory keys (mlx5dv_create_mkey(3), mlx5dv_wr_mr_list(3),
// mlx5dv_wr_mr_interleaved, mlx5dv_wr_mkey_configure(3)): a UMR gives the
// key its layout in its send queue's order; SENDs, receives and RDMA WRITEs
// through the key reach the bytes its layout names and nothing else; an
// access past the layout, through an invalidated key or onto an MR that is
// gone fails as hardware's does; the builders check what libmlx5 checks.
// Over the network transport too (devx_mkey_wire_loopback).
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include <chrono>
#include <string>
#include <thread>

#include "mkey_fixture.h"

namespace devx_it {
namespace {

// rdma-core's test_mkey_list, byte for byte: a 16-byte SEND gathered from
// two 8-byte pieces of one MR through a list key lands, through another
// list key, in two 8-byte pieces of the receiver's MR; the UMRs complete as
// MLX5DV_WC_UMR, in the send queue's order.
TEST_F(MkeyTest, AListKeyGathersAndScattersAcrossItsMrs) {
  Pair();
  std::vector<uint8_t> src(256, 'c'), dst(256, 's');
  ibv_mr* src_mr = Register(src.data(), src.size());
  ibv_mr* dst_mr = Register(dst.data(), dst.size());
  ASSERT_TRUE(src_mr && dst_mr);
  src[3] = 'X';
  src[70] = 'Y';
  mlx5dv_mkey* gather = NewMkey();
  mlx5dv_mkey* scatter = NewMkey();
  ASSERT_TRUE(gather && scatter) << strerror(errno);
  ASSERT_EQ(MrList(gather, 0, {{At(src, 0), 8, src_mr->lkey}, {At(src, 64), 8, src_mr->lkey}}, 1),
            0);
  ASSERT_EQ(MrList(scatter, IBV_ACCESS_LOCAL_WRITE,
                   {{At(dst, 0), 8, dst_mr->lkey}, {At(dst, 64), 8, dst_mr->lkey}}, 2),
            0);
  ExpectUmrDone(1);
  ExpectUmrDone(2);
  ASSERT_EQ(PostRecv(b_, 10, nullptr, 16, scatter->lkey), 0);
  ASSERT_EQ(PostSend(a_, 11, 0, 16, gather->lkey), 0);
  for (const ibv_wc& wc : Successes(2)) {
    if (wc.wr_id == 10) {
      EXPECT_EQ(wc.byte_len, 16u);
    }
  }
  std::string expected =
      std::string(8, 'c') + std::string(56, 's') + std::string(8, 'c') + std::string(184, 's');
  expected[3] = 'X';
  expected[70] = 'Y';
  EXPECT_EQ(std::string(dst.begin(), dst.end()), expected);
}

// An interleaved key: repeat_count blocks, each entry giving bytes_count
// bytes and skipping bytes_skip. An RDMA WRITE through its rkey (remote
// write granted by the UMR) lands exactly where the layout says, computed
// here independently; a WRITE starting inside a block too.
TEST_F(MkeyTest, AnInterleavedKeyRepeatsItsBlocks) {
  Pair();
  std::vector<uint8_t> src(64), dst(512, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i + 1);
  ibv_mr* src_mr = Register(src.data(), src.size());
  ibv_mr* dst_mr = Register(dst.data(), dst.size());
  ASSERT_TRUE(src_mr && dst_mr);
  mlx5dv_mkey* mkey = NewMkey();
  ASSERT_NE(mkey, nullptr) << strerror(errno);
  mlx5dv_mr_interleaved layout[2] = {{At(dst, 0), 3, 5, dst_mr->lkey},
                                     {At(dst, 200), 2, 6, dst_mr->lkey}};
  ibv_wr_start(Qx());
  Qx()->wr_id = 1;
  Qx()->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  mlx5dv_wr_mr_interleaved(Mx(), mkey, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 4, 2,
                           layout);
  ASSERT_EQ(ibv_wr_complete(Qx()), 0);
  ExpectUmrDone();
  // Where byte k of the key lives: block k / 5; in it, 3 bytes of entry 0
  // (stride 8) then 2 of entry 1 (stride 8).
  const auto where = [](size_t k) {
    const size_t block = k / 5, in = k % 5;
    return in < 3 ? block * 8 + in : 200 + block * 8 + (in - 3);
  };
  ASSERT_EQ(PostWrite(a_, 5, At(src, 0), 20, src_mr->lkey, 0, mkey->rkey), 0);
  ibv_wc wc = Next();
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  std::vector<uint8_t> expected(512, 0);
  for (size_t k = 0; k < 20; ++k) expected[where(k)] = src[k];
  EXPECT_EQ(dst, expected);
  // Bytes 7..15 of the key again, from other source bytes.
  ASSERT_EQ(PostWrite(a_, 6, At(src, 40), 9, src_mr->lkey, 7, mkey->rkey), 0);
  wc = Next();
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  for (size_t k = 7; k < 16; ++k) expected[where(k)] = src[40 + k - 7];
  EXPECT_EQ(dst, expected);
}

// An interleaved key of one-byte pieces: a 4 KiB SEND gathers 4,096 of
// them (more than an access's pieces that fit on the stack: the list moves
// to the heap) and a 4 KiB WRITE scatters 4,096 - every byte where the
// layout says.
TEST_F(MkeyTest, AKeyOfThousandsOfPiecesCarriesWholeMessages) {
  Pair();
  constexpr uint32_t kBytes = 4096, kStride = 3;
  std::vector<uint8_t> src(kBytes * kStride), dst(kBytes, 0), far(kBytes * kStride, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + i / 251);
  ibv_mr* src_mr = Register(src.data(), src.size());
  ibv_mr* dst_mr = Register(dst.data(), dst.size());
  ibv_mr* far_mr = Register(far.data(), far.size());
  ASSERT_TRUE(src_mr && dst_mr && far_mr);
  mlx5dv_mkey* gather = NewMkey();
  mlx5dv_mkey* scatter = NewMkey();
  ASSERT_TRUE(gather && scatter);
  const auto interleave = [&](mlx5dv_mkey* mkey, uint64_t addr, uint32_t lkey, uint32_t access,
                              uint64_t wr_id) {
    mlx5dv_mr_interleaved one{addr, 1, kStride - 1, lkey};
    ibv_wr_start(Qx());
    Qx()->wr_id = wr_id;
    Qx()->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
    mlx5dv_wr_mr_interleaved(Mx(), mkey, access, kBytes, 1, &one);
    return ibv_wr_complete(Qx());
  };
  ASSERT_EQ(interleave(gather, At(src, 0), src_mr->lkey, 0, 1), 0);
  ExpectUmrDone(1);
  ASSERT_EQ(interleave(scatter, At(far, 1), far_mr->lkey,
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 2),
            0);
  ExpectUmrDone(2);
  ASSERT_EQ(PostRecv(b_, 10, dst.data(), kBytes, dst_mr->lkey), 0);
  ASSERT_EQ(PostSend(a_, 3, 0, kBytes, gather->lkey), 0);
  Successes(2);
  for (uint32_t k = 0; k < kBytes; ++k) ASSERT_EQ(dst[k], src[k * kStride]) << "byte " << k;
  ASSERT_EQ(PostWrite(a_, 4, At(dst, 0), kBytes, dst_mr->lkey, 0, scatter->rkey), 0);
  const ibv_wc wc = Next();
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  for (size_t i = 0; i < far.size(); ++i) {
    ASSERT_EQ(far[i], i % kStride == 1 ? dst[i / kStride] : 0) << "byte " << i;
  }
}

// rdma-core's test_mkey_list_bad_flow: a SEND longer than the key's layout
// is a local protection error (vendor_err 0x103, out of range), the QP goes
// to ERR and nothing arrives.
TEST_F(MkeyTest, PastItsLayoutIsALocalProtectionError) {
  Pair();
  std::vector<uint8_t> src(256, 'c'), dst(256, 's');
  ibv_mr* src_mr = Register(src.data(), src.size());
  ibv_mr* dst_mr = Register(dst.data(), dst.size());
  ASSERT_TRUE(src_mr && dst_mr);
  mlx5dv_mkey* mkey = NewMkey();
  ASSERT_NE(mkey, nullptr);
  ASSERT_EQ(MrList(mkey, 0, {{At(src, 0), 8, src_mr->lkey}, {At(src, 64), 8, src_mr->lkey}}), 0);
  ExpectUmrDone();
  ASSERT_EQ(PostRecv(b_, 10, dst.data(), 256, dst_mr->lkey), 0);
  ASSERT_EQ(PostSend(a_, 11, 0, 17, mkey->lkey), 0);
  const ibv_wc wc = Next();
  EXPECT_EQ(wc.wr_id, 11u);
  EXPECT_EQ(wc.status, IBV_WC_LOC_PROT_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.vendor_err, 0x103u);
  EXPECT_EQ(dst, std::vector<uint8_t>(256, 's'));
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(ibv_query_qp(a_, &attr, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(attr.qp_state, IBV_QPS_ERR);
}

// IBV_WR_LOCAL_INV of the key (its lkey, as libmlx5's tests post it) ends
// it: the next SEND through it is a bad key (vendor_err 0x101). A UMR makes
// it whole again, with a new layout.
TEST_F(MkeyTest, LocalInvalidateEndsTheKeyAndAUmrRestoresIt) {
  Pair();
  std::vector<uint8_t> src(64, 'a'), dst(64, 0);
  ibv_mr* src_mr = Register(src.data(), src.size());
  ibv_mr* dst_mr = Register(dst.data(), dst.size());
  ASSERT_TRUE(src_mr && dst_mr);
  mlx5dv_mkey* mkey = NewMkey();
  ASSERT_NE(mkey, nullptr);
  ASSERT_EQ(MrList(mkey, 0, {{At(src, 0), 16, src_mr->lkey}}), 0);
  ExpectUmrDone();
  ASSERT_EQ(PostSend(a_, 2, 0, 0, 0, IBV_WR_LOCAL_INV, mkey->lkey), 0);
  ibv_wc wc = Next();
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.opcode, IBV_WC_LOCAL_INV);
  ASSERT_EQ(PostRecv(b_, 10, dst.data(), 64, dst_mr->lkey), 0);
  ASSERT_EQ(PostSend(a_, 3, 0, 16, mkey->lkey), 0);
  wc = Next();
  EXPECT_EQ(wc.wr_id, 3u);
  EXPECT_EQ(wc.status, IBV_WC_LOC_PROT_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.vendor_err, 0x101u);
  EXPECT_EQ(dst, std::vector<uint8_t>(64, 0));

  // A new pair (A is in ERR): the UMR gives the key a layout again.
  ibv_qp* old_a = a_;
  Pair();
  ASSERT_NE(a_, old_a);
  src[20] = 'z';
  ASSERT_EQ(MrList(mkey, 0, {{At(src, 16), 8, src_mr->lkey}}, 4), 0);
  ExpectUmrDone(4);
  ASSERT_EQ(PostRecv(b_, 11, dst.data(), 64, dst_mr->lkey), 0);
  ASSERT_EQ(PostSend(a_, 5, 0, 8, mkey->lkey), 0);
  Successes(2);
  EXPECT_EQ(std::string(dst.begin(), dst.begin() + 9), std::string("aaaazaaa") + '\0');
}

// rdma-core's test_mkey_remote_invalidate: a key created with
// MLX5DV_MKEY_INIT_ATTR_FLAGS_REMOTE_INVALIDATE is invalidated by a
// SEND_WITH_INV of its rkey (the receive completion says IBV_WC_WITH_INV
// and names it); a WRITE through it then is a remote access error. A key
// created without the flag is not: the SEND_WITH_INV is an invalid request.
TEST_F(MkeyTest, RemoteInvalidateNeedsTheKeysFlag) {
  Pair();
  std::vector<uint8_t> src(64, 'w'), dst(64, 0), note(16, 0);
  ibv_mr* src_mr = Register(src.data(), src.size());
  ibv_mr* dst_mr = Register(dst.data(), dst.size());
  ibv_mr* note_mr = Register(note.data(), note.size());
  ASSERT_TRUE(src_mr && dst_mr && note_mr);
  mlx5dv_mkey* mkey =
      NewMkey(MLX5DV_MKEY_INIT_ATTR_FLAGS_INDIRECT | MLX5DV_MKEY_INIT_ATTR_FLAGS_REMOTE_INVALIDATE);
  ASSERT_NE(mkey, nullptr) << strerror(errno);
  ASSERT_EQ(MrList(mkey, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
                   {{At(dst, 0), 32, dst_mr->lkey}}),
            0);
  ExpectUmrDone();
  ASSERT_EQ(PostRecv(b_, 10, note.data(), 16, note_mr->lkey), 0);
  ASSERT_EQ(PostSend(a_, 2, At(src, 0), 4, src_mr->lkey, IBV_WR_SEND_WITH_INV, mkey->rkey), 0);
  for (const ibv_wc& wc : Successes(2)) {
    if (wc.wr_id == 10) {
      EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_INV);
      EXPECT_EQ(wc.invalidated_rkey, mkey->rkey);
    }
  }
  ASSERT_EQ(PostWrite(a_, 3, At(src, 0), 8, src_mr->lkey, 0, mkey->rkey), 0);
  ibv_wc wc = Next();
  EXPECT_EQ(wc.wr_id, 3u);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(dst, std::vector<uint8_t>(64, 0));

  Pair();
  mlx5dv_mkey* plain = NewMkey();
  ASSERT_NE(plain, nullptr);
  ASSERT_EQ(MrList(plain, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE,
                   {{At(dst, 0), 32, dst_mr->lkey}}),
            0);
  ExpectUmrDone();
  ASSERT_EQ(PostRecv(b_, 12, note.data(), 16, note_mr->lkey), 0);
  ASSERT_EQ(PostSend(a_, 4, At(src, 0), 4, src_mr->lkey, IBV_WR_SEND_WITH_INV, plain->rkey), 0);
  bool sender_saw_it = false;
  for (int i = 0; i < 2 && PollOne(&wc); ++i) {
    if (wc.wr_id == 4) {
      sender_saw_it = true;
      EXPECT_EQ(wc.status, IBV_WC_REM_INV_REQ_ERR) << ibv_wc_status_str(wc.status);
    }
  }
  EXPECT_TRUE(sender_saw_it);
}

// The key reaches its MRs only while they are registered: once one is
// deregistered, a WRITE through the key is a remote access error and the
// memory keeps its bytes.
TEST_F(MkeyTest, AnMrDeregisteredUnderTheKeyIsNotReached) {
  Pair();
  std::vector<uint8_t> src(64, 'q'), dst(4096, 0);
  ibv_mr* src_mr = Register(src.data(), src.size());
  ASSERT_NE(src_mr, nullptr);
  ibv_mr* dst_mr =
      ibv_reg_mr(pd_, dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ASSERT_NE(dst_mr, nullptr);
  mlx5dv_mkey* mkey = NewMkey();
  ASSERT_NE(mkey, nullptr);
  ASSERT_EQ(MrList(mkey, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
                   {{At(dst, 0), 64, dst_mr->lkey}}),
            0);
  ExpectUmrDone();
  ASSERT_EQ(ibv_dereg_mr(dst_mr), 0);
  ASSERT_EQ(PostWrite(a_, 2, At(src, 0), 64, src_mr->lkey, 0, mkey->rkey), 0);
  const ibv_wc wc = Next();
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(dst, std::vector<uint8_t>(4096, 0));
}

// What the device refuses of a layout - an MR of another PD, a range past
// its MR - fails the UMR with IBV_WC_MW_BIND_ERR (vendor_err 0x107, mlx5's
// status for a refused UMR), and the key stays as it was (free).
TEST_F(MkeyTest, TheDeviceRefusesALayoutItCannotServe) {
  ibv_pd* other_pd = ibv_alloc_pd(ctx_);
  ASSERT_NE(other_pd, nullptr);
  std::vector<uint8_t> buf(4096, 0);
  ibv_mr* mine = Register(buf.data(), buf.size());
  ibv_mr* foreign = ibv_reg_mr(other_pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_TRUE(mine && foreign);
  mlx5dv_mkey* mkey = NewMkey();
  ASSERT_NE(mkey, nullptr);
  const std::vector<std::vector<ibv_sge>> bad = {
      {{At(buf, 0), 16, foreign->lkey}},
      {{At(buf, 4090), 16, mine->lkey}},
  };
  for (const auto& layout : bad) {
    Pair();
    ASSERT_EQ(MrList(mkey, IBV_ACCESS_LOCAL_WRITE, layout, 7), 0);
    const ibv_wc wc = Next();
    EXPECT_EQ(wc.wr_id, 7u);
    EXPECT_EQ(wc.status, IBV_WC_MW_BIND_ERR) << ibv_wc_status_str(wc.status);
    EXPECT_EQ(wc.vendor_err, 0x107u);
  }
  // Still free: a SEND through it is a bad key.
  Pair();
  ASSERT_EQ(PostSend(a_, 8, 0, 8, mkey->lkey), 0);
  const ibv_wc wc = Next();
  EXPECT_EQ(wc.wr_id, 8u);
  EXPECT_EQ(wc.status, IBV_WC_LOC_PROT_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.vendor_err, 0x101u);
  ibv_dereg_mr(foreign);
  ibv_dealloc_pd(other_pd);
}

// UMR WQEs as libmlx5 writes them, given to mlx5dv_wr_raw_wqe (the DEVX
// queue engine reads WQEs with the same parser): inline KLMs give the key a
// list layout, a repeat block an interleaved one (the same key again,
// without an invalidation, as an mlx5 UMR may), and a UMR with the FREE
// mask and a free context invalidates it. Each completes as a raw WQE
// (IBV_WC_DRIVER2).
TEST_F(MkeyTest, UmrWqesConfigureAndInvalidateTheKey) {
  dv_ = MkeyQpAttr(MLX5DV_QP_EX_WITH_MR_LIST | MLX5DV_QP_EX_WITH_RAW_WQE);
  Pair();
  std::vector<uint8_t> src(256), dst(256, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i + 1);
  ibv_mr* src_mr = Register(src.data(), src.size());
  ibv_mr* dst_mr = Register(dst.data(), dst.size());
  ASSERT_TRUE(src_mr && dst_mr);
  mlx5dv_mkey* mkey = NewMkey();
  ASSERT_NE(mkey, nullptr);
  struct Umr {
    mlx5_wqe_ctrl_seg ctrl;
    mlx5_wqe_umr_ctrl_seg umr;
    mlx5_wqe_mkey_context_seg mkc;
    uint8_t translation[64];
  };
  static_assert(sizeof(Umr) == 192);
  const auto post = [&](const Umr& w, uint64_t wr_id) {
    ibv_wr_start(Qx());
    Qx()->wr_id = wr_id;
    mlx5dv_wr_raw_wqe(Mx(), &w);
    return ibv_wr_complete(Qx());
  };
  const auto expect_done = [&](uint64_t wr_id) {
    const ibv_wc wc = Next();
    EXPECT_EQ(wc.wr_id, wr_id);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    EXPECT_EQ(wc.opcode, IBV_WC_DRIVER2);
  };
  const uint64_t access_mask = MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_LOCAL_WRITE |
                               MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_READ |
                               MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_WRITE |
                               MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_ATOMIC;

  // Two KLMs: src[0..8) and src[64..72).
  Umr list{};
  mlx5dv_set_ctrl_seg(&list.ctrl, 0, MLX5_OPCODE_UMR, 0, a_->qp_num, MLX5_WQE_CTRL_CQ_UPDATE, 12, 0,
                      htobe32(mkey->lkey));
  list.umr.flags = MLX5_WQE_UMR_CTRL_FLAG_INLINE;
  list.umr.klm_octowords = htobe16(4);
  list.umr.mkey_mask = htobe64(MLX5_WQE_UMR_CTRL_MKEY_MASK_FREE | MLX5_WQE_UMR_CTRL_MKEY_MASK_MKEY |
                               MLX5_WQE_UMR_CTRL_MKEY_MASK_LEN | access_mask);
  list.mkc.qpn_mkey = htobe32(0xffffff00);
  list.mkc.len = htobe64(16);
  auto* klm = reinterpret_cast<mlx5_wqe_umr_klm_seg*>(list.translation);
  klm[0] = {htobe32(8), htobe32(src_mr->lkey), htobe64(At(src, 0))};
  klm[1] = {htobe32(8), htobe32(src_mr->lkey), htobe64(At(src, 64))};
  ASSERT_EQ(post(list, 1), 0);
  expect_done(1);
  ASSERT_EQ(PostRecv(b_, 10, dst.data(), 64, dst_mr->lkey), 0);
  ASSERT_EQ(PostSend(a_, 2, 0, 16, mkey->lkey), 0);
  Successes(2);
  std::vector<uint8_t> expected(256, 0);
  for (size_t i = 0; i < 8; ++i) expected[i] = src[i], expected[8 + i] = src[64 + i];
  EXPECT_EQ(dst, expected);

  // A repeat block over dst: 2 blocks of (3 bytes, stride 8) and (2 bytes,
  // stride 8 at 100), remote write granted.
  Umr repeat{};
  mlx5dv_set_ctrl_seg(&repeat.ctrl, 0, MLX5_OPCODE_UMR, 0, a_->qp_num, MLX5_WQE_CTRL_CQ_UPDATE, 12,
                      0, htobe32(mkey->lkey));
  repeat.umr = list.umr;
  repeat.mkc.access_flags = MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_LOCAL_WRITE |
                            MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_WRITE;
  repeat.mkc.len = htobe64(10);
  auto* rb = reinterpret_cast<mlx5_wqe_umr_repeat_block_seg*>(repeat.translation);
  rb->byte_count = htobe32(5);
  rb->op = htobe32(0x400);
  rb->repeat_count = htobe32(2);
  rb->num_ent = htobe16(2);
  auto* ent = reinterpret_cast<mlx5_wqe_umr_repeat_ent_seg*>(repeat.translation + 16);
  ent[0] = {htobe16(8), htobe16(3), htobe32(dst_mr->lkey), htobe64(At(dst, 128))};
  ent[1] = {htobe16(8), htobe16(2), htobe32(dst_mr->lkey), htobe64(At(dst, 200))};
  ASSERT_EQ(post(repeat, 3), 0);
  expect_done(3);
  ASSERT_EQ(PostWrite(a_, 4, At(src, 100), 10, src_mr->lkey, 0, mkey->rkey), 0);
  ibv_wc wc = Next();
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  const size_t where[10] = {128, 129, 130, 200, 201, 136, 137, 138, 208, 209};
  for (size_t k = 0; k < 10; ++k) expected[where[k]] = src[100 + k];
  EXPECT_EQ(dst, expected);

  // Invalidation: the FREE mask and a free context, no translation.
  Umr inv{};
  mlx5dv_set_ctrl_seg(&inv.ctrl, 0, MLX5_OPCODE_UMR, 0, a_->qp_num, MLX5_WQE_CTRL_CQ_UPDATE, 8, 0,
                      htobe32(mkey->lkey));
  inv.umr.mkey_mask = htobe64(MLX5_WQE_UMR_CTRL_MKEY_MASK_FREE);
  inv.mkc.free = MLX5_WQE_MKEY_CONTEXT_FREE;
  ASSERT_EQ(post(inv, 5), 0);
  expect_done(5);
  ASSERT_EQ(PostWrite(a_, 6, At(src, 0), 4, src_mr->lkey, 0, mkey->rkey), 0);
  wc = Next();
  EXPECT_EQ(wc.wr_id, 6u);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(dst, expected);
}

// libmlx5's bind of a type 2 memory window is a UMR WQE of the window's key
// (one KLM, the window's access, the new key's tag and the QP's number):
// written raw, it binds the window, which the peer's WRITE then reaches; a
// UMR WQE with the FREE mask of the new key invalidates it.
TEST_F(MkeyTest, AUmrWqeOfAWindowsKeyBindsTheWindow) {
  dv_ = MkeyQpAttr(MLX5DV_QP_EX_WITH_RAW_WQE);
  Pair();
  std::vector<uint8_t> mem(4096, 0), src(64);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(0xa0 + i);
  ibv_mr* mr = ibv_reg_mr(pd_, mem.data(), mem.size(),
                          IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND);
  ASSERT_NE(mr, nullptr) << strerror(errno);
  ibv_mr* src_mr = Register(src.data(), src.size());
  ibv_mw* mw = ibv_alloc_mw(pd_, IBV_MW_TYPE_2);
  ASSERT_TRUE(src_mr && mw);
  const uint8_t tag = static_cast<uint8_t>(mw->rkey + 1);
  const uint32_t rkey = (mw->rkey & ~0xffu) | tag;
  struct {
    mlx5_wqe_ctrl_seg ctrl;
    mlx5_wqe_umr_ctrl_seg umr;
    mlx5_wqe_mkey_context_seg mkc;
    mlx5_wqe_umr_klm_seg klm[4];
  } bind{};
  mlx5dv_set_ctrl_seg(&bind.ctrl, 0, MLX5_OPCODE_UMR, 0, a_->qp_num, MLX5_WQE_CTRL_CQ_UPDATE, 12, 0,
                      htobe32(mw->rkey));
  bind.umr.flags = MLX5_WQE_UMR_CTRL_FLAG_INLINE | MLX5_WQE_UMR_CTRL_FLAG_CHECK_FREE;
  bind.umr.klm_octowords = htobe16(4);
  bind.umr.mkey_mask = htobe64(MLX5_WQE_UMR_CTRL_MKEY_MASK_FREE | MLX5_WQE_UMR_CTRL_MKEY_MASK_MKEY |
                               MLX5_WQE_UMR_CTRL_MKEY_MASK_QPN | MLX5_WQE_UMR_CTRL_MKEY_MASK_LEN |
                               MLX5_WQE_UMR_CTRL_MKEY_MASK_START_ADDR |
                               MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_WRITE);
  bind.mkc.qpn_mkey = htobe32(tag | a_->qp_num << 8);
  bind.mkc.access_flags = MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_WRITE;
  bind.mkc.start_addr = htobe64(At(mem, 256));
  bind.mkc.len = htobe64(512);
  bind.klm[0] = {htobe32(512), htobe32(mr->lkey), htobe64(At(mem, 256))};
  ibv_wr_start(Qx());
  Qx()->wr_id = 1;
  mlx5dv_wr_raw_wqe(Mx(), &bind);
  ASSERT_EQ(ibv_wr_complete(Qx()), 0);
  ibv_wc wc = Next();
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.opcode, IBV_WC_DRIVER2);
  ASSERT_EQ(PostWrite(b_, 2, At(src, 0), 64, src_mr->lkey, At(mem, 300), rkey), 0);
  wc = Next();
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  std::vector<uint8_t> expected(4096, 0);
  std::copy(src.begin(), src.end(), expected.begin() + 300);
  EXPECT_EQ(mem, expected);

  struct {
    mlx5_wqe_ctrl_seg ctrl;
    mlx5_wqe_umr_ctrl_seg umr;
    mlx5_wqe_mkey_context_seg mkc;
  } inv{};
  mlx5dv_set_ctrl_seg(&inv.ctrl, 0, MLX5_OPCODE_UMR, 0, a_->qp_num, MLX5_WQE_CTRL_CQ_UPDATE, 8, 0,
                      htobe32(rkey));
  inv.umr.mkey_mask = htobe64(MLX5_WQE_UMR_CTRL_MKEY_MASK_FREE | MLX5_WQE_UMR_CTRL_MKEY_MASK_MKEY);
  inv.mkc.free = MLX5_WQE_MKEY_CONTEXT_FREE;
  ibv_wr_start(Qx());
  Qx()->wr_id = 3;
  mlx5dv_wr_raw_wqe(Mx(), &inv);
  ASSERT_EQ(ibv_wr_complete(Qx()), 0);
  wc = Next();
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  ASSERT_EQ(PostWrite(b_, 4, At(src, 0), 8, src_mr->lkey, At(mem, 400), rkey), 0);
  wc = Next();
  EXPECT_EQ(wc.wr_id, 4u);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(mem, expected);
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
}

// A UMR WQE the parser cannot read - a translation that is not inline, or
// more KLMs than a key takes - fails its batch with EINVAL (its CQE would
// be LOCAL_QP_OP_ERR on a DEVX queue).
TEST_F(MkeyTest, AnUnreadableUmrWqeFailsItsBatch) {
  dv_ = MkeyQpAttr(MLX5DV_QP_EX_WITH_MR_LIST | MLX5DV_QP_EX_WITH_RAW_WQE);
  Pair();
  mlx5dv_mkey* mkey = NewMkey();
  ASSERT_NE(mkey, nullptr);
  struct {
    mlx5_wqe_ctrl_seg ctrl;
    mlx5_wqe_umr_ctrl_seg umr;
    mlx5_wqe_mkey_context_seg mkc;
    mlx5_wqe_umr_klm_seg klm[12];
  } w{};
  mlx5dv_set_ctrl_seg(&w.ctrl, 0, MLX5_OPCODE_UMR, 0, a_->qp_num, MLX5_WQE_CTRL_CQ_UPDATE, 20, 0,
                      htobe32(mkey->lkey));
  w.umr.klm_octowords = htobe16(4);
  w.umr.mkey_mask = htobe64(MLX5_WQE_UMR_CTRL_MKEY_MASK_FREE | MLX5_WQE_UMR_CTRL_MKEY_MASK_LEN);
  w.klm[0] = {htobe32(8), htobe32(1), htobe64(0x1000)};
  const auto batch = [&] {
    ibv_wr_start(Qx());
    mlx5dv_wr_raw_wqe(Mx(), &w);
    return ibv_wr_complete(Qx());
  };
  EXPECT_EQ(batch(), EINVAL) << "a translation by pointer";
  w.umr.flags = MLX5_WQE_UMR_CTRL_FLAG_INLINE;
  w.umr.klm_octowords = htobe16(12);
  for (auto& k : w.klm) k = {htobe32(8), htobe32(1), htobe64(0x1000)};
  w.ctrl.qpn_ds = htobe32(a_->qp_num << 8 | 20);
  EXPECT_EQ(batch(), EINVAL) << "nine KLMs and more";
  ibv_wc wc{};
  usleep(20000);
  EXPECT_EQ(ibv_poll_cq(ibv_cq_ex_to_cq(cq_), 1, &wc), 0) << "a refused WQE ran";
}

// libmlx5's checks, at mlx5dv_create_mkey and when the batch completes
// (the first error of a batch is wr_complete's, and nothing of it runs):
// crypto keys are EOPNOTSUPP here, max_entries is rounded up
// to a multiple of 4; a UMR needs IBV_SEND_INLINE (EOPNOTSUPP), at most the
// key's entries (ENOMEM), each setter once and after mkey_configure
// (EINVAL), and a QP created with a memory-key send_ops flag (EINVAL).
// ibv_post_send has no UMR opcode. The keys are the device's objects: its
// status counts them until they are destroyed.
TEST_F(MkeyTest, CreationAndBuildersCheckAsLibmlx5Does) {
  const auto mkey_count = [] { return Status()["objects"]["mkey"].get<size_t>(); };
  const size_t before = mkey_count();
  mlx5dv_mkey_init_attr attr{};
  attr.pd = pd_;
  attr.create_flags = MLX5DV_MKEY_INIT_ATTR_FLAGS_INDIRECT;
  attr.max_entries = 3;
  mlx5dv_mkey* mkey = mlx5dv_create_mkey(&attr);
  ASSERT_NE(mkey, nullptr) << strerror(errno);
  EXPECT_EQ(attr.max_entries, 4);
  EXPECT_EQ(mkey_count(), before + 1);
  EXPECT_EQ(mkey->lkey & 0xff, 0u);
  // Signature keys are made (sig_mkey_test.cc); crypto keys are not.
  for (uint32_t flags : {0u, uint32_t{MLX5DV_MKEY_INIT_ATTR_FLAGS_CRYPTO}, 1u << 20}) {
    EXPECT_EQ(NewMkey(flags), nullptr);
    EXPECT_EQ(errno, EOPNOTSUPP) << "create_flags 0x" << std::hex << flags;
  }
  EXPECT_EQ(NewMkey(MLX5DV_MKEY_INIT_ATTR_FLAGS_INDIRECT, 9), nullptr);
  EXPECT_EQ(errno, EINVAL);
  mlx5dv_mkey_err err{};
  EXPECT_EQ(mlx5dv_mkey_check(mkey, &err), EINVAL);  // no signature

  Pair();
  std::vector<uint8_t> buf(256);
  ibv_mr* mr = Register(buf.data(), buf.size());
  ASSERT_NE(mr, nullptr);
  const ibv_sge one{At(buf, 0), 8, mr->lkey};
  std::vector<ibv_sge> five(5, one);
  EXPECT_EQ(MrList(mkey, 0, five), ENOMEM);
  ibv_wr_start(Qx());
  Qx()->wr_flags = IBV_SEND_SIGNALED;
  mlx5dv_wr_mr_list(Mx(), mkey, 0, 1, const_cast<ibv_sge*>(&one));
  EXPECT_EQ(ibv_wr_complete(Qx()), EOPNOTSUPP);
  mlx5dv_mkey_conf_attr conf{};
  ibv_wr_start(Qx());
  Qx()->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  mlx5dv_wr_mkey_configure(Mx(), mkey, 3, &conf);
  mlx5dv_wr_set_mkey_access_flags(Mx(), IBV_ACCESS_LOCAL_WRITE);
  mlx5dv_wr_set_mkey_access_flags(Mx(), IBV_ACCESS_LOCAL_WRITE);
  EXPECT_EQ(ibv_wr_complete(Qx()), EINVAL);
  ibv_wr_start(Qx());
  mlx5dv_wr_set_mkey_layout_list(Mx(), 1, &one);
  EXPECT_EQ(ibv_wr_complete(Qx()), EINVAL);
  ibv_wr_start(Qx());
  Qx()->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  mlx5dv_wr_mkey_configure(Mx(), mkey, 1, &conf);
  mlx5dv_wr_set_mkey_access_flags(Mx(), IBV_ACCESS_MW_BIND);
  EXPECT_EQ(ibv_wr_complete(Qx()), EINVAL);
  // The mkey_configure API in full: access and layout, then traffic reads
  // the layout (the error batches above ran nothing).
  ibv_wr_start(Qx());
  Qx()->wr_id = 8;
  Qx()->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  mlx5dv_wr_mkey_configure(Mx(), mkey, 2, &conf);
  mlx5dv_wr_set_mkey_access_flags(Mx(), IBV_ACCESS_LOCAL_WRITE);
  mlx5dv_wr_set_mkey_layout_list(Mx(), 1, &one);
  ASSERT_EQ(ibv_wr_complete(Qx()), 0);
  ExpectUmrDone(8);

  ibv_qp_init_attr_ex plain_attr = QpAttr();
  ibv_qp* plain = Create(plain_attr, nullptr);
  ASSERT_NE(plain, nullptr);
  ASSERT_TRUE(ConnectVerbsRc(ctx_, plain, b_->qp_num));
  ibv_qp_ex* px = ibv_qp_to_qp_ex(plain);
  ibv_wr_start(px);
  px->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  mlx5dv_wr_mr_list(mlx5dv_qp_ex_from_ibv_qp_ex(px), mkey, 0, 1, const_cast<ibv_sge*>(&one));
  EXPECT_EQ(ibv_wr_complete(px), EINVAL) << "a QP without memory-key send_ops";

  ibv_send_wr wr{}, *bad = nullptr;
  wr.opcode = static_cast<ibv_wr_opcode>(kUmr);
  wr.send_flags = IBV_SEND_SIGNALED;
  EXPECT_EQ(ibv_post_send(a_, &wr, &bad), EINVAL);
  usleep(20000);
  ibv_wc wc{};
  EXPECT_EQ(ibv_poll_cq(ibv_cq_ex_to_cq(cq_), 1, &wc), 0) << "a refused WR ran";

  EXPECT_EQ(mlx5dv_destroy_mkey(mkey), 0);
  EXPECT_EQ(mkey_count(), before);
}

// A process that dies loses its keys as its other objects: the device frees
// a SIGKILLed owner's configured key (and its index) with the rest.
TEST(MkeyOwner, AKilledOwnersKeysAreFreed) {
  ASSERT_NE(FindSoftverbs(), nullptr);
  // A context of the parent's own keeps the device (and its status) up.
  ibv_context* ctx = OpenDevx(false);
  ASSERT_NE(ctx, nullptr);
  const auto mkey_count = [] { return Status()["objects"]["mkey"].get<size_t>(); };
  const size_t before = mkey_count();
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(pipe_fds[0]);
    ibv_context* own = OpenDevx(false);
    ibv_pd* pd = own ? ibv_alloc_pd(own) : nullptr;
    ibv_cq* cq = own ? ibv_create_cq(own, 16, nullptr, nullptr, 0) : nullptr;
    if (!pd || !cq) _exit(10);
    static std::vector<uint8_t> memory(4096);
    ibv_mr* mr = ibv_reg_mr(pd, memory.data(), memory.size(), IBV_ACCESS_LOCAL_WRITE);
    ibv_qp_init_attr_ex attr{};
    attr.qp_type = IBV_QPT_RC;
    attr.send_cq = attr.recv_cq = cq;
    attr.cap = {4, 4, 1, 1, 0};
    attr.pd = pd;
    attr.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    attr.send_ops_flags = IBV_QP_EX_WITH_SEND;
    mlx5dv_qp_init_attr dv = MkeyQpAttr();
    ibv_qp* qp = mr ? mlx5dv_create_qp(own, &attr, &dv) : nullptr;
    if (!qp || !ConnectVerbsRc(own, qp, qp->qp_num)) _exit(11);
    mlx5dv_mkey_init_attr mattr{};
    mattr.pd = pd;
    mattr.create_flags = MLX5DV_MKEY_INIT_ATTR_FLAGS_INDIRECT;
    mattr.max_entries = 1;
    mlx5dv_mkey* mkey = mlx5dv_create_mkey(&mattr);
    if (!mkey) _exit(12);
    ibv_qp_ex* qx = ibv_qp_to_qp_ex(qp);
    ibv_sge sge{reinterpret_cast<uintptr_t>(memory.data()), 64, mr->lkey};
    ibv_wr_start(qx);
    qx->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
    mlx5dv_wr_mr_list(mlx5dv_qp_ex_from_ibv_qp_ex(qx), mkey, IBV_ACCESS_LOCAL_WRITE, 1, &sge);
    if (ibv_wr_complete(qx) != 0) _exit(13);
    // The UMR's completion, within 2 s by the clock (a zeroed wc reads as
    // success: the count says whether one came).
    ibv_wc wc{};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    int polled = 0;
    while ((polled = ibv_poll_cq(cq, 1, &wc)) == 0 && std::chrono::steady_clock::now() < deadline) {
    }
    if (polled != 1 || wc.status != IBV_WC_SUCCESS) _exit(14);
    char ok = 'y';
    if (write(pipe_fds[1], &ok, 1) != 1) _exit(15);
    for (;;) pause();
  }
  close(pipe_fds[1]);
  char ready = 0;
  ASSERT_EQ(read(pipe_fds[0], &ready, 1), 1) << "the child failed to set up";
  close(pipe_fds[0]);
  EXPECT_EQ(mkey_count(), before + 1);
  // The owner's listing shows the key, configured with its one entry.
  const nlohmann::json listed = ClientOf(Status(), child);
  ASSERT_TRUE(listed.contains("mkey")) << listed.dump();
  ASSERT_EQ(listed["mkey"].size(), 1u);
  EXPECT_TRUE(listed["mkey"][0]["configured"].get<bool>());
  EXPECT_EQ(listed["mkey"][0]["entries"].get<size_t>(), 1u);
  EXPECT_EQ(listed["mkey"][0]["max_entries"].get<uint32_t>(), 4u);
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);
  size_t after = before + 1;
  for (int i = 0; i < 100 && after != before; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    after = mkey_count();
  }
  EXPECT_EQ(after, before);
  ibv_close_device(ctx);
}

}  // namespace
}  // namespace devx_it
