// How each reported capability field follows from DeviceCaps.
#ifndef SOFTVERBS_DEVX_HCA_CAP_TABLES_H_
#define SOFTVERBS_DEVX_HCA_CAP_TABLES_H_

#include <cstdint>
#include <span>

#include "device_objects.h"

namespace softverbs::devx {

// Fill a zeroed capability structure (the part of the answer at byte 0x10).
void WriteGeneralCaps(const DeviceCaps& caps, std::span<uint8_t> cap);
void WriteGeneralCaps2(const DeviceCaps& caps, std::span<uint8_t> cap);
void WriteHcaVportContext(const DeviceCaps& caps, std::span<uint8_t> context);

}  // namespace softverbs::devx

#endif  // SOFTVERBS_DEVX_HCA_CAP_TABLES_H_
