// libmlx5's queue-buffer allocation types (rdma-core providers/mlx5/buf.c):
// MLX_CQ_ALLOC_TYPE, MLX_QP_ALLOC_TYPE and MLX_SRQ_ALLOC_TYPE choose where a
// CQ's, QP's or SRQ's buffer lives. "HUGE" puts it on huge pages from
// shmget(SHM_HUGETLB) and fails without them; the other types (ANON,
// CONTIG, PREFER_*, ALL) fall back to ordinary pages. Under the mlx5
// personality softverbs answers the same: a HUGE queue needs a huge page
// it may take (the same shmget, so the same limits: huge pages reserved,
// and root or the hugetlb_shm_group), else its creation fails with ENOMEM.
// The queue's ring itself is the device's shared memory either way
// (docs/devx.md, "The mlx5 personality").
#pragma once

namespace softverbs::provider {

// 0, or ENOMEM (explained on the log channel) when the mlx5 personality is
// active, MLX_<component>_ALLOC_TYPE is HUGE and no huge page can be had.
// component: "CQ", "QP" or "SRQ"; verb names the call in the explanation.
int CheckMlx5AllocType(const char* component, const char* verb);

}  // namespace softverbs::provider
