// The device table (layout.h) as a process sees it once mapped.
#pragma once

#include <cstddef>
#include <cstdint>

#include "datapath/layout.h"

namespace softverbs::datapath {

class DeviceTable {
 public:
  DeviceTable() = default;
  explicit DeviceTable(void* base) : base_(static_cast<char*>(base)) {}
  bool valid() const { return base_ != nullptr; }
  // Writes a fresh header (daemon).
  static void Init(void* base);
  // Whether a mapped table is of this layout.
  static bool Compatible(const void* base, size_t size);

  MrEntry* MrSlot(uint32_t key) const {
    return reinterpret_cast<MrEntry*>(base_ + kDeviceTableMrOffset) + MrSlotOf(key);
  }
  // The layout of the indirect key in key's MR slot (MrEntry::access has
  // kMrIndirect).
  MkeyLayout* MkeyLayoutSlot(uint32_t key) const {
    return reinterpret_cast<MkeyLayout*>(base_ + kDeviceTableMkeyOffset) + MrSlotOf(key);
  }
  // The epoch of the device's flow steering rules (DeviceTableHeader).
  std::atomic<uint32_t>& FlowEpoch() const {
    return reinterpret_cast<DeviceTableHeader*>(base_)->flow_epoch;
  }
  QpEntry* QpSlot(uint32_t qpn) const {
    return reinterpret_cast<QpEntry*>(base_ + kDeviceTableQpOffset) + QpSlotOf(qpn);
  }
  // The entry of QP qpn, or nullptr if no such QP exists now.
  QpEntry* FindQp(uint32_t qpn) const {
    if (qpn < kFirstQpn) return nullptr;
    QpEntry* e = QpSlot(qpn);
    return e->qpn.load(std::memory_order_acquire) == qpn ? e : nullptr;
  }

 private:
  char* base_ = nullptr;
};

}  // namespace softverbs::datapath
