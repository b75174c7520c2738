// ibv_modify_qp: check (the state table and every attribute value, in
// verbs/qp_modify_check) -> apply -> report. A rejected modify changes
// nothing, not even the state.
#include <errno.h>

#include "common/device_limits.h"
#include "daemon/device.h"
#include "verbs/qp_modify_check.h"
#include "verbs/qp_names.h"

namespace softverbs::daemon {

namespace {

// Copies the attributes named by mask from src into the QP's record.
void ApplyAttributes(const ibv_qp_attr& src, uint32_t mask, ibv_qp_attr* dst) {
  if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) dst->en_sqd_async_notify = src.en_sqd_async_notify;
  if (mask & IBV_QP_ACCESS_FLAGS) dst->qp_access_flags = src.qp_access_flags;
  if (mask & IBV_QP_PKEY_INDEX) dst->pkey_index = src.pkey_index;
  if (mask & IBV_QP_PORT) dst->port_num = src.port_num;
  if (mask & IBV_QP_QKEY) dst->qkey = src.qkey;
  if (mask & IBV_QP_AV) dst->ah_attr = src.ah_attr;
  if (mask & IBV_QP_PATH_MTU) dst->path_mtu = src.path_mtu;
  if (mask & IBV_QP_TIMEOUT) dst->timeout = src.timeout;
  if (mask & IBV_QP_RETRY_CNT) dst->retry_cnt = src.retry_cnt;
  if (mask & IBV_QP_RNR_RETRY) dst->rnr_retry = src.rnr_retry;
  if (mask & IBV_QP_RQ_PSN) dst->rq_psn = src.rq_psn & verbs::kPsnMask;
  if (mask & IBV_QP_MAX_QP_RD_ATOMIC) dst->max_rd_atomic = src.max_rd_atomic;
  if (mask & IBV_QP_ALT_PATH) {
    dst->alt_ah_attr = src.alt_ah_attr;
    dst->alt_pkey_index = src.alt_pkey_index;
    dst->alt_port_num = src.alt_port_num;
    dst->alt_timeout = src.alt_timeout;
  }
  if (mask & IBV_QP_MIN_RNR_TIMER) dst->min_rnr_timer = src.min_rnr_timer;
  if (mask & IBV_QP_SQ_PSN) dst->sq_psn = src.sq_psn & verbs::kPsnMask;
  if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) dst->max_dest_rd_atomic = src.max_dest_rd_atomic;
  if (mask & IBV_QP_PATH_MIG_STATE) dst->path_mig_state = src.path_mig_state;
  if (mask & IBV_QP_DEST_QPN) dst->dest_qp_num = src.dest_qp_num;
}

}  // namespace

Verdict Device::ModifyQp(ClientId c, const protocol::ModifyQpRequest& req) {
  QpHandle* qh = FindOwned(qp_handles_, c, req.handle);
  if (!qh) return Verdict::Fail(EINVAL, "modify_qp: no such QP in this context");
  Qp& qp = qps_.at(qh->qpn);

  // Check.
  const verbs::DeviceLimits device{limits::kPhysPortCount, limits::kMaxQpRdAtom,
                                   limits::kMaxQpInitRdAtom};
  const verbs::PortLimits port{limits::kMaxPkeys, gids_.count,
                               static_cast<ibv_mtu>(limits::kMaxMtu), IBV_LINK_LAYER_ETHERNET};
  verbs::ModifyVerdict verdict =
      verbs::CheckModifyQp(qp.type, qp.state, req.attr, req.mask, device, port);
  if (!verdict.ok()) {
    return Verdict::Fail(
        verdict.err, "QP 0x" + ToHex(qp.qpn) + " (" + std::string(verbs::QpTypeName(qp.type)) +
                         ", " + std::string(verbs::QpStateName(qp.state)) + "): " + verdict.why);
  }

  // Apply.
  const ibv_qp_state previous = qp.state;
  ApplyAttributes(req.attr, verdict.effective_mask, &qp.attr);
  qp.attr_set_mask |= verdict.effective_mask;
  qp.state = verdict.next;
  if (qp.state == IBV_QPS_RESET && previous != IBV_QPS_RESET) {
    // RESET forgets the connection, as on hardware.
    qp.attr = {};
    qp.attr_set_mask = 0;
  }
  // A new path (or none) takes the source port derived from the QP number
  // again, as mlx5 derives the path's udp_sport at every address vector.
  if (qp.state == IBV_QPS_RESET || (verdict.effective_mask & IBV_QP_AV)) qp.udp_sport = 0;
  PublishQpAttributes(qp);
  RaiseLastWqeReached(qp, previous);
  // IBV_EVENT_SQ_DRAINED (RTS->SQD with en_sqd_async_notify) is not raised
  // here: it is due when the send queue is empty, and the send queue (WRs
  // waiting for an RNR or a retry) lives in the library that owns the QP,
  // which raises it through the qp_event op (datapath/shm_send_queue.cc, through
  // the library's QpPort);
  // for a QP the network transport serves, the transport raises it
  // (WireService::CheckDrains).
  return Verdict::Ok();
}

Verdict Device::SetQpUdpSport(ClientId c, const protocol::SetQpUdpSportRequest& req) {
  QpHandle* qh = FindOwned(qp_handles_, c, req.handle);
  if (!qh) return Verdict::Fail(EINVAL, "modify_qp_udp_sport: no such QP in this context");
  Qp& qp = qps_.at(qh->qpn);
  // Check: libmlx5's rules (RC or UC, in RTS: EOPNOTSUPP otherwise).
  if (qp.type != IBV_QPT_RC && qp.type != IBV_QPT_UC) {
    return Verdict::Fail(EOPNOTSUPP, "modify_qp_udp_sport: QP 0x" + ToHex(qp.qpn) + " is " +
                                         std::string(verbs::QpTypeName(qp.type)) +
                                         ": RC and UC QPs only");
  }
  if (qp.state != IBV_QPS_RTS) {
    return Verdict::Fail(EOPNOTSUPP, "modify_qp_udp_sport: QP 0x" + ToHex(qp.qpn) + " is in " +
                                         std::string(verbs::QpStateName(qp.state)) + ": RTS only");
  }
  if (req.udp_sport == 0) {
    return Verdict::Fail(EINVAL, "modify_qp_udp_sport: port 0 is not a source port");
  }
  // Apply, and report to the network transport (its next packet).
  qp.udp_sport = req.udp_sport;
  PublishQpAttributes(qp);
  return Verdict::Ok();
}

}  // namespace softverbs::daemon
