// mlx5 PRM command opcodes and firmware status codes (spec §1.3, §2.2).
#ifndef SOFTVERBS_DEVX_PRM_OPCODES_H_
#define SOFTVERBS_DEVX_PRM_OPCODES_H_

#include <cstdint>

namespace softverbs::devx {

// Opcodes this library knows by name: the ones it executes, the destroy
// commands it builds itself, and the general-object family used by the
// kernel-layer id checks.
namespace opcode {
inline constexpr uint16_t kQueryHcaCap = 0x100;
inline constexpr uint16_t kQueryAdapter = 0x101;
inline constexpr uint16_t kQueryIssi = 0x10a;
inline constexpr uint16_t kCreateMkey = 0x200;
inline constexpr uint16_t kQueryMkey = 0x201;
inline constexpr uint16_t kDestroyMkey = 0x202;
inline constexpr uint16_t kCreateCq = 0x400;
inline constexpr uint16_t kDestroyCq = 0x401;
inline constexpr uint16_t kQueryCq = 0x402;
inline constexpr uint16_t kModifyCq = 0x403;
inline constexpr uint16_t kCreateQp = 0x500;
inline constexpr uint16_t kDestroyQp = 0x501;
inline constexpr uint16_t kRst2InitQp = 0x502;
inline constexpr uint16_t kInit2RtrQp = 0x503;
inline constexpr uint16_t kRtr2RtsQp = 0x504;
inline constexpr uint16_t kRts2RtsQp = 0x505;
inline constexpr uint16_t kSqerr2RtsQp = 0x506;
inline constexpr uint16_t k2ErrQp = 0x507;
inline constexpr uint16_t k2RstQp = 0x50a;
inline constexpr uint16_t kQueryQp = 0x50b;
inline constexpr uint16_t kInit2InitQp = 0x50e;
inline constexpr uint16_t kQueryVportState = 0x750;
inline constexpr uint16_t kQueryEswVportContext = 0x752;
inline constexpr uint16_t kQueryNicVportContext = 0x754;
inline constexpr uint16_t kQueryHcaVportContext = 0x762;
inline constexpr uint16_t kAllocPd = 0x800;
inline constexpr uint16_t kDeallocPd = 0x801;
inline constexpr uint16_t kNop = 0x80d;
inline constexpr uint16_t kAllocTransportDomain = 0x816;
inline constexpr uint16_t kDeallocTransportDomain = 0x817;
inline constexpr uint16_t kSetFlowTableEntry = 0x936;
inline constexpr uint16_t kAllocFlowCounter = 0x939;
inline constexpr uint16_t kDeallocFlowCounter = 0x93a;
inline constexpr uint16_t kQueryFlowCounter = 0x93b;
inline constexpr uint16_t kCreateGeneralObject = 0xa00;
inline constexpr uint16_t kModifyGeneralObject = 0xa01;
inline constexpr uint16_t kQueryGeneralObject = 0xa02;
inline constexpr uint16_t kDestroyGeneralObject = 0xa03;
}  // namespace opcode

// Firmware status byte of the output header (spec §1.3).
enum class Status : uint8_t {
  kOk = 0x00,
  kInternalError = 0x01,
  kBadOp = 0x02,
  kBadParam = 0x03,
  kBadSystemState = 0x04,
  kBadResource = 0x05,
  kResourceBusy = 0x06,
  kNotReady = 0x07,
  kLimitsExceeded = 0x08,
  kBadResourceState = 0x09,
  kBadIndex = 0x0a,
  kNoResources = 0x0f,
  kBadQpState = 0x10,
  kBadPacket = 0x30,
  kBadSizeOutstandingCqes = 0x40,
  kBadInputLength = 0x50,
  kBadOutputLength = 0x51,
};

// The errno the kernel's mlx5_cmd_exec maps a status to (spec §1.3 table).
// Used for destroy, which reports a firmware failure as a plain errno rather
// than EREMOTEIO.
int StatusToErrno(Status status);

// The kernel's text for a status ("bad resource state"), for logs.
const char* StatusName(Status status);

}  // namespace softverbs::devx

#endif  // SOFTVERBS_DEVX_PRM_OPCODES_H_
