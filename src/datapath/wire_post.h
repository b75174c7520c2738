// One work request a context posts to the device's network transport
// through its doorbell socket (protocol kWireDoorbell; docs/roce.md, "The
// network transport"): a QP whose path leaves the host is served by the
// device, as a NIC serves the work requests in its send queue.
#pragma once

#include <cstdint>

#include "datapath/engine.h"

namespace softverbs::datapath {

struct WirePostRecord {
  uint32_t qpn;       // the posting QP (the device checks the poster owns it)
  uint32_t reserved;  // 0
  SendWr wr;          // as the library's posting checks accepted it
};
// Library and device are one build (the protocol version says so): the
// record is the same on both sides of the socket.
static_assert(sizeof(WirePostRecord) == 8 + sizeof(SendWr));

}  // namespace softverbs::datapath
