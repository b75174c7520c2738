#include "datapath/device_table.h"

namespace softverbs::datapath {

void DeviceTable::Init(void* base) {
  auto* h = static_cast<DeviceTableHeader*>(base);
  h->magic = kDeviceTableMagic;
  h->layout_version = kLayoutVersion;
  h->mr_slots = kMrSlots;
  h->qp_slots = kQpSlots;
  h->mr_offset = kDeviceTableMrOffset;
  h->qp_offset = kDeviceTableQpOffset;
  h->mkey_offset = kDeviceTableMkeyOffset;
}

bool DeviceTable::Compatible(const void* base, size_t size) {
  const auto* h = static_cast<const DeviceTableHeader*>(base);
  return size >= kDeviceTableSize && h->magic == kDeviceTableMagic &&
         h->layout_version == kLayoutVersion && h->mr_slots == kMrSlots &&
         h->qp_slots == kQpSlots && h->mkey_offset == kDeviceTableMkeyOffset;
}

}  // namespace softverbs::datapath
