// mlx5's indirect memory keys in the provider (mlx5dv_create_mkey(3)): the
// key object libmlx5 hands out, made and destroyed by the device
// (daemon/mkey.cc); the UMR work requests that give it a layout are built
// in dv_qp_ex.cc.
#pragma once

#include <infiniband/mlx5dv.h>

#include <cstdint>

namespace softverbs::provider {

struct Context;

struct Mkey {
  mlx5dv_mkey dv;  // first: what mlx5dv_create_mkey hands out
  Context* ctx = nullptr;
  uint32_t handle = 0;       // the device's
  uint32_t max_entries = 0;  // the most entries a layout may have (a multiple of 4)
  bool signature = false;    // created with MLX5DV_MKEY_INIT_ATTR_FLAGS_BLOCK_SIGNATURE
};

inline Mkey* MkeyOf(mlx5dv_mkey* dv) {
  return reinterpret_cast<Mkey*>(dv);
}

}  // namespace softverbs::provider
