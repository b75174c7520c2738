// The narrow interface between the emulated firmware and the daemon that
// embeds it.
//
// The daemon owns the device-wide object tables (PD, CQ, QP and MR key
// numbers, UMEMs): verbs objects and DEVX objects share those number spaces,
// so a DEVX QP can name a verbs CQ by its CQN and a verbs PD by its PDN
// (mlx5dv_devx_obj_create(3): "create an ibv_cq via ibv_create_cq() and use
// the returned cqn to create a DEVX QP"). The firmware keeps the PRM state of
// the objects created through DEVX (contexts, QP state) and asks the daemon,
// through DeviceObjects, for numbers and for the verbs objects it references.
#ifndef SOFTVERBS_DEVX_DEVICE_OBJECTS_H_
#define SOFTVERBS_DEVX_DEVICE_OBJECTS_H_

#include <cstdint>

namespace softverbs::devx {

// The daemon's id of a client (one per process connection).
using ClientId = uint64_t;

// Who issues a command: what the kernel knows about the calling ucontext.
struct CallerContext {
  ClientId client = 0;
  // DEVX uid of the context (spec §2.1). 0 means the context was opened
  // without MLX5DV_CONTEXT_FLAGS_DEVX: only the whitelisted queries work.
  uint16_t uid = 0;
};

// The uid stamped on whitelisted queries from a context without a DEVX uid
// (the kernel's per-device "whitelist uid").
inline constexpr uint16_t kWhitelistUid = 0xffff;

// Objects whose numbers live in the daemon's tables.
enum class ResourceKind : uint8_t {
  kPd,    // PDN
  kCq,    // CQN
  kQp,    // QPN
  kMkey,  // MR key index (lkey >> 8)
  kUmem,  // UMEM id (registered by the daemon, never allocated here)
};

// One port's attributes, as ibv_query_port reports them.
struct PortCaps {
  bool ethernet = true;        // link_layer: Ethernet (RoCE) or InfiniBand
  uint8_t state = 4;           // ibv_port_state; 4 = ACTIVE
  uint8_t physical_state = 5;  // 5 = LinkUp
  uint16_t lid = 0;
  uint16_t sm_lid = 0;
  uint8_t sm_sl = 0;
  uint8_t lmc = 0;
  uint8_t subnet_timeout = 0;
  uint32_t gid_table_len = 0;
  uint32_t pkey_table_len = 0;
  uint32_t max_msg_size = 0;
  uint32_t port_cap_flags = 0;
  uint64_t port_guid = 0;
};

// Device capabilities: the numbers ibv_query_device/ibv_query_port report,
// plus the few that only DEVX users see. QUERY_HCA_CAP and
// QUERY_HCA_VPORT_CONTEXT answer from this struct alone, so that verbs and
// DEVX users of the same device see the same limits.
struct DeviceCaps {
  // ibv_device_attr
  uint64_t node_guid = 0;
  uint64_t sys_image_guid = 0;
  uint64_t max_mr_size = 0;
  uint64_t page_size_cap = 0;
  uint32_t vendor_id = 0x02c9;
  uint32_t vendor_part_id = 0x1017;
  uint32_t max_qp = 0;
  uint32_t max_qp_wr = 0;
  uint32_t max_sge = 0;
  uint32_t max_cq = 0;
  uint32_t max_cqe = 0;
  uint32_t max_mr = 0;
  uint32_t max_pd = 0;
  uint32_t max_qp_rd_atom = 0;
  uint32_t max_qp_init_rd_atom = 0;
  uint32_t max_srq_wr = 0;
  uint8_t local_ca_ack_delay = 0;
  uint8_t phys_port_cnt = 1;
  bool atomic = false;  // atomic_cap != IBV_ATOMIC_NONE
  bool xrc = false;

  // Every port reports the same attributes.
  PortCaps port;

  // DEVX-only
  uint32_t num_comp_vectors = 1;  // EQs behind mlx5dv_devx_query_eqn
  uint32_t max_transport_domains = 0;
  uint32_t max_flow_counters = 0;
  uint8_t log_max_flow_counter_bulk = 0;  // bulks of up to 2^n counters
  uint16_t vhca_id = 0;
  uint32_t device_frequency_khz = 0;
  bool send_dbr_less = false;  // send_dbr_mode_no_dbr_ext (DBR-less SQ doorbells)
  // DMA memcpy through the send queue (dma_mmo_sq): copies of up to
  // 2^n bytes (log_dma_mmo_max_size); 0: none.
  uint8_t log_dma_mmo_max_size = 0;
};

// Implemented by the daemon. All calls come from inside Firmware's lock:
// an implementation must not call back into the Firmware.
class DeviceObjects {
 public:
  virtual ~DeviceObjects() = default;

  virtual DeviceCaps Caps() const = 0;

  // A fresh number in the device-wide space of `kind` (kPd, kCq, kQp, kMkey),
  // or 0 when the space is exhausted. FreeNumber returns it.
  virtual uint32_t AllocNumber(ResourceKind kind) = 0;
  virtual void FreeNumber(ResourceKind kind, uint32_t number) = 0;

  // True when a verbs object (or a UMEM) of `kind` with `number` exists and
  // belongs to the caller's context, i.e. carries its uid (spec §2.1). Not
  // asked for objects the firmware created itself.
  virtual bool VerbsObjectUsable(ResourceKind kind, uint32_t number,
                                 const CallerContext& caller) = 0;

  // A firmware object refers to a verbs object (a DEVX QP on a verbs CQ):
  // while held, destroying the verbs object must fail with EBUSY.
  virtual void Hold(ResourceKind kind, uint32_t number) = 0;
  virtual void Release(ResourceKind kind, uint32_t number) = 0;
};

}  // namespace softverbs::devx

#endif  // SOFTVERBS_DEVX_DEVICE_OBJECTS_H_
