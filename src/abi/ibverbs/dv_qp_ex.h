// The mlx5dv_qp_ex of a QP (mlx5dv_qp_ex_from_ibv_qp_ex): libmlx5's work
// request builders beside ibv_qp_ex's, adding to the same ibv_wr_start ...
// ibv_wr_complete batch. softverbs builds mlx5dv_wr_raw_wqe (an RC or UC
// QP created by mlx5dv_create_qp with MLX5DV_QP_EX_WITH_RAW_WQE): the WQE is
// read as the DEVX queue engine reads one (datapath/mlx5_wqe.h) and runs as
// the verbs WR it describes; mlx5dv_wr_set_dc_addr on a DCI (the DCT a
// WR goes to; docs/devx.md, "DC QPs"); and mlx5dv_wr_memcpy on an RC QP or a
// DCI created with MLX5DV_QP_EX_WITH_MEMCPY (a copy between two local
// ranges, datapath/local_ops.h). Every other builder fails the batch
// with EOPNOTSUPP (libmlx5 leaves them NULL where they do not apply).
#pragma once

#include <infiniband/mlx5dv.h>

#include <cstdint>

namespace softverbs::provider {

struct Mkey;

struct Qp;

struct DvQpEx {
  mlx5dv_qp_ex ex;  // first: what mlx5dv_qp_ex_from_ibv_qp_ex hands out
  Qp* qp = nullptr;
  // The MLX5DV_QP_EX_WITH_* operations the QP was created with.
  uint64_t send_ops = 0;
  // mlx5dv_create_qp made the QP: libmlx5's QP, whose every ibv_wr_*
  // builder of its type works whatever its send_ops_flags (qp_ex_ops.cc).
  bool made_by_mlx5dv = false;
  // The UMR being built: mlx5dv_wr_mkey_configure opened it (the batch's
  // last WR) for `setters_left` setters; nullptr once they all came.
  Mkey* umr_mkey = nullptr;
  uint8_t umr_setters_left = 0;
};

// Fills every builder of qp's DvQpEx (at the QP's creation).
void InstallDvQpExOps(Qp* qp);

}  // namespace softverbs::provider
