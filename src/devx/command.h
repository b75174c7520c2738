// What a command handler sees: the caller, the uid-stamped input box, the
// answer being built, and the firmware's state. Handlers follow check ->
// apply -> report: they validate everything before changing any state, and
// return the Check that failed (Check::kPassed on success).
#ifndef SOFTVERBS_DEVX_COMMAND_H_
#define SOFTVERBS_DEVX_COMMAND_H_

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "checks.h"
#include "device_objects.h"
#include "object_table.h"

namespace softverbs::devx {

// Everything the firmware remembers between commands.
struct FirmwareState {
  explicit FirmwareState(DeviceObjects& device_objects) : device(device_objects) {}

  DeviceObjects& device;
  ObjectTable objects;
  NumberPool transport_domains{1u << 24};
  uint32_t next_flow_counter = 1;
  uint64_t live_flow_counters = 0;
};

struct Command {
  const CallerContext& caller;
  uint16_t uid;                 // the uid the kernel stamped into the box
  std::span<const uint8_t> in;  // the whole input box
  std::vector<uint8_t>& out;    // the whole answer, zeroed; header set later
  FirmwareState& state;
  ObjectHandle created = 0;  // set by create handlers

  uint16_t OpMod() const;
};

using Handler = Check (*)(Command& command);

// Finds an object the caller's uid may use by number: a firmware object of
// the same uid first, else a verbs object the daemon vouches for.
std::optional<Reference> Resolve(Command& command, ResourceKind kind, uint32_t number);

// Keeps `target` alive on behalf of `holder` until ReleaseHolds(holder).
void Pin(FirmwareState& state, FirmwareObject& holder, const Reference& target);
void ReleaseHolds(FirmwareState& state, FirmwareObject& holder);

// The firmware object of `creator_opcode` named by `number` if it belongs
// to the command's uid (firmware checks ownership by uid, spec §2.1).
FirmwareObject* FindOwned(Command& command, uint16_t creator_opcode, uint32_t number);

// Records a new object of the caller and writes its handle to `created`.
FirmwareObject& InsertCreated(Command& command, uint16_t creator_opcode, uint32_t number);

// Writes the created object's number at DW2[23:0] of the answer.
void ReportObjectNumber(Command& command, uint32_t number);

// floor(log2(value)), 0 for 0: caps are reported as log2 of the limits.
uint32_t Log2Floor(uint64_t value);

}  // namespace softverbs::devx

#endif  // SOFTVERBS_DEVX_COMMAND_H_
