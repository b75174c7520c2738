// For tests run on host A of tests/common/two_hosts.sh whose packets must
// leave the host and find nobody: an RC QP connected to ::ffff:198.51.100.99
// (TEST-NET-2, no address of either test host; its packets go onto the test
// link, which leads only to host B, and nobody answers).
#pragma once

#include <infiniband/verbs.h>
#include <string.h>

namespace softverbs::test {

// Moves qp RESET -> INIT -> RTR -> RTS towards the unanswered peer, with
// the local ACK timeout code `timeout` (0: wait for an ACK forever).
// Returns 0 or the errno of the first ibv_modify_qp that failed.
inline int ConnectToUnansweredPeer(ibv_qp* qp, uint8_t timeout) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  if (int err = ibv_modify_qp(
          qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
    return err;
  }
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = 0x99;
  a.max_dest_rd_atomic = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.sgid_index = 1;
  const uint8_t remote[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 51, 100, 99};
  memcpy(a.ah_attr.grh.dgid.raw, remote, 16);
  if (int err =
          ibv_modify_qp(qp, &a,
                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                            IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
    return err;
  }
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = timeout;
  a.retry_cnt = 7;
  a.max_rd_atomic = 1;
  return ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                           IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

}  // namespace softverbs::test
