// The work requests that send no packet (WrAction::kLocal in opcodes.h): a
// window bind, a local invalidate and mlx5's DMA memcpy. The device does
// them itself, in the send queue's order, on either carrier: the shared-
// memory requester (shm_requester.cc) and the network transport's
// (wire_requester.cc) call the one function below.
#pragma once

#include <infiniband/verbs.h>

#include "datapath/engine.h"

namespace softverbs::datapath {

// Runs local operation wr of QP qp, whose keys belong to client `owner`.
// Returns kVendorNone, or why it failed with *status set to the
// completion's status (the QP then goes to the error state). *byte_len is
// the bytes a memcpy moved (0 for the others).
VendorError RunLocalOperation(Host& host, const LocalQp& qp, uint32_t owner, const SendWr& wr,
                              ibv_wc_status* status, uint32_t* byte_len);

}  // namespace softverbs::datapath
