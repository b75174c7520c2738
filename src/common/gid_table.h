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
  // A test mode of the device (SOFTVERBS_ROCE_LOOPBACK=1 in the daemon's
  // environment, docs/roce.md "Wire loopback"): paths between this host's
  // own GIDs go through the network transport too, as RoCE v2 packets to
  // the host's own address, so that every test of one host exercises it.
  bool wire_loopback;
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

// A multicast GID: IPv6 multicast (ff00::/8), or an IPv4 multicast address
// mapped (::ffff:224.0.0.0/4) - the MGID rdma_cm gives an IPv4 group over
// RoCE v2, as the kernel's cma_iboe_set_mgid does.
inline bool IsMulticastGid(const uint8_t gid[16]) {
  if (gid[0] == 0xff) return true;
  for (int i = 0; i < 10; ++i) {
    if (gid[i] != 0) return false;
  }
  return gid[10] == 0xff && gid[11] == 0xff && (gid[12] & 0xf0) == 0xe0;
}

// An IPv4 address's GID (::ffff:a.b.c.d).
inline bool IsIpv4Gid(const uint8_t gid[16]) {
  for (int i = 0; i < 10; ++i) {
    if (gid[i] != 0) return false;
  }
  return gid[10] == 0xff && gid[11] == 0xff;
}

// A loopback address's GID (::1, ::ffff:127.0.0.0/8).
inline bool IsLoopbackGid(const uint8_t gid[16]) {
  for (int i = 0; i < 10; ++i) {
    if (gid[i] != 0) return false;
  }
  if (gid[10] == 0xff && gid[11] == 0xff) return gid[12] == 127;
  if (gid[10] != 0 || gid[11] != 0 || gid[12] != 0 || gid[13] != 0 || gid[14] != 0) return false;
  return gid[15] == 1;
}

// Whether an address vector leads off this host to one other host: it has
// a GRH whose destination GID is neither one of the port's GIDs nor
// multicast (in wire loopback mode: one of them too). A path without a GRH
// stays local. The library (which routes posts) and the device (which runs
// the network transport) ask the same question of the same table.
inline bool PathLeavesHost(const GidTable& gids, const ibv_ah_attr& ah) {
  if (!ah.is_global) return false;
  const uint8_t* dgid = ah.grh.dgid.raw;
  return !IsMulticastGid(dgid) && (gids.wire_loopback || !GidTableHas(gids, dgid));
}

// Whether a send to a multicast group goes on the link (docs/roce.md,
// "Multicast"): the device sends groups on the link from the AH's source GID
// (bit sgid_index of on_link_gids: groups span hosts and the device has a
// carrier there) and it is an address of an interface of the group's family (an id bound
// to loopback, which the table does not carry, sends from the link-local
// GID: its IPv4 groups stay here), not loopback's. Then the device
// sends it to the group's IP address, and members on this host get it back
// from the link as members elsewhere do; otherwise only this host's
// members get it, through shared memory.
inline bool MulticastGoesOnLink(const GidTable& gids, const ibv_ah_attr& ah,
                                uint32_t on_link_gids) {
  if (!ah.is_global || !IsMulticastGid(ah.grh.dgid.raw)) return false;
  const uint8_t index = ah.grh.sgid_index;
  if (index >= 32 || !(on_link_gids & (1u << index))) return false;
  if (index >= gids.count || gids.gids[index].type != GidType::kRoceV2) return false;
  const uint8_t* sgid = gids.gids[index].raw;
  return !IsLoopbackGid(sgid) && IsIpv4Gid(sgid) == IsIpv4Gid(ah.grh.dgid.raw);
}

}  // namespace softverbs
