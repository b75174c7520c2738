// IP addresses as the connection manager sees them on this host: which ones
// reach the local device (loopback, and every address of the host's
// interfaces), the GID each maps to (docs/rdmacm.md), wildcard and multicast
// tests, and the RoCE multicast GID of a group address.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>

#include "common/gid_table.h"

namespace softverbs::daemon {

// sockaddr_in / sockaddr_in6 held in a sockaddr_in6.
using CmAddr = sockaddr_in6;

inline int FamilyOf(const CmAddr& a) {
  return a.sin6_family;
}
uint16_t PortOf(const CmAddr& a);  // host order
void SetPort(CmAddr* a, uint16_t port);
bool IsWildcard(const CmAddr& a);
bool IsMulticast(const CmAddr& a);
bool IsLoopback(const CmAddr& a);
// An address the kernel's rdma_cm binds to no device (cma_any_addr): the
// wildcard and loopback. An id bound to one has no device until a connection
// or a resolved address gives it one, listens on every device (it hears other
// hosts too) and holds its port against every address of its family.
bool IsAnyAddress(const CmAddr& a);
// Same family and IP (ports ignored).
bool SameIp(const CmAddr& a, const CmAddr& b);
// An address of this host: loopback or assigned to one of its interfaces.
bool IsLocalAddress(const CmAddr& a);
// The source address this host's routing table picks to reach dst (another
// host's address), as the kernel's rdma_cm asks it: false when there is no
// route, or only one through a gateway (routed RoCE v2 paths are not
// resolved). Port 0.
bool RouteSource(const CmAddr& dst, CmAddr* src);
// The wildcard address of a's family.
CmAddr WildcardOf(int family);
// 127.0.0.1 or ::1.
CmAddr LoopbackOf(int family);
// The IP as a GID: IPv4-mapped (::ffff:a.b.c.d) or the IPv6 address.
void IpAsGid(const CmAddr& a, uint8_t gid[16]);
// The RoCE v2 entry of the port's GID table that carries a's IP; the
// link-local RoCE v2 entry (index 1) for addresses outside the table
// (loopback when the port is bound to another interface). Fills gid.
uint8_t GidIndexFor(const GidTable& table, const CmAddr& a, uint8_t gid[16]);
// The multicast GID of a group address on RoCE: ff0e::ffff:a.b.c.d for IPv4,
// the address itself for IPv6.
void MulticastGid(const CmAddr& group, uint8_t mgid[16]);
std::string FormatAddr(const CmAddr& a);

}  // namespace softverbs::daemon
