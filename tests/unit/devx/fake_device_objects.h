// An in-memory DeviceObjects: the daemon's object tables reduced to what the
// firmware asks for. Verbs objects are registered by the test with an owner.
#ifndef SOFTVERBS_TESTS_UNIT_DEVX_FAKE_DEVICE_OBJECTS_H_
#define SOFTVERBS_TESTS_UNIT_DEVX_FAKE_DEVICE_OBJECTS_H_

#include <cstdint>
#include <map>
#include <set>
#include <utility>

#include "device_objects.h"

namespace softverbs::devx::testing {

inline DeviceCaps DefaultTestCaps() {
  DeviceCaps caps;
  caps.node_guid = 0x0002c90300a1b2c3ull;
  caps.sys_image_guid = 0x0002c90300a1b2c4ull;
  caps.max_mr_size = uint64_t{1} << 40;
  caps.page_size_cap = 0xfffff000ull;
  caps.max_qp = 1 << 16;
  caps.max_qp_wr = 1 << 15;
  caps.max_sge = 16;
  caps.max_cq = 1 << 16;
  caps.max_cqe = (1 << 22) - 1;
  caps.max_mr = 1 << 20;
  caps.max_pd = 1 << 16;
  caps.max_qp_rd_atom = 16;
  caps.max_qp_init_rd_atom = 16;
  caps.max_srq_wr = (1 << 15) - 1;
  caps.local_ca_ack_delay = 16;
  caps.phys_port_cnt = 1;
  caps.atomic = true;
  caps.port.ethernet = true;
  caps.port.gid_table_len = 256;
  caps.port.pkey_table_len = 1;
  caps.port.max_msg_size = 1u << 31;
  caps.port.port_cap_flags = 0x04010000;
  caps.port.port_guid = 0x0002c90300a1b2c5ull;
  caps.num_comp_vectors = 4;
  caps.max_transport_domains = 1 << 10;
  caps.max_flow_counters = 1 << 16;
  caps.log_max_flow_counter_bulk = 10;
  caps.vhca_id = 3;
  caps.device_frequency_khz = 1000000;
  caps.send_dbr_less = true;
  return caps;
}

class FakeDeviceObjects : public DeviceObjects {
 public:
  DeviceCaps caps = DefaultTestCaps();

  DeviceCaps Caps() const override { return caps; }

  uint32_t AllocNumber(ResourceKind kind) override {
    if (exhausted.count(kind)) return 0;
    const uint32_t number = next_[kind]++;
    allocated.insert({kind, number});
    return number;
  }
  void FreeNumber(ResourceKind kind, uint32_t number) override {
    allocated.erase({kind, number});
    freed.insert({kind, number});
  }
  bool VerbsObjectUsable(ResourceKind kind, uint32_t number, const CallerContext& caller) override {
    auto it = verbs_owner.find({kind, number});
    return it != verbs_owner.end() && it->second == caller.client;
  }
  void Hold(ResourceKind kind, uint32_t number) override { ++holds[{kind, number}]; }
  void Release(ResourceKind kind, uint32_t number) override { --holds[{kind, number}]; }

  // A verbs object (ibv_alloc_pd, ibv_create_cq, ...) of `owner`, numbered
  // from the same space the firmware allocates from.
  uint32_t AddVerbsObject(ResourceKind kind, ClientId owner) {
    const uint32_t number = kind == ResourceKind::kUmem ? next_umem_++ : AllocNumber(kind);
    verbs_owner[{kind, number}] = owner;
    return number;
  }
  int HoldCount(ResourceKind kind, uint32_t number) const {
    auto it = holds.find({kind, number});
    return it == holds.end() ? 0 : it->second;
  }

  std::set<std::pair<ResourceKind, uint32_t>> allocated;
  std::set<std::pair<ResourceKind, uint32_t>> freed;
  std::set<ResourceKind> exhausted;
  std::map<std::pair<ResourceKind, uint32_t>, ClientId> verbs_owner;
  std::map<std::pair<ResourceKind, uint32_t>, int> holds;

 private:
  std::map<ResourceKind, uint32_t> next_ = {{ResourceKind::kPd, 0x10},
                                            {ResourceKind::kCq, 0x100},
                                            {ResourceKind::kQp, 0x1000},
                                            {ResourceKind::kMkey, 0x20}};
  uint32_t next_umem_ = 0x7000;
};

}  // namespace softverbs::devx::testing

#endif  // SOFTVERBS_TESTS_UNIT_DEVX_FAKE_DEVICE_OBJECTS_H_
