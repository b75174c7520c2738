// mlx5dv_wr_set_mkey_sig_block's attributes as the device takes them: the
// checks libmlx5 makes of a struct mlx5dv_sig_block_attr, and the SigAttr
// (datapath/layout.h) it becomes - with the copy mask libmlx5 computes for
// domains of the same kind.
#pragma once

#include <infiniband/mlx5dv.h>

#include "datapath/layout.h"

namespace softverbs::provider {

// Fills *out from attr. Returns 0, EINVAL where libmlx5 fails the batch
// with it (why says what), or EOPNOTSUPP for what softverbs does not compute
// (CRC64-XP10; domains of different block sizes).
int SigAttrFrom(const mlx5dv_sig_block_attr& attr, datapath::SigAttr* out, const char** why);

}  // namespace softverbs::provider
