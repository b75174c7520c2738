#include "checks.h"

namespace softverbs::devx {
namespace {

// One row per check site: which status the user sees and why.
constexpr CheckInfo kChecks[] = {
    {Check::kPassed, Status::kOk, "ok"},
    {Check::kUnknownOpcode, Status::kBadOp, "opcode not implemented by this firmware"},
    {Check::kOutputTooShortForId, Status::kBadOutputLength,
     "output box too short for the created object's id"},
    {Check::kInputTooShort, Status::kBadInputLength,
     "input box too short for the fields the command needs"},
    {Check::kUnsupportedOpMod, Status::kBadParam, "op_mod not supported for this opcode"},
    {Check::kCapOtherFunction, Status::kBadParam, "other_function: there are no other functions"},
    {Check::kCapUnknownType, Status::kBadParam, "unknown capability type in op_mod"},
    {Check::kVportOtherVport, Status::kBadParam, "other_vport: there are no other vports"},
    {Check::kVportBadPort, Status::kBadParam, "port_num beyond num_ports"},
    {Check::kPdNumbersExhausted, Status::kLimitsExceeded, "no free PD number"},
    {Check::kPdInUse, Status::kResourceBusy, "PD still used by a QP or MKEY"},
    {Check::kPdNotFound, Status::kBadResource, "no such PD of this uid"},
    {Check::kTdLimit, Status::kLimitsExceeded, "transport domain limit reached"},
    {Check::kTdNotFound, Status::kBadResource, "no such transport domain of this uid"},
    {Check::kFlowCounterBulkTooBig, Status::kBadParam,
     "flow counter bulk beyond log_max_flow_counter_bulk"},
    {Check::kFlowCounterLimit, Status::kLimitsExceeded, "flow counter limit reached"},
    {Check::kFlowCounterNotFound, Status::kBadResource, "no such flow counter of this uid"},
    {Check::kFlowCounterRange, Status::kBadParam, "queried counters run past the bulk"},
    {Check::kMkeyAccessMode, Status::kBadParam, "mkey access mode not supported (MTT only)"},
    {Check::kMkeyPd, Status::kBadResource, "mkc.pd: no such PD of this uid"},
    {Check::kMkeyUmem, Status::kBadResource, "mkey_umem_id: no such UMEM of this uid"},
    {Check::kMkeyTooLong, Status::kBadParam, "mkc.len beyond the maximum MR size"},
    {Check::kMkeyNumbersExhausted, Status::kLimitsExceeded, "no free MKEY index"},
    {Check::kMkeyNotFound, Status::kBadResource, "no such MKEY of this uid"},
    {Check::kCqSize, Status::kBadParam, "cqc.log_cq_size beyond log_max_cq_sz"},
    {Check::kCqCqeSize, Status::kBadParam, "cqc.cqe_sz must be 0 (64 B) or 1 (128 B)"},
    {Check::kCqUmem, Status::kBadResource, "cq_umem_id: no such UMEM of this uid"},
    {Check::kCqDbrUmem, Status::kBadResource, "cqc.dbr_umem_id: no such UMEM of this uid"},
    {Check::kCqNumbersExhausted, Status::kLimitsExceeded, "no free CQ number"},
    {Check::kCqNotFound, Status::kBadResource, "no such CQ of this uid"},
    {Check::kCqInUse, Status::kResourceBusy, "CQ still used by a QP"},
    {Check::kCqEqn, Status::kBadParam, "cqc.c_eqn: no such EQ"},
    {Check::kQpServiceType, Status::kBadParam, "qpc.st not supported (RC, UC, UD only)"},
    {Check::kQpSqSize, Status::kBadParam, "qpc.log_sq_size beyond log_max_qp_sz"},
    {Check::kQpRqSize, Status::kBadParam, "qpc.log_rq_size beyond log_max_qp_sz"},
    {Check::kQpRqType, Status::kBadParam, "qpc.rq_type not supported (regular, zero-length)"},
    {Check::kQpPd, Status::kBadResource, "qpc.pd: no such PD of this uid"},
    {Check::kQpSendCq, Status::kBadResource, "qpc.cqn_snd: no such CQ of this uid"},
    {Check::kQpRecvCq, Status::kBadResource, "qpc.cqn_rcv: no such CQ of this uid"},
    {Check::kQpDbrUmem, Status::kBadResource, "qpc.dbr_umem_id: no such UMEM of this uid"},
    {Check::kQpWqUmem, Status::kBadResource, "wq_umem_id: no such UMEM of this uid"},
    {Check::kQpSendDbrMode, Status::kBadParam, "qpc.send_dbr_mode not supported by the device"},
    {Check::kQpNumbersExhausted, Status::kLimitsExceeded, "no free QP number"},
    {Check::kQpNotFound, Status::kBadResource, "no such QP of this uid"},
    {Check::kQpBadState, Status::kBadQpState, "QP transition not allowed from the current state"},
    {Check::kQpMtu, Status::kBadParam, "qpc.mtu must be 1 (256) .. 5 (4096)"},
};

}  // namespace

const CheckInfo& Describe(Check check) {
  for (const CheckInfo& info : kChecks) {
    if (info.check == check) return info;
  }
  return kChecks[1];  // Unreachable for a valid Check: every enumerator has a row.
}

}  // namespace softverbs::devx
