// Memory windows in the provider: the bind work request both ways of
// posting it build (ibv_bind_mw for type 1, IBV_WR_BIND_MW / ibv_wr_bind_mw
// for type 2).
#pragma once

#include <infiniband/verbs.h>

#include "datapath/engine.h"

namespace softverbs::provider {

// Fills wr's bind fields: window mw bound with `info` under new key `rkey`.
// `verb` names the caller in rejections. Returns 0 or the errno to report
// (EINVAL for a NULL or foreign window or a range without an MR; EPERM for
// an MR of another PD, as ibv_bind_mw(3) says).
int SetBindWr(ibv_qp* qp, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info& info,
              datapath::SendWr* wr, const char* verb);

}  // namespace softverbs::provider
