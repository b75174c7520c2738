#include "command.h"

#include <bit>

#include "prm_command_layouts.h"
#include "prm_opcodes.h"

namespace softverbs::devx {
namespace {

// The create opcode behind each resource kind, when DEVX can create it.
std::optional<uint16_t> CreatorOf(ResourceKind kind) {
  switch (kind) {
    case ResourceKind::kPd:
      return opcode::kAllocPd;
    case ResourceKind::kCq:
      return opcode::kCreateCq;
    case ResourceKind::kQp:
      return opcode::kCreateQp;
    case ResourceKind::kMkey:
      return opcode::kCreateMkey;
    case ResourceKind::kUmem:
      return std::nullopt;  // UMEMs are registered by the daemon
  }
  return std::nullopt;
}

}  // namespace

uint16_t Command::OpMod() const {
  return static_cast<uint16_t>(GetField(in, layout::in_hdr::kOpMod));
}

std::optional<Reference> Resolve(Command& command, ResourceKind kind, uint32_t number) {
  if (number == 0) return std::nullopt;
  if (const auto creator = CreatorOf(kind)) {
    FirmwareObject* object = command.state.objects.Find(MakeObjectHandle(*creator, 0, number));
    if (object != nullptr) {
      if (object->uid != command.uid) return std::nullopt;
      return Reference{kind, number, object->handle};
    }
  }
  if (command.state.device.VerbsObjectUsable(kind, number, command.caller)) {
    return Reference{kind, number, std::nullopt};
  }
  return std::nullopt;
}

void Pin(FirmwareState& state, FirmwareObject& holder, const Reference& target) {
  if (target.firmware_object) {
    if (FirmwareObject* object = state.objects.Find(*target.firmware_object)) ++object->referrers;
  } else {
    state.device.Hold(target.kind, target.number);
  }
  holder.holds.push_back(target);
}

void ReleaseHolds(FirmwareState& state, FirmwareObject& holder) {
  for (const Reference& target : holder.holds) {
    if (target.firmware_object) {
      if (FirmwareObject* object = state.objects.Find(*target.firmware_object)) {
        --object->referrers;
      }
    } else {
      state.device.Release(target.kind, target.number);
    }
  }
  holder.holds.clear();
}

FirmwareObject* FindOwned(Command& command, uint16_t creator_opcode, uint32_t number) {
  FirmwareObject* object = command.state.objects.FindCovering(creator_opcode, number);
  if (object == nullptr || object->uid != command.uid) return nullptr;
  return object;
}

FirmwareObject& InsertCreated(Command& command, uint16_t creator_opcode, uint32_t number) {
  FirmwareObject object;
  object.handle = MakeObjectHandle(creator_opcode, 0, number);
  object.client = command.caller.client;
  object.uid = command.uid;
  object.number = number;
  command.created = object.handle;
  return command.state.objects.Insert(std::move(object));
}

void ReportObjectNumber(Command& command, uint32_t number) {
  SetField(command.out, layout::kObjectNumber, number);
}

uint32_t Log2Floor(uint64_t value) {
  return value == 0 ? 0 : static_cast<uint32_t>(std::bit_width(value) - 1);
}

}  // namespace softverbs::devx
