// mlx5dv_create_cq: a verbs extended CQ with libmlx5's vendor attributes.
// The CQ is softverbs' own (polled with ibv_poll_cq or ibv_start_poll); what
// the attributes change is its mlx5 view (mlx5dv_init_obj): the size of its
// CQEs, 64 or 128 bytes. A 128-byte CQE carries its 64-byte CQE in the
// second half and nothing in the first (no data scattered to the CQE): it
// is padded, so MLX5DV_CQ_INIT_ATTR_FLAGS_CQE_PAD is granted on 128-byte
// CQEs (mlx5dv_query_device reports MLX5DV_CONTEXT_FLAGS_CQE_128B_PAD) and,
// as libmlx5 answers, EINVAL on 64-byte ones. CQE compression is refused as
// libmlx5 refuses it on a device without it (cqe_comp_caps.max_num 0),
// with EINVAL.
#include <cstdlib>

#include "abi/ibverbs/softverbs_private.h"
#include "abi/mlx5/devx_internal.h"

using softverbs::mlx5::RejectNull;

namespace {

constexpr uint64_t kKnownCompMask = MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE |
                                    MLX5DV_CQ_INIT_ATTR_MASK_FLAGS |
                                    MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE;
constexpr uint32_t kKnownFlags = MLX5DV_CQ_INIT_ATTR_FLAGS_RESERVED - 1;

// libmlx5's choice of the CQE size: the attribute when its mask bit is set,
// else MLX5_CQE_SIZE from the environment, else 64. Anything but 64 or 128
// is EINVAL (0 here).
uint32_t ChosenCqeSize(const mlx5dv_cq_init_attr* attr, const char** from) {
  long size = 64;
  *from = "the default";
  if (attr != nullptr && (attr->comp_mask & MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE)) {
    size = attr->cqe_size;
    *from = "cqe_size";
  } else if (const char* env = getenv("MLX5_CQE_SIZE")) {
    size = atoi(env);
    *from = "MLX5_CQE_SIZE";
  }
  return size == 64 || size == 128 ? static_cast<uint32_t>(size) : 0;
}

}  // namespace

SV_MLX5_EXPORT ibv_cq_ex* mlx5dv_create_cq(ibv_context* context, ibv_cq_init_attr_ex* cq_attr,
                                           mlx5dv_cq_init_attr* mlx5_cq_attr) {
  if (context == nullptr || !softverbs_is_device(context->device)) {
    // libmlx5: a context without mlx5 ops.
    return RejectNull(EOPNOTSUPP, "mlx5dv_create_cq: the context is not softverbs'");
  }
  if (cq_attr == nullptr) return RejectNull(EINVAL, "mlx5dv_create_cq: cq_attr is NULL");
  if (cq_attr->cqe == 0) return RejectNull(EINVAL, "mlx5dv_create_cq: cqe is 0");
  if (mlx5_cq_attr != nullptr && (mlx5_cq_attr->comp_mask & ~kKnownCompMask)) {
    return RejectNull(EINVAL, "mlx5dv_create_cq: comp_mask 0x%llx has bits libmlx5 does not know",
                      static_cast<unsigned long long>(mlx5_cq_attr->comp_mask));
  }
  const char* size_from = nullptr;
  const uint32_t cqe_size = ChosenCqeSize(mlx5_cq_attr, &size_from);
  if (cqe_size == 0) {
    return RejectNull(EINVAL, "mlx5dv_create_cq: %s asks for CQEs of neither 64 nor 128 bytes",
                      size_from);
  }
  if (mlx5_cq_attr != nullptr) {
    if (mlx5_cq_attr->comp_mask & MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE) {
      return RejectNull(EINVAL,
                        "mlx5dv_create_cq: CQE compression (format 0x%x) is not supported "
                        "(cqe_comp_caps.max_num is 0)",
                        mlx5_cq_attr->cqe_comp_res_format);
    }
    if (mlx5_cq_attr->comp_mask & MLX5DV_CQ_INIT_ATTR_MASK_FLAGS) {
      if (mlx5_cq_attr->flags & ~kKnownFlags) {
        return RejectNull(EINVAL, "mlx5dv_create_cq: flags 0x%x have bits libmlx5 does not know",
                          mlx5_cq_attr->flags);
      }
      if ((mlx5_cq_attr->flags & MLX5DV_CQ_INIT_ATTR_FLAGS_CQE_PAD) && cqe_size != 128) {
        return RejectNull(EINVAL,
                          "mlx5dv_create_cq: CQE padding needs 128-byte CQEs, not %u-byte ones",
                          cqe_size);
      }
    }
  }
  ibv_cq_ex* cq = ibv_create_cq_ex(context, cq_attr);
  if (cq == nullptr) return nullptr;  // ibv_create_cq_ex explained it and set errno
  // Cannot fail: the size is 64 or 128 and the CQ is softverbs'.
  softverbs_dv_set_cqe_size(ibv_cq_ex_to_cq(cq), cqe_size);
  return cq;
}
