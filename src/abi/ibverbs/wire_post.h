// Posting to the device's network transport: the work requests of a QP
// whose path leaves the host (and of a UD AH that does) are served by the
// daemon, as a NIC serves its send queue (docs/roce.md, "The network
// transport"). A context opens its doorbell - a SOCK_SEQPACKET socket pair
// whose other end it hands to the daemon (kWireDoorbell) - at its first
// such post; each post is one record on it. Completions come back through
// the QP's CQ rings like any other.
#pragma once

#include "abi/ibverbs/provider.h"
#include "datapath/engine.h"

namespace softverbs::provider {

// Whether wr, posted on qp, goes over the network.
inline bool GoesOverWire(const Qp* qp, const datapath::SendWr& wr) {
  return qp->ibv.qp_base.qp_type == IBV_QPT_UD ? wr.off_host : RequesterOf(qp).path_leaves_host;
}

// Hands wr to the device. 0, or ENOMEM when the doorbell is full (the
// device has not taken the previous posts yet), or the errno of a failure
// to open the doorbell (explained on the log channel).
int PostToWire(Context* ctx, Qp* qp, const datapath::SendWr& wr);

// Closes the context's doorbell (context teardown).
void CloseWire(Context* ctx);

}  // namespace softverbs::provider
