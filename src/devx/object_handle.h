// The handle the kernel keeps for a created DEVX object (spec §2.3):
// (creator_opcode | obj_type << 16) << 32 | object_number. Object numbers are
// unique per type only, so the creator opcode takes part in every comparison.
// The daemon uses the same encoding for verbs objects handed to DEVX calls
// (an ibv_qp is MakeObjectHandle(opcode::kCreateQp, 0, qpn)).
#ifndef SOFTVERBS_DEVX_OBJECT_HANDLE_H_
#define SOFTVERBS_DEVX_OBJECT_HANDLE_H_

#include <cstdint>

namespace softverbs::devx {

using ObjectHandle = uint64_t;

constexpr ObjectHandle MakeObjectHandle(uint16_t creator_opcode, uint16_t obj_type,
                                        uint32_t number) {
  const uint64_t kind = creator_opcode | (static_cast<uint32_t>(obj_type) << 16);
  return (kind << 32) | number;
}

constexpr uint16_t CreatorOpcodeOf(ObjectHandle handle) {
  return static_cast<uint16_t>(handle >> 32);
}

constexpr uint32_t ObjectNumberOf(ObjectHandle handle) {
  return static_cast<uint32_t>(handle);
}

}  // namespace softverbs::devx

#endif  // SOFTVERBS_DEVX_OBJECT_HANDLE_H_
