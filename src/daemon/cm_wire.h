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

// The communication IDs this device's ids have on the wire: an id's handle
// XORed with a number drawn once per daemon, as the kernel's ib_cm XORs its
// ids with a random operand - so that a MAD made up by anyone, or meant for
// an id of another connection (a REP answering a forged REQ), does not reach
// an id that happens to have a small handle. Until session 26 the handles
// went on the wire as they are: 1, 2, 3... (roce_wire.forged_cm_mads: a
// forged REQ's REP then reached the next rping connection's id, which was
// rejected). The number's top bit is set, so no handle below 2^31 becomes 0,
// which stands for "none" (a REQ's remote ID).
class WireCommIds {
 public:
  explicit WireCommIds(uint32_t key) : key_(key | 0x80000000u) {}
  static WireCommIds Random();
  uint32_t ToWire(uint32_t handle) const { return handle ? handle ^ key_ : 0; }
  uint32_t FromWire(uint32_t id) const { return id ? id ^ key_ : 0; }

 private:
  uint32_t key_;
};

// The MAD of msg (its local ID on the wire as ids make it). ca_guid: this
// device's node GUID.
roce::CmMad MadOf(const CmMessage& msg, ibv_mtu path_mtu, uint64_t ca_guid, const WireCommIds& ids);

// The message of a MAD that came from sgid to dgid (the packet's GIDs); its
// remote ID (ours) back to the handle. False for a MAD rdma_cm does not act
// on (a REQ without rdma_cm's IP header, an unknown port space).
bool MessageOf(const roce::CmMad& mad, const uint8_t sgid[16], const uint8_t dgid[16],
               const WireCommIds& ids, CmMessage* msg);

// Joins the two services: cm's messages for other hosts leave through
// wire's carriers, and CM MADs that wire receives on QP1 reach cm.
void ConnectCmToWire(CmService& cm, WireService& wire, ibv_mtu path_mtu, uint64_t ca_guid);

}  // namespace softverbs::daemon
