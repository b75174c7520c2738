// Opening softverbs0 through libmlx5: mlx5dv_is_supported, mlx5dv_open_device
// (MLX5DV_CONTEXT_FLAGS_DEVX gives the context's daemon client a DEVX uid),
// mlx5dv_query_device and mlx5dv_devx_query_eqn.
#include <cstring>

#include "abi/ibverbs/softverbs_private.h"
#include "abi/mlx5/devx_internal.h"

using softverbs::mlx5::ReturnErrno;

SV_MLX5_EXPORT bool mlx5dv_is_supported(ibv_device* device) {
  return softverbs_is_device(device);
}

SV_MLX5_EXPORT ibv_context* mlx5dv_open_device(ibv_device* device, mlx5dv_context_attr* attr) {
  if (!softverbs_is_device(device)) {
    errno = EOPNOTSUPP;  // not a device this provider drives
    return nullptr;
  }
  if (attr != nullptr && attr->comp_mask != 0) {
    errno = EINVAL;  // no comp_mask fields are defined
    return nullptr;
  }
  if (attr != nullptr && (attr->flags & ~uint32_t{MLX5DV_CONTEXT_FLAGS_DEVX})) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  ibv_context* context = ibv_open_device(device);
  if (context == nullptr) return nullptr;
  if (attr != nullptr && (attr->flags & MLX5DV_CONTEXT_FLAGS_DEVX)) {
    // The kernel runs CREATE_UCTX here; the daemon hands out the uid it will
    // stamp on every command of this context.
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
  if (context == nullptr || attrs_out == nullptr) return ReturnErrno(EINVAL);
  if (!softverbs_is_device(context->device)) return ReturnErrno(EOPNOTSUPP);
  // None of the optional capabilities (CQE compression, striding RQ, SW
  // parsing, tunnel offloads, dynamic BF registers, ...) exist on softverbs:
  // every comp_mask bit the caller asked for is cleared, as rdma-core does
  // for capabilities the device lacks. CQE version 1 is what QUERY_HCA_CAP
  // reports (cqe_version).
  attrs_out->version = 0;
  attrs_out->flags = MLX5DV_CONTEXT_FLAGS_CQE_V1;
  attrs_out->comp_mask = 0;
  return 0;
}

SV_MLX5_EXPORT int mlx5dv_devx_query_eqn(ibv_context* context, uint32_t vector, uint32_t* eqn) {
  if (context == nullptr || eqn == nullptr) return ReturnErrno(EINVAL);
  // The firmware numbers its completion EQs after the completion vectors
  // (CREATE_CQ accepts c_eqn < num_comp_vectors).
  if (vector >= static_cast<uint32_t>(context->num_comp_vectors)) return ReturnErrno(EINVAL);
  *eqn = vector;
  return 0;
}
