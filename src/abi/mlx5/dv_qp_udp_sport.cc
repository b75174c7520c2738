// mlx5dv_modify_qp_udp_sport(3): the UDP source port of an RC or UC QP's
// RoCE v2 packets, set while the QP is in RTS. The device checks and applies
// it (Device::SetQpUdpSport; the network transport sends the QP's next
// packets from that port). Between QPs of one host no packet exists; the
// port is kept all the same.
#include "abi/ibverbs/softverbs_private.h"
#include "abi/mlx5/devx_internal.h"

using softverbs::mlx5::Reject;
using softverbs::mlx5::ReturnErrno;

SV_MLX5_EXPORT int mlx5dv_modify_qp_udp_sport(ibv_qp* qp, uint16_t udp_sport) {
  if (qp == nullptr) return Reject(EINVAL, "mlx5dv_modify_qp_udp_sport: qp is NULL");
  if (!softverbs_is_device(qp->context->device)) {
    return Reject(EOPNOTSUPP, "mlx5dv_modify_qp_udp_sport: the QP is not softverbs'");
  }
  softverbs::protocol::SetQpUdpSportRequest req{};
  req.handle = qp->handle;
  req.udp_sport = udp_sport;
  return ReturnErrno(softverbs::mlx5::CallDaemon(
      qp->context, softverbs::protocol::Op::kSetQpUdpSport, &req, sizeof(req), nullptr, 0));
}
