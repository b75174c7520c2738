// Opening softverbs0 through libmlx5: mlx5dv_is_supported, mlx5dv_open_device
// (every context is a DEVX context, as libmlx5 opens them),
// mlx5dv_query_device, mlx5dv_query_port, mlx5dv_get_clock_info and
// mlx5dv_devx_query_eqn.
#include <time.h>

#include <cstring>

#include "abi/ibverbs/softverbs_private.h"
#include "abi/mlx5/devx_internal.h"
#include "common/device_limits.h"
#include "datapath/timers.h"

using softverbs::mlx5::Reject;
using softverbs::mlx5::RejectNull;

namespace {
// max_clock_info_update_nsec: one second.
constexpr uint64_t kClockInfoUpdateNs = 1000000000;
}  // namespace

SV_MLX5_EXPORT bool mlx5dv_is_supported(ibv_device* device) {
  return softverbs_is_device(device);
}

SV_MLX5_EXPORT ibv_context* mlx5dv_open_device(ibv_device* device, mlx5dv_context_attr* attr) {
  if (!softverbs_is_device(device)) {
    // Not a device this provider drives.
    return RejectNull(EOPNOTSUPP, "mlx5dv_open_device: %p is not softverbs' device",
                      static_cast<void*>(device));
  }
  if (attr != nullptr && attr->comp_mask != 0) {
    return RejectNull(EINVAL,
                      "mlx5dv_open_device: comp_mask 0x%llx: no comp_mask fields are defined",
                      static_cast<unsigned long long>(attr->comp_mask));
  }
  if (attr != nullptr && (attr->flags & ~uint32_t{MLX5DV_CONTEXT_FLAGS_DEVX})) {
    return RejectNull(
        EINVAL, "mlx5dv_open_device: flags 0x%llx: MLX5DV_CONTEXT_FLAGS_DEVX is the only flag",
        static_cast<unsigned long long>(attr->flags));
  }
  ibv_context* context = ibv_open_device(device);
  if (context == nullptr) return nullptr;
  {
    // The kernel runs CREATE_UCTX here, with or without the flag (libmlx5
    // asks for a DEVX ucontext in any case); the daemon hands out the uid it
    // will stamp on every command of this context. A context opened by
    // ibv_open_device gets its uid at its first DEVX command.
    softverbs::protocol::HandleRequest req{};
    softverbs::protocol::DevxOpenReply rep{};
    if (int err = softverbs::mlx5::CallDaemon(context, softverbs::protocol::Op::kDevxOpen, &req,
                                              sizeof(req), &rep, sizeof(rep))) {
      ibv_close_device(context);
      errno = err;
      return nullptr;
    }
  }
  return context;
}

SV_MLX5_EXPORT int mlx5dv_query_device(ibv_context* context, mlx5dv_context* attrs_out) {
  if (context == nullptr || attrs_out == nullptr) {
    return Reject(EINVAL, "mlx5dv_query_device: %s is NULL",
                  context == nullptr ? "context" : "attrs_out");
  }
  if (!softverbs_is_device(context->device)) {
    return Reject(EOPNOTSUPP, "mlx5dv_query_device: the context is not softverbs'");
  }
  // CQE version 1 is what QUERY_HCA_CAP reports (cqe_version); no MPW, no
  // real-time timestamps.
  attrs_out->version = 0;
  // 128-byte CQEs are padded (dv_cq.cc).
  attrs_out->flags = MLX5DV_CONTEXT_FLAGS_CQE_V1 | MLX5DV_CONTEXT_FLAGS_CQE_128B_PAD;
  // As libmlx5's _mlx5dv_query_device: each of these fields asked for is
  // written and its bit kept, zero when the device lacks the capability
  // (none of them exists on softverbs: CQE compression, SW parsing, striding
  // RQ, tunnel offloads, dynamic BF registers, flow action
  // flags, crypto offloads).
  // The core clock register and LAG ports are answered only when the
  // device has them: their bits are cleared.
  uint64_t answered = 0;
  const auto answer = [&](uint64_t bit, auto& field) {
    if (attrs_out->comp_mask & bit) {
      field = {};
      answered |= bit;
    }
  };
  answer(MLX5DV_CONTEXT_MASK_CQE_COMPRESION, attrs_out->cqe_comp_caps);
  answer(MLX5DV_CONTEXT_MASK_SWP, attrs_out->sw_parsing_caps);
  answer(MLX5DV_CONTEXT_MASK_STRIDING_RQ, attrs_out->striding_rq_caps);
  answer(MLX5DV_CONTEXT_MASK_TUNNEL_OFFLOADS, attrs_out->tunnel_offloads_caps);
  answer(MLX5DV_CONTEXT_MASK_DYN_BFREGS, attrs_out->max_dynamic_bfregs);
  answer(MLX5DV_CONTEXT_MASK_FLOW_ACTION_FLAGS, attrs_out->flow_action_flags);
  // Signature keys: T10-DIF (either guard) and CRC-32 / CRC-32C, every
  // block size (datapath/block_signature.h); not CRC64-XP10.
  if (attrs_out->comp_mask & MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD) {
    mlx5dv_sig_caps& caps = attrs_out->sig_caps;
    caps = {};
    caps.block_size = MLX5DV_BLOCK_SIZE_CAP_512 | MLX5DV_BLOCK_SIZE_CAP_520 |
                      MLX5DV_BLOCK_SIZE_CAP_4048 | MLX5DV_BLOCK_SIZE_CAP_4096 |
                      MLX5DV_BLOCK_SIZE_CAP_4160;
    caps.block_prot = MLX5DV_SIG_PROT_CAP_T10DIF | MLX5DV_SIG_PROT_CAP_CRC;
    caps.t10dif_bg = MLX5DV_SIG_T10DIF_BG_CAP_CRC | MLX5DV_SIG_T10DIF_BG_CAP_CSUM;
    caps.crc_type = MLX5DV_SIG_CRC_TYPE_CAP_CRC32 | MLX5DV_SIG_CRC_TYPE_CAP_CRC32C;
    answered |= MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD;
  }
  answer(MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD, attrs_out->crypto_caps);
  // DCI streams (on one host, as DC QPs: docs/devx.md, "DCI streams").
  if (attrs_out->comp_mask & MLX5DV_CONTEXT_MASK_DCI_STREAMS) {
    attrs_out->dci_streams_caps.max_log_num_concurent = softverbs::limits::kMaxLogDciStreams;
    attrs_out->dci_streams_caps.max_log_num_errored = softverbs::limits::kMaxLogDciErroredStreams;
    answered |= MLX5DV_CONTEXT_MASK_DCI_STREAMS;
  }
  // DMA memcpy (mlx5dv_wr_memcpy), as QUERY_HCA_CAP's log_dma_mmo_max_size.
  if (attrs_out->comp_mask & MLX5DV_CONTEXT_MASK_WR_MEMCPY_LENGTH) {
    attrs_out->max_wr_memcpy_length = softverbs::limits::kMaxWrMemcpyLength;
    answered |= MLX5DV_CONTEXT_MASK_WR_MEMCPY_LENGTH;
  }
  // DC QPs (on one host, docs/devx.md) take ODP MRs as RC QPs do.
  if (attrs_out->comp_mask & MLX5DV_CONTEXT_MASK_DC_ODP_CAPS) {
    attrs_out->dc_odp_caps = softverbs::limits::kOdpReliableOps & ~uint32_t{IBV_ODP_SUPPORT_RECV};
    answered |= MLX5DV_CONTEXT_MASK_DC_ODP_CAPS;
  }
  // The clock info mlx5dv_get_clock_info reads is made at each call (below):
  // it never goes stale, so any period is right; libmlx5 reports how often
  // the kernel rewrites its page.
  if (attrs_out->comp_mask & MLX5DV_CONTEXT_MASK_CLOCK_INFO_UPDATE) {
    attrs_out->max_clock_info_update_nsec = kClockInfoUpdateNs;
    answered |= MLX5DV_CONTEXT_MASK_CLOCK_INFO_UPDATE;
  }
  attrs_out->comp_mask = answered;
  return 0;
}

// mlx5dv_query_port(3) answers what the kernel's mlx5_ib answers for a port
// of a device whose e-switch is not in switchdev mode: success, and no field
// (flags 0: no vport, steering ICM or reg_c0 information). A port other than
// 1 is EINVAL, an answer buffer smaller than the structure EINVAL.
SV_MLX5_EXPORT int _mlx5dv_query_port(ibv_context* context, uint32_t port_num, mlx5dv_port* info,
                                      size_t info_len) {
  if (context == nullptr || !softverbs_is_device(context->device)) {
    return Reject(EOPNOTSUPP, "mlx5dv_query_port: the context is not softverbs'");
  }
  if (port_num != 1)
    return Reject(EINVAL, "mlx5dv_query_port: port %u: the device has port 1", port_num);
  if (info == nullptr || info_len < sizeof(mlx5dv_port)) {
    return Reject(EINVAL, "mlx5dv_query_port: info of %zu bytes is smaller than struct mlx5dv_port",
                  info == nullptr ? size_t{0} : info_len);
  }
  memset(info, 0, info_len);
  return 0;
}

// mlx5dv_get_clock_info(3): what mlx5dv_ts_to_ns needs to turn the device
// clock (completion timestamps, ibv_query_rt_values_ex: nanoseconds of
// CLOCK_MONOTONIC, hca_core_clock 1 GHz) into the wall-clock time the
// kernel's clock info page gives on a NIC. One cycle is one nanosecond
// (mult 1, shift 0); nsec is CLOCK_REALTIME read with last_cycles, so a
// conversion agrees with ibv_wc_read_completion_wallclock_ns.
SV_MLX5_EXPORT int mlx5dv_get_clock_info(ibv_context* context, mlx5dv_clock_info* clock_info) {
  if (context == nullptr || !softverbs_is_device(context->device)) {
    return Reject(EOPNOTSUPP, "mlx5dv_get_clock_info: the context is not softverbs'");
  }
  if (clock_info == nullptr) return Reject(EINVAL, "mlx5dv_get_clock_info: clock_info is NULL");
  const uint64_t cycles = softverbs::datapath::DeviceClockNs();
  timespec real;
  clock_gettime(CLOCK_REALTIME, &real);
  *clock_info = {};
  clock_info->nsec =
      static_cast<uint64_t>(real.tv_sec) * 1000000000ull + static_cast<uint64_t>(real.tv_nsec);
  clock_info->last_cycles = cycles;
  clock_info->frac = 0;
  clock_info->mult = 1;
  clock_info->shift = 0;
  clock_info->mask = ~uint64_t{0};
  return 0;
}

SV_MLX5_EXPORT int mlx5dv_devx_query_eqn(ibv_context* context, uint32_t vector, uint32_t* eqn) {
  if (context == nullptr || eqn == nullptr) {
    return Reject(EINVAL, "mlx5dv_devx_query_eqn: %s is NULL",
                  context == nullptr ? "context" : "eqn");
  }
  // The firmware numbers its completion EQs after the completion vectors
  // (CREATE_CQ accepts c_eqn < num_comp_vectors).
  if (vector >= static_cast<uint32_t>(context->num_comp_vectors)) {
    // mlx5_vector2eqn finds no such completion EQ: ENOENT.
    return Reject(ENOENT, "mlx5dv_devx_query_eqn: vector %u is not below num_comp_vectors %d",
                  vector, context->num_comp_vectors);
  }
  *eqn = vector;
  return 0;
}
