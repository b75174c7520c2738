// The QP state machine of the modify-QP commands. One row per transition
// command: the states it may start from, the state it ends in, and the qpc
// fields it takes from the box. Required fields are always applied;
// optional ones only when their opt_param_mask bit is set, so zeros in the
// rest of the box never overwrite stored state (the test's RST2INIT box has
// pd = 0 and cqn = 0).
#include <span>

#include "handlers.h"
#include "prm_command_layouts.h"
#include "prm_context_layouts.h"
#include "prm_opcodes.h"

namespace softverbs::devx {
namespace {

using namespace layout;

constexpr uint32_t StateBit(uint32_t state) {
  return 1u << state;
}
constexpr uint32_t kAnyState = StateBit(qp_state::kRst) | StateBit(qp_state::kInit) |
                               StateBit(qp_state::kRtr) | StateBit(qp_state::kRts) |
                               StateBit(qp_state::kSqer) | StateBit(qp_state::kErr) |
                               StateBit(qp_state::kSqd);

constexpr uint32_t kAlways = 0;

struct FieldRule {
  Field field;      // within the qpc
  uint32_t optpar;  // kAlways, or the opt_param_mask bit that selects it
};

constexpr FieldRule kRst2Init[] = {
    {qpc::kPrimaryPkeyIndex, kAlways},
    {qpc::kPrimaryVhcaPortNum, kAlways},
    {qpc::kRre, kAlways},
    {qpc::kRwe, kAlways},
    {qpc::kRae, kAlways},
    {qpc::kQKey, kAlways},
};

constexpr FieldRule kInit2Init[] = {
    {qpc::kPrimaryPkeyIndex, qp_optpar::kPkeyIndex},
    {qpc::kPrimaryVhcaPortNum, qp_optpar::kPriPort},
    {qpc::kRre, qp_optpar::kRre},
    {qpc::kRwe, qp_optpar::kRwe},
    {qpc::kRae, qp_optpar::kRae},
    {qpc::kQKey, qp_optpar::kQKey},
};

constexpr FieldRule kInit2Rtr[] = {
    {qpc::kMtu, kAlways},
    {qpc::kLogMsgMax, kAlways},
    {qpc::kRemoteQpn, kAlways},
    {qpc::kNextRcvPsn, kAlways},
    {qpc::kMinRnrNak, kAlways},
    {qpc::kLogRraMax, kAlways},
    {qpc::kPrimaryAddressPath, kAlways},
    {qpc::kRre, qp_optpar::kRre},
    {qpc::kRwe, qp_optpar::kRwe},
    {qpc::kRae, qp_optpar::kRae},
    {qpc::kQKey, qp_optpar::kQKey},
    {qpc::kSecondaryAddressPath, qp_optpar::kAltAddrPath},
};

constexpr FieldRule kRtr2Rts[] = {
    {qpc::kNextSendPsn, kAlways},
    {qpc::kRetryCount, kAlways},
    {qpc::kRnrRetry, kAlways},
    {qpc::kLogSraMax, kAlways},
    {qpc::kPrimaryAckTimeout, kAlways},
    {qpc::kRre, qp_optpar::kRre},
    {qpc::kRwe, qp_optpar::kRwe},
    {qpc::kRae, qp_optpar::kRae},
    {qpc::kMinRnrNak, qp_optpar::kRnrTimeout},
    {qpc::kPmState, qp_optpar::kPmState},
    {qpc::kSecondaryAddressPath, qp_optpar::kAltAddrPath},
};

constexpr FieldRule kRts2Rts[] = {
    {qpc::kRre, qp_optpar::kRre},
    {qpc::kRwe, qp_optpar::kRwe},
    {qpc::kRae, qp_optpar::kRae},
    {qpc::kMinRnrNak, qp_optpar::kRnrTimeout},
    {qpc::kPmState, qp_optpar::kPmState},
    {qpc::kPrimaryAckTimeout, qp_optpar::kAckTimeout},
    {qpc::kPrimaryAddressPath, qp_optpar::kPrimaryAddrPath},
    {qpc::kSecondaryAddressPath, qp_optpar::kAltAddrPath},
};

constexpr FieldRule kSqerr2Rts[] = {
    {qpc::kRre, qp_optpar::kRre},
    {qpc::kRwe, qp_optpar::kRwe},
    {qpc::kRae, qp_optpar::kRae},
    {qpc::kMinRnrNak, qp_optpar::kRnrTimeout},
};

struct Transition {
  uint16_t opcode;
  uint32_t from_states;  // StateBit() mask
  uint32_t to_state;
  std::span<const FieldRule> fields;  // empty: the command carries no qpc
};

constexpr Transition kTransitions[] = {
    {opcode::kRst2InitQp, StateBit(qp_state::kRst), qp_state::kInit, kRst2Init},
    {opcode::kInit2InitQp, StateBit(qp_state::kInit), qp_state::kInit, kInit2Init},
    {opcode::kInit2RtrQp, StateBit(qp_state::kInit), qp_state::kRtr, kInit2Rtr},
    {opcode::kRtr2RtsQp, StateBit(qp_state::kRtr), qp_state::kRts, kRtr2Rts},
    {opcode::kRts2RtsQp, StateBit(qp_state::kRts), qp_state::kRts, kRts2Rts},
    {opcode::kSqerr2RtsQp, StateBit(qp_state::kSqer), qp_state::kRts, kSqerr2Rts},
    {opcode::k2ErrQp, kAnyState, qp_state::kErr, {}},
    {opcode::k2RstQp, kAnyState, qp_state::kRst, {}},
};

const Transition* FindTransition(uint16_t op) {
  for (const Transition& transition : kTransitions) {
    if (transition.opcode == op) return &transition;
  }
  return nullptr;
}

constexpr uint32_t kMinMtu = 1;  // 256 bytes
constexpr uint32_t kMaxMtu = 5;  // 4096 bytes

// Values the transition cannot accept even though the state is right.
Check CheckTransitionValues(const Transition& transition, std::span<const uint8_t> stored,
                            std::span<const uint8_t> qpc) {
  const bool connected = GetField(stored, qpc::kSt) != qp_st::kUd;
  if (transition.opcode == opcode::kInit2RtrQp && connected) {
    const uint32_t mtu = GetField(qpc, qpc::kMtu);
    if (mtu < kMinMtu || mtu > kMaxMtu) return Check::kQpMtu;
  }
  return Check::kPassed;
}

}  // namespace

Check ModifyQpState(Command& command) {
  const auto op = static_cast<uint16_t>(GetField(command.in, in_hdr::kOpcode));
  const Transition* transition = FindTransition(op);
  if (transition == nullptr) return Check::kUnknownOpcode;
  if (!transition->fields.empty() && command.in.size() < qp_cmd::kMinInBytesWithQpc) {
    return Check::kInputTooShort;
  }
  FirmwareObject* qp = FindOwned(command, opcode::kCreateQp, GetField(command.in, qp_cmd::kQpn));
  if (qp == nullptr) return Check::kQpNotFound;
  if (!(transition->from_states & StateBit(GetField(qp->context, qpc::kState)))) {
    return Check::kQpBadState;
  }
  const auto qpc = SubBox(command.in, qp_cmd::kQpcByte);
  if (Check values = CheckTransitionValues(*transition, qp->context, qpc);
      values != Check::kPassed) {
    return values;
  }

  const uint32_t optpar = GetField(command.in, qp_cmd::kOptParamMask);
  for (const FieldRule& rule : transition->fields) {
    if (rule.optpar == kAlways || (optpar & rule.optpar)) CopyField(qp->context, qpc, rule.field);
  }
  SetField(qp->context, qpc::kState, transition->to_state);
  return Check::kPassed;
}

}  // namespace softverbs::devx
