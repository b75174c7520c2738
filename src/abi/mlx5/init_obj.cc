// mlx5dv_init_obj: the mlx5 view of verbs objects. softverbs has no mlx5
// rings behind its verbs objects (the data path lives in the daemon), so
// only the object numbers are real: pdn, cqn, srqn (and, for a QP, the
// number is ibv_qp::qp_num, which mlx5dv_qp has no field for). Every
// buffer, doorbell record, BlueFlame register, stride and ring size is
// reported as 0/NULL rather than pointing at memory the device never reads;
// optional comp_mask fields are cleared except MLX5DV_SRQ_MASK_SRQN.
// RWQ, DM and AH objects do not exist on softverbs: EOPNOTSUPP.
#include <cstring>

#include "abi/ibverbs/softverbs_private.h"
#include "abi/mlx5/devx_internal.h"

using softverbs::mlx5::Reject;
using softverbs::mlx5::RejectErrno;
using softverbs::mlx5::ReturnErrno;

namespace {

constexpr uint64_t kKnownTypes = MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ | MLX5DV_OBJ_SRQ | MLX5DV_OBJ_RWQ |
                                 MLX5DV_OBJ_DM | MLX5DV_OBJ_AH | MLX5DV_OBJ_PD;
constexpr uint64_t kSupportedTypes = MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ | MLX5DV_OBJ_SRQ | MLX5DV_OBJ_PD;

bool OnSoftverbs(ibv_context* context) {
  return context != nullptr && softverbs_is_device(context->device);
}

// The checks every object kind makes.
template <typename In, typename Out>
int CheckObj(const char* kind, In* in, Out* out) {
  if (in == nullptr || out == nullptr) {
    return Reject(EINVAL, "mlx5dv_init_obj: %s.%s is NULL", kind, in == nullptr ? "in" : "out");
  }
  if (!OnSoftverbs(in->context)) {
    return Reject(EINVAL, "mlx5dv_init_obj: %s.in is not an object of softverbs", kind);
  }
  return 0;
}

int InitQp(ibv_qp* in, mlx5dv_qp* out) {
  if (int err = CheckObj("qp", in, out)) return err;
  memset(out, 0, sizeof(*out));  // comp_mask too: no optional field is provided
  return 0;
}

int InitCq(ibv_cq* in, mlx5dv_cq* out) {
  if (int err = CheckObj("cq", in, out)) return err;
  memset(out, 0, sizeof(*out));
  out->cqn = softverbs_cq_number(in);
  return 0;
}

int InitSrq(ibv_srq* in, mlx5dv_srq* out) {
  if (int err = CheckObj("srq", in, out)) return err;
  const bool wants_srqn = out->comp_mask & MLX5DV_SRQ_MASK_SRQN;
  memset(out, 0, sizeof(*out));
  if (wants_srqn) {
    out->srqn = softverbs_srq_number(in);
    out->comp_mask = MLX5DV_SRQ_MASK_SRQN;
  }
  return 0;
}

int InitPd(ibv_pd* in, mlx5dv_pd* out) {
  if (int err = CheckObj("pd", in, out)) return err;
  out->pdn = softverbs_pd_number(in);
  out->comp_mask = 0;
  return 0;
}

}  // namespace

SV_MLX5_EXPORT int mlx5dv_init_obj(mlx5dv_obj* obj, uint64_t obj_type) {
  if (obj == nullptr) return RejectErrno(EINVAL, "mlx5dv_init_obj: obj is NULL");
  if (obj_type == 0 || (obj_type & ~kKnownTypes)) {
    return RejectErrno(EINVAL, "mlx5dv_init_obj: obj_type 0x%llx is 0 or has unknown bits",
                       static_cast<unsigned long long>(obj_type));
  }
  if (obj_type & ~kSupportedTypes) {
    return RejectErrno(EOPNOTSUPP,
                       "mlx5dv_init_obj: RWQ, DM and AH objects do not exist on softverbs");
  }
  int err = 0;
  if (!err && (obj_type & MLX5DV_OBJ_QP)) err = InitQp(obj->qp.in, obj->qp.out);
  if (!err && (obj_type & MLX5DV_OBJ_CQ)) err = InitCq(obj->cq.in, obj->cq.out);
  if (!err && (obj_type & MLX5DV_OBJ_SRQ)) err = InitSrq(obj->srq.in, obj->srq.out);
  if (!err && (obj_type & MLX5DV_OBJ_PD)) err = InitPd(obj->pd.in, obj->pd.out);
  return ReturnErrno(err);
}
