#include "roce/icrc.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "roce/headers.h"
#include "roce/ip_headers.h"

namespace softverbs::roce {
namespace {

constexpr size_t kMaxMasked = sizeof(Ipv6Header) + sizeof(UdpHeader) + sizeof(Bth);

uint32_t Crc(uint32_t crc, const uint8_t* p, size_t n) {
  return static_cast<uint32_t>(crc32(crc, p, static_cast<uInt>(n)));
}

}  // namespace

uint32_t ComputeIcrc(std::span<const uint8_t> ip_udp, std::span<const uint8_t> roce) {
  std::array<uint8_t, kMaxMasked> masked;
  const size_t ip_len = ip_udp.size() - sizeof(UdpHeader);
  std::copy(ip_udp.begin(), ip_udp.end(), masked.begin());
  std::copy_n(roce.begin(), sizeof(Bth), masked.begin() + ip_udp.size());
  if (ip_len == sizeof(Ipv4Header)) {
    auto* ip = reinterpret_cast<Ipv4Header*>(masked.data());
    ip->tos = 0xff;
    ip->ttl = 0xff;
    ip->checksum.set(0xffff);
  } else {
    auto* ip = reinterpret_cast<Ipv6Header*>(masked.data());
    ip->version_class_flow.set(ip->version_class_flow.get() | 0x0fffffff);
    ip->hop_limit = 0xff;
  }
  reinterpret_cast<UdpHeader*>(masked.data() + ip_len)->checksum.set(0xffff);
  reinterpret_cast<Bth*>(masked.data() + ip_udp.size())->fecn_becn_resv6 = 0xff;

  static constexpr uint8_t kMaskedLrh[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  uint32_t crc = Crc(0, kMaskedLrh, sizeof(kMaskedLrh));
  crc = Crc(crc, masked.data(), ip_udp.size() + sizeof(Bth));
  return Crc(crc, roce.data() + sizeof(Bth), roce.size() - sizeof(Bth));
}

void StoreIcrc(uint32_t icrc, uint8_t out[4]) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(icrc >> (8 * i));
}

uint32_t LoadIcrc(const uint8_t in[4]) {
  return uint32_t{in[0]} | uint32_t{in[1]} << 8 | uint32_t{in[2]} << 16 | uint32_t{in[3]} << 24;
}

}  // namespace softverbs::roce
