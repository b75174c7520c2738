// Posting to the device's network transport: the work requests of a QP
// whose path leaves the host (and of a UD AH that does) are served by the
// daemon, as a NIC serves its send queue (docs/roce.md, "The network
// transport"). A context opens its doorbell at its first such post: a ring
// in shared memory (datapath/wire_post.h) and a SOCK_SEQPACKET socket pair,
// both handed to the daemon (kWireDoorbell). Each post is one record in the
// ring, and a byte on the socket when the daemon sleeps. Completions come
// back through the QP's CQ rings like any other.
#pragma once

#include "abi/ibverbs/provider.h"
#include "datapath/engine.h"
#include "verbs/qp_names.h"

namespace softverbs::provider {

// Whether wr, posted on qp, goes over the network.
// A UD QP's and a DCI's path is each WR's (a DCI's off the host is refused
// before: post_checks.h).
inline bool GoesOverWire(const Qp* qp, const datapath::SendWr& wr) {
  return qp->type == IBV_QPT_UD || qp->type == verbs::kQptDcIni ? wr.off_host
                                                                : RequesterOf(qp).path_leaves_host;
}

// Hands wr to the device. 0, or ENOMEM when the QP's send queue holds
// max_send_wr WRs the device has not finished or the ring is full (the
// device has not taken the previous posts yet), or the errno of a failure
// to open the doorbell (explained on the log channel).
int PostToWire(Context* ctx, Qp* qp, const datapath::SendWr& wr);

// Closes the context's doorbell (context teardown).
void CloseWire(Context* ctx);

}  // namespace softverbs::provider
