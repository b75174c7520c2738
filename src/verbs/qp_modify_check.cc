#include "verbs/qp_modify_check.h"

#include <array>
#include <cerrno>
#include <cstdio>
#include <optional>
#include <string_view>
#include <utility>

#include "common/raw_enum.h"
#include "verbs/qp_names.h"
#include "verbs/qp_state_table.h"

namespace softverbs::verbs {
namespace {

constexpr uint32_t kXrcIniStripped = IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
constexpr uint32_t kXrcTgtStripped = IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY;

// Every ibv_access_flags bit of rdma-core 44 plus its optional range (bits
// 20-29, which providers must ignore when unsupported). Linux stores
// qp_access_flags without checking and only the REMOTE_* bits matter for a QP;
// apps routinely pass LOCAL_WRITE and other MR flags, so all defined bits are
// tolerated. Undefined bits are rejected (stricter than Linux) so a garbage
// value is explained rather than silently kept.
constexpr uint32_t kKnownAccessFlags =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
    IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_ON_DEMAND |
    IBV_ACCESS_HUGETLB | IBV_ACCESS_OPTIONAL_RANGE;

// Largest values of the IBA's fixed-width fields.
constexpr unsigned kMaxTimeout = 31;      // 5 bits: 4.096 us * 2^timeout
constexpr unsigned kMaxRetryCount = 7;    // 3 bits
constexpr unsigned kMaxMinRnrTimer = 31;  // 5-bit RNR NAK timer code

std::string Hex(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%x", value);
  return text;
}

std::string Num(long long value) {
  return std::to_string(value);
}

bool IsQpState(uint32_t state) {
  return state <= IBV_QPS_ERR;
}

bool CurStateAssertable(ibv_qp_state state) {
  return state == IBV_QPS_RTR || state == IBV_QPS_RTS || state == IBV_QPS_SQD ||
         state == IBV_QPS_SQE;
}

struct Request {
  const ibv_qp_attr& attr;
  const DeviceLimits& device;
  const PortLimits& port;
};

// Empty when `port_num` names a port of the device.
std::string CheckPortNumber(std::string_view field, uint8_t port_num, const DeviceLimits& device) {
  if (port_num >= 1 && port_num <= device.phys_port_cnt) return {};
  return std::string(field) + " " + Num(port_num) + " is not a port of the device (valid: 1.." +
         Num(device.phys_port_cnt) + ")";
}

std::string CheckPkeyIndex(std::string_view field, uint16_t index, const PortLimits& port) {
  if (index < port.pkey_table_len) return {};
  return std::string(field) + " " + Num(index) + " is outside the port's P_Key table (length " +
         Num(port.pkey_table_len) + ")";
}

std::string CheckAtMost(std::string_view field, unsigned value, unsigned max) {
  if (value <= max) return {};
  return std::string(field) + " " + Num(value) + " is above " + Num(max);
}

// An address vector (IBV_QP_AV's ah_attr or IBV_QP_ALT_PATH's alt_ah_attr).
std::string CheckAddressVector(std::string_view field, const ibv_ah_attr& ah,
                               const Request& request) {
  const std::string name(field);
  if (std::string why = CheckPortNumber(name + ".port_num", ah.port_num, request.device);
      !why.empty()) {
    return why;
  }
  // RoCE addresses by GID: without a GRH there is no destination (Linux
  // rdma_check_ah_attr).
  if (request.port.link_layer == IBV_LINK_LAYER_ETHERNET && !ah.is_global) {
    return name + ".is_global must be 1 on a RoCE port (RoCE requires a GRH)";
  }
  if (ah.is_global && ah.grh.sgid_index >= request.port.gid_table_len) {
    return name + ".grh.sgid_index " + Num(ah.grh.sgid_index) +
           " is outside the port's GID table (length " + Num(request.port.gid_table_len) + ")";
  }
  return {};
}

std::string CheckAccessFlags(const Request& r) {
  const uint32_t unknown = r.attr.qp_access_flags & ~kKnownAccessFlags;
  if (unknown == 0) return {};
  return "qp_access_flags " + Hex(r.attr.qp_access_flags) + " has bits " + Hex(unknown) +
         " that are not ibv_access_flags";
}

std::string CheckPkey(const Request& r) {
  return CheckPkeyIndex("pkey_index", r.attr.pkey_index, r.port);
}

std::string CheckPort(const Request& r) {
  return CheckPortNumber("port_num", r.attr.port_num, r.device);
}

std::string CheckAv(const Request& r) {
  return CheckAddressVector("ah_attr", r.attr.ah_attr, r);
}

std::string CheckPathMtu(const Request& r) {
  const uint32_t mtu = RawEnum(r.attr.path_mtu);
  if (mtu < IBV_MTU_256 || mtu > IBV_MTU_4096) {
    return "path_mtu " + Num(mtu) + " is not an ibv_mtu (1..5 = 256..4096 bytes)";
  }
  // Against max_mtu, as rxe_qp_chk_attr and mlx5 check it: a path MTU above
  // the active MTU is accepted (ibv_rc_pingpong -m 4096 on a 1500-byte link).
  if (mtu > static_cast<uint32_t>(r.port.max_mtu)) {
    return "path_mtu " + Num(mtu) + " (" + std::string(MtuName(r.attr.path_mtu)) +
           ") is above the port's max MTU " + std::string(MtuName(r.port.max_mtu));
  }
  return {};
}

std::string CheckTimeout(const Request& r) {
  return CheckAtMost("timeout", r.attr.timeout, kMaxTimeout);
}

std::string CheckRetryCount(const Request& r) {
  return CheckAtMost("retry_cnt", r.attr.retry_cnt, kMaxRetryCount);
}

std::string CheckRnrRetry(const Request& r) {
  return CheckAtMost("rnr_retry", r.attr.rnr_retry, kMaxRetryCount);
}

std::string CheckMaxRdAtomic(const Request& r) {
  if (r.attr.max_rd_atomic <= r.device.max_qp_init_rd_atom) return {};
  return "max_rd_atomic " + Num(r.attr.max_rd_atomic) + " is above the device's " +
         "max_qp_init_rd_atom " + Num(r.device.max_qp_init_rd_atom);
}

std::string CheckAltPath(const Request& r) {
  if (std::string why = CheckPortNumber("alt_port_num", r.attr.alt_port_num, r.device);
      !why.empty()) {
    return why;
  }
  if (std::string why = CheckAddressVector("alt_ah_attr", r.attr.alt_ah_attr, r); !why.empty()) {
    return why;
  }
  // uverbs: the alternate path leaves through the port its AV names.
  if (r.attr.alt_port_num != r.attr.alt_ah_attr.port_num) {
    return "alt_port_num " + Num(r.attr.alt_port_num) + " differs from alt_ah_attr.port_num " +
           Num(r.attr.alt_ah_attr.port_num);
  }
  if (std::string why = CheckPkeyIndex("alt_pkey_index", r.attr.alt_pkey_index, r.port);
      !why.empty()) {
    return why;
  }
  return CheckAtMost("alt_timeout", r.attr.alt_timeout, kMaxTimeout);
}

std::string CheckMinRnrTimer(const Request& r) {
  return CheckAtMost("min_rnr_timer", r.attr.min_rnr_timer, kMaxMinRnrTimer);
}

std::string CheckMaxDestRdAtomic(const Request& r) {
  if (r.attr.max_dest_rd_atomic <= r.device.max_qp_rd_atom) return {};
  return "max_dest_rd_atomic " + Num(r.attr.max_dest_rd_atomic) + " is above the device's " +
         "max_qp_rd_atom " + Num(r.device.max_qp_rd_atom);
}

std::string CheckPathMigState(const Request& r) {
  const uint32_t state = RawEnum(r.attr.path_mig_state);
  if (state <= IBV_MIG_ARMED) return {};
  return "path_mig_state " + Num(state) + " is not an ibv_mig_state (MIGRATED, REARM, ARMED)";
}

struct ValueRule {
  uint32_t bit;
  std::string (*check)(const Request&);  // empty string: value is fine
};

// One rule per mask bit whose value can be wrong, in mask-bit order. Bits not
// listed accept any value: CUR_STATE and STATE (checked before the table),
// EN_SQD_ASYNC_NOTIFY, QKEY, DEST_QPN, and RQ_PSN/SQ_PSN (masked, see
// kPsnMask). IBV_QP_CAP never reaches here: no table cell accepts it.
constexpr std::array kValueRules = {
    ValueRule{IBV_QP_ACCESS_FLAGS, CheckAccessFlags},
    ValueRule{IBV_QP_PKEY_INDEX, CheckPkey},
    ValueRule{IBV_QP_PORT, CheckPort},
    ValueRule{IBV_QP_AV, CheckAv},
    ValueRule{IBV_QP_PATH_MTU, CheckPathMtu},
    ValueRule{IBV_QP_TIMEOUT, CheckTimeout},
    ValueRule{IBV_QP_RETRY_CNT, CheckRetryCount},
    ValueRule{IBV_QP_RNR_RETRY, CheckRnrRetry},
    ValueRule{IBV_QP_MAX_QP_RD_ATOMIC, CheckMaxRdAtomic},
    ValueRule{IBV_QP_ALT_PATH, CheckAltPath},
    ValueRule{IBV_QP_MIN_RNR_TIMER, CheckMinRnrTimer},
    ValueRule{IBV_QP_MAX_DEST_RD_ATOMIC, CheckMaxDestRdAtomic},
    ValueRule{IBV_QP_PATH_MIG_STATE, CheckPathMigState},
};

// Appends a note for a PSN that does not fit 24 bits.
void NotePsnOverflow(std::string_view field, uint32_t psn, std::string& warning) {
  if ((psn & ~kPsnMask) == 0) return;
  if (!warning.empty()) warning += "; ";
  warning += std::string(field) + " " + Hex(psn) + " does not fit 24 bits; masked to " +
             Hex(psn & kPsnMask) + " as Linux does";
}

ModifyVerdict Reject(ModifyVerdict verdict, int err, std::string why) {
  verdict.err = err;
  verdict.why = std::move(why);
  return verdict;
}

std::string TransitionName(const ModifyVerdict& v, ibv_qp_type qp_type) {
  return std::string(QpStateName(v.cur)) + "->" + std::string(QpStateName(v.next)) + " on " +
         std::string(QpTypeName(qp_type));
}

// §2.2 steps 1-4 with an explanation of the first rule broken.
std::string CheckTransition(const ModifyVerdict& v, ibv_qp_type qp_type, QpTableColumn column) {
  const uint32_t mask = v.effective_mask;
  if ((mask & IBV_QP_CUR_STATE) && !CurStateAssertable(v.cur)) {
    return "IBV_QP_CUR_STATE is only allowed from RTR/RTS/SQD/SQE, not " +
           std::string(QpStateName(v.cur));
  }
  const QpTransitionMasks* found = FindTransitionMasks(column, v.cur, v.next);
  if (found == nullptr) {
    std::string why = std::string(QpStateName(v.cur)) + "->" + std::string(QpStateName(v.next));
    if ((mask & IBV_QP_STATE) == 0) {
      why += " (no IBV_QP_STATE: the QP stays in " + std::string(QpStateName(v.cur)) + ")";
    }
    if (column == QpTableColumn::kDci || column == QpTableColumn::kDct) {
      return why + " is not a valid transition of an mlx5 " + std::string(QpTypeName(qp_type));
    }
    return why + " is not a valid QP state transition";
  }
  const QpTransitionMasks& masks = *found;
  if (const uint32_t missing = masks.required & ~mask; missing != 0) {
    return TransitionName(v, qp_type) + " requires " + QpAttrMaskToString(missing);
  }
  const uint32_t allowed = masks.required | masks.optional | IBV_QP_STATE;
  if (const uint32_t extra = mask & ~allowed; extra != 0) {
    return TransitionName(v, qp_type) + " does not accept " + QpAttrMaskToString(extra);
  }
  return {};
}

}  // namespace

uint32_t StripXrcModifyMask(ibv_qp_type qp_type, uint32_t mask) {
  const std::optional<QpTableColumn> column = QpTableColumnFor(qp_type);
  if (column == QpTableColumn::kXrcIni) return mask & ~kXrcIniStripped;
  if (column == QpTableColumn::kXrcTgt) return mask & ~kXrcTgtStripped;
  return mask;
}

ModifyVerdict CheckModifyQp(ibv_qp_type qp_type, ibv_qp_state current_state,
                            const ibv_qp_attr& attr, uint32_t attr_mask, const DeviceLimits& device,
                            const PortLimits& port) {
  ModifyVerdict verdict;
  verdict.cur = current_state;
  verdict.next = current_state;
  verdict.effective_mask = attr_mask;

  const std::optional<QpTableColumn> column = QpTableColumnFor(qp_type);
  if (!column) {
    return Reject(std::move(verdict), EINVAL,
                  "QP type " + Num(qp_type) + " (" + std::string(QpTypeName(qp_type)) +
                      ") has no modify rules");
  }
  if (const uint32_t unsupported = attr_mask & ~kStandardQpAttrMask; unsupported != 0) {
    return Reject(std::move(verdict), EOPNOTSUPP,
                  "attr_mask bits " + QpAttrMaskToString(unsupported) +
                      " are outside ibv_modify_qp's set (IBV_QP_STATE..IBV_QP_DEST_QPN)");
  }
  verdict.effective_mask = StripXrcModifyMask(qp_type, attr_mask);
  const uint32_t mask = verdict.effective_mask;

  if (!IsQpState(current_state)) {
    return Reject(std::move(verdict), EINVAL,
                  "the QP's current state " + Num(current_state) + " is not a QP state");
  }
  // Read as integers first: an out-of-range value may not be loaded as the enum.
  if ((mask & IBV_QP_STATE) && !IsQpState(RawEnum(attr.qp_state))) {
    return Reject(
        std::move(verdict), EINVAL,
        "qp_state " + Num(RawEnum(attr.qp_state)) + " is not a QP state (0..6 = RESET..ERR)");
  }
  if ((mask & IBV_QP_CUR_STATE) && !IsQpState(RawEnum(attr.cur_qp_state))) {
    return Reject(std::move(verdict), EINVAL,
                  "cur_qp_state " + Num(RawEnum(attr.cur_qp_state)) +
                      " is not a QP state (0..6 = RESET..ERR)");
  }

  // Like Linux, an asserted cur_qp_state is trusted as the starting state.
  verdict.cur = (mask & IBV_QP_CUR_STATE) ? attr.cur_qp_state : current_state;
  verdict.next = (mask & IBV_QP_STATE) ? attr.qp_state : verdict.cur;

  if (std::string why = CheckTransition(verdict, qp_type, *column); !why.empty()) {
    return Reject(std::move(verdict), EINVAL, std::move(why));
  }

  const Request request{attr, device, port};
  for (const ValueRule& rule : kValueRules) {
    if ((mask & rule.bit) == 0) continue;
    if (std::string why = rule.check(request); !why.empty()) {
      return Reject(std::move(verdict), EINVAL, std::move(why));
    }
  }

  if (mask & IBV_QP_RQ_PSN) NotePsnOverflow("rq_psn", attr.rq_psn, verdict.warning);
  if (mask & IBV_QP_SQ_PSN) NotePsnOverflow("sq_psn", attr.sq_psn, verdict.warning);
  return verdict;
}

}  // namespace softverbs::verbs
