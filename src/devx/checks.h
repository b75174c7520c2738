// Every place where the firmware rejects a command, with the status it
// reports and a stable syndrome. Real syndromes are undocumented; ours are
// 0x5f0000 | check id, one per check site, so that a user who sees a
// syndrome in an out box can find the rule in docs/devx.md.
#ifndef SOFTVERBS_DEVX_CHECKS_H_
#define SOFTVERBS_DEVX_CHECKS_H_

#include <cstdint>

#include "prm_opcodes.h"

namespace softverbs::devx {

enum class Check : uint16_t {
  kPassed = 0,
  // Any command
  kUnknownOpcode = 0x01,
  kOutputTooShortForId = 0x02,
  kInputTooShort = 0x03,
  kUnsupportedOpMod = 0x04,
  // QUERY_HCA_CAP / QUERY_HCA_VPORT_CONTEXT
  kCapOtherFunction = 0x10,
  kCapUnknownType = 0x11,
  kVportOtherVport = 0x12,
  kVportBadPort = 0x13,
  // PD, transport domain, flow counter
  kPdNumbersExhausted = 0x20,
  kPdInUse = 0x21,
  kPdNotFound = 0x22,
  kTdLimit = 0x23,
  kTdNotFound = 0x24,
  kFlowCounterBulkTooBig = 0x25,
  kFlowCounterLimit = 0x26,
  kFlowCounterNotFound = 0x27,
  kFlowCounterRange = 0x28,
  // MKEY
  kMkeyAccessMode = 0x30,
  kMkeyPd = 0x31,
  kMkeyUmem = 0x32,
  kMkeyTooLong = 0x33,
  kMkeyNumbersExhausted = 0x34,
  kMkeyNotFound = 0x35,
  // CQ
  kCqSize = 0x40,
  kCqCqeSize = 0x41,
  kCqUmem = 0x42,
  kCqDbrUmem = 0x43,
  kCqNumbersExhausted = 0x44,
  kCqNotFound = 0x45,
  kCqInUse = 0x46,
  kCqEqn = 0x47,
  // QP
  kQpServiceType = 0x50,
  kQpSqSize = 0x51,
  kQpRqSize = 0x52,
  kQpRqType = 0x53,
  kQpPd = 0x54,
  kQpSendCq = 0x55,
  kQpRecvCq = 0x56,
  kQpDbrUmem = 0x57,
  kQpWqUmem = 0x58,
  kQpSendDbrMode = 0x59,
  kQpNumbersExhausted = 0x5a,
  kQpNotFound = 0x5b,
  kQpBadState = 0x5c,
  kQpMtu = 0x5d,
};

struct CheckInfo {
  Check check;
  Status status;
  const char* rule;  // what was wrong, for the log channel
};

// The table row of `check` (kPassed maps to Status::kOk).
const CheckInfo& Describe(Check check);

constexpr uint32_t SyndromeOf(Check check) {
  return check == Check::kPassed ? 0 : 0x5f0000u | static_cast<uint32_t>(check);
}

}  // namespace softverbs::devx

#endif  // SOFTVERBS_DEVX_CHECKS_H_
