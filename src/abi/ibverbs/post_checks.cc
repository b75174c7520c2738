#include "abi/ibverbs/post_checks.h"

#include <errno.h>
#include <string.h>

#include "abi/ibverbs/reject.h"
#include "common/device_limits.h"
#include "common/gid_table.h"
#include "verbs/qp_names.h"

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
      return Reject(EINVAL, "ibv_post_send: QP 0x%x is not in RTS/SQD/SQE/ERR (state %u)",
                    qp->ibv.qp_base.qp_num, state);
  }
}

int CheckSendWr(Qp* qp, const datapath::SendWr& wr) {
  if (wr.send_flags & ~kKnownSendFlags) {
    return Reject(EINVAL, "ibv_post_send: WR 0x%llx: send_flags 0x%x have unknown bits 0x%x",
                  static_cast<unsigned long long>(wr.wr_id), wr.send_flags,
                  wr.send_flags & ~kKnownSendFlags);
  }
  const ibv_qp_type type = qp->type;
  if (type == IBV_QPT_XRC_SEND && !wr.srqn_set) {
    return Reject(EINVAL,
                  "ibv_wr_complete: XRC_SEND QP 0x%x: WR 0x%llx without ibv_wr_set_xrc_srqn",
                  qp->ibv.qp_base.qp_num, static_cast<unsigned long long>(wr.wr_id));
  }
  const datapath::WrOpcodeInfo& info = datapath::WrOpcode(wr.opcode);
  if (type == verbs::kQptDcIni && !wr.dc_addr_set && info.action != datapath::WrAction::kLocal) {
    return Reject(EINVAL,
                  "ibv_post_send: DCI 0x%x: WR 0x%llx names no DCT (a DCI posts through ibv_wr_* "
                  "with mlx5dv_wr_set_dc_addr)",
                  qp->ibv.qp_base.qp_num, static_cast<unsigned long long>(wr.wr_id));
  }
  if (type == verbs::kQptDcIni && wr.off_host) {
    return Reject(EOPNOTSUPP,
                  "ibv_wr_complete: DCI 0x%x: WR 0x%llx: a DCT on another host is not reachable "
                  "(DC runs on one host in softverbs; docs/devx.md)",
                  qp->ibv.qp_base.qp_num, static_cast<unsigned long long>(wr.wr_id));
  }
  // The opcode table says which QP types may post it (XRC_SEND is an RC
  // requester whose messages name an SRQ) and whether it may be inline.
  if (!datapath::WrOpcodeAllowed(info, type)) {
    return Reject(
        EINVAL, "ibv_post_send: WR 0x%llx: opcode %u is not supported on QP 0x%x of type %d",
        static_cast<unsigned long long>(wr.wr_id), wr.opcode, qp->ibv.qp_base.qp_num, type);
  }
  if (type == IBV_QPT_RAW_PACKET && (wr.send_flags & IBV_SEND_IP_CSUM)) {
    return Reject(EINVAL,
                  "ibv_post_send: raw packet QP 0x%x: WR 0x%llx asks for IBV_SEND_IP_CSUM; the "
                  "device offloads no checksum (raw_packet_caps has no IP_CSUM), as libmlx5 "
                  "refuses it then",
                  qp->ibv.qp_base.qp_num, static_cast<unsigned long long>(wr.wr_id));
  }
  if (type == IBV_QPT_RAW_PACKET && datapath::WrBytes(wr) < limits::kMinRawFrameBytes) {
    return Reject(EINVAL,
                  "ibv_post_send: raw packet QP 0x%x: WR 0x%llx carries %u bytes, less than the "
                  "%u-byte Ethernet header a frame starts with",
                  qp->ibv.qp_base.qp_num, static_cast<unsigned long long>(wr.wr_id),
                  datapath::WrBytes(wr), limits::kMinRawFrameBytes);
  }
  if ((wr.send_flags & IBV_SEND_INLINE) && !info.inline_allowed) {
    return Reject(EINVAL, "ibv_post_send: WR 0x%llx: IBV_SEND_INLINE on opcode %u (READ/atomic)",
                  static_cast<unsigned long long>(wr.wr_id), wr.opcode);
  }
  return 0;
}

int SetUdAddress(Context* ctx, ibv_ah* ibah, uint32_t remote_qpn, uint32_t remote_qkey,
                 datapath::SendWr* wr) {
  const Ah* ah = FromPublic<Ah>(ibah);
  wr->remote_qpn = remote_qpn;
  wr->off_host = ah->leaves_host;
  wr->remote_qkey = remote_qkey;
  wr->sl = ah->attr.sl;
  wr->path = {ah->attr.grh.traffic_class, roce::HopLimitOnTheWire(ah->attr.grh.hop_limit)};
  memcpy(wr->dgid, ah->attr.grh.dgid.raw, 16);
  const int index = ah->attr.grh.sgid_index;
  if (index < ctx->gids.count) memcpy(wr->sgid, ctx->gids.gids[index].raw, 16);
  return 0;
}

}  // namespace softverbs::provider
