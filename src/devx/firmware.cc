#include "firmware.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "command.h"
#include "command_table.h"
#include "prm_command_layouts.h"
#include "prm_context_layouts.h"
#include "prm_opcodes.h"

namespace softverbs::devx {
namespace {

using namespace layout;

uint16_t OpcodeOf(std::span<const uint8_t> box) {
  return static_cast<uint16_t>(GetField(box, in_hdr::kOpcode));
}

}  // namespace

Firmware::Firmware(DeviceObjects& device) : state_(std::make_unique<FirmwareState>(device)) {}

Firmware::~Firmware() = default;

int Firmware::Execute(EntryPoint entry_point, const CallerContext& caller,
                      std::span<const uint8_t> in, std::span<uint8_t> out, ObjectHandle* handle) {
  std::lock_guard lock(mutex_);
  return ExecuteLocked(entry_point, caller, in, out, handle);
}

int Firmware::Destroy(const CallerContext& caller, ObjectHandle handle) {
  std::lock_guard lock(mutex_);
  return DestroyLocked(caller, handle);
}

int Firmware::ExecuteLocked(EntryPoint entry_point, const CallerContext& caller,
                            std::span<const uint8_t> in, std::span<uint8_t> out,
                            ObjectHandle* handle) {
  if (entry_point == EntryPoint::kObjDestroy) {
    return handle == nullptr ? EINVAL : DestroyLocked(caller, *handle);
  }
  // Kernel layer: everything here fails with a plain errno, explained on the
  // log sink like the firmware's own failures.
  auto reject = [&](const char* rule, unsigned opcode) {
    if (log_) {
      char line[256];
      std::snprintf(line, sizeof(line), "devx: kernel layer: opcode 0x%x: %s", opcode, rule);
      log_(line);
    }
    return EINVAL;
  };
  // The kernel's UVERBS_ATTR_MIN_SIZE of general_obj_{in,out}_cmd_hdr: 16
  // bytes each (the 8-byte command header and the object fields after it).
  constexpr size_t kMinBoxBytes = 16;
  if (in.size() < kMinBoxBytes || out.size() < kMinBoxBytes) {
    return reject("the in and out boxes must hold at least 16 bytes",
                  in.size() >= in_hdr::kBytes ? OpcodeOf(in) : 0u);
  }
  const uint16_t op = OpcodeOf(in);
  const auto op_mod = static_cast<uint16_t>(GetField(in, in_hdr::kOpMod));
  if (GetField(in, in_hdr::kVhcaTunnelId) != 0) return reject("vhca_tunnel_id must be 0", op);
  if (!AcceptedBy(entry_point, op, op_mod)) {
    return reject(
        "this entry point does not accept the opcode (create, modify, query and "
        "general commands each have their own)",
        op);
  }
  uint16_t uid = caller.uid;
  if (uid == 0) {
    if (!IsWhitelisted(op)) {
      return reject(
          "the context was opened without MLX5DV_CONTEXT_FLAGS_DEVX; only the "
          "HCA/vport queries are allowed",
          op);
    }
    uid = kWhitelistUid;
  }
  const bool targets_object =
      entry_point == EntryPoint::kObjModify || entry_point == EntryPoint::kObjQuery;
  if (targets_object && (handle == nullptr || !HandleMatches(in, *handle, caller))) {
    return reject("the object named in the box is not the object the call was made on", op);
  }
  if (!InputLongEnoughForKernel(op, in.size())) return reject("the in box is too short", op);

  std::vector<uint8_t> stamped(in.begin(), in.end());
  SetField(stamped, in_hdr::kUid, uid);
  if (entry_point == EntryPoint::kObjCreate) ForceUmemMode(stamped);

  std::vector<uint8_t> answer;
  ObjectHandle created = 0;
  const uint8_t status =
      RunCommand(entry_point, caller, uid, stamped, out.size(), answer, &created);

  // Copy out what fits; the rest of the caller's box reads as zero.
  std::fill(out.begin(), out.end(), 0);
  std::copy_n(answer.begin(), std::min(answer.size(), out.size()), out.begin());
  if (status != 0) return EREMOTEIO;
  if (entry_point == EntryPoint::kObjCreate && handle != nullptr) *handle = created;
  return 0;
}

uint8_t Firmware::RunCommand(EntryPoint entry_point, const CallerContext& caller, uint16_t uid,
                             std::span<const uint8_t> in, size_t out_bytes,
                             std::vector<uint8_t>& answer, ObjectHandle* created) {
  const uint16_t op = OpcodeOf(in);
  const CommandSpec* spec = FindCommand(op);
  answer.assign(spec ? spec->out_bytes : kCreateOutBytes, 0);
  Check check = Check::kPassed;
  if (spec == nullptr) {
    check = Check::kUnknownOpcode;
  } else if (entry_point == EntryPoint::kObjCreate && out_bytes < kObjectNumber.EndByte()) {
    // The created object's id must reach the caller, or the object is lost.
    check = Check::kOutputTooShortForId;
  } else {
    Command command{caller, uid, in, answer, *state_};
    check = spec->handler(command);
    if (check == Check::kPassed) *created = command.created;
  }
  const CheckInfo& info = Describe(check);
  SetField(answer, out_hdr::kStatus, static_cast<uint8_t>(info.status));
  SetField(answer, out_hdr::kSyndrome, SyndromeOf(check));
  if (check != Check::kPassed && log_) {
    char line[256];
    std::snprintf(
        line, sizeof(line),
        "devx: %s (0x%x) op_mod 0x%x uid %u failed: status 0x%x (%s) syndrome 0x%x: %s",
        spec ? spec->name : "unknown", op, static_cast<unsigned>(GetField(in, in_hdr::kOpMod)), uid,
        static_cast<unsigned>(info.status), StatusName(info.status), SyndromeOf(check), info.rule);
    log_(line);
  }
  return static_cast<uint8_t>(info.status);
}

bool Firmware::HandleMatches(std::span<const uint8_t> in, ObjectHandle handle,
                             const CallerContext& caller) {
  const auto target = TargetHandleOf(in);
  if (!target) return false;
  // A handle the firmware knows must belong to the caller.
  FirmwareObject* object = state_->objects.Find(handle);
  if (object != nullptr && object->client != caller.client) return false;
  if (*target == handle) return true;
  // A flow counter bulk answers to any id inside it (the kernel records the
  // bulk size with the object).
  if (object != nullptr && CreatorOpcodeOf(handle) == opcode::kAllocFlowCounter &&
      CreatorOpcodeOf(*target) == opcode::kAllocFlowCounter) {
    const uint32_t id = ObjectNumberOf(*target);
    return id >= object->number && id - object->number < object->range;
  }
  return false;
}

int Firmware::DestroyLocked(const CallerContext& caller, ObjectHandle handle) {
  FirmwareObject* object = state_->objects.Find(handle);
  if (object == nullptr || object->client != caller.client) return ENOENT;
  const DestroyRule* rule = FindDestroyRule(CreatorOpcodeOf(handle));
  if (rule == nullptr) return ENOENT;
  // The destroy box the kernel stored at creation, with the creator's uid.
  std::vector<uint8_t> box(16, 0);
  SetField(box, in_hdr::kOpcode, rule->destroy_opcode);
  SetField(box, in_hdr::kUid, object->uid);
  SetField(box, rule->number, object->number);
  std::vector<uint8_t> answer;
  ObjectHandle unused = 0;
  const auto status = static_cast<Status>(RunCommand(EntryPoint::kObjDestroy, caller, object->uid,
                                                     box, out_hdr::kBytes, answer, &unused));
  return StatusToErrno(status);
}

size_t Firmware::DestroyAllOf(ClientId client) {
  std::lock_guard lock(mutex_);
  const CallerContext caller{client, 0};
  size_t destroyed = 0;
  // Newest first destroys children before parents; repeat in case an older
  // object referred to a newer one.
  bool progress = true;
  while (progress) {
    progress = false;
    for (ObjectHandle handle : state_->objects.HandlesOf(client)) {
      if (DestroyLocked(caller, handle) == 0) {
        ++destroyed;
        progress = true;
      }
    }
  }
  return destroyed;
}

std::optional<ObjectSnapshot> Firmware::Lookup(ObjectHandle handle) const {
  std::lock_guard lock(mutex_);
  const FirmwareObject* object = state_->objects.Find(handle);
  if (object == nullptr) return std::nullopt;
  return ObjectSnapshot{object->handle, object->client, object->uid, object->number,
                        object->context};
}

void Firmware::SetQpState(uint32_t qpn, uint32_t prm_state) {
  std::lock_guard lock(mutex_);
  FirmwareObject* qp = state_->objects.Find(MakeObjectHandle(opcode::kCreateQp, 0, qpn));
  if (qp != nullptr && qp->context.size() >= qpc::kBytes) {
    SetField(qp->context, qpc::kState, prm_state);
  }
}

size_t Firmware::ObjectCount() const {
  std::lock_guard lock(mutex_);
  return state_->objects.size();
}

void Firmware::SetLogSink(LogSink sink) {
  std::lock_guard lock(mutex_);
  log_ = std::move(sink);
}

}  // namespace softverbs::devx
