#include "abi/ibverbs/sig_block_attr.h"

#include <errno.h>

#include "datapath/block_signature.h"

namespace softverbs::provider {

namespace dp = softverbs::datapath;

namespace {

// mlx5dv_block_size, in order: the data bytes of a block.
constexpr uint16_t kBlockBytes[] = {512, 520, 4048, 4096, 4160};

int DomainFrom(const mlx5dv_sig_block_domain* d, dp::SigDomain* out, const char** why) {
  *out = {};
  if (d == nullptr) return 0;
  // libmlx5's mlx5_validate_sig_block_domain.
  if (d->block_size < MLX5DV_BLOCK_SIZE_512 || d->block_size > MLX5DV_BLOCK_SIZE_4160) {
    *why = "a domain's block_size is not an enum mlx5dv_block_size";
    return EINVAL;
  }
  if (d->comp_mask != 0) {
    *why = "a domain's comp_mask is not 0";
    return EINVAL;
  }
  out->block_size = kBlockBytes[d->block_size];
  switch (d->sig_type) {
    case MLX5DV_SIG_TYPE_T10DIF: {
      const mlx5dv_sig_t10dif* dif = d->sig.dif;
      if (dif == nullptr) {
        *why = "a T10-DIF domain's sig.dif is NULL";
        return EINVAL;
      }
      if ((dif->bg != 0 && dif->bg != 0xffff) ||
          (dif->bg_type != MLX5DV_SIG_T10DIF_CRC && dif->bg_type != MLX5DV_SIG_T10DIF_CSUM) ||
          (dif->flags & ~(MLX5DV_SIG_T10DIF_FLAG_REF_REMAP | MLX5DV_SIG_T10DIF_FLAG_APP_ESCAPE |
                          MLX5DV_SIG_T10DIF_FLAG_APP_REF_ESCAPE))) {
        *why = "a T10-DIF domain's bg is not 0 or 0xffff, or its bg_type or flags are unknown";
        return EINVAL;
      }
      out->kind = dif->bg_type == MLX5DV_SIG_T10DIF_CRC ? dp::kSigT10DifCrc : dp::kSigT10DifCsum;
      out->seed_ones = dif->bg == 0xffff;
      out->dif_flags = dif->flags;
      out->app_tag = dif->app_tag;
      out->ref_tag = dif->ref_tag;
      return 0;
    }
    case MLX5DV_SIG_TYPE_CRC: {
      const mlx5dv_sig_crc* crc = d->sig.crc;
      if (crc == nullptr) {
        *why = "a CRC domain's sig.crc is NULL";
        return EINVAL;
      }
      switch (crc->type) {
        case MLX5DV_SIG_CRC_TYPE_CRC32:
        case MLX5DV_SIG_CRC_TYPE_CRC32C:
          if (crc->seed != 0 && crc->seed != UINT32_MAX) {
            *why = "a CRC-32 domain's seed is not 0 or 0xffffffff";
            return EINVAL;
          }
          out->kind = crc->type == MLX5DV_SIG_CRC_TYPE_CRC32 ? dp::kSigCrc32 : dp::kSigCrc32c;
          out->seed_ones = crc->seed != 0;
          return 0;
        case MLX5DV_SIG_CRC_TYPE_CRC64_XP10:
          if (crc->seed != 0 && crc->seed != UINT64_MAX) {
            *why = "a CRC64-XP10 domain's seed is not 0 or all ones";
            return EINVAL;
          }
          *why = "CRC64-XP10 signatures are not computed by softverbs (sig_caps.crc_type)";
          return EOPNOTSUPP;
        default:
          *why = "a CRC domain's type is unknown";
          return EINVAL;
      }
    }
    default:
      *why = "a domain's sig_type is unknown";
      return EINVAL;
  }
}

bool IsDif(const dp::SigDomain& d) {
  return d.kind == dp::kSigT10DifCrc || d.kind == dp::kSigT10DifCsum;
}

}  // namespace

int SigAttrFrom(const mlx5dv_sig_block_attr& attr, dp::SigAttr* out, const char** why) {
  *out = {};
  if (attr.mem == nullptr && attr.wire == nullptr) {
    *why = "neither mem nor wire is given";
    return EINVAL;
  }
  if (attr.flags & ~uint32_t{MLX5DV_SIG_BLOCK_ATTR_FLAG_COPY_MASK}) {
    *why = "flags has unknown bits";
    return EINVAL;
  }
  if (attr.comp_mask != 0) {
    *why = "comp_mask is not 0";
    return EINVAL;
  }
  if (int err = DomainFrom(attr.mem, &out->mem, why)) return err;
  if (int err = DomainFrom(attr.wire, &out->wire, why)) return err;
  const bool both = attr.mem != nullptr && attr.wire != nullptr;
  if (both && out->mem.block_size != out->wire.block_size) {
    *why = "memory and wire domains of different block sizes are not supported by softverbs";
    return EOPNOTSUPP;
  }
  // libmlx5's "same block structure": both domains signed alike, one block
  // size. Then the wire's signature copies the memory's bytes that are the
  // same by configuration - or those of the caller's copy mask.
  const bool same_structure =
      both && (IsDif(out->mem) ? IsDif(out->wire) : out->mem.kind == out->wire.kind);
  uint8_t copy_mask = 0;
  if (same_structure) {
    if (IsDif(out->mem)) {
      if (out->mem.kind == out->wire.kind && out->mem.seed_ones == out->wire.seed_ones) {
        copy_mask |= MLX5DV_SIG_MASK_T10DIF_GUARD;
      }
      if (out->mem.app_tag == out->wire.app_tag) copy_mask |= MLX5DV_SIG_MASK_T10DIF_APPTAG;
      if (out->mem.ref_tag == out->wire.ref_tag) copy_mask |= MLX5DV_SIG_MASK_T10DIF_REFTAG;
    } else {
      copy_mask = MLX5DV_SIG_MASK_CRC32;
    }
  }
  if (attr.flags & MLX5DV_SIG_BLOCK_ATTR_FLAG_COPY_MASK) {
    if (!same_structure) {
      *why = "MLX5DV_SIG_BLOCK_ATTR_FLAG_COPY_MASK needs both domains signed alike";
      return EINVAL;
    }
    copy_mask = attr.copy_mask;
  }
  out->copy_mask = copy_mask;
  out->check_mask = attr.check_mask;
  out->enabled = 1;
  if (const char* problem = dp::SigAttrProblem(*out)) {
    *why = problem;
    return EINVAL;
  }
  return 0;
}

}  // namespace softverbs::provider
