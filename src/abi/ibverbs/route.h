// Where an address vector leads: to a QP of this host's device, or off the
// host. softverbs has no packet carrier yet (docs/roce.md): a path whose
// destination GID is not one of this host's GIDs must never reach a local QP
// that happens to have the same number. Such traffic goes to a QP number no
// local QP can have, so the engine treats it as a NIC with no route would:
// RC/XRC requests get no response (IBV_WC_RETRY_EXC_ERR after timeout x
// retry_cnt), UC/UD packets are lost (the sender completes successfully).
// Local checks (lkeys, lengths) still run first, as on a NIC.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "common/gid_table.h"

namespace softverbs::provider {

// QPN 0 (the SMI QP) is never in the device table (datapath::kFirstQpn).
inline constexpr uint32_t kUnroutedQpn = 0;

// PathLeavesHost (common/gid_table.h) tells whether a path leaves the host.
using softverbs::PathLeavesHost;

}  // namespace softverbs::provider
