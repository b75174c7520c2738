#include "object_table.h"

#include <algorithm>

namespace softverbs::devx {

FirmwareObject* ObjectTable::Find(ObjectHandle handle) {
  auto it = objects_.find(handle);
  return it == objects_.end() ? nullptr : &it->second;
}

FirmwareObject* ObjectTable::FindCovering(uint16_t creator_opcode, uint32_t number) {
  // Handles of one creator opcode are ordered by number: the candidate is
  // the last object whose first number is <= `number`.
  auto it = objects_.upper_bound(MakeObjectHandle(creator_opcode, 0, number));
  if (it == objects_.begin()) return nullptr;
  --it;
  FirmwareObject& object = it->second;
  if (CreatorOpcodeOf(object.handle) != creator_opcode) return nullptr;
  const uint64_t end = static_cast<uint64_t>(object.number) + object.range;
  return number < end ? &object : nullptr;
}

FirmwareObject& ObjectTable::Insert(FirmwareObject object) {
  object.sequence = next_sequence_++;
  const ObjectHandle handle = object.handle;
  return objects_.insert_or_assign(handle, std::move(object)).first->second;
}

void ObjectTable::Erase(ObjectHandle handle) {
  objects_.erase(handle);
}

std::vector<ObjectHandle> ObjectTable::HandlesOf(ClientId client) const {
  std::vector<const FirmwareObject*> owned;
  for (const auto& [handle, object] : objects_) {
    if (object.client == client) owned.push_back(&object);
  }
  std::sort(owned.begin(), owned.end(), [](const FirmwareObject* a, const FirmwareObject* b) {
    return a->sequence > b->sequence;
  });
  std::vector<ObjectHandle> handles;
  for (const FirmwareObject* object : owned) handles.push_back(object->handle);
  return handles;
}

bool ObjectTable::Overlaps(uint16_t creator_opcode, uint32_t first, uint32_t count) const {
  const uint64_t end = static_cast<uint64_t>(first) + count;
  for (const auto& [handle, object] : objects_) {
    if (CreatorOpcodeOf(handle) != creator_opcode) continue;
    const uint64_t object_end = static_cast<uint64_t>(object.number) + object.range;
    if (object.number < end && first < object_end) return true;
  }
  return false;
}

std::optional<uint32_t> NumberPool::Alloc(uint32_t max_live) {
  if (live_.size() >= max_live) return std::nullopt;
  uint32_t candidate = 1;
  for (uint32_t number : live_) {
    if (number != candidate) break;
    ++candidate;
  }
  if (candidate >= limit_) return std::nullopt;
  live_.insert(candidate);
  return candidate;
}

}  // namespace softverbs::devx
