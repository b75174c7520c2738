// The mlx5 WQE parser and CQE builder against WQEs built with rdma-core's
// own inline helpers (mlx5dv_set_ctrl_seg, mlx5dv_set_data_seg) and CQEs
// read back with its accessors (mlx5dv_get_cqe_opcode).
#include "datapath/mlx5_wqe.h"

#include <endian.h>
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <vector>

#include "datapath/mkey_layout.h"

namespace softverbs::datapath::mlx5 {
namespace {

constexpr uint32_t kQpn = 0x1234;

class SendRing {
 public:
  explicit SendRing(uint32_t basic_blocks)
      : bytes_(basic_blocks * kSendWqeBb), blocks_(basic_blocks) {}
  uint8_t* At(uint32_t offset) { return bytes_.data() + offset % bytes_.size(); }
  // Writes `segs` (16 bytes each) starting at basic block `wqebb`, wrapping.
  void Write(uint32_t wqebb, const std::vector<std::array<uint8_t, 16>>& segs) {
    uint32_t offset = (wqebb % blocks_) * kSendWqeBb;
    for (const auto& seg : segs) {
      memcpy(At(offset), seg.data(), 16);
      offset += 16;
    }
  }
  const uint8_t* data() const { return bytes_.data(); }
  uint32_t blocks() const { return blocks_; }

 private:
  std::vector<uint8_t> bytes_;
  uint32_t blocks_;
};

template <typename Seg>
std::array<uint8_t, 16> Bytes(const Seg& seg) {
  static_assert(sizeof(Seg) == 16);
  std::array<uint8_t, 16> out;
  memcpy(out.data(), &seg, 16);
  return out;
}

std::array<uint8_t, 16> Ctrl(uint16_t index, uint8_t opcode, uint8_t ds, uint8_t flags,
                             uint32_t imm = 0, uint32_t qpn = kQpn) {
  mlx5_wqe_ctrl_seg ctrl{};
  mlx5dv_set_ctrl_seg(&ctrl, index, opcode, 0, qpn, flags, ds, 0, imm);
  return Bytes(ctrl);
}

std::array<uint8_t, 16> Data(uint32_t length, uint32_t lkey, uint64_t addr) {
  mlx5_wqe_data_seg data{};
  mlx5dv_set_data_seg(&data, length, lkey, addr);
  return Bytes(data);
}

std::array<uint8_t, 16> Raddr(uint64_t addr, uint32_t rkey) {
  mlx5_wqe_raddr_seg raddr{};
  raddr.raddr = htobe64(addr);
  raddr.rkey = htobe32(rkey);
  return Bytes(raddr);
}

TEST(Mlx5SendWqe, SendWithImmediateAndTwoDataSegments) {
  SendRing ring(8);
  ring.Write(3, {Ctrl(3, MLX5_OPCODE_SEND_IMM, 3, MLX5_WQE_CTRL_CQ_UPDATE, htobe32(0xabcd)),
                 Data(100, 0x501, 0x1000), Data(28, 0x502, 0x2000)});
  ParsedSendWqe wqe;
  ASSERT_EQ(ParseSendWqe(ring.data(), ring.blocks(), 3, kQpn, &wqe), WqeError::kNone);
  EXPECT_EQ(wqe.wqe_index, 3);
  EXPECT_EQ(wqe.basic_blocks, 1u);
  EXPECT_EQ(wqe.wr.opcode, uint32_t{IBV_WR_SEND_WITH_IMM});
  EXPECT_EQ(wqe.wr.imm_data, htobe32(0xabcd));
  EXPECT_TRUE(wqe.wr.send_flags & IBV_SEND_SIGNALED);
  ASSERT_EQ(wqe.wr.num_sge, 2u);
  EXPECT_EQ(wqe.wr.sge[0].addr, 0x1000u);
  EXPECT_EQ(wqe.wr.sge[0].length, 100u);
  EXPECT_EQ(wqe.wr.sge[1].lkey, 0x502u);
  EXPECT_EQ(wqe.wr.wr_id, RequesterWrId(MLX5_OPCODE_SEND_IMM, 3));
}

// SEND_INVAL carries the rkey to invalidate in the control segment's
// immediate (big-endian, as libmlx5 writes invalidate_rkey); the SendWr holds
// it in host order, as ibv_send_wr's invalidate_rkey.
TEST(Mlx5SendWqe, SendInvalCarriesTheRkeyToInvalidate) {
  SendRing ring(4);
  ring.Write(0, {Ctrl(0, MLX5_OPCODE_SEND_INVAL, 2, MLX5_WQE_CTRL_CQ_UPDATE, htobe32(0x80001234)),
                 Data(32, 0x501, 0x1000)});
  ParsedSendWqe wqe;
  ASSERT_EQ(ParseSendWqe(ring.data(), ring.blocks(), 0, kQpn, &wqe), WqeError::kNone);
  EXPECT_EQ(wqe.wr.opcode, uint32_t{IBV_WR_SEND_WITH_INV});
  EXPECT_EQ(wqe.wr.imm_data, 0x80001234u);
  ASSERT_EQ(wqe.wr.num_sge, 1u);
  EXPECT_EQ(wqe.wr.sge[0].length, 32u);
}

TEST(Mlx5SendWqe, AtomicWrapsAroundTheRing) {
  // Five segments starting in the last basic block of a 4-block ring: the
  // fifth (the terminating data segment) is at the ring's start.
  SendRing ring(4);
  mlx5_wqe_atomic_seg atomic{};
  atomic.swap_add = htobe64(7);
  atomic.compare = htobe64(5);
  ring.Write(3, {Ctrl(3, MLX5_OPCODE_ATOMIC_CS, 5, 0), Raddr(0xdead0000, 0x77), Bytes(atomic),
                 Data(8, 0x11, 0x4000), Data(0, kInvalidLkey, 0)});
  ParsedSendWqe wqe;
  ASSERT_EQ(ParseSendWqe(ring.data(), ring.blocks(), 3, kQpn, &wqe), WqeError::kNone);
  EXPECT_EQ(wqe.basic_blocks, 2u);
  EXPECT_EQ(wqe.wr.opcode, uint32_t{IBV_WR_ATOMIC_CMP_AND_SWP});
  EXPECT_EQ(wqe.wr.remote_addr, 0xdead0000u);
  EXPECT_EQ(wqe.wr.rkey, 0x77u);
  EXPECT_EQ(wqe.wr.compare_add, 5u);
  EXPECT_EQ(wqe.wr.swap, 7u);
  ASSERT_EQ(wqe.wr.num_sge, 1u);
  EXPECT_EQ(wqe.wr.sge[0].addr, 0x4000u);
}

TEST(Mlx5SendWqe, InlineWrite) {
  SendRing ring(4);
  std::array<uint8_t, 16> inl{};
  const uint32_t count = htobe32(MLX5_INLINE_SEG | 5);
  memcpy(inl.data(), &count, 4);
  memcpy(inl.data() + 4, "hello", 5);
  ring.Write(0, {Ctrl(0, MLX5_OPCODE_RDMA_WRITE, 3, 0), Raddr(0x9000, 0x33), inl});
  ParsedSendWqe wqe;
  ASSERT_EQ(ParseSendWqe(ring.data(), ring.blocks(), 0, kQpn, &wqe), WqeError::kNone);
  EXPECT_TRUE(wqe.wr.send_flags & IBV_SEND_INLINE);
  ASSERT_EQ(wqe.wr.inline_len, 5u);
  EXPECT_EQ(memcmp(wqe.wr.inline_data, "hello", 5), 0);
}

// UCX's am_zcopy: an inline header, then the payload's data segments.
TEST(Mlx5SendWqe, InlineHeaderThenDataSegments) {
  SendRing ring(4);
  std::array<uint8_t, 16> inl{};
  const uint32_t count = htobe32(MLX5_INLINE_SEG | 6);
  memcpy(inl.data(), &count, 4);
  memcpy(inl.data() + 4, "header", 6);
  ring.Write(
      0, {Ctrl(0, MLX5_OPCODE_SEND, 4, 0), inl, Data(100, 0x501, 0x1000), Data(28, 0x502, 0x2000)});
  ParsedSendWqe wqe;
  ASSERT_EQ(ParseSendWqe(ring.data(), ring.blocks(), 0, kQpn, &wqe), WqeError::kNone);
  EXPECT_TRUE(wqe.wr.send_flags & IBV_SEND_INLINE);
  ASSERT_EQ(wqe.wr.inline_len, 6u);
  EXPECT_EQ(memcmp(wqe.wr.inline_data, "header", 6), 0);
  ASSERT_EQ(wqe.wr.num_sge, 2u);
  EXPECT_EQ(wqe.wr.sge[1].addr, 0x2000u);
  EXPECT_EQ(WrBytes(wqe.wr), 6u + 100u + 28u);
  // Inline bytes after a data segment are not read: a named error.
  ring.Write(0, {Ctrl(0, MLX5_OPCODE_SEND, 3, 0), Data(100, 0x501, 0x1000), inl});
  EXPECT_EQ(ParseSendWqe(ring.data(), ring.blocks(), 0, kQpn, &wqe), WqeError::kInlineAfterData);
}

// A UD QP's SEND: the datagram segment's address vector gives the
// destination QP, Q_Key, GID, path and source GID index.
TEST(Mlx5SendWqe, DatagramSegmentAddressesAUdSend) {
  SendRing ring(4);
  mlx5_wqe_av av{};
  av.key.qkey.qkey = htobe32(0x11111111);
  av.dqp_dct = htobe32(0x123 | MLX5_EXTENDED_UD_AV);
  av.tclass = 0x20;
  av.hop_limit = 9;
  av.grh_gid_fl = htobe32(1u << 30 | 3u << 20);
  for (int i = 0; i < 16; ++i) av.rgid[i] = static_cast<uint8_t>(i);
  std::array<uint8_t, 48> seg;
  memcpy(seg.data(), &av, sizeof(av));
  std::array<uint8_t, 16> a, b, c;
  memcpy(a.data(), seg.data(), 16);
  memcpy(b.data(), seg.data() + 16, 16);
  memcpy(c.data(), seg.data() + 32, 16);
  ring.Write(0, {Ctrl(0, MLX5_OPCODE_SEND, 5, 0), a, b, c, Data(12, 0x501, 0x1000)});
  ParsedSendWqe wqe;
  ASSERT_EQ(ParseSendWqe(ring.data(), ring.blocks(), 0, kQpn, &wqe, WqeAddress::kDatagram),
            WqeError::kNone);
  EXPECT_EQ(wqe.basic_blocks, 2u);
  EXPECT_EQ(wqe.wr.remote_qpn, 0x123u);
  EXPECT_EQ(wqe.wr.remote_qkey, 0x11111111u);
  EXPECT_EQ(wqe.wr.dgid[15], 15);
  EXPECT_EQ(wqe.wr.path.traffic_class, 0x20);
  EXPECT_EQ(wqe.wr.path.hop_limit, 9);
  EXPECT_EQ(wqe.sgid_index, 3);
  ASSERT_EQ(wqe.wr.num_sge, 1u);
  EXPECT_EQ(wqe.wr.sge[0].length, 12u);
  // Read as an RC WQE, the same bytes are not a datagram: no data segment
  // where the address vector is (its first word is no byte count here).
  ring.Write(0, {Ctrl(0, MLX5_OPCODE_SEND, 2, 0), a});
  EXPECT_EQ(ParseSendWqe(ring.data(), ring.blocks(), 0, kQpn, &wqe, WqeAddress::kDatagram),
            WqeError::kBadDs);
}

TEST(Mlx5SendWqe, MalformedWqesAreNamedErrors) {
  SendRing ring(4);
  ParsedSendWqe wqe;
  ring.Write(0, {Ctrl(0, MLX5_OPCODE_SEND, 2, 0, 0, kQpn + 1), Data(1, 1, 1)});
  EXPECT_EQ(ParseSendWqe(ring.data(), ring.blocks(), 0, kQpn, &wqe), WqeError::kQpnMismatch);
  ring.Write(0, {Ctrl(0, MLX5_OPCODE_SEND, 0, 0)});
  EXPECT_EQ(ParseSendWqe(ring.data(), ring.blocks(), 0, kQpn, &wqe), WqeError::kBadDs);
  ring.Write(0, {Ctrl(0, MLX5_OPCODE_ATOMIC_MASKED_CS, 1, 0)});
  EXPECT_EQ(ParseSendWqe(ring.data(), ring.blocks(), 0, kQpn, &wqe), WqeError::kUnknownOpcode);
  EXPECT_EQ(wqe.opcode, MLX5_OPCODE_ATOMIC_MASKED_CS);
  ring.Write(0, {Ctrl(0, MLX5_OPCODE_UMR, 1, 0)});  // no UMR control segment
  EXPECT_EQ(ParseSendWqe(ring.data(), ring.blocks(), 0, kQpn, &wqe), WqeError::kUmrSegments);
  ring.Write(0, {Ctrl(0, MLX5_OPCODE_RDMA_READ, 1, 0)});  // no room for the raddr segment
  EXPECT_EQ(ParseSendWqe(ring.data(), ring.blocks(), 0, kQpn, &wqe), WqeError::kBadDs);
  std::array<uint8_t, 16> inl{};
  const uint32_t count = htobe32(MLX5_INLINE_SEG | 200);  // past ds
  memcpy(inl.data(), &count, 4);
  ring.Write(0, {Ctrl(0, MLX5_OPCODE_SEND, 2, 0), inl});
  EXPECT_EQ(ParseSendWqe(ring.data(), ring.blocks(), 0, kQpn, &wqe), WqeError::kInlineOverrun);
  ring.Write(0, {Ctrl(0, MLX5_OPCODE_ATOMIC_FA, 4, 0), Raddr(8, 1), Bytes(mlx5_wqe_atomic_seg{}),
                 Data(4, 1, 8)});
  EXPECT_EQ(ParseSendWqe(ring.data(), ring.blocks(), 0, kQpn, &wqe), WqeError::kAtomicSge);
  // A ds larger than the whole ring.
  ring.Write(0, {Ctrl(0, MLX5_OPCODE_SEND, 0x3f, 0)});
  EXPECT_EQ(ParseSendWqe(ring.data(), ring.blocks(), 0, kQpn, &wqe), WqeError::kBadDs);
}

// A DMA MMO WQE as libmlx5's mlx5dv_wr_memcpy builds it (ctrl with opmod
// MMO_DMA, the metadata segment, source, destination) is the device's
// memcpy: the source as the one SGE, the destination by address and lkey.
// Another opmod is an engine the device lacks; a WQE without both data
// segments of one length is refused.
// UMR WQEs as libmlx5 writes them: the key in the immediate, KLMs (their
// zeroed padding dropped) or a repeat block, access and length by mask; the
// FREE mask with a free context is LOCAL_INV of the key.
TEST(Mlx5SendWqe, UmrWqesConfigureOrInvalidateAKey) {
  SendRing ring(8);
  ParsedSendWqe wqe;
  struct {
    mlx5_wqe_umr_ctrl_seg umr;
    mlx5_wqe_mkey_context_seg mkc;
    mlx5_wqe_umr_klm_seg klm[4];
  } list{};
  list.umr.flags = MLX5_WQE_UMR_CTRL_FLAG_INLINE;
  list.umr.klm_octowords = htobe16(4);
  list.umr.mkey_mask = htobe64(MLX5_WQE_UMR_CTRL_MKEY_MASK_FREE | MLX5_WQE_UMR_CTRL_MKEY_MASK_LEN |
                               MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_LOCAL_WRITE |
                               MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_READ);
  list.mkc.access_flags = MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_READ;
  list.klm[0] = {htobe32(8), htobe32(0x1234), htobe64(0x10000)};
  list.klm[1] = {htobe32(24), htobe32(0x5678), htobe64(0x20040)};
  std::array<uint8_t, 11 * 16> body{};
  memcpy(body.data(), &list, sizeof(list));
  std::vector<std::array<uint8_t, 16>> segs{
      Ctrl(0, MLX5_OPCODE_UMR, 12, MLX5_WQE_CTRL_CQ_UPDATE, htobe32(0x700))};
  for (size_t i = 0; i < 11; ++i) {
    std::array<uint8_t, 16> seg{};
    memcpy(seg.data(), body.data() + i * 16, 16);
    segs.push_back(seg);
  }
  ring.Write(0, segs);
  ASSERT_EQ(ParseSendWqe(ring.data(), ring.blocks(), 0, kQpn, &wqe), WqeError::kNone);
  EXPECT_EQ(wqe.wr.opcode, kWrMlx5Umr);
  EXPECT_EQ(wqe.wr.imm_data, 0x700u);
  EXPECT_EQ(wqe.wr.swap, kUmrSetsAccess | kUmrSetsLayout);
  EXPECT_EQ(wqe.wr.bind_access, uint32_t{IBV_ACCESS_REMOTE_READ});
  EXPECT_EQ(wqe.wr.compare_add, 1u);
  ASSERT_EQ(wqe.wr.inline_len, 2 * sizeof(UmrEntry));
  UmrEntry e[2];
  memcpy(e, wqe.wr.inline_data, sizeof(e));
  EXPECT_EQ(e[0].addr, 0x10000u);
  EXPECT_EQ(e[0].lkey, 0x1234u);
  EXPECT_EQ(e[0].bytes_count, 8u);
  EXPECT_EQ(e[1].addr, 0x20040u);
  EXPECT_EQ(e[1].bytes_count, 24u);
  EXPECT_EQ(e[1].stride, 24u);
  EXPECT_EQ(wqe.basic_blocks, 3u);

  // A repeat block: 3 blocks of one entry (4 bytes, stride 16).
  struct {
    mlx5_wqe_umr_ctrl_seg umr;
    mlx5_wqe_mkey_context_seg mkc;
    mlx5_wqe_umr_repeat_block_seg rb;
    mlx5_wqe_umr_repeat_ent_seg ent[3];
  } repeat{};
  repeat.umr = list.umr;
  repeat.umr.mkey_mask = htobe64(MLX5_WQE_UMR_CTRL_MKEY_MASK_LEN);
  repeat.rb.op = htobe32(kUmrRepeatBlockOp);
  repeat.rb.repeat_count = htobe32(3);
  repeat.rb.num_ent = htobe16(1);
  repeat.ent[0] = {htobe16(16), htobe16(4), htobe32(0x1234), htobe64(0x10000)};
  memcpy(body.data(), &repeat, sizeof(repeat));
  for (size_t i = 0; i < 11; ++i) memcpy(segs[i + 1].data(), body.data() + i * 16, 16);
  ring.Write(0, segs);
  ASSERT_EQ(ParseSendWqe(ring.data(), ring.blocks(), 0, kQpn, &wqe), WqeError::kNone);
  EXPECT_EQ(wqe.wr.swap, kUmrSetsLayout) << "no access bits in the mask";
  EXPECT_EQ(wqe.wr.compare_add, 3u);
  ASSERT_EQ(wqe.wr.inline_len, sizeof(UmrEntry));
  memcpy(e, wqe.wr.inline_data, sizeof(UmrEntry));
  EXPECT_EQ(e[0].bytes_count, 4u);
  EXPECT_EQ(e[0].stride, 16u);

  // An invalidation.
  struct {
    mlx5_wqe_umr_ctrl_seg umr;
    mlx5_wqe_mkey_context_seg mkc;
  } inv{};
  inv.umr.mkey_mask = htobe64(MLX5_WQE_UMR_CTRL_MKEY_MASK_FREE);
  inv.mkc.free = MLX5_WQE_MKEY_CONTEXT_FREE;
  segs.resize(8);
  segs[0] = Ctrl(0, MLX5_OPCODE_UMR, 8, 0, htobe32(0x900));
  memcpy(body.data(), &inv, sizeof(inv));
  for (size_t i = 0; i < 7; ++i) memcpy(segs[i + 1].data(), body.data() + i * 16, 16);
  ring.Write(0, segs);
  ASSERT_EQ(ParseSendWqe(ring.data(), ring.blocks(), 0, kQpn, &wqe), WqeError::kNone);
  EXPECT_EQ(wqe.wr.opcode, uint32_t{IBV_WR_LOCAL_INV});
  EXPECT_EQ(wqe.wr.imm_data, 0x900u);
}

std::array<uint8_t, 16> MmoCtrl(uint16_t index, uint8_t opmod, uint8_t ds) {
  mlx5_wqe_ctrl_seg ctrl{};
  mlx5dv_set_ctrl_seg(&ctrl, index, MLX5_OPCODE_MMO, opmod, kQpn, MLX5_WQE_CTRL_CQ_UPDATE, ds, 0,
                      0);
  return Bytes(ctrl);
}

TEST(Mlx5SendWqe, DmaMmoIsTheDevicesMemcpy) {
  SendRing ring(4);
  const std::array<uint8_t, 16> metadata{};  // libmlx5's opaque buffer: not read
  ring.Write(1, {MmoCtrl(1, kOpcModMmoDma, 4), metadata, Data(4096, 0x601, 0x10000),
                 Data(4096, 0x602, 0x20000)});
  ParsedSendWqe wqe;
  ASSERT_EQ(ParseSendWqe(ring.data(), ring.blocks(), 1, kQpn, &wqe), WqeError::kNone);
  EXPECT_EQ(wqe.wr.opcode, kWrMlx5Memcpy);
  EXPECT_EQ(WrOpcode(wqe.wr.opcode).local_op, LocalOp::kMemcpy);
  EXPECT_EQ(wqe.basic_blocks, 1u);
  ASSERT_EQ(wqe.wr.num_sge, 1u);
  EXPECT_EQ(wqe.wr.sge[0].addr, 0x10000u);
  EXPECT_EQ(wqe.wr.sge[0].length, 4096u);
  EXPECT_EQ(wqe.wr.sge[0].lkey, 0x601u);
  EXPECT_EQ(wqe.wr.memcpy_dest_addr, 0x20000u);
  EXPECT_EQ(wqe.wr.memcpy_dest_lkey, 0x602u);
  EXPECT_TRUE(wqe.wr.send_flags & IBV_SEND_SIGNALED);
  // A DCI's copy carries no address vector: the same WQE reads the same.
  ASSERT_EQ(ParseSendWqe(ring.data(), ring.blocks(), 1, kQpn, &wqe, WqeAddress::kDc),
            WqeError::kNone);
  EXPECT_EQ(wqe.wr.memcpy_dest_lkey, 0x602u);

  ring.Write(1, {MmoCtrl(1, 0x2, 4), metadata, Data(64, 1, 0), Data(64, 2, 64)});
  EXPECT_EQ(ParseSendWqe(ring.data(), ring.blocks(), 1, kQpn, &wqe), WqeError::kUnknownOpcode);
  ring.Write(1, {MmoCtrl(1, kOpcModMmoDma, 4), metadata, Data(64, 1, 0), Data(32, 2, 64)});
  EXPECT_EQ(ParseSendWqe(ring.data(), ring.blocks(), 1, kQpn, &wqe), WqeError::kMmoSegments);
  ring.Write(1, {MmoCtrl(1, kOpcModMmoDma, 3), metadata, Data(64, 1, 0)});
  EXPECT_EQ(ParseSendWqe(ring.data(), ring.blocks(), 1, kQpn, &wqe), WqeError::kMmoSegments);
}

// A DMA MMO's completion (MLX5DV_WC_MEMCPY, numbered after the receive
// opcodes) is a requester CQE naming its WQE.
TEST(Mlx5Cqe, DmaMmoCompletionIsTheRequesters) {
  Completion c{};
  c.wr_id = RequesterWrId(MLX5_OPCODE_MMO, 7);
  c.status = IBV_WC_SUCCESS;
  c.opcode = IBV_WC_DRIVER3;
  alignas(64) uint8_t bytes[64];
  bytes[63] = BuildCqe(c, kQpn, bytes);
  auto* cqe = reinterpret_cast<mlx5_cqe64*>(bytes);
  EXPECT_EQ(mlx5dv_get_cqe_opcode(cqe), MLX5_CQE_REQ);
  EXPECT_EQ(be32toh(cqe->sop_drop_qpn), uint32_t{MLX5_OPCODE_MMO} << 24 | kQpn);
  EXPECT_EQ(be16toh(cqe->wqe_counter), 7);
}

TEST(Mlx5RecvWqe, StopsAtTheInvalidLkey) {
  uint8_t wqe[64];
  auto d0 = Data(64, 0x10, 0x100);
  auto d1 = Data(0, kInvalidLkey, 0);
  memcpy(wqe, d0.data(), 16);
  memcpy(wqe + 16, d1.data(), 16);
  memset(wqe + 32, 0xff, 32);
  RecvSge sge[4];
  uint32_t num = 0;
  ASSERT_EQ(ParseRecvWqe(wqe, sizeof(wqe), sge, 4, &num), WqeError::kNone);
  ASSERT_EQ(num, 1u);
  EXPECT_EQ(sge[0].length, 64u);
  EXPECT_EQ(sge[0].lkey, 0x10u);
  // A full stride of data segments and max_sge 2: too many.
  for (int i = 0; i < 4; ++i) memcpy(wqe + 16 * i, d0.data(), 16);
  EXPECT_EQ(ParseRecvWqe(wqe, sizeof(wqe), sge, 2, &num), WqeError::kTooManySges);
}

TEST(Mlx5Cqe, ResponderSendWithImmediate) {
  Completion c{};
  c.wr_id = 0x10005;  // receive WQE counter 5 (the CQE keeps 16 bits)
  c.status = IBV_WC_SUCCESS;
  c.opcode = IBV_WC_RECV;
  c.wc_flags = IBV_WC_WITH_IMM;
  c.imm_data = htobe32(0x03020100);
  c.byte_len = 1024;
  c.src_qp = 0x99;
  alignas(64) uint8_t bytes[64];
  const uint8_t op_own = BuildCqe(c, kQpn, bytes);
  bytes[63] = op_own | 1;
  auto* cqe = reinterpret_cast<mlx5_cqe64*>(bytes);
  EXPECT_EQ(mlx5dv_get_cqe_opcode(cqe), MLX5_CQE_RESP_SEND_IMM);
  EXPECT_EQ(mlx5dv_get_cqe_owner(cqe), 1);
  EXPECT_EQ(be32toh(cqe->imm_inval_pkey), 0x03020100u);
  EXPECT_EQ(be32toh(cqe->byte_cnt), 1024u);
  EXPECT_EQ(be16toh(cqe->wqe_counter), 5);
  EXPECT_EQ(be32toh(cqe->sop_drop_qpn) & 0xffffff, kQpn);
  EXPECT_EQ(be32toh(cqe->flags_rqpn) & 0xffffff, 0x99u);
  EXPECT_EQ(be32toh(cqe->flags_rqpn) >> 28, 0u);  // no GRH
}

// A UD receive: the GRH in the buffer (flags_rqpn bit 28) and the packet
// type in the SL bits (27:24), as libmlx5 and UCX read them.
TEST(Mlx5Cqe, UdReceiveSaysGrhAndPacketType) {
  Completion c{};
  c.status = IBV_WC_SUCCESS;
  c.opcode = IBV_WC_RECV;
  c.wc_flags = IBV_WC_GRH;
  c.sl = 0xa;  // RoCE v2 over IPv4 (ud_receive.h)
  c.src_qp = 0x77;
  alignas(64) uint8_t bytes[64];
  BuildCqe(c, kQpn, bytes);
  const auto* cqe = reinterpret_cast<const mlx5_cqe64*>(bytes);
  EXPECT_EQ(be32toh(cqe->flags_rqpn), 1u << 28 | 0xau << 24 | 0x77u);
}

TEST(Mlx5Cqe, RequesterErrorCarriesSyndromeOpcodeAndIndex) {
  Completion c{};
  c.wr_id = RequesterWrId(MLX5_OPCODE_RDMA_WRITE, 42);
  c.status = IBV_WC_REM_ACCESS_ERR;
  c.opcode = IBV_WC_RDMA_WRITE;
  alignas(64) uint8_t bytes[64];
  const uint8_t op_own = BuildCqe(c, kQpn, bytes);
  bytes[63] = op_own;
  auto* err = reinterpret_cast<mlx5_err_cqe*>(bytes);
  EXPECT_EQ(mlx5dv_get_cqe_opcode(reinterpret_cast<mlx5_cqe64*>(bytes)), MLX5_CQE_REQ_ERR);
  EXPECT_EQ(err->syndrome, MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR);
  EXPECT_EQ(be32toh(err->s_wqe_opcode_qpn), uint32_t{MLX5_OPCODE_RDMA_WRITE} << 24 | kQpn);
  EXPECT_EQ(be16toh(err->wqe_counter), 42);
  EXPECT_EQ(SyndromeOf(IBV_WC_WR_FLUSH_ERR), MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
}

}  // namespace
}  // namespace softverbs::datapath::mlx5
