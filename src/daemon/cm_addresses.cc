#include "daemon/cm_addresses.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <string.h>

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
  mgid[0] = 0xff;
  mgid[1] = 0x0e;
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
