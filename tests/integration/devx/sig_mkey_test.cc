// mlx5's signature memory keys (mlx5dv_wr_set_mkey_sig_block(3),
// mlx5dv_mkey_check): a key whose layout is the memory domain and whose
// accesses see the wire domain - each block's T10-DIF or CRC inserted on the
// way out, checked and stripped on the way in, or kept in memory - with the
// values computed here independently (bitwise CRC-16/T10-DIF and CRC-32,
// not the device's tables); a bad signature reported by mlx5dv_mkey_check while the data
// moves as on hardware; signature pipelining stopping the send queue at a
// fenced WR; and the checks libmlx5 makes. Over the network transport too
// (devx_sig_mkey_wire_loopback: blocks spread over several packets).
#include <string>

#include "mkey_fixture.h"
#include "reference_crc.h"

namespace devx_it {
namespace {

using softverbs_test::BitwiseCrc32;
using softverbs_test::BitwiseT10Dif;

void PutBe(uint64_t v, int bytes, std::vector<uint8_t>* out) {
  for (int i = bytes - 1; i >= 0; --i) out->push_back(static_cast<uint8_t>(v >> (8 * i)));
}

constexpr uint16_t kApp = 0x5a5a;
constexpr uint32_t kRef = 1000;

// Blocks of 512 data bytes, each followed by its T10-DIF (guard CRC, the
// application tag, the reference tag counting up from kRef).
std::vector<uint8_t> DifWire(const std::vector<uint8_t>& data) {
  std::vector<uint8_t> wire;
  for (size_t b = 0; b * 512 < data.size(); ++b) {
    const uint8_t* p = data.data() + b * 512;
    wire.insert(wire.end(), p, p + 512);
    PutBe(BitwiseT10Dif(p, 512), 2, &wire);
    PutBe(kApp, 2, &wire);
    PutBe(kRef + b, 4, &wire);
  }
  return wire;
}

std::vector<uint8_t> Pattern(size_t n, int seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 31 + i / 7 + seed);
  return v;
}

class SigMkeyTest : public MkeyTest {
 protected:
  mlx5dv_mkey* NewSigMkey() {
    return NewMkey(MLX5DV_MKEY_INIT_ATTR_FLAGS_INDIRECT |
                   MLX5DV_MKEY_INIT_ATTR_FLAGS_BLOCK_SIGNATURE);
  }

  // mlx5dv_wr_mkey_configure with access, a one-SGE layout and the block
  // signature (if attr): wr_complete's result, then the UMR's completion.
  int Configure(mlx5dv_mkey* mkey, uint32_t access, ibv_sge sge, const mlx5dv_sig_block_attr* attr,
                uint64_t wr_id = 1) {
    ibv_wr_start(Qx());
    Qx()->wr_id = wr_id;
    Qx()->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
    mlx5dv_mkey_conf_attr conf{};
    mlx5dv_wr_mkey_configure(Mx(), mkey, attr ? 3 : 2, &conf);
    mlx5dv_wr_set_mkey_access_flags(Mx(), access);
    mlx5dv_wr_set_mkey_layout_list(Mx(), 1, &sge);
    if (attr) mlx5dv_wr_set_mkey_sig_block(Mx(), attr);
    const int err = ibv_wr_complete(Qx());
    if (err == 0) ExpectUmrDone(wr_id);
    return err;
  }

  mlx5dv_mkey_err Check(mlx5dv_mkey* mkey) {
    mlx5dv_mkey_err err{};
    EXPECT_EQ(mlx5dv_mkey_check(mkey, &err), 0);
    return err;
  }

  // The T10-DIF of the tests: CRC guard, seed 0, kApp, kRef counting up.
  mlx5dv_sig_t10dif dif_{MLX5DV_SIG_T10DIF_CRC, 0, kApp, kRef, MLX5DV_SIG_T10DIF_FLAG_REF_REMAP};
  mlx5dv_sig_block_domain dif_domain_{
      MLX5DV_SIG_TYPE_T10DIF, {.dif = &dif_}, MLX5DV_BLOCK_SIZE_512, 0};
  mlx5dv_sig_crc crc_{MLX5DV_SIG_CRC_TYPE_CRC32, UINT32_MAX};
  mlx5dv_sig_block_domain crc_domain_{
      MLX5DV_SIG_TYPE_CRC, {.crc = &crc_}, MLX5DV_BLOCK_SIZE_512, 0};
};

constexpr uint8_t kDifChecks =
    MLX5DV_SIG_MASK_T10DIF_GUARD | MLX5DV_SIG_MASK_T10DIF_APPTAG | MLX5DV_SIG_MASK_T10DIF_REFTAG;

// The wire domain T10-DIF, memory plain: a SEND through the key carries each
// block with its DIF after it.
TEST_F(SigMkeyTest, AWireT10DifIsInsertedIntoWhatTheKeySends) {
  Pair();
  const std::vector<uint8_t> data = Pattern(3 * 512, 1);
  std::vector<uint8_t> src = data, dst(3 * 520 + 8, 0);
  ibv_mr* src_mr = Register(src.data(), src.size());
  ibv_mr* dst_mr = Register(dst.data(), dst.size());
  ASSERT_TRUE(src_mr && dst_mr);
  mlx5dv_mkey* key = NewSigMkey();
  ASSERT_NE(key, nullptr) << strerror(errno);
  mlx5dv_sig_block_attr attr{nullptr, &dif_domain_, 0, kDifChecks, 0, 0};
  ASSERT_EQ(Configure(key, 0, {At(src, 0), 3 * 512, src_mr->lkey}, &attr), 0);
  ASSERT_EQ(PostRecv(b_, 10, dst.data(), dst.size(), dst_mr->lkey), 0);
  ASSERT_EQ(PostSend(a_, 11, 0, 3 * 520, key->lkey), 0);
  for (const ibv_wc& wc : Successes(2)) {
    if (wc.wr_id == 10) {
      EXPECT_EQ(wc.byte_len, 3u * 520);
    }
  }
  EXPECT_EQ(std::vector<uint8_t>(dst.begin(), dst.begin() + 3 * 520), DifWire(data));
  EXPECT_EQ(Check(key).err_type, MLX5DV_MKEY_NO_ERR);
}

// The same key receiving: each DIF is checked and stripped; memory gets the
// data alone. A bad guard is reported once (the key re-armed by its next
// UMR), with the values and the block's offset; the data lands regardless.
TEST_F(SigMkeyTest, AWireT10DifIsCheckedAndStrippedFromWhatTheKeyReceives) {
  Pair();
  const std::vector<uint8_t> data = Pattern(3 * 512, 2);
  std::vector<uint8_t> src = DifWire(data), dst(3 * 512, 0);
  ibv_mr* src_mr = Register(src.data(), src.size());
  ibv_mr* dst_mr = Register(dst.data(), dst.size());
  ASSERT_TRUE(src_mr && dst_mr);
  mlx5dv_mkey* key = NewSigMkey();
  ASSERT_NE(key, nullptr);
  mlx5dv_sig_block_attr attr{nullptr, &dif_domain_, 0, kDifChecks, 0, 0};
  ASSERT_EQ(Configure(key, IBV_ACCESS_LOCAL_WRITE, {At(dst, 0), 3 * 512, dst_mr->lkey}, &attr), 0);
  const auto deliver = [&](uint64_t wr_id) {
    std::fill(dst.begin(), dst.end(), 0);
    ASSERT_EQ(PostRecv(b_, wr_id, nullptr, 3 * 520, key->lkey), 0);
    ASSERT_EQ(PostSend(a_, wr_id + 1, At(src, 0), 3 * 520, src_mr->lkey), 0);
    Successes(2);
    EXPECT_EQ(dst, data);
  };
  deliver(20);
  EXPECT_EQ(Check(key).err_type, MLX5DV_MKEY_NO_ERR);

  const uint16_t guard = BitwiseT10Dif(data.data() + 2 * 512, 512);
  src[2 * 520 + 512] ^= 0x40;  // block 2's guard
  deliver(30);
  // softverbs status shows the key signed, with a bad signature kept.
  bool listed = false;
  const nlohmann::json status = Status();
  for (const auto& client : status["clients"]) {
    for (const auto& m : client.value("mkey", nlohmann::json::array())) {
      if (m["lkey"].get<uint32_t>() != key->lkey) continue;
      listed = true;
      EXPECT_TRUE(m["signed"].get<bool>());
      EXPECT_TRUE(m["sig_error_kept"].get<bool>());
    }
  }
  EXPECT_TRUE(listed);
  mlx5dv_mkey_err err = Check(key);
  EXPECT_EQ(err.err_type, MLX5DV_MKEY_SIG_BLOCK_BAD_GUARD);
  EXPECT_EQ(err.err.sig.expected_value, guard);
  EXPECT_EQ(err.err.sig.actual_value, guard ^ 0x4000u);
  EXPECT_EQ(err.err.sig.offset, 2u * 520);
  EXPECT_EQ(Check(key).err_type, MLX5DV_MKEY_NO_ERR);  // read once
  // Not reported again until a UMR arms the key (mlx5's error count).
  deliver(40);
  EXPECT_EQ(Check(key).err_type, MLX5DV_MKEY_NO_ERR);
  // mlx5dv_wr_mr_list keeps the signature and arms the key again.
  ASSERT_EQ(MrList(key, IBV_ACCESS_LOCAL_WRITE, {{At(dst, 0), 3 * 512, dst_mr->lkey}}, 2), 0);
  ExpectUmrDone(2);
  src[2 * 520 + 512] ^= 0x40;
  src[520 + 512 + 3] ^= 1;  // block 1's application tag
  deliver(50);
  err = Check(key);
  EXPECT_EQ(err.err_type, MLX5DV_MKEY_SIG_BLOCK_BAD_APPTAG);
  EXPECT_EQ(err.err.sig.expected_value, kApp);
  EXPECT_EQ(err.err.sig.actual_value, kApp ^ 1u);
}

// A CRC-32 kept in memory after each block: an RDMA WRITE into the key
// writes it (CRC-32, big-endian), a SEND out of the key checks it -
// a bad one is the memory domain's error, the data is sent all the same.
TEST_F(SigMkeyTest, AMemoryCrcIsWrittenByAWriteAndCheckedBySends) {
  Pair();
  const std::vector<uint8_t> data = Pattern(2 * 512, 3);
  std::vector<uint8_t> src = data, mem(2 * 516, 0xee), dst(2 * 512, 0);
  ibv_mr* src_mr = Register(src.data(), src.size());
  ibv_mr* mem_mr = Register(mem.data(), mem.size());
  ibv_mr* dst_mr = Register(dst.data(), dst.size());
  ASSERT_TRUE(src_mr && mem_mr && dst_mr);
  mlx5dv_mkey* key = NewSigMkey();
  ASSERT_NE(key, nullptr);
  mlx5dv_sig_block_attr attr{&crc_domain_, nullptr, 0, MLX5DV_SIG_MASK_CRC32, 0, 0};
  ASSERT_EQ(Configure(key, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
                      {At(mem, 0), 2 * 516, mem_mr->lkey}, &attr),
            0);
  ASSERT_EQ(PostWrite(a_, 5, At(src, 0), 2 * 512, src_mr->lkey, 0, key->rkey), 0);
  Successes(1);
  std::vector<uint8_t> want;
  for (int b = 0; b < 2; ++b) {
    want.insert(want.end(), data.begin() + b * 512, data.begin() + (b + 1) * 512);
    PutBe(BitwiseCrc32(data.data() + b * 512, 512), 4, &want);
  }
  EXPECT_EQ(mem, want);

  ASSERT_EQ(PostRecv(b_, 10, dst.data(), dst.size(), dst_mr->lkey), 0);
  ASSERT_EQ(PostSend(a_, 11, 0, 2 * 512, key->lkey), 0);
  Successes(2);
  EXPECT_EQ(dst, data);
  EXPECT_EQ(Check(key).err_type, MLX5DV_MKEY_NO_ERR);

  mem[516 + 512] ^= 0xff;  // block 1's CRC, in memory
  std::fill(dst.begin(), dst.end(), 0);
  ASSERT_EQ(PostRecv(b_, 12, dst.data(), dst.size(), dst_mr->lkey), 0);
  ASSERT_EQ(PostSend(a_, 13, 0, 2 * 512, key->lkey), 0);
  Successes(2);
  EXPECT_EQ(dst, data);
  const mlx5dv_mkey_err err = Check(key);
  EXPECT_EQ(err.err_type, MLX5DV_MKEY_SIG_BLOCK_BAD_GUARD);
  const uint32_t crc = BitwiseCrc32(data.data() + 512, 512);
  EXPECT_EQ(err.err.sig.expected_value, crc);
  EXPECT_EQ(err.err.sig.actual_value, crc ^ 0xff000000u);
  EXPECT_EQ(err.err.sig.offset, 512u);
}

// MLX5DV_QP_CREATE_SIG_PIPELINING (rdma-core's test_mkey_sig_pipelining_bad):
// after a WRITE whose memory signature is bad, the fenced SEND does not
// start - the QP drains to SQD (IBV_EVENT_SQ_DRAINED), nothing completes;
// mlx5dv_qp_cancel_posted_send_wrs makes it a NOP (only in SQD), which
// completes as a SEND once SQD->RTS resumes the queue, without a message.
TEST_F(SigMkeyTest, PipeliningStopsAtAFenceAfterABadSignature) {
  dv_.comp_mask |= MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS;
  dv_.create_flags = MLX5DV_QP_CREATE_SIG_PIPELINING;
  Pair();
  std::vector<uint8_t> mem = Pattern(516, 4), far(512, 0), note(16, 'n'), got(16, 0);
  ibv_mr* mem_mr = Register(mem.data(), mem.size());
  ibv_mr* far_mr = Register(far.data(), far.size());
  ibv_mr* note_mr = Register(note.data(), note.size());
  ibv_mr* got_mr = Register(got.data(), got.size());
  ASSERT_TRUE(mem_mr && far_mr && note_mr && got_mr);
  far_mr = ibv_rereg_mr(far_mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) == 0
               ? far_mr
               : nullptr;
  ASSERT_NE(far_mr, nullptr);
  mlx5dv_mkey* key = NewSigMkey();
  ASSERT_NE(key, nullptr);
  mlx5dv_sig_block_attr attr{&crc_domain_, nullptr, 0, MLX5DV_SIG_MASK_CRC32, 0, 0};
  ASSERT_EQ(Configure(key, IBV_ACCESS_LOCAL_WRITE, {At(mem, 0), 516, mem_mr->lkey}, &attr), 0);
  ASSERT_EQ(PostRecv(b_, 10, got.data(), got.size(), got_mr->lkey), 0);
  ibv_sge data_sge{0, 512, key->lkey};
  ibv_send_wr write{}, *bad = nullptr;
  write.wr_id = 1;
  write.opcode = IBV_WR_RDMA_WRITE;
  write.sg_list = &data_sge;
  write.num_sge = 1;
  write.wr.rdma.remote_addr = At(far, 0);
  write.wr.rdma.rkey = far_mr->rkey;
  ASSERT_EQ(ibv_post_send(a_, &write, &bad), 0);
  ibv_sge note_sge{At(note, 0), 16, note_mr->lkey};
  ibv_send_wr send{};
  send.wr_id = 2;
  send.opcode = IBV_WR_SEND;
  send.sg_list = &note_sge;
  send.num_sge = 1;
  send.send_flags = IBV_SEND_SIGNALED | IBV_SEND_FENCE;
  ASSERT_EQ(ibv_post_send(a_, &send, &bad), 0);

  ibv_async_event event{};
  ASSERT_EQ(ibv_get_async_event(ctx_, &event), 0);
  EXPECT_EQ(event.event_type, IBV_EVENT_SQ_DRAINED);
  EXPECT_EQ(event.element.qp, a_);
  ibv_ack_async_event(&event);
  ibv_wc wc{};
  EXPECT_EQ(ibv_poll_cq(ibv_cq_ex_to_cq(cq_), 1, &wc), 0);
  ibv_qp_attr qa{};
  ibv_qp_init_attr qi{};
  ASSERT_EQ(ibv_query_qp(a_, &qa, IBV_QP_STATE, &qi), 0);
  EXPECT_EQ(qa.qp_state, IBV_QPS_SQD);
  EXPECT_EQ(Check(key).err_type, MLX5DV_MKEY_SIG_BLOCK_BAD_GUARD);
  EXPECT_EQ(far, std::vector<uint8_t>(mem.begin(), mem.begin() + 512));  // the WRITE moved its data

  EXPECT_EQ(mlx5dv_qp_cancel_posted_send_wrs(Mx(), 2), 1);
  qa.qp_state = IBV_QPS_RTS;
  qa.cur_qp_state = IBV_QPS_SQD;
  ASSERT_EQ(ibv_modify_qp(a_, &qa, IBV_QP_STATE | IBV_QP_CUR_STATE), 0);
  wc = Next();
  EXPECT_EQ(wc.wr_id, 2u);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.opcode, IBV_WC_SEND);
  EXPECT_EQ(ibv_poll_cq(ibv_cq_ex_to_cq(cq_), 1, &wc), 0);  // the NOP sent nothing
  EXPECT_EQ(got, std::vector<uint8_t>(16, 0));
  // Only in SQD: -EINVAL in RTS, as libmlx5 answers.
  EXPECT_EQ(mlx5dv_qp_cancel_posted_send_wrs(Mx(), 2), -EINVAL);
  // The queue runs again: a fenced SEND after no new error goes out.
  ASSERT_EQ(ibv_post_send(a_, &send, &bad), 0);
  Successes(2);
  EXPECT_EQ(got, note);
}

// The responder's bad signature is the responder's: a requester with
// pipelining whose SEND lands through the peer's signature key with a bad
// DIF goes on with its next fenced WR (only its own accesses count).
TEST_F(SigMkeyTest, AResponderSignatureErrorDoesNotStopTheRequester) {
  dv_.comp_mask |= MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS;
  dv_.create_flags = MLX5DV_QP_CREATE_SIG_PIPELINING;
  Pair();
  std::vector<uint8_t> src = Pattern(520, 5), dst(512, 0), note(16, 'n'), got(16, 0);
  ibv_mr* src_mr = Register(src.data(), src.size());
  ibv_mr* dst_mr = Register(dst.data(), dst.size());
  ibv_mr* note_mr = Register(note.data(), note.size());
  ibv_mr* got_mr = Register(got.data(), got.size());
  ASSERT_TRUE(src_mr && dst_mr && note_mr && got_mr);
  mlx5dv_mkey* key = NewSigMkey();
  ASSERT_NE(key, nullptr);
  mlx5dv_sig_block_attr attr{nullptr, &dif_domain_, 0, kDifChecks, 0, 0};
  ASSERT_EQ(Configure(key, IBV_ACCESS_LOCAL_WRITE, {At(dst, 0), 512, dst_mr->lkey}, &attr), 0);
  ASSERT_EQ(PostRecv(b_, 10, nullptr, 520, key->lkey), 0);
  ASSERT_EQ(PostSend(a_, 11, At(src, 0), 520, src_mr->lkey), 0);  // no valid DIF in it
  Successes(2);
  // Every field of the would-be DIF differs: libmlx5 names the reference tag.
  EXPECT_EQ(Check(key).err_type, MLX5DV_MKEY_SIG_BLOCK_BAD_REFTAG);
  ASSERT_EQ(PostRecv(b_, 12, got.data(), got.size(), got_mr->lkey), 0);
  ibv_sge note_sge{At(note, 0), 16, note_mr->lkey};
  ibv_send_wr send{}, *bad = nullptr;
  send.wr_id = 13;
  send.opcode = IBV_WR_SEND;
  send.sg_list = &note_sge;
  send.num_sge = 1;
  send.send_flags = IBV_SEND_SIGNALED | IBV_SEND_FENCE;
  ASSERT_EQ(ibv_post_send(a_, &send, &bad), 0);
  Successes(2);
  EXPECT_EQ(got, note);
  ibv_qp_attr qa{};
  ibv_qp_init_attr qi{};
  ASSERT_EQ(ibv_query_qp(a_, &qa, IBV_QP_STATE, &qi), 0);
  EXPECT_EQ(qa.qp_state, IBV_QPS_RTS);
}

// What libmlx5 refuses, and what softverbs does not compute.
TEST_F(SigMkeyTest, TheBuildersCheckWhatLibmlx5Checks) {
  Pair();
  std::vector<uint8_t> mem(1024);
  ibv_mr* mr = Register(mem.data(), mem.size());
  ASSERT_NE(mr, nullptr);
  mlx5dv_mkey* plain = NewMkey();
  mlx5dv_mkey* key = NewSigMkey();
  ASSERT_TRUE(plain && key);
  const ibv_sge sge{At(mem, 0), 1024, mr->lkey};
  mlx5dv_sig_block_attr attr{nullptr, &dif_domain_, 0, kDifChecks, 0, 0};
  // A key created without BLOCK_SIGNATURE takes no signature; nor can it be
  // checked.
  EXPECT_EQ(Configure(plain, 0, sge, &attr), EINVAL);
  mlx5dv_mkey_err err{};
  EXPECT_EQ(mlx5dv_mkey_check(plain, &err), EINVAL);
  // Neither domain; an unknown flag; a seed CRC-32 does not have.
  mlx5dv_sig_block_attr none{nullptr, nullptr, 0, 0, 0, 0};
  EXPECT_EQ(Configure(key, 0, sge, &none), EINVAL);
  mlx5dv_sig_block_attr flagged{nullptr, &dif_domain_, 2, 0, 0, 0};
  EXPECT_EQ(Configure(key, 0, sge, &flagged), EINVAL);
  mlx5dv_sig_crc odd_seed{MLX5DV_SIG_CRC_TYPE_CRC32, 5};
  mlx5dv_sig_block_domain odd{MLX5DV_SIG_TYPE_CRC, {.crc = &odd_seed}, MLX5DV_BLOCK_SIZE_512, 0};
  mlx5dv_sig_block_attr seeded{&odd, nullptr, 0, 0, 0, 0};
  EXPECT_EQ(Configure(key, 0, sge, &seeded), EINVAL);
  // A copy mask across domains not signed alike.
  mlx5dv_sig_block_attr copy{
      &crc_domain_, &dif_domain_, MLX5DV_SIG_BLOCK_ATTR_FLAG_COPY_MASK, 0, 0xff, 0};
  EXPECT_EQ(Configure(key, 0, sge, &copy), EINVAL);
  // CRC64-XP10 and two block sizes: not computed here.
  mlx5dv_sig_crc crc64{MLX5DV_SIG_CRC_TYPE_CRC64_XP10, 0};
  mlx5dv_sig_block_domain d64{MLX5DV_SIG_TYPE_CRC, {.crc = &crc64}, MLX5DV_BLOCK_SIZE_512, 0};
  mlx5dv_sig_block_attr xp10{&d64, nullptr, 0, 0, 0, 0};
  EXPECT_EQ(Configure(key, 0, sge, &xp10), EOPNOTSUPP);
  mlx5dv_sig_block_domain big = crc_domain_;
  big.block_size = MLX5DV_BLOCK_SIZE_4096;
  mlx5dv_sig_block_attr two{&big, &dif_domain_, 0, 0, 0, 0};
  EXPECT_EQ(Configure(key, 0, sge, &two), EOPNOTSUPP);
  // The device reports what it computes.
  mlx5dv_context dv{};
  dv.comp_mask = MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD;
  ASSERT_EQ(mlx5dv_query_device(ctx_, &dv), 0);
  EXPECT_TRUE(dv.comp_mask & MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD);
  EXPECT_EQ(dv.sig_caps.block_prot, unsigned{MLX5DV_SIG_PROT_CAP_T10DIF | MLX5DV_SIG_PROT_CAP_CRC});
  EXPECT_EQ(dv.sig_caps.crc_type, MLX5DV_SIG_CRC_TYPE_CAP_CRC32 | MLX5DV_SIG_CRC_TYPE_CAP_CRC32C);
  // Configured well at last, the key checks clean.
  EXPECT_EQ(Configure(key, 0, sge, &attr), 0);
  EXPECT_EQ(Check(key).err_type, MLX5DV_MKEY_NO_ERR);
}

}  // namespace
}  // namespace devx_it
