// The checks ibv_post_send makes before a WR runs (both APIs: ibv_send_wr
// and ibv_wr_*), and the UD address of a WR.
#pragma once

#include "abi/ibverbs/provider.h"
#include "verbs/qp_names.h"

namespace softverbs::provider {

// The legacy OFED send-side XRC QP type (include/softverbs/xrc_legacy.h):
// an XRC_SEND QP whose ibv_qp.qp_type reads 5.
using verbs::kLegacyQptXrc;

// XRC_SEND, or the legacy IBV_QPT_XRC: what the data path runs them as.
inline ibv_qp_type DatapathQpType(ibv_qp_type type) {
  return type == kLegacyQptXrc ? IBV_QPT_XRC_SEND : type;
}

// The send_flags a WR may carry (others are refused with EINVAL).
inline constexpr unsigned kKnownSendFlags =
    IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | IBV_SEND_INLINE | IBV_SEND_IP_CSUM;

// The QP can post: RTS or SQD (a QP in ERR accepts WRs and flushes them).
// Returns 0 or EINVAL.
int CheckSendState(Qp* qp);

// The opcode exists for the QP's type, the flags are known, an XRC WR names
// its SRQ. 0 or EINVAL.
int CheckSendWr(Qp* qp, const datapath::SendWr& wr);

// Fills the UD destination of wr from an address handle.
int SetUdAddress(Context* ctx, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey,
                 datapath::SendWr* wr);

}  // namespace softverbs::provider
