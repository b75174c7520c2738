// CREATE_QP / QUERY_QP / DESTROY_QP. QPNs come from the daemon's QP table
// (QPNs are device-wide: two contexts never share one). A DEVX QP may name
// verbs objects of its context: its PD by PDN and its CQs by CQN.
#include <algorithm>

#include "handlers.h"
#include "prm_command_layouts.h"
#include "prm_context_layouts.h"
#include "prm_opcodes.h"

namespace softverbs::devx {
namespace {

using namespace layout;

constexpr uint32_t kRqTypeRegular = 0;
constexpr uint32_t kRqTypeZeroLength = 3;
constexpr uint32_t kSendDbrModeValid = 0;
constexpr uint32_t kSendDbrModeNoDbrExt = 1;

bool IsSupportedServiceType(uint32_t st) {
  return st == qp_st::kRc || st == qp_st::kUc || st == qp_st::kUd;
}

// The references a new QP takes, resolved before anything is created.
struct QpReferences {
  std::optional<Reference> pd, send_cq, recv_cq, doorbell, buffer;
};

Check ResolveQpReferences(Command& command, std::span<const uint8_t> qpc, QpReferences& refs) {
  const bool has_sq = GetField(qpc, qpc::kNoSq) == 0;
  const bool has_rq = GetField(qpc, qpc::kRqType) != kRqTypeZeroLength;
  refs.pd = Resolve(command, ResourceKind::kPd, GetField(qpc, qpc::kPd));
  if (!refs.pd) return Check::kQpPd;
  if (has_sq) {
    refs.send_cq = Resolve(command, ResourceKind::kCq, GetField(qpc, qpc::kCqnSnd));
    if (!refs.send_cq) return Check::kQpSendCq;
  }
  if (has_rq) {
    refs.recv_cq = Resolve(command, ResourceKind::kCq, GetField(qpc, qpc::kCqnRcv));
    if (!refs.recv_cq) return Check::kQpRecvCq;
  }
  refs.doorbell = Resolve(command, ResourceKind::kUmem, GetField(qpc, qpc::kDbrUmemId));
  if (!refs.doorbell) return Check::kQpDbrUmem;
  if (has_sq || has_rq) {
    refs.buffer = Resolve(command, ResourceKind::kUmem, GetField(command.in, create_qp::kWqUmemId));
    if (!refs.buffer) return Check::kQpWqUmem;
  }
  return Check::kPassed;
}

Check CheckQpShape(std::span<const uint8_t> qpc, const DeviceCaps& caps) {
  if (!IsSupportedServiceType(GetField(qpc, qpc::kSt))) return Check::kQpServiceType;
  const uint32_t log_max_qp_sz = Log2Floor(caps.max_qp_wr);
  if (GetField(qpc, qpc::kLogSqSize) > log_max_qp_sz) return Check::kQpSqSize;
  if (GetField(qpc, qpc::kLogRqSize) > log_max_qp_sz) return Check::kQpRqSize;
  const uint32_t rq_type = GetField(qpc, qpc::kRqType);
  if (rq_type != kRqTypeRegular && rq_type != kRqTypeZeroLength) return Check::kQpRqType;
  const uint32_t dbr_mode = GetField(qpc, qpc::kSendDbrMode);
  if (dbr_mode != kSendDbrModeValid && !(dbr_mode == kSendDbrModeNoDbrExt && caps.send_dbr_less)) {
    return Check::kQpSendDbrMode;
  }
  return Check::kPassed;
}

}  // namespace

Check CreateQp(Command& command) {
  if (command.in.size() < create_qp::kMinInBytes) return Check::kInputTooShort;
  const auto qpc = SubBox(command.in, qp_cmd::kQpcByte);
  if (Check shape = CheckQpShape(qpc, command.state.device.Caps()); shape != Check::kPassed) {
    return shape;
  }
  QpReferences refs;
  if (Check found = ResolveQpReferences(command, qpc, refs); found != Check::kPassed) {
    return found;
  }
  const uint32_t qpn = command.state.device.AllocNumber(ResourceKind::kQp);
  if (qpn == 0) return Check::kQpNumbersExhausted;

  FirmwareObject& qp = InsertCreated(command, opcode::kCreateQp, qpn);
  qp.context.assign(qpc.begin(), qpc.begin() + qpc::kBytes);
  SetField(qp.context, qpc::kState, qp_state::kRst);
  for (const auto& ref : {refs.pd, refs.send_cq, refs.recv_cq, refs.doorbell, refs.buffer}) {
    if (ref) Pin(command.state, qp, *ref);
  }
  ReportObjectNumber(command, qpn);
  return Check::kPassed;
}

Check QueryQp(Command& command) {
  const FirmwareObject* qp =
      FindOwned(command, opcode::kCreateQp, GetField(command.in, qp_cmd::kQpn));
  if (qp == nullptr) return Check::kQpNotFound;
  std::copy(qp->context.begin(), qp->context.end(), command.out.begin() + qp_cmd::kQpcByte);
  return Check::kPassed;
}

Check DestroyQp(Command& command) {
  const uint32_t qpn = GetField(command.in, qp_cmd::kQpn);
  FirmwareObject* qp = FindOwned(command, opcode::kCreateQp, qpn);
  if (qp == nullptr) return Check::kQpNotFound;
  ReleaseHolds(command.state, *qp);
  command.state.device.FreeNumber(ResourceKind::kQp, qpn);
  command.state.objects.Erase(qp->handle);
  return Check::kPassed;
}

}  // namespace softverbs::devx
