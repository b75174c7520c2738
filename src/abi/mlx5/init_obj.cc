// mlx5dv_init_obj: the mlx5 view of verbs objects. An RC, UC or UD QP and a CQ get
// mlx5 buffers and doorbell records that the context's DEVX queue engine
// serves (docs/devx.md, "mlx5dv_init_obj on verbs queues"): software that
// writes mlx5 WQEs and polls mlx5 CQEs on verbs-created queues runs; so
// does a basic SRQ's linked list of receive WQEs. Other QP types and other
// SRQs report their numbers only (buffers NULL); optional comp_mask fields
// are cleared except MLX5DV_SRQ_MASK_SRQN.
// Device memory gets its bytes, an AH its mlx5 address vector. RWQs (not
// on softverbs): EOPNOTSUPP.
#include <cstring>

#include "abi/ibverbs/softverbs_private.h"
#include "abi/mlx5/devx_internal.h"

using softverbs::mlx5::Reject;
using softverbs::mlx5::ReturnErrno;

namespace {

constexpr uint64_t kKnownTypes = MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ | MLX5DV_OBJ_SRQ | MLX5DV_OBJ_RWQ |
                                 MLX5DV_OBJ_DM | MLX5DV_OBJ_AH | MLX5DV_OBJ_PD;
constexpr uint64_t kSupportedTypes =
    MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ | MLX5DV_OBJ_SRQ | MLX5DV_OBJ_DM | MLX5DV_OBJ_AH | MLX5DV_OBJ_PD;

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

// An RC, UC or UD QP or a DCI gets mlx5 buffers that the DEVX queue engine
// serves (send WQEs executed - a UD or DCI WQE's datagram segment read -,
// receive WQEs posted to the QP); other QP types (XRC, DCT) keep the
// zeroed answer.
int InitQp(ibv_qp* in, mlx5dv_qp* out) {
  if (int err = CheckObj("qp", in, out)) return err;
  memset(out, 0, sizeof(*out));  // comp_mask too: no optional field is provided
  softverbs_dv_queue q{};
  const int err = softverbs_dv_init_qp(in, &q);
  if (err == EOPNOTSUPP) return 0;
  if (err) return Reject(err, "mlx5dv_init_obj: qp 0x%x: no mlx5 buffers", in->qp_num);
  out->dbrec = const_cast<__be32*>(reinterpret_cast<volatile __be32*>(q.dbr));
  out->sq.buf = q.sq_buf;
  out->sq.wqe_cnt = q.sq_wqebb_cnt;
  out->sq.stride = 64;
  out->rq.buf = q.rq_buf;
  out->rq.wqe_cnt = q.rq_wqe_cnt;
  out->rq.stride = q.rq_stride;
  out->bf.reg = static_cast<uint8_t*>(q.uar) + 0x800;
  out->bf.size = 0;  // no BlueFlame: ring the doorbell record
  return 0;
}

// A CQ gets a CQE buffer that the engine fills from the CQ's completions:
// poll the CQEs, not ibv_poll_cq, from then on (one consumer).
int InitCq(ibv_cq* in, mlx5dv_cq* out) {
  if (int err = CheckObj("cq", in, out)) return err;
  memset(out, 0, sizeof(*out));
  out->cqn = softverbs_cq_number(in);
  softverbs_dv_queue q{};
  if (int err = softverbs_dv_init_cq(in, &q)) {
    return Reject(err, "mlx5dv_init_obj: cq 0x%x: no mlx5 buffer", out->cqn);
  }
  out->buf = q.cq_buf;
  out->dbrec = const_cast<__be32*>(reinterpret_cast<volatile __be32*>(q.dbr));
  out->cqe_cnt = q.cqe_cnt;
  out->cqe_size = q.cqe_size;
  out->cq_uar = q.uar;
  return 0;
}

// A basic SRQ gets libmlx5's linked list of receive WQEs, which the engine
// takes into the SRQ in list order (as a ConnectX follows next_wqe_index);
// its receive CQEs report the WQE's index (wqe_counter). Post either
// through the list or with ibv_post_srq_recv, not both.
int InitSrq(ibv_srq* in, mlx5dv_srq* out) {
  if (int err = CheckObj("srq", in, out)) return err;
  const bool wants_srqn = out->comp_mask & MLX5DV_SRQ_MASK_SRQN;
  memset(out, 0, sizeof(*out));
  if (wants_srqn) {
    out->srqn = softverbs_srq_number(in);
    out->comp_mask = MLX5DV_SRQ_MASK_SRQN;
  }
  softverbs_dv_queue q{};
  const int err = softverbs_dv_init_srq(in, &q);
  if (err == EOPNOTSUPP) return 0;  // an XRC or tag-matching SRQ: its number only
  if (err) return Reject(err, "mlx5dv_init_obj: srq: no mlx5 buffers");
  out->buf = q.rq_buf;
  out->dbrec = const_cast<__be32*>(reinterpret_cast<volatile __be32*>(q.dbr));
  out->stride = q.rq_stride;
  out->head = 0;
  out->tail = q.rq_wqe_cnt - 1;
  return 0;
}

// Device memory: its bytes, as libmlx5 maps the device's memory into the
// process (stores and loads there are ibv_memcpy_to_dm's and _from_dm's);
// no remote VA (MLX5DV_DM_MASK_REMOTE_VA: MEMIC operations do not exist).
int InitDm(ibv_dm* in, mlx5dv_dm* out) {
  if (int err = CheckObj("dm", in, out)) return err;
  void* buf = nullptr;
  uint64_t length = 0;
  if (int err = softverbs_dm_view(in, &buf, &length)) {
    return Reject(err, "mlx5dv_init_obj: dm: not softverbs' device memory");
  }
  out->buf = buf;
  out->length = length;
  out->comp_mask = 0;
  return 0;
}

// An AH: its address vector, as libmlx5's mlx5_create_ah makes it for a
// RoCE port (abi/ibverbs/ah.cc), for software to copy into UD and DC WQEs.
int InitAh(ibv_ah* in, mlx5dv_ah* out) {
  if (int err = CheckObj("ah", in, out)) return err;
  out->av = softverbs_dv_ah_av(in);
  out->comp_mask = 0;
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
  if (obj == nullptr) return Reject(EINVAL, "mlx5dv_init_obj: obj is NULL");
  // As libmlx5: bits it does not know are ignored; none it knows is EINVAL.
  if ((obj_type & kKnownTypes) == 0) {
    return Reject(EINVAL, "mlx5dv_init_obj: obj_type 0x%llx names no object libmlx5 knows",
                  static_cast<unsigned long long>(obj_type));
  }
  obj_type &= kKnownTypes;
  if (obj_type & ~kSupportedTypes) {
    return Reject(EOPNOTSUPP, "mlx5dv_init_obj: RWQ and AH objects have no mlx5 view on softverbs");
  }
  int err = 0;
  if (!err && (obj_type & MLX5DV_OBJ_QP)) err = InitQp(obj->qp.in, obj->qp.out);
  if (!err && (obj_type & MLX5DV_OBJ_CQ)) err = InitCq(obj->cq.in, obj->cq.out);
  if (!err && (obj_type & MLX5DV_OBJ_SRQ)) err = InitSrq(obj->srq.in, obj->srq.out);
  if (!err && (obj_type & MLX5DV_OBJ_DM)) err = InitDm(obj->dm.in, obj->dm.out);
  if (!err && (obj_type & MLX5DV_OBJ_AH)) err = InitAh(obj->ah.in, obj->ah.out);
  if (!err && (obj_type & MLX5DV_OBJ_PD)) err = InitPd(obj->pd.in, obj->pd.out);
  return ReturnErrno(err);
}
