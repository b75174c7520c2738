// CREATE_CQ / QUERY_CQ / DESTROY_CQ. CQNs come from the daemon's CQ table,
// shared with verbs CQs. The CQ buffer and doorbell record are UMEMs (the
// kernel forces umem mode, spec §2.5).
#include <algorithm>

#include "handlers.h"
#include "prm_command_layouts.h"
#include "prm_context_layouts.h"
#include "prm_opcodes.h"

namespace softverbs::devx {
namespace {

using namespace layout;

constexpr uint32_t kMaxCqeSz = 1;  // 0 = 64-byte CQEs, 1 = 128-byte CQEs

}  // namespace

Check CreateCq(Command& command) {
  if (command.in.size() < create_cq::kMinInBytes) return Check::kInputTooShort;
  const auto cqc = SubBox(command.in, create_cq::kCqcByte);
  const DeviceCaps caps = command.state.device.Caps();
  if (GetField(cqc, cqc::kLogCqSize) > Log2Floor(uint64_t{caps.max_cqe} + 1)) {
    return Check::kCqSize;
  }
  if (GetField(cqc, cqc::kCqeSz) > kMaxCqeSz) return Check::kCqCqeSize;
  // EQ numbers are the completion vectors (what mlx5dv_devx_query_eqn gives).
  if (GetField(cqc, cqc::kCEqn) >= std::max<uint32_t>(caps.num_comp_vectors, 1)) {
    return Check::kCqEqn;
  }
  const auto buffer =
      Resolve(command, ResourceKind::kUmem, GetField(command.in, create_cq::kCqUmemId));
  if (!buffer) return Check::kCqUmem;
  const auto doorbell = Resolve(command, ResourceKind::kUmem, GetField(cqc, cqc::kDbrUmemId));
  if (!doorbell) return Check::kCqDbrUmem;
  const uint32_t cqn = command.state.device.AllocNumber(ResourceKind::kCq);
  if (cqn == 0) return Check::kCqNumbersExhausted;

  FirmwareObject& cq = InsertCreated(command, opcode::kCreateCq, cqn);
  cq.context.assign(cqc.begin(), cqc.begin() + cqc::kBytes);
  SetField(cq.context, cqc::kStatus, 0);
  Pin(command.state, cq, *buffer);
  Pin(command.state, cq, *doorbell);
  ReportObjectNumber(command, cqn);
  return Check::kPassed;
}

Check QueryCq(Command& command) {
  const FirmwareObject* cq =
      FindOwned(command, opcode::kCreateCq, GetField(command.in, kObjectNumber));
  if (cq == nullptr) return Check::kCqNotFound;
  std::copy(cq->context.begin(), cq->context.end(), command.out.begin() + query_cq::kCqcByte);
  return Check::kPassed;
}

Check DestroyCq(Command& command) {
  const uint32_t cqn = GetField(command.in, kObjectNumber);
  FirmwareObject* cq = FindOwned(command, opcode::kCreateCq, cqn);
  if (cq == nullptr) return Check::kCqNotFound;
  if (cq->referrers > 0) return Check::kCqInUse;
  ReleaseHolds(command.state, *cq);
  command.state.device.FreeNumber(ResourceKind::kCq, cqn);
  command.state.objects.Erase(cq->handle);
  return Check::kPassed;
}

}  // namespace softverbs::devx
