#include "daemon/cm_addresses.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <string>

namespace softverbs::daemon {

namespace {

const in_addr& V4(const CmAddr& a) {
  return reinterpret_cast<const sockaddr_in&>(a).sin_addr;
}

}  // namespace

uint16_t PortOf(const CmAddr& a) {
  // sin_port and sin6_port sit at the same offset.
  return ntohs(a.sin6_port);
}

void SetPort(CmAddr* a, uint16_t port) {
  a->sin6_port = htons(port);
}

bool IsWildcard(const CmAddr& a) {
  if (a.sin6_family == AF_INET) return V4(a).s_addr == htonl(INADDR_ANY);
  if (a.sin6_family == AF_INET6) return IN6_IS_ADDR_UNSPECIFIED(&a.sin6_addr);
  return false;
}

bool IsMulticast(const CmAddr& a) {
  if (a.sin6_family == AF_INET) return IN_MULTICAST(ntohl(V4(a).s_addr));
  if (a.sin6_family == AF_INET6) return IN6_IS_ADDR_MULTICAST(&a.sin6_addr);
  return false;
}

bool IsLoopback(const CmAddr& a) {
  if (a.sin6_family == AF_INET) return (ntohl(V4(a).s_addr) >> 24) == 127;
  if (a.sin6_family == AF_INET6) return IN6_IS_ADDR_LOOPBACK(&a.sin6_addr);
  return false;
}

bool IsAnyAddress(const CmAddr& a) {
  return IsWildcard(a) || IsLoopback(a);
}

bool SameIp(const CmAddr& a, const CmAddr& b) {
  if (a.sin6_family != b.sin6_family) return false;
  if (a.sin6_family == AF_INET) return V4(a).s_addr == V4(b).s_addr;
  return memcmp(&a.sin6_addr, &b.sin6_addr, 16) == 0;
}

bool IsLocalAddress(const CmAddr& a) {
  if (IsLoopback(a)) return true;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* i = list; i && !found; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != a.sin6_family) continue;
    CmAddr mine{};
    memcpy(&mine, i->ifa_addr,
           a.sin6_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    found = SameIp(mine, a);
  }
  freeifaddrs(list);
  return found;
}

namespace {

// Whether the kernel's most specific route to dst has no gateway: dst is on
// a directly connected network (/proc/net/route, /proc/net/ipv6_route).
bool OnLink(const CmAddr& dst) {
  if (dst.sin6_family == AF_INET) {
    const uint32_t ip = reinterpret_cast<const sockaddr_in&>(dst).sin_addr.s_addr;
    FILE* f = fopen("/proc/net/route", "re");
    if (!f) return false;
    char line[256];
    int best_len = -1;
    bool best_direct = false;
    if (!fgets(line, sizeof(line), f)) line[0] = 0;  // the header
    while (fgets(line, sizeof(line), f)) {
      char iface[32];
      unsigned dest, gateway, flags, refcnt, use, metric, mask;
      if (sscanf(line, "%31s %x %x %x %u %u %u %x", iface, &dest, &gateway, &flags, &refcnt, &use,
                 &metric, &mask) != 8 ||
          !(flags & 0x1) || (ip & mask) != dest) {  // RTF_UP, and a match
        continue;
      }
      const int len = __builtin_popcount(mask);
      if (len > best_len) {
        best_len = len;
        best_direct = gateway == 0;
      }
    }
    fclose(f);
    return best_len >= 0 && best_direct;
  }
  FILE* f = fopen("/proc/net/ipv6_route", "re");
  if (!f) return false;
  char dest[33], src[33], next_hop[33], iface[32];
  unsigned dest_len, src_len, metric, refcnt, use, flags;
  int best_len = -1;
  bool best_direct = false;
  while (fscanf(f, "%32s %x %32s %x %32s %x %x %x %x %31s", dest, &dest_len, src, &src_len,
                next_hop, &metric, &refcnt, &use, &flags, iface) == 10) {
    if (!(flags & 0x1) || (flags & 0x0200)) continue;  // RTF_UP, not RTF_REJECT
    uint8_t net[16];
    for (int i = 0; i < 16; ++i) sscanf(dest + 2 * i, "%2hhx", &net[i]);
    bool match = true;
    for (unsigned bit = 0; bit < dest_len && match; ++bit) {
      const uint8_t m = 0x80 >> (bit % 8);
      match = (net[bit / 8] & m) == (dst.sin6_addr.s6_addr[bit / 8] & m);
    }
    if (!match || static_cast<int>(dest_len) <= best_len) continue;
    best_len = static_cast<int>(dest_len);
    best_direct = strspn(next_hop, "0") == 32;
  }
  fclose(f);
  return best_len >= 0 && best_direct;
}

}  // namespace

bool RouteSource(const CmAddr& dst, CmAddr* src) {
  // Routed paths (through a gateway) are not resolved: only another host on
  // a directly connected network (docs/rdmacm.md).
  if (!OnLink(dst)) return false;
  const socklen_t len = dst.sin6_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  int fd = socket(dst.sin6_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  // A UDP connect sends nothing: it only asks the routing table.
  CmAddr to = dst;
  SetPort(&to, 4791);
  CmAddr from{};
  socklen_t from_len = sizeof(from);
  const bool ok = connect(fd, reinterpret_cast<const sockaddr*>(&to), len) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&from), &from_len) == 0;
  close(fd);
  if (!ok) return false;
  SetPort(&from, 0);
  *src = from;
  return true;
}

CmAddr WildcardOf(int family) {
  CmAddr a{};
  a.sin6_family = static_cast<sa_family_t>(family);
  return a;
}

CmAddr LoopbackOf(int family) {
  CmAddr a = WildcardOf(family);
  if (family == AF_INET) {
    reinterpret_cast<sockaddr_in&>(a).sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  } else {
    a.sin6_addr = in6addr_loopback;
  }
  return a;
}

void IpAsGid(const CmAddr& a, uint8_t gid[16]) {
  memset(gid, 0, 16);
  if (a.sin6_family == AF_INET) {
    gid[10] = gid[11] = 0xff;
    memcpy(gid + 12, &V4(a), 4);
  } else if (a.sin6_family == AF_INET6) {
    memcpy(gid, &a.sin6_addr, 16);
  }
}

uint8_t GidIndexFor(const GidTable& table, const CmAddr& a, uint8_t gid[16]) {
  uint8_t ip_gid[16];
  IpAsGid(a, ip_gid);
  for (int i = 0; i < table.count; ++i) {
    if (table.gids[i].type == GidType::kRoceV2 && memcmp(table.gids[i].raw, ip_gid, 16) == 0) {
      memcpy(gid, ip_gid, 16);
      return static_cast<uint8_t>(i);
    }
  }
  memcpy(gid, table.gids[1].raw, 16);
  return 1;
}

void MulticastGid(const CmAddr& group, uint8_t mgid[16]) {
  memset(mgid, 0, 16);
  if (group.sin6_family == AF_INET6) {
    memcpy(mgid, &group.sin6_addr, 16);
    return;
  }
  // RoCE v2: the group's address mapped, as the kernel's cma_iboe_set_mgid
  // gives it for a RoCE v2 GID (ff0e::ffff:a.b.c.d is RoCE v1's).
  mgid[10] = mgid[11] = 0xff;
  memcpy(mgid + 12, &V4(group), 4);
}

std::string FormatAddr(const CmAddr& a) {
  char ip[INET6_ADDRSTRLEN] = "?";
  if (a.sin6_family == AF_INET) {
    inet_ntop(AF_INET, &V4(a), ip, sizeof(ip));
    return std::string(ip) + ":" + std::to_string(PortOf(a));
  }
  if (a.sin6_family == AF_INET6) {
    inet_ntop(AF_INET6, &a.sin6_addr, ip, sizeof(ip));
    return "[" + std::string(ip) + "]:" + std::to_string(PortOf(a));
  }
  return "(no address)";
}

}  // namespace softverbs::daemon
