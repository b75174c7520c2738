#include "abi/ibverbs/post_checks.h"

#include <errno.h>
#include <string.h>

#include "common/log.h"

namespace softverbs::provider {

int CheckSendState(Qp* qp) {
  uint32_t state = qp->entry ? qp->entry->state.load(std::memory_order_acquire)
                             : static_cast<uint32_t>(qp->ibv.qp_base.state);
  switch (state) {
    case IBV_QPS_RTS:
    case IBV_QPS_SQD:
    case IBV_QPS_SQE:
    case IBV_QPS_ERR:
      return 0;
    default:
      Log("ibv_post_send: QP 0x%x is not in RTS (state %u)", qp->ibv.qp_base.qp_num, state);
      return EINVAL;
  }
}

int CheckSendWr(Qp* qp, const datapath::SendWr& wr) {
  constexpr uint32_t kKnownFlags =
      IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | IBV_SEND_INLINE | IBV_SEND_IP_CSUM;
  if (wr.send_flags & ~kKnownFlags) return EINVAL;
  const ibv_qp_type type = DatapathQpType(qp->ibv.qp_base.qp_type);
  if (type == IBV_QPT_XRC_SEND && !wr.srqn_set) {
    Log("ibv_wr_complete: XRC_SEND QP 0x%x: a WR without ibv_wr_set_xrc_srqn",
        qp->ibv.qp_base.qp_num);
    return EINVAL;
  }
  // XRC_SEND is an RC requester whose messages name an SRQ.
  const bool rc = type == IBV_QPT_RC || type == IBV_QPT_XRC_SEND;
  bool ok = false;
  switch (wr.opcode) {
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM:
      ok = rc || type == IBV_QPT_UC || type == IBV_QPT_UD;
      break;
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
      ok = rc || type == IBV_QPT_UC;
      break;
    case IBV_WR_RDMA_READ:
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      ok = rc;
      break;
    default:
      ok = false;
  }
  if (!ok) {
    Log("ibv_post_send: opcode %u is not supported on QP 0x%x of type %d", wr.opcode,
        qp->ibv.qp_base.qp_num, type);
    return EINVAL;
  }
  if ((wr.send_flags & IBV_SEND_INLINE) &&
      (wr.opcode == IBV_WR_RDMA_READ || wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
       wr.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)) {
    return EINVAL;
  }
  return 0;
}

int SetUdAddress(Context* ctx, ibv_ah* ibah, uint32_t remote_qpn, uint32_t remote_qkey,
                 datapath::SendWr* wr) {
  const Ah* ah = FromPublic<Ah>(ibah);
  wr->remote_qpn = remote_qpn;
  wr->remote_qkey = remote_qkey;
  wr->sl = ah->attr.sl;
  memcpy(wr->dgid, ah->attr.grh.dgid.raw, 16);
  const int index = ah->attr.grh.sgid_index;
  if (index < ctx->gids.count) memcpy(wr->sgid, ctx->gids.gids[index].raw, 16);
  return 0;
}

}  // namespace softverbs::provider
