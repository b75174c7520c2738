// The fixture of the memory-key tests (mkey_test.cc, sig_mkey_test.cc): a
// connected RC pair whose first QP builds memory-key (UMR) work requests,
// the keys it made, and the posts and waits those tests share.
#pragma once

#include <errno.h>
#include <string.h>

#include <vector>

#include "dv_qp_fixture.h"

namespace devx_it {

constexpr uint32_t kUmr = IBV_WR_ATOMIC_WRITE + 2;  // no ibv_wr_opcode: a vendor WR

mlx5dv_qp_init_attr MkeyQpAttr(uint64_t send_ops = MLX5DV_QP_EX_WITH_MR_LIST |
                                                   MLX5DV_QP_EX_WITH_MR_INTERLEAVED |
                                                   MLX5DV_QP_EX_WITH_MKEY_CONFIGURE) {
  mlx5dv_qp_init_attr dv{};
  dv.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS;
  dv.send_ops_flags = send_ops;
  return dv;
}

class MkeyTest : public DvQpTest {
 protected:
  void TearDown() override {
    for (mlx5dv_mkey* mkey : mkeys_) mlx5dv_destroy_mkey(mkey);
    DvQpTest::TearDown();
  }

  mlx5dv_mkey* NewMkey(uint32_t flags = MLX5DV_MKEY_INIT_ATTR_FLAGS_INDIRECT,
                       uint16_t max_entries = 4) {
    mlx5dv_mkey_init_attr attr{};
    attr.pd = pd_;
    attr.create_flags = flags;
    attr.max_entries = max_entries;
    errno = 0;
    mlx5dv_mkey* mkey = mlx5dv_create_mkey(&attr);
    if (mkey) mkeys_.push_back(mkey);
    return mkey;
  }

  // A connected pair whose first QP builds memory-key WRs.
  void Pair() { ASSERT_TRUE(ConnectedPair(&dv_, &a_, &b_)) << strerror(errno); }

  ibv_qp_ex* Qx() { return ibv_qp_to_qp_ex(a_); }
  mlx5dv_qp_ex* Mx() { return mlx5dv_qp_ex_from_ibv_qp_ex(Qx()); }

  // mlx5dv_wr_mr_list of `sges` on A, signaled and inline as libmlx5 wants:
  // wr_complete's result.
  int MrList(mlx5dv_mkey* mkey, uint32_t access, std::vector<ibv_sge> sges, uint64_t wr_id = 1) {
    ibv_wr_start(Qx());
    Qx()->wr_id = wr_id;
    Qx()->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
    mlx5dv_wr_mr_list(Mx(), mkey, access, static_cast<uint16_t>(sges.size()), sges.data());
    return ibv_wr_complete(Qx());
  }

  // The next completion, which must come.
  ibv_wc Next() {
    ibv_wc wc{};
    EXPECT_TRUE(PollOne(&wc)) << "no completion";
    return wc;
  }

  // The next n completions, each of which must be a success.
  std::vector<ibv_wc> Successes(int n) {
    std::vector<ibv_wc> out;
    for (int i = 0; i < n; ++i) {
      out.push_back(Next());
      EXPECT_EQ(out.back().status, IBV_WC_SUCCESS) << ibv_wc_status_str(out.back().status);
    }
    return out;
  }

  // A UMR that must complete successfully.
  void ExpectUmrDone(uint64_t wr_id = 1) {
    const ibv_wc wc = Next();
    EXPECT_EQ(wc.wr_id, wr_id);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    EXPECT_EQ(wc.opcode, static_cast<ibv_wc_opcode>(MLX5DV_WC_UMR));
  }

  // One SEND of [addr, +length) under lkey from `from`.
  static int PostSend(ibv_qp* from, uint64_t wr_id, uint64_t addr, uint32_t length, uint32_t lkey,
                      ibv_wr_opcode opcode = IBV_WR_SEND, uint32_t invalidate_rkey = 0) {
    ibv_sge sge{addr, length, lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = wr_id;
    wr.opcode = opcode;
    wr.sg_list = &sge;
    wr.num_sge = length ? 1 : 0;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.invalidate_rkey = invalidate_rkey;
    return ibv_post_send(from, &wr, &bad);
  }

  static int PostWrite(ibv_qp* from, uint64_t wr_id, uint64_t addr, uint32_t length, uint32_t lkey,
                       uint64_t remote_addr, uint32_t rkey) {
    ibv_sge sge{addr, length, lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = wr_id;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey = rkey;
    return ibv_post_send(from, &wr, &bad);
  }

  static uint64_t At(const std::vector<uint8_t>& buf, size_t offset) {
    return reinterpret_cast<uintptr_t>(buf.data() + offset);
  }

  mlx5dv_qp_init_attr dv_ = MkeyQpAttr();
  ibv_qp* a_ = nullptr;
  ibv_qp* b_ = nullptr;
  std::vector<mlx5dv_mkey*> mkeys_;
};

}  // namespace devx_it
