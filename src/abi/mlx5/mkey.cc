// mlx5dv_create_mkey(3), mlx5dv_destroy_mkey, mlx5dv_mkey_check: indirect
// memory keys (docs/devx.md, "Indirect memory keys"). libmlx5's checks of
// the creation attributes, then the device makes the key
// (softverbs_create_mkey). Signature and crypto keys answer EOPNOTSUPP, as
// libmlx5 does where the device reports no such engine.
#include "abi/ibverbs/softverbs_private.h"
#include "abi/mlx5/devx_internal.h"
#include "common/device_limits.h"

using softverbs::mlx5::Reject;
using softverbs::mlx5::RejectNull;

SV_MLX5_EXPORT mlx5dv_mkey* mlx5dv_create_mkey(mlx5dv_mkey_init_attr* attr) {
  if (attr == nullptr || attr->pd == nullptr) {
    return RejectNull(EINVAL, "mlx5dv_create_mkey: %s is NULL",
                      attr == nullptr ? "mkey_init_attr" : "pd");
  }
  if (!softverbs_is_device(attr->pd->context->device)) {
    return RejectNull(EOPNOTSUPP, "mlx5dv_create_mkey: the PD is not of a softverbs context");
  }
  // libmlx5: some flag, and only those it knows (UPDATE_TAG only where the
  // device has it: not here).
  constexpr uint32_t kKnown =
      MLX5DV_MKEY_INIT_ATTR_FLAGS_INDIRECT | MLX5DV_MKEY_INIT_ATTR_FLAGS_BLOCK_SIGNATURE |
      MLX5DV_MKEY_INIT_ATTR_FLAGS_CRYPTO | MLX5DV_MKEY_INIT_ATTR_FLAGS_REMOTE_INVALIDATE;
  if (attr->create_flags == 0 || (attr->create_flags & ~kKnown)) {
    return RejectNull(EOPNOTSUPP, "mlx5dv_create_mkey: create_flags 0x%x are empty or unknown",
                      attr->create_flags);
  }
  if (attr->create_flags &
      (MLX5DV_MKEY_INIT_ATTR_FLAGS_BLOCK_SIGNATURE | MLX5DV_MKEY_INIT_ATTR_FLAGS_CRYPTO)) {
    return RejectNull(EOPNOTSUPP,
                      "mlx5dv_create_mkey: signature and crypto keys are not supported by "
                      "softverbs");
  }
  // libmlx5 rounds the entries up to a multiple of 4 and reports it back.
  const uint32_t max_entries = (uint32_t{attr->max_entries} + 3) / 4 * 4;
  if (max_entries > softverbs::limits::kMaxMkeyEntries) {
    return RejectNull(EINVAL, "mlx5dv_create_mkey: max_entries %u is above softverbs' %u",
                      attr->max_entries, softverbs::limits::kMaxMkeyEntries);
  }
  mlx5dv_mkey* mkey = softverbs_create_mkey(
      attr->pd, max_entries,
      (attr->create_flags & MLX5DV_MKEY_INIT_ATTR_FLAGS_REMOTE_INVALIDATE) != 0);
  if (mkey != nullptr) attr->max_entries = static_cast<uint16_t>(max_entries);
  return mkey;
}

SV_MLX5_EXPORT int mlx5dv_destroy_mkey(mlx5dv_mkey* mkey) {
  return softverbs_destroy_mkey(mkey);
}

// libmlx5: EINVAL for a key without a signature context - every key here.
SV_MLX5_EXPORT int _mlx5dv_mkey_check(mlx5dv_mkey* mkey, mlx5dv_mkey_err* err_info,
                                      size_t err_info_size) {
  (void)err_info;
  (void)err_info_size;
  return Reject(EINVAL, "mlx5dv_mkey_check: memory key 0x%x has no signature to check",
                mkey ? mkey->lkey : 0);
}
