// The port's GID table, derived from the host's addresses the way Soft-RoCE
// (rxe) derives it from its network device: a link-local GID built from the
// MAC (EUI-64), then one GID per IPv4 address (IPv4-mapped IPv6) and per IPv6
// address, each present twice, as RoCE v1 and as RoCE v2.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

namespace softverbs {

inline constexpr int kMaxGids = 16;

// Values of enum ibv_gid_type_sysfs / ibv_gid_type in rdma-core.
enum class GidType : uint8_t { kIb = 0, kRoceV1 = 1, kRoceV2 = 2 };

struct GidEntry {
  uint8_t raw[16];
  GidType type;
};

struct GidTable {
  char netdev[16];   // the host interface the port is bound to
  uint32_t ifindex;  // its index
  uint8_t mac[6];    // its MAC (synthesised from the host id when it has none)
  int count;         // valid entries in gids[]
  GidEntry gids[kMaxGids];
  uint32_t mtu;  // the interface's MTU in bytes
};

// Reads the host's interfaces. Prefers the first UP, non-loopback interface
// with an address; falls back to the loopback interface.
GidTable BuildGidTable();

// Node and port GUID: EUI-64 from the MAC, as rxe does.
uint64_t GuidFromMac(const uint8_t mac[6]);

std::string FormatGid(const uint8_t raw[16]);

// Whether gid is one of the table's entries (of any type): an address of
// this host (network namespace).
bool GidTableHas(const GidTable& table, const uint8_t gid[16]);

// A multicast GID (ff00::/8).
inline bool IsMulticastGid(const uint8_t gid[16]) {
  return gid[0] == 0xff;
}

// Whether an address vector leads off this host: it has a GRH whose
// destination GID is neither one of the port's GIDs nor multicast
// (multicast groups are joined on this host only, for now). A path without
// a GRH stays local. The library (which routes posts) and the device
// (which runs the network transport) ask the same question of the same table.
inline bool PathLeavesHost(const GidTable& gids, const ibv_ah_attr& ah) {
  if (!ah.is_global) return false;
  const uint8_t* dgid = ah.grh.dgid.raw;
  return !IsMulticastGid(dgid) && !GidTableHas(gids, dgid);
}

}  // namespace softverbs
