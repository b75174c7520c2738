// mlx5dv_reserved_qpn_alloc(3) / mlx5dv_reserved_qpn_dealloc(3): a QP
// number from the device's space that no QP gets while the context holds
// it - what an application hands rdma_cm as the number of an "external"
// QP (a DCT serving several connections). The device keeps them
// (Device::AllocReservedQpn) and frees a context's with its other objects.
#include "abi/ibverbs/softverbs_private.h"
#include "abi/mlx5/devx_internal.h"

using softverbs::mlx5::Reject;
using softverbs::mlx5::ReturnErrno;
namespace protocol = softverbs::protocol;

SV_MLX5_EXPORT int mlx5dv_reserved_qpn_alloc(ibv_context* ctx, uint32_t* qpn) {
  if (ctx == nullptr || qpn == nullptr) {
    return Reject(EINVAL, "mlx5dv_reserved_qpn_alloc: %s is NULL", ctx == nullptr ? "ctx" : "qpn");
  }
  if (!softverbs_is_device(ctx->device)) {
    return Reject(EOPNOTSUPP, "mlx5dv_reserved_qpn_alloc: the context is not softverbs'");
  }
  protocol::ReservedQpn rep{};
  if (int err = ReturnErrno(softverbs::mlx5::CallDaemon(ctx, protocol::Op::kAllocReservedQpn,
                                                        nullptr, 0, &rep, sizeof(rep)))) {
    return err;
  }
  *qpn = rep.qpn;
  return 0;
}

SV_MLX5_EXPORT int mlx5dv_reserved_qpn_dealloc(ibv_context* ctx, uint32_t qpn) {
  if (ctx == nullptr) return Reject(EINVAL, "mlx5dv_reserved_qpn_dealloc: ctx is NULL");
  if (!softverbs_is_device(ctx->device)) {
    return Reject(EOPNOTSUPP, "mlx5dv_reserved_qpn_dealloc: the context is not softverbs'");
  }
  protocol::ReservedQpn req{qpn, 0};
  return ReturnErrno(softverbs::mlx5::CallDaemon(ctx, protocol::Op::kFreeReservedQpn, &req,
                                                 sizeof(req), nullptr, 0));
}
