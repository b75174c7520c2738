// rdma_init_qp_attr: the attributes that take an id's QP to a state, from
// what the connection exchanged (as rdma_cm and ib_cm compute them).
//
//   state  RC / UC (connected)                         UD
//   INIT   pkey_index, port, access flags: 0 before    pkey_index, port,
//          the connection, REMOTE_WRITE (+READ and     qkey RDMA_UDP_QKEY
//          ATOMIC with responder resources) after
//   RTR    av (GRH to the peer's GID), path_mtu,        state only
//          dest_qp_num, rq_psn = the peer's starting
//          PSN, max_dest_rd_atomic, min_rnr_timer 0
//   RTS    timeout 17, retry_cnt, rnr_retry, sq_psn,    sq_psn 0
//          max_rd_atomic
//
// XRC (the IBA's attribute tables, docs/xrc.md): an XRC_SEND QP takes RC's
// attributes but max_dest_rd_atomic and min_rnr_timer at RTR; an XRC_RECV
// QP takes RC's at RTR, and only timeout and sq_psn at RTS.
#include <errno.h>
#include <rdma/rdma_cma.h>

#include <cstring>

#include "daemon/cm_service.h"

namespace softverbs::daemon {

namespace {

// The local ACK timeout rdma_cm uses over RoCE: packet lifetime 16 + 1.
constexpr uint8_t kLocalAckTimeout = 17;
constexpr uint8_t kHopLimit = 64;

}  // namespace

Verdict CmService::InitQpAttr(const Id& id, uint32_t qp_state, protocol::CmReply* out) const {
  ibv_qp_attr& a = out->qp_attr;
  memset(&a, 0, sizeof(a));
  int mask = IBV_QP_STATE;
  a.qp_state = static_cast<ibv_qp_state>(qp_state);
  const bool ud = id.qp_type == IBV_QPT_UD;
  const bool connected = id.peer != 0 || id.state == CmState::kReqSent;
  switch (qp_state) {
    case IBV_QPS_INIT:
      if (!id.route.on_device) {
        return Verdict::Fail(EINVAL,
                             "id " + std::to_string(id.handle) + " is not bound to the device yet");
      }
      a.pkey_index = 0;
      a.port_num = 1;
      mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT;
      if (ud) {
        a.qkey = RDMA_UDP_QKEY;
        mask |= IBV_QP_QKEY;
      } else {
        a.qp_access_flags = 0;
        if (connected) {
          a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
          if (id.responder_resources) {
            a.qp_access_flags |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
          }
        }
        mask |= IBV_QP_ACCESS_FLAGS;
      }
      break;
    case IBV_QPS_RTR:
      if (ud) break;
      if (!id.peer) {
        return Verdict::Fail(EINVAL, "id " + std::to_string(id.handle) +
                                         " has no peer yet: RTR needs the REQ or REP (state " +
                                         CmStateName(id.state) + ")");
      }
      a.ah_attr.is_global = 1;
      memcpy(a.ah_attr.grh.dgid.raw, id.remote_gid, 16);
      a.ah_attr.grh.sgid_index = id.route.sgid_index;
      a.ah_attr.grh.hop_limit = kHopLimit;
      a.ah_attr.grh.traffic_class = id.traffic_class;
      a.ah_attr.port_num = 1;
      a.path_mtu = static_cast<ibv_mtu>(id.route.path_mtu);
      a.dest_qp_num = id.remote.qp_num;
      a.rq_psn = id.remote_psn;
      mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
      if (id.qp_type == IBV_QPT_RC || id.qp_type == IBV_QPT_XRC_RECV) {
        a.max_dest_rd_atomic = id.responder_resources;
        a.min_rnr_timer = 0;
        mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
      }
      break;
    case IBV_QPS_RTS:
      a.sq_psn = ud ? 0 : id.local_psn;
      mask |= IBV_QP_SQ_PSN;
      if (ud) break;
      if (!id.peer) {
        return Verdict::Fail(EINVAL, "id " + std::to_string(id.handle) +
                                         " has no peer yet: RTS needs the REQ or REP (state " +
                                         CmStateName(id.state) + ")");
      }
      if (id.qp_type == IBV_QPT_XRC_RECV) {
        a.timeout = kLocalAckTimeout;
        mask |= IBV_QP_TIMEOUT;
      } else if (id.qp_type == IBV_QPT_RC || id.qp_type == IBV_QPT_XRC_SEND) {
        a.timeout = kLocalAckTimeout;
        // The REQ's retry count serves both sides; the RNR retry count is
        // the one the other side sent (REQ for the passive, REP for the
        // active side).
        a.retry_cnt = (id.active ? id.local.retry_count : id.remote.retry_count) & 7;
        a.rnr_retry = id.remote.rnr_retry_count & 7;
        a.max_rd_atomic = id.initiator_depth;
        mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
      }
      break;
    default:
      return Verdict::Fail(EINVAL, "rdma_init_qp_attr answers for INIT, RTR and RTS, not state " +
                                       std::to_string(qp_state));
  }
  out->qp_attr_mask = mask;
  return Verdict::Ok();
}

}  // namespace softverbs::daemon
