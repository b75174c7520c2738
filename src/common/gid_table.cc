#include "common/gid_table.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace softverbs {
namespace {

void AddGid(GidTable* t, const uint8_t raw[16]) {
  for (GidType type : {GidType::kRoceV1, GidType::kRoceV2}) {
    if (t->count >= kMaxGids) return;
    GidEntry& e = t->gids[t->count++];
    memcpy(e.raw, raw, 16);
    e.type = type;
  }
}

bool MacOf(const char* ifname, uint8_t mac[6]) {
  std::ifstream f(std::string("/sys/class/net/") + ifname + "/address");
  unsigned b[6];
  std::string line;
  if (!std::getline(f, line)) return false;
  if (sscanf(line.c_str(), "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]) != 6) {
    return false;
  }
  bool all_zero = true;
  for (int i = 0; i < 6; ++i) {
    mac[i] = static_cast<uint8_t>(b[i]);
    all_zero &= mac[i] == 0;
  }
  return !all_zero;
}

uint32_t MtuOf(const char* ifname) {
  std::ifstream f(std::string("/sys/class/net/") + ifname + "/mtu");
  uint32_t mtu = 0;
  if (!(f >> mtu)) mtu = 1500;
  return mtu;
}

// A stable, locally administered MAC for hosts whose chosen interface has
// none (loopback only): derived from the machine id.
void SynthesizeMac(uint8_t mac[6]) {
  std::ifstream f("/etc/machine-id");
  std::string id;
  std::getline(f, id);
  uint64_t h = 1469598103934665603ull;
  for (char c : id) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  for (int i = 0; i < 6; ++i) mac[i] = static_cast<uint8_t>(h >> (8 * i));
  mac[0] = (mac[0] & 0xfe) | 0x02;
}

}  // namespace

uint64_t GuidFromMac(const uint8_t mac[6]) {
  uint8_t eui[8] = {
      static_cast<uint8_t>(mac[0] ^ 2), mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]};
  uint64_t guid = 0;
  for (uint8_t b : eui) guid = (guid << 8) | b;
  return guid;  // host order; the verbs report it big-endian
}

GidTable BuildGidTable() {
  GidTable t{};
  ifaddrs* list = nullptr;
  getifaddrs(&list);
  // Choose the interface: first UP non-loopback one with an IP address.
  const char* chosen = nullptr;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || !(a->ifa_flags & IFF_UP) || (a->ifa_flags & IFF_LOOPBACK)) continue;
    int family = a->ifa_addr->sa_family;
    if (family == AF_INET || family == AF_INET6) {
      chosen = a->ifa_name;
      break;
    }
  }
  if (!chosen) chosen = "lo";
  snprintf(t.netdev, sizeof(t.netdev), "%s", chosen);
  t.ifindex = if_nametoindex(t.netdev);
  if (!MacOf(t.netdev, t.mac)) SynthesizeMac(t.mac);
  t.mtu = MtuOf(t.netdev);

  // Default GID: fe80::/64 + EUI-64 of the MAC.
  uint8_t link_local[16] = {0xfe, 0x80};
  uint64_t guid = GuidFromMac(t.mac);
  for (int i = 0; i < 8; ++i) link_local[8 + i] = static_cast<uint8_t>(guid >> (56 - 8 * i));
  AddGid(&t, link_local);

  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || strcmp(a->ifa_name, t.netdev) != 0) continue;
    uint8_t raw[16] = {};
    if (a->ifa_addr->sa_family == AF_INET) {
      raw[10] = raw[11] = 0xff;
      memcpy(raw + 12, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, 4);
    } else if (a->ifa_addr->sa_family == AF_INET6) {
      memcpy(raw, &reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr, 16);
      if (memcmp(raw, link_local, 16) == 0) continue;
    } else {
      continue;
    }
    AddGid(&t, raw);
  }
  if (list) freeifaddrs(list);
  return t;
}

bool GidTableHas(const GidTable& table, const uint8_t gid[16]) {
  for (int i = 0; i < table.count && i < kMaxGids; ++i) {
    if (memcmp(table.gids[i].raw, gid, 16) == 0) return true;
  }
  return false;
}

std::string FormatGid(const uint8_t raw[16]) {
  char buf[48];
  snprintf(buf, sizeof(buf),
           "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x", raw[0],
           raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7], raw[8], raw[9], raw[10], raw[11],
           raw[12], raw[13], raw[14], raw[15]);
  return buf;
}

}  // namespace softverbs
