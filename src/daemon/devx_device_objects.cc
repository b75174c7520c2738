#include "daemon/devx_device_objects.h"

#include <errno.h>

#include "common/device_limits.h"
#include "common/gid_table.h"
#include "daemon/device.h"

namespace softverbs::daemon {

namespace lim = softverbs::limits;
using devx::ResourceKind;

namespace {

// What the firmware advertises beyond the verbs limits. Transport domains and
// flow counters have no verbs counterpart; the numbers are this emulation's.
constexpr uint32_t kMaxTransportDomains = 1u << 16;
constexpr uint32_t kMaxFlowCounters = 1u << 16;
constexpr uint8_t kLogMaxFlowCounterBulk = 8;

}  // namespace

devx::DeviceCaps DevxDeviceObjects::Caps() const {
  // Every number here is the one ibv_query_device / ibv_query_port report
  // (src/abi/ibverbs/query.cc): a DEVX user and a verbs user of softverbs0
  // must see the same device.
  devx::DeviceCaps caps;
  const uint64_t guid = GuidFromMac(device_.gids_.mac);
  caps.node_guid = guid;
  caps.sys_image_guid = guid;
  caps.max_mr_size = lim::kMaxMrSize;
  caps.page_size_cap = lim::kPageSizeCap;
  caps.vendor_id = lim::kVendorId;
  caps.vendor_part_id = lim::kVendorPartId;
  caps.max_qp = lim::kMaxQp;
  caps.max_qp_wr = lim::kMaxQpWr;
  caps.max_sge = lim::kMaxSge;
  caps.max_cq = lim::kMaxCq;
  caps.max_cqe = lim::kMaxCqe;
  caps.max_mr = lim::kMaxMr;
  caps.max_pd = lim::kMaxPd;
  caps.max_qp_rd_atom = lim::kMaxQpRdAtom;
  caps.max_qp_init_rd_atom = lim::kMaxQpInitRdAtom;
  caps.max_srq_wr = lim::kMaxSrqWr;
  caps.local_ca_ack_delay = lim::kLocalCaAckDelay;
  caps.phys_port_cnt = lim::kPhysPortCount;
  caps.atomic = true;  // IBV_ATOMIC_HCA
  caps.xrc = true;     // IBV_DEVICE_XRC

  caps.port.ethernet = true;  // IBV_LINK_LAYER_ETHERNET
  caps.port.state = IBV_PORT_ACTIVE;
  caps.port.physical_state = lim::kPhysStateLinkUp;
  caps.port.gid_table_len = lim::kGidTableLength;
  caps.port.pkey_table_len = lim::kMaxPkeys;
  caps.port.max_msg_size = lim::kMaxMsgSize;
  caps.port.port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
  caps.port.port_guid = guid;

  caps.num_comp_vectors = lim::kNumCompVectors;
  caps.max_transport_domains = kMaxTransportDomains;
  caps.max_flow_counters = kMaxFlowCounters;
  caps.log_max_flow_counter_bulk = kLogMaxFlowCounterBulk;
  // The device clock ibv_query_device_ex reports (hca_core_clock) and that
  // stamps completions; no DBR-less doorbells.
  caps.device_frequency_khz = static_cast<uint32_t>(lim::kHcaCoreClockKhz);
  caps.send_dbr_less = false;
  caps.log_dma_mmo_max_size = lim::kLogMaxWrMemcpyLength;
  return caps;
}

uint32_t DevxDeviceObjects::AllocNumber(ResourceKind kind) {
  // Numbers are drawn from the verbs counters, so a DEVX object's number is
  // never that of a verbs object of the same kind.
  switch (kind) {
    case ResourceKind::kPd:
      return device_.next_pdn_++;
    case ResourceKind::kCq:
      return device_.next_cqn_++;
    case ResourceKind::kQp:
      return device_.AllocateQpn();
    case ResourceKind::kMkey:
      return device_.AllocateMrIndex();
    case ResourceKind::kUmem:
      return 0;  // UMEMs are registered, never allocated by the firmware
  }
  return 0;
}

void DevxDeviceObjects::FreeNumber(ResourceKind, uint32_t) {
  // The verbs counters never reuse a number while the daemon lives; neither
  // do DEVX objects.
}

bool DevxDeviceObjects::VerbsObjectUsable(ResourceKind kind, uint32_t number,
                                          const devx::CallerContext& caller) {
  // Verbs objects carry the uid of the context that made them: usable only by
  // DEVX commands of that same context (spec §2.1).
  const auto owner = static_cast<ClientId>(caller.client);
  switch (kind) {
    case ResourceKind::kPd:
      for (const auto& [h, pd] : device_.pds_) {
        if (pd.pdn == number) return pd.owner == owner;
      }
      return false;
    case ResourceKind::kCq:
      for (const auto& [h, cq] : device_.cqs_) {
        if (cq.cqn == number) return cq.owner == owner;
      }
      return false;
    case ResourceKind::kQp: {
      auto it = device_.qps_.find(number);
      return it != device_.qps_.end() && it->second.creator == owner;
    }
    case ResourceKind::kMkey: {
      auto it = device_.mr_by_index_.find(number);
      return it != device_.mr_by_index_.end() && device_.mrs_.at(it->second).owner == owner;
    }
    case ResourceKind::kUmem: {
      auto it = umems_.find(number);
      return it != umems_.end() && it->second.owner == owner;
    }
  }
  return false;
}

void DevxDeviceObjects::Hold(ResourceKind kind, uint32_t number) {
  AdjustUsers(kind, number, +1);
}

void DevxDeviceObjects::Release(ResourceKind kind, uint32_t number) {
  AdjustUsers(kind, number, -1);
}

void DevxDeviceObjects::AdjustUsers(ResourceKind kind, uint32_t number, int delta) {
  switch (kind) {
    case ResourceKind::kPd:
      for (auto& [h, pd] : device_.pds_) {
        if (pd.pdn == number) pd.users += delta;
      }
      return;
    case ResourceKind::kCq:
      for (auto& [h, cq] : device_.cqs_) {
        if (cq.cqn == number) cq.users += delta;
      }
      return;
    case ResourceKind::kUmem:
      if (auto it = umems_.find(number); it != umems_.end()) it->second.users += delta;
      return;
    case ResourceKind::kQp:
    case ResourceKind::kMkey: {
      // The verbs QP/MR tables keep no user count; the firmware references
      // neither today, but keep the books balanced if it ever does.
      int& holds = other_holds_[{kind, number}];
      holds += delta;
      if (holds == 0) other_holds_.erase({kind, number});
      return;
    }
  }
}

uint32_t DevxDeviceObjects::RegisterUmem(ClientId owner, uint64_t addr, uint64_t size,
                                         uint32_t access) {
  uint32_t id = next_umem_id_++;
  if (next_umem_id_ > 0xffffff) next_umem_id_ = 1;  // 24-bit ids in the PRM
  while (umems_.count(id)) id = next_umem_id_++;
  umems_[id] = Umem{id, owner, addr, size, access};
  return id;
}

int DevxDeviceObjects::DeregisterUmem(ClientId owner, uint32_t id) {
  auto it = umems_.find(id);
  if (it == umems_.end() || it->second.owner != owner) return ENOENT;
  if (it->second.users > 0) return EBUSY;
  umems_.erase(it);
  return 0;
}

void DevxDeviceObjects::RemoveClient(ClientId owner) {
  std::erase_if(umems_, [owner](const auto& entry) { return entry.second.owner == owner; });
}

}  // namespace softverbs::daemon
