// The checks ibv_post_send makes before a WR runs (both APIs: ibv_send_wr
// and ibv_wr_*), and the UD address of a WR.
#pragma once

#include "abi/ibverbs/provider.h"

namespace softverbs::provider {

// The QP can post: RTS or SQD (a QP in ERR accepts WRs and flushes them).
// Returns 0 or EINVAL.
int CheckSendState(Qp* qp);

// The opcode exists for the QP's type, the flags are known. 0 or EINVAL.
int CheckSendWr(Qp* qp, const datapath::SendWr& wr);

// Fills the UD destination of wr from an address handle.
int SetUdAddress(Context* ctx, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey,
                 datapath::SendWr* wr);

}  // namespace softverbs::provider
