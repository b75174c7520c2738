// The firmware's record of every object created through DEVX: who owns it,
// its PRM context, and the references it holds on other objects.
#ifndef SOFTVERBS_DEVX_OBJECT_TABLE_H_
#define SOFTVERBS_DEVX_OBJECT_TABLE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "device_objects.h"
#include "object_handle.h"

namespace softverbs::devx {

// A reference from one object to another, dropped when the referrer dies.
// Either to a firmware object (counted in its `referrers`) or to a verbs
// object of the daemon (counted by DeviceObjects::Hold).
struct Reference {
  ResourceKind kind;
  uint32_t number;
  std::optional<ObjectHandle> firmware_object;  // empty: a verbs object
};

struct FirmwareObject {
  ObjectHandle handle = 0;
  ClientId client = 0;
  uint16_t uid = 0;
  uint32_t number = 0;
  uint32_t range = 1;            // flow counter bulks cover [number, number + range)
  std::vector<uint8_t> context;  // stored cqc / qpc / mkc, state included
  std::vector<Reference> holds;  // what this object keeps alive
  uint32_t referrers = 0;        // how many objects hold this one
  uint64_t sequence = 0;         // creation order, for teardown
};

class ObjectTable {
 public:
  FirmwareObject* Find(ObjectHandle handle);
  // The object of `creator_opcode` that `number` names, within its range.
  FirmwareObject* FindCovering(uint16_t creator_opcode, uint32_t number);
  FirmwareObject& Insert(FirmwareObject object);
  void Erase(ObjectHandle handle);
  // The client's objects, newest first (children before parents).
  std::vector<ObjectHandle> HandlesOf(ClientId client) const;
  // Whether any object of `creator_opcode` overlaps [first, first + count).
  bool Overlaps(uint16_t creator_opcode, uint32_t first, uint32_t count) const;
  size_t size() const { return objects_.size(); }

 private:
  std::map<ObjectHandle, FirmwareObject> objects_;
  uint64_t next_sequence_ = 1;
};

// Numbers the firmware allocates itself (transport domains), for objects
// that have no verbs counterpart in the daemon. Lowest free number first.
class NumberPool {
 public:
  explicit NumberPool(uint32_t limit) : limit_(limit) {}
  std::optional<uint32_t> Alloc(uint32_t max_live);
  void Free(uint32_t number) { live_.erase(number); }

 private:
  uint32_t limit_;
  std::set<uint32_t> live_;
};

}  // namespace softverbs::devx

#endif  // SOFTVERBS_DEVX_OBJECT_TABLE_H_
