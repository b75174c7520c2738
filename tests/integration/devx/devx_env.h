// What every DEVX integration test needs: softverbs0 opened through libmlx5
// (with or without the DEVX flag), UMEM helpers, the three boxes most tests
// start from, and `softverbs status --json`.
#pragma once

#include <gtest/gtest.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>
#include <sched.h>
#include <stdio.h>

#include <cerrno>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "prm_box.h"

namespace devx_it {

inline ibv_device* FindSoftverbs() {
  static ibv_device** list = ibv_get_device_list(nullptr);
  for (int i = 0; list && list[i]; ++i) {
    if (std::string(ibv_get_device_name(list[i])) == "softverbs0") return list[i];
  }
  return nullptr;
}

inline ibv_context* OpenDevx(bool devx = true) {
  mlx5dv_context_attr attr{};
  attr.flags = devx ? MLX5DV_CONTEXT_FLAGS_DEVX : 0;
  return mlx5dv_open_device(FindSoftverbs(), &attr);
}

inline nlohmann::json Status() {
  std::string out;
  FILE* p = popen(SOFTVERBS_CLI " status --json", "r");
  if (p == nullptr) return {};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  pclose(p);
  return nlohmann::json::parse(out, nullptr, false);
}

// The newest status entry of a client of `pid` (null when it has none).
// Newest: a context closed just before may not be released yet.
inline nlohmann::json ClientOf(const nlohmann::json& status, pid_t pid) {
  nlohmann::json found = nullptr;
  if (status.is_object() && status.contains("clients")) {
    for (const auto& c : status["clients"]) {
      if (c.value("pid", -1) == pid) found = c;
    }
  }
  return found;
}

struct Umem {
  std::vector<uint8_t> memory;
  mlx5dv_devx_umem* umem = nullptr;
};

// A verbs RC QP from RESET to RTS, connected to `remote` on this host,
// allowing its peer `access`.
inline bool ConnectVerbsRc(ibv_context* ctx, ibv_qp* qp, uint32_t remote,
                           unsigned access = IBV_ACCESS_REMOTE_WRITE) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = access;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    return false;
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = remote;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.hop_limit = 64;
  ibv_query_gid(ctx, 1, 0, &a.ah_attr.grh.dgid);
  if (ibv_modify_qp(qp, &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return false;
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  return ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                           IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) == 0;
}

// The CQE at `index` of a CQ's mlx5 view once its owner bit says software
// owns it (libmlx5's get_cqe: the 64-byte CQE ends its entry), or nullptr
// after `spins` looks.
inline mlx5_cqe64* WaitCqe(const mlx5dv_cq& cq, uint32_t index, int spins = 20000000) {
  auto* cqe =
      reinterpret_cast<mlx5_cqe64*>(static_cast<uint8_t*>(cq.buf) +
                                    size_t{index % cq.cqe_cnt} * cq.cqe_size + (cq.cqe_size - 64));
  const uint8_t owner = (index / cq.cqe_cnt) & 1;
  for (int i = 0; i < spins; ++i) {
    const uint8_t op_own = __atomic_load_n(&cqe->op_own, __ATOMIC_ACQUIRE);
    if ((op_own >> 4) != MLX5_CQE_INVALID && (op_own & 1) == owner) return cqe;
    sched_yield();
  }
  return nullptr;
}

class DevxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(FindSoftverbs(), nullptr) << "softverbs0 not listed";
    ctx_ = OpenDevx();
    ASSERT_NE(ctx_, nullptr) << "mlx5dv_open_device(DEVX): " << strerror(errno);
  }
  void TearDown() override {
    if (ctx_) ibv_close_device(ctx_);
  }

  uint32_t RegUmem(ibv_context* ctx = nullptr, size_t size = 1 << 16) {
    auto u = std::make_unique<Umem>();
    u->memory.resize(size);
    u->umem =
        mlx5dv_devx_umem_reg(ctx ? ctx : ctx_, u->memory.data(), size, IBV_ACCESS_LOCAL_WRITE);
    EXPECT_NE(u->umem, nullptr) << strerror(errno);
    uint32_t id = u->umem ? u->umem->umem_id : 0;
    umems_.push_back(std::move(u));
    return id;
  }

  mlx5dv_devx_obj* Create(Box box, Out* out = nullptr, ibv_context* ctx = nullptr) {
    Out local(kCreateOut);
    Out& o = out ? *out : local;
    return mlx5dv_devx_obj_create(ctx ? ctx : ctx_, box.data(), box.size(), o.data(), o.size());
  }

  // A DEVX CQ on fresh UMEMs.
  mlx5dv_devx_obj* CreateCq(uint32_t* cqn, ibv_context* ctx = nullptr) {
    Out out(kCreateOut);
    auto* cq = Create(CreateCqBox(RegUmem(ctx), RegUmem(ctx), 0), &out, ctx);
    EXPECT_NE(cq, nullptr) << strerror(errno) << " status " << int(out.status());
    *cqn = out.number();
    return cq;
  }

  mlx5dv_devx_obj* CreatePd(uint32_t* pdn) {
    Out out(kCreateOut);
    auto* pd = Create(Box(16, kAllocPd), &out);
    EXPECT_NE(pd, nullptr) << strerror(errno);
    *pdn = out.number();
    return pd;
  }

  mlx5dv_devx_obj* CreateQp(uint32_t pdn, uint32_t cqn, uint32_t* qpn, Out* out_box = nullptr) {
    Out local(kCreateOut);
    Out& out = out_box ? *out_box : local;
    auto* qp = Create(CreateQpBox(pdn, cqn, cqn, RegUmem(), RegUmem()), &out);
    *qpn = out.number();
    return qp;
  }

  uint32_t QpState(mlx5dv_devx_obj* qp, uint32_t qpn) {
    Box q = QpBox(kQueryQp, qpn);
    Out out(kQueryQpOut);
    EXPECT_EQ(mlx5dv_devx_obj_query(qp, q.data(), q.size(), out.data(), out.size()), 0);
    return static_cast<uint32_t>(out.Get(kQpcByte * 8, 4));
  }

  ibv_context* ctx_ = nullptr;
  std::vector<std::unique_ptr<Umem>> umems_;
};

}  // namespace devx_it
