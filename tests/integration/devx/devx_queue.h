// A DEVX RC QP with its CQ, as DEVX software drives one (rdma-core's
// tests/mlx5_base.py Mlx5DevxRcResources does the same): UMEMs for the
// queues and doorbell records, CREATE_CQ/CREATE_QP boxes, mlx5 WQEs written
// with rdma-core's own inline helpers (mlx5dv_set_ctrl_seg/_data_seg), the
// doorbell record updated, and mlx5 CQEs polled by owner bit.
#pragma once

#include <endian.h>
#include <infiniband/mlx5dv.h>
#include <sched.h>
#include <time.h>

#include <cstring>

#include "devx_env.h"

namespace devx_it {

inline constexpr uint32_t kLogQueue = 6;  // 64 receive WQEs, 64 send basic blocks, 64 CQEs
inline constexpr uint32_t kQueueEntries = 1u << kLogQueue;

struct Cqe {
  uint8_t opcode = 0xff;  // MLX5_CQE_*; 0xff: none arrived in time
  uint8_t syndrome = 0;   // error CQEs
  uint16_t wqe_counter = 0;
  uint32_t byte_cnt = 0;
  uint32_t imm = 0;  // host order
  uint32_t qpn = 0;
  uint8_t wqe_opcode = 0;  // requester CQEs: the WQE's MLX5_OPCODE_*
};

class DevxQueue {
 public:
  // A DEVX CQ and RC QP on `ctx` (a DEVX context) in PD `pdn`.
  DevxQueue(ibv_context* ctx, uint32_t pdn) : ctx_(ctx) {
    cq_buf_.assign(kQueueEntries * 64, 0);
    // As libmlx5 does: every CQE starts invalid, owned by software.
    for (uint32_t i = 0; i < kQueueEntries; ++i) cq_buf_[i * 64 + 63] = MLX5_CQE_INVALID << 4;
    wq_buf_.assign(kQueueEntries * 16 + kQueueEntries * 64, 0);
    dbr_.assign(64, 0);
    cq_umem_ = mlx5dv_devx_umem_reg(ctx, cq_buf_.data(), cq_buf_.size(), IBV_ACCESS_LOCAL_WRITE);
    wq_umem_ = mlx5dv_devx_umem_reg(ctx, wq_buf_.data(), wq_buf_.size(), IBV_ACCESS_LOCAL_WRITE);
    dbr_umem_ = mlx5dv_devx_umem_reg(ctx, dbr_.data(), dbr_.size(), IBV_ACCESS_LOCAL_WRITE);
    if (!cq_umem_ || !wq_umem_ || !dbr_umem_) return;
    uint32_t eqn = 0;
    mlx5dv_devx_query_eqn(ctx, 0, &eqn);
    Box cq_box(0x110, kCreateCq);
    cq_box
        .SetIn(kCqcByte, 0x63, 5, kLogQueue)  // log_cq_size
        .SetIn(kCqcByte, 0x68, 24, 1)         // uar_page
        .SetIn(kCqcByte, 0xa0, 32, eqn)       // c_eqn
        .SetIn(kCqcByte, 0x20, 32, dbr_umem_->umem_id)
        .SetIn(kCqcByte, 0x1c0, 64, 0)  // dbr_addr: offset 0 of the DBR UMEM
        .Set(0x2c0, 32, cq_umem_->umem_id);
    Out out(kCreateOut);
    cq_ = mlx5dv_devx_obj_create(ctx, cq_box.data(), cq_box.size(), out.data(), out.size());
    if (!cq_) return;
    cqn_ = out.number();
    Box qp_box(0x110 + 8, kCreateQp);
    qp_box
        .SetIn(kQpcByte, 0x08, 8, 0)  // st = RC
        .SetIn(kQpcByte, 0x13, 2, 3)  // pm_state = migrated
        .SetIn(kQpcByte, 0x28, 24, pdn)
        .SetIn(kQpcByte, 0x49, 4, kLogQueue)  // log_rq_size
        .SetIn(kQpcByte, 0x4d, 3, 0)          // log_rq_stride: 16 bytes, one data segment
        .SetIn(kQpcByte, 0x51, 4, kLogQueue)  // log_sq_size
        .SetIn(kQpcByte, 0x68, 24, 1)
        .SetIn(kQpcByte, 0x3e8, 24, cqn_)
        .SetIn(kQpcByte, 0x4e8, 24, cqn_)
        .SetIn(kQpcByte, 0x720, 32, dbr_umem_->umem_id)
        .SetIn(kQpcByte, 0x500, 64, 8)  // dbr_addr: offset 8 (the CQ's record is at 0)
        .Set(0x840, 32, wq_umem_->umem_id);
    Out qp_out(kCreateOut);
    qp_ = mlx5dv_devx_obj_create(ctx, qp_box.data(), qp_box.size(), qp_out.data(), qp_out.size());
    if (qp_) qpn_ = qp_out.number();
  }
  ~DevxQueue() {
    if (qp_) mlx5dv_devx_obj_destroy(qp_);
    if (cq_) mlx5dv_devx_obj_destroy(cq_);
    for (auto* u : {cq_umem_, wq_umem_, dbr_umem_}) {
      if (u) mlx5dv_devx_umem_dereg(u);
    }
  }
  bool ok() const { return qp_ != nullptr; }
  uint32_t qpn() const { return qpn_; }
  mlx5dv_devx_obj* qp() { return qp_; }

  // RST -> INIT -> RTR -> RTS, connected to `remote_qpn`.
  bool ToRts(uint32_t remote_qpn) {
    Box init = QpBox(kRst2Init, qpn_);
    init.SetIn(kQpcByte, 0x490, 1, 1)  // rre
        .SetIn(kQpcByte, 0x491, 1, 1)  // rwe
        .SetIn(kQpcByte, 0x492, 1, 1)  // rae
        .SetIn(kQpcByte, kPrimaryPath + 0x128, 8, 1);
    Box rtr = Init2RtrBox(qpn_, remote_qpn);
    rtr.SetIn(kQpcByte, 0x4a3, 5, 1);  // min_rnr_nak: 0.01 ms
    Box rts = Rtr2RtsBox(qpn_);
    for (Box* b : {&init, &rtr, &rts}) {
      Out o(16);
      if (mlx5dv_devx_obj_modify(qp_, b->data(), b->size(), o.data(), o.size()) != 0) return false;
    }
    return true;
  }

  // One receive WQE of one data segment.
  void PostRecv(uint32_t lkey, void* addr, uint32_t length) {
    auto* seg =
        reinterpret_cast<mlx5_wqe_data_seg*>(wq_buf_.data() + (rq_posted_ % kQueueEntries) * 16);
    mlx5dv_set_data_seg(seg, length, lkey, reinterpret_cast<uintptr_t>(addr));
    ++rq_posted_;
    __atomic_thread_fence(__ATOMIC_RELEASE);
    StoreDbr(8, rq_posted_ & 0xffff);
  }

  // One send WQE: control segment (with opcode modifier `opmod`), then
  // `segs` (16 bytes each), signaled.
  void PostSend(uint8_t opcode, const std::vector<std::array<uint8_t, 16>>& segs,
                uint32_t imm_be = 0, uint8_t opmod = 0) {
    const uint32_t ds = 1 + static_cast<uint32_t>(segs.size());
    uint8_t wqe[64 * 4] = {};
    auto* ctrl = reinterpret_cast<mlx5_wqe_ctrl_seg*>(wqe);
    mlx5dv_set_ctrl_seg(ctrl, sq_posted_ & 0xffff, opcode, opmod, qpn_, MLX5_WQE_CTRL_CQ_UPDATE,
                        static_cast<uint8_t>(ds), 0, imm_be);
    for (size_t i = 0; i < segs.size(); ++i) memcpy(wqe + 16 * (i + 1), segs[i].data(), 16);
    const uint32_t blocks = (ds * 16 + 63) / 64;
    uint8_t* sq = wq_buf_.data() + kQueueEntries * 16;
    for (uint32_t b = 0; b < blocks; ++b) {
      memcpy(sq + ((sq_posted_ + b) % kQueueEntries) * 64, wqe + 64 * b, 64);
    }
    sq_posted_ += blocks;
    __atomic_thread_fence(__ATOMIC_RELEASE);
    StoreDbr(12, sq_posted_ & 0xffff);
  }

  // The next CQE, waiting up to `seconds`; then the consumer index moves.
  Cqe Poll(double seconds = 10) {
    Cqe result;
    auto* cqe = reinterpret_cast<mlx5_cqe64*>(cq_buf_.data() + (consumed_ % kQueueEntries) * 64);
    const uint8_t owner = (consumed_ / kQueueEntries) & 1;
    timespec start{}, now{};
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
      const uint8_t op_own = __atomic_load_n(&cqe->op_own, __ATOMIC_ACQUIRE);
      if ((op_own >> 4) != MLX5_CQE_INVALID && (op_own & 1) == owner) break;
      // Polite polling: the device's engine is a thread of this process,
      // and with more spinning threads than cores it must get the CPU.
      sched_yield();
      clock_gettime(CLOCK_MONOTONIC, &now);
      if (now.tv_sec - start.tv_sec + (now.tv_nsec - start.tv_nsec) / 1e9 > seconds) return result;
    }
    result.opcode = mlx5dv_get_cqe_opcode(cqe);
    if (result.opcode == MLX5_CQE_REQ_ERR || result.opcode == MLX5_CQE_RESP_ERR) {
      auto* err = reinterpret_cast<mlx5_err_cqe*>(cqe);
      result.syndrome = err->syndrome;
      result.qpn = be32toh(err->s_wqe_opcode_qpn) & 0xffffff;
      result.wqe_opcode = static_cast<uint8_t>(be32toh(err->s_wqe_opcode_qpn) >> 24);
    } else {
      result.qpn = be32toh(cqe->sop_drop_qpn) & 0xffffff;
      result.wqe_opcode = static_cast<uint8_t>(be32toh(cqe->sop_drop_qpn) >> 24);
    }
    result.wqe_counter = be16toh(cqe->wqe_counter);
    result.byte_cnt = be32toh(cqe->byte_cnt);
    result.imm = be32toh(cqe->imm_inval_pkey);
    ++consumed_;
    StoreDbr(0, consumed_ & 0xffffff);
    return result;
  }

  uint32_t State() {
    Box q = QpBox(kQueryQp, qpn_);
    Out out(kQueryQpOut);
    if (mlx5dv_devx_obj_query(qp_, q.data(), q.size(), out.data(), out.size()) != 0) return 0xff;
    return static_cast<uint32_t>(out.Get(kQpcByte * 8, 4));
  }

 private:
  void StoreDbr(size_t offset, uint32_t value) {
    __atomic_store_n(reinterpret_cast<uint32_t*>(dbr_.data() + offset), htobe32(value),
                     __ATOMIC_RELEASE);
  }

  ibv_context* ctx_;
  std::vector<uint8_t> cq_buf_, wq_buf_, dbr_;
  mlx5dv_devx_umem *cq_umem_ = nullptr, *wq_umem_ = nullptr, *dbr_umem_ = nullptr;
  mlx5dv_devx_obj *cq_ = nullptr, *qp_ = nullptr;
  uint32_t cqn_ = 0, qpn_ = 0;
  uint32_t rq_posted_ = 0, sq_posted_ = 0, consumed_ = 0;
};

inline std::array<uint8_t, 16> DataSeg(uint32_t length, uint32_t lkey, const void* addr) {
  mlx5_wqe_data_seg seg{};
  mlx5dv_set_data_seg(&seg, length, lkey, reinterpret_cast<uintptr_t>(addr));
  std::array<uint8_t, 16> out;
  memcpy(out.data(), &seg, 16);
  return out;
}

inline std::array<uint8_t, 16> RaddrSeg(uint64_t addr, uint32_t rkey) {
  mlx5_wqe_raddr_seg seg{};
  seg.raddr = htobe64(addr);
  seg.rkey = htobe32(rkey);
  std::array<uint8_t, 16> out;
  memcpy(out.data(), &seg, 16);
  return out;
}

inline std::array<uint8_t, 16> AtomicSeg(uint64_t swap_add, uint64_t compare) {
  mlx5_wqe_atomic_seg seg{};
  seg.swap_add = htobe64(swap_add);
  seg.compare = htobe64(compare);
  std::array<uint8_t, 16> out;
  memcpy(out.data(), &seg, 16);
  return out;
}

// The PD number DEVX commands name a verbs PD by.
inline uint32_t PdnOf(ibv_pd* pd) {
  mlx5dv_pd dv{};
  mlx5dv_obj obj{};
  obj.pd.in = pd;
  obj.pd.out = &dv;
  return mlx5dv_init_obj(&obj, MLX5DV_OBJ_PD) == 0 ? dv.pdn : 0;
}

}  // namespace devx_it
