// The fixture of the tests of mlx5dv_create_qp's QPs (dv_qp_test.cc,
// mkey_test.cc): a PD and a CQ, QPs made by mlx5dv_create_qp and connected
// RC pairs, receive posting, registration and polling; everything made is
// destroyed at the end of the test.
#pragma once

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <chrono>
#include <vector>

#include "devx_env.h"

namespace devx_it {

class DvQpTest : public DevxTest {
 protected:
  void SetUp() override {
    DevxTest::SetUp();
    pd_ = ibv_alloc_pd(ctx_);
    ASSERT_NE(pd_, nullptr);
    ibv_cq_init_attr_ex cq_attr{};
    cq_attr.cqe = 32;
    cq_attr.wc_flags = IBV_WC_STANDARD_FLAGS;
    cq_ = ibv_create_cq_ex(ctx_, &cq_attr);
    ASSERT_NE(cq_, nullptr);
  }
  void TearDown() override {
    for (ibv_qp* qp : qps_) ibv_destroy_qp(qp);
    for (ibv_mr* mr : mrs_) ibv_dereg_mr(mr);
    if (cq_) ibv_destroy_cq(ibv_cq_ex_to_cq(cq_));
    if (pd_) ibv_dealloc_pd(pd_);
    DevxTest::TearDown();
  }

  ibv_qp_init_attr_ex QpAttr(ibv_qp_type type = IBV_QPT_RC) {
    ibv_qp_init_attr_ex attr{};
    attr.qp_type = type;
    attr.send_cq = attr.recv_cq = ibv_cq_ex_to_cq(cq_);
    attr.cap = {16, 16, 2, 2, 0};
    attr.pd = pd_;
    attr.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    attr.send_ops_flags = IBV_QP_EX_WITH_SEND;
    if (type == IBV_QPT_RC) attr.send_ops_flags |= IBV_QP_EX_WITH_RDMA_WRITE;
    return attr;
  }

  // mlx5dv_create_qp; the QP is destroyed at the end of the test.
  ibv_qp* Create(ibv_qp_init_attr_ex attr, mlx5dv_qp_init_attr* dv) {
    errno = 0;
    ibv_qp* qp = mlx5dv_create_qp(ctx_, &attr, dv);
    if (qp) qps_.push_back(qp);
    return qp;
  }

  // A, made by mlx5dv_create_qp with `dv`, and a plain B, connected to each
  // other (RTS); false when creating or connecting them failed.
  bool ConnectedPair(mlx5dv_qp_init_attr* dv, ibv_qp** a, ibv_qp** b) {
    *a = Create(QpAttr(), dv);
    *b = Create(QpAttr(), nullptr);
    return *a && *b && ConnectVerbsRc(ctx_, *a, (*b)->qp_num) &&
           ConnectVerbsRc(ctx_, *b, (*a)->qp_num);
  }

  // Posts one receive WR of `length` bytes at `addr`.
  static int PostRecv(ibv_qp* qp, uint64_t wr_id, const void* addr, uint32_t length,
                      uint32_t lkey) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(addr), length, lkey};
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    return ibv_post_recv(qp, &wr, &bad);
  }

  // The errno of a creation that must fail (0 if it did not).
  int Refused(ibv_qp_init_attr_ex attr, mlx5dv_qp_init_attr* dv) {
    errno = 0;
    ibv_qp* qp = mlx5dv_create_qp(ctx_, &attr, dv);
    if (qp) {
      ibv_destroy_qp(qp);
      return 0;
    }
    return errno;
  }

  ibv_mr* Register(void* addr, size_t len) {
    ibv_mr* mr = ibv_reg_mr(pd_, addr, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    EXPECT_NE(mr, nullptr) << strerror(errno);
    if (mr) mrs_.push_back(mr);
    return mr;
  }

  // Polls one completion of the CQ; false after 2 s without one (by the
  // clock: a usleep(1) sleeps 50 us or more, so 2,000,000 of them were
  // minutes).
  bool PollOne(ibv_wc* wc) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    for (int i = 0;; ++i) {
      if (ibv_poll_cq(ibv_cq_ex_to_cq(cq_), 1, wc) == 1) return true;
      if (std::chrono::steady_clock::now() > deadline) return false;
      if (i > 1000) usleep(1);
    }
  }

  ibv_pd* pd_ = nullptr;
  ibv_cq_ex* cq_ = nullptr;
  std::vector<ibv_qp*> qps_;
  std::vector<ibv_mr*> mrs_;
};

}  // namespace devx_it
