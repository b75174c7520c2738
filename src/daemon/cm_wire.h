// The connection manager's wire carrier (docs/rdmacm.md, "Across hosts"):
// a CmMessage for another host's GID becomes the CM MAD the kernel's ib_cm
// would send (roce/cm_mad.h) - rdma_cm's IP header at the start of a REQ's
// or SIDR REQ's private data - and goes to that host's QP1 over RoCE v2; a
// CM MAD that arrives on QP1 becomes the CmMessage its receiver's id acts on.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <span>

#include "daemon/cm_service.h"
#include "roce/cm_mad.h"

namespace softverbs::daemon {

class WireService;

// The MAD of msg. ca_guid: this device's node GUID.
roce::CmMad MadOf(const CmMessage& msg, ibv_mtu path_mtu, uint64_t ca_guid);

// The message of a MAD that came from sgid to dgid (the packet's GIDs).
// False for a MAD rdma_cm does not act on (a REQ without rdma_cm's IP
// header, an unknown port space).
bool MessageOf(const roce::CmMad& mad, const uint8_t sgid[16], const uint8_t dgid[16],
               CmMessage* msg);

// Joins the two services: cm's messages for other hosts leave through
// wire's carriers, and CM MADs that wire receives on QP1 reach cm.
void ConnectCmToWire(CmService& cm, WireService& wire, ibv_mtu path_mtu, uint64_t ca_guid);

}  // namespace softverbs::daemon
