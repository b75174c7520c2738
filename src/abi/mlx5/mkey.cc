// mlx5dv_create_mkey(3), mlx5dv_destroy_mkey, mlx5dv_mkey_check: indirect
// memory keys and signature keys (docs/devx.md, "Indirect memory keys",
// "Signature keys"). libmlx5's checks of the creation attributes, then the
// device makes the key (softverbs_create_mkey). Crypto keys answer
// EOPNOTSUPP, as libmlx5 does where the device reports no such engine.
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
  if (attr->create_flags & MLX5DV_MKEY_INIT_ATTR_FLAGS_CRYPTO) {
    return RejectNull(EOPNOTSUPP, "mlx5dv_create_mkey: crypto keys are not supported by softverbs");
  }
  // libmlx5 rounds the entries up to a multiple of 4 and reports it back.
  const uint32_t max_entries = (uint32_t{attr->max_entries} + 3) / 4 * 4;
  if (max_entries > softverbs::limits::kMaxMkeyEntries) {
    return RejectNull(EINVAL, "mlx5dv_create_mkey: max_entries %u is above softverbs' %u",
                      attr->max_entries, softverbs::limits::kMaxMkeyEntries);
  }
  mlx5dv_mkey* mkey = softverbs_create_mkey(attr->pd, max_entries, attr->create_flags);
  if (mkey != nullptr) attr->max_entries = static_cast<uint16_t>(max_entries);
  return mkey;
}

SV_MLX5_EXPORT int mlx5dv_destroy_mkey(mlx5dv_mkey* mkey) {
  return softverbs_destroy_mkey(mkey);
}

// libmlx5: EINVAL for a key without a signature context; else NO_ERR, or
// the error kept since the last check, decoded as mlx5_decode_sigerr does
// (a reference tag before an application tag before a guard; the value of
// that field alone).
SV_MLX5_EXPORT int _mlx5dv_mkey_check(mlx5dv_mkey* mkey, mlx5dv_mkey_err* err_info,
                                      size_t err_info_size) {
  if (err_info == nullptr || err_info_size < sizeof(*err_info)) {
    return Reject(EINVAL, "mlx5dv_mkey_check: err_info is NULL or shorter than libmlx5's");
  }
  int has_error = 0;
  softverbs_sig_error e{};
  if (int err = softverbs_mkey_sig_error(mkey, &has_error, &e)) return err;
  *err_info = {};
  if (!has_error) {
    err_info->err_type = MLX5DV_MKEY_NO_ERR;
    return 0;
  }
  mlx5dv_sig_err& sig = err_info->err.sig;
  sig.offset = e.offset;
  if (e.syndrome & 4) {
    err_info->err_type = MLX5DV_MKEY_SIG_BLOCK_BAD_REFTAG;
    sig.expected_value = e.expected & 0xffffffff;
    sig.actual_value = e.actual & 0xffffffff;
  } else if (e.syndrome & 2) {
    err_info->err_type = MLX5DV_MKEY_SIG_BLOCK_BAD_APPTAG;
    sig.expected_value = (e.expected >> 32) & 0xffff;
    sig.actual_value = (e.actual >> 32) & 0xffff;
  } else {
    err_info->err_type = MLX5DV_MKEY_SIG_BLOCK_BAD_GUARD;
    // A T10-DIF guard is the top 16 bits, a CRC-32 the top 32.
    const int shift = e.kind >= 3 ? 48 : 32;
    sig.expected_value = e.expected >> shift;
    sig.actual_value = e.actual >> shift;
  }
  return 0;
}
