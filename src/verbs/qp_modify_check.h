// The complete check of an ibv_modify_qp request, run before anything is
// applied (ibv_modify_qp(3): if any attribute or the mask is invalid, nothing
// changes, not even the state). Pure: it reads the request and the limits and
// returns a verdict; the caller applies verdict.effective_mask only if ok().
#ifndef SOFTVERBS_VERBS_QP_MODIFY_CHECK_H_
#define SOFTVERBS_VERBS_QP_MODIFY_CHECK_H_

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

namespace softverbs::verbs {

// The bits ibv_modify_qp's command path understands: IBV_QP_STATE through
// IBV_QP_DEST_QPN. Anything else (the never-exposed bits 21-24,
// IBV_QP_RATE_LIMIT and up) is EOPNOTSUPP, as in libibverbs/uverbs.
inline constexpr uint32_t kStandardQpAttrMask = (IBV_QP_DEST_QPN << 1) - 1;

// PSNs are 24 bits on the wire. Linux masks larger rq_psn/sq_psn values with a
// warning instead of failing (spec §2.5); so do we: the caller stores
// `psn & kPsnMask`, and the verdict carries the warning.
inline constexpr uint32_t kPsnMask = 0xffffff;

// Limits of a port, as ibv_query_port reports them. They apply to every port
// (softverbs has one).
struct PortLimits {
  uint16_t pkey_table_len;  // ibv_port_attr.pkey_tbl_len
  int gid_table_len;        // ibv_port_attr.gid_tbl_len
  ibv_mtu max_mtu;          // ibv_port_attr.max_mtu: the bound of path_mtu
  uint8_t link_layer;       // IBV_LINK_LAYER_ETHERNET: RoCE, every AV needs a GRH
};

// Device limits, named as in ibv_device_attr.
struct DeviceLimits {
  uint8_t phys_port_cnt;    // valid port numbers are 1..phys_port_cnt
  int max_qp_rd_atom;       // responder depth: upper bound of max_dest_rd_atomic
  int max_qp_init_rd_atom;  // initiator depth: upper bound of max_rd_atomic
};

struct ModifyVerdict {
  int err = 0;                        // 0, EINVAL or EOPNOTSUPP (positive, as ibv_modify_qp)
  uint32_t effective_mask = 0;        // the request's mask after XRC stripping
  ibv_qp_state cur = IBV_QPS_RESET;   // state the transition starts from
  ibv_qp_state next = IBV_QPS_RESET;  // state the QP ends in if ok()
  std::string why;                    // failed rule, for humans; empty if ok()
  std::string warning;                // non-fatal note (a PSN that was masked)

  bool ok() const { return err == 0; }
};

// Linux's modify_qp_mask: bits that mean nothing for an XRC QP are dropped
// before the table check, so RC-style masks work. XRC_SEND (and the legacy
// IBV_QPT_XRC) drops MAX_DEST_RD_ATOMIC|MIN_RNR_TIMER; XRC_RECV drops
// MAX_QP_RD_ATOMIC|RETRY_CNT|RNR_RETRY. Other types keep `mask` unchanged.
uint32_t StripXrcModifyMask(ibv_qp_type qp_type, uint32_t mask);

// No input says whether the QP has an SRQ: in Linux only the IBV_QP_CAP check
// depends on it, and no table cell accepts IBV_QP_CAP. dest_qp_num, qkey and
// en_sqd_async_notify accept any value, as in Linux.
//
// Checks, in this order: QP type has rules; mask bits within
// kStandardQpAttrMask (else EOPNOTSUPP); XRC stripping; qp_state/cur_qp_state
// at most ERR; cur = attr.cur_qp_state if IBV_QP_CUR_STATE else
// `current_state`, next = attr.qp_state if IBV_QP_STATE else cur;
// IBV_QP_CUR_STATE only from RTR/RTS/SQD/SQE; the state table (valid pair,
// required bits present, no bit outside required|optional|IBV_QP_STATE); then
// the value of every attribute present. Every failure but the mask-bit one is
// EINVAL.
ModifyVerdict CheckModifyQp(ibv_qp_type qp_type, ibv_qp_state current_state,
                            const ibv_qp_attr& attr, uint32_t attr_mask, const DeviceLimits& device,
                            const PortLimits& port);

}  // namespace softverbs::verbs

#endif  // SOFTVERBS_VERBS_QP_MODIFY_CHECK_H_
