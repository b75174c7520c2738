// The UDP source port of a QP's RoCEv2 packets: flow entropy, so that ECMP
// and RSS spread QPs while each QP's packets stay in order on one path
// (IBA A17.5.1.1: the source port "may be" derived from the flow; Linux's
// rxe and RoCE NICs use 0xC000..0xFFFF). Same numbers as rxe: a 14-bit
// multiplicative hash of the QP number, or, when the path has an IPv6 flow
// label, the label folded to 14 bits (rdma_flow_label_to_udp_sport).
#pragma once

#include <cstdint>

namespace softverbs::roce {

inline constexpr uint16_t kSourcePortBase = 0xc000;

// From the sending QP's number.
constexpr uint16_t SourcePortOfQpn(uint32_t qpn) {
  constexpr uint32_t kGoldenRatio32 = 0x61c88647;  // the kernel's hash_32()
  return static_cast<uint16_t>(kSourcePortBase | (((qpn * kGoldenRatio32) >> 18) & 0x3fff));
}

// From a 20-bit IPv6 flow label (non-zero).
constexpr uint16_t SourcePortOfFlowLabel(uint32_t flow_label) {
  const uint32_t low = flow_label & 0x3fff;
  const uint32_t high = flow_label & 0xfc000;
  return static_cast<uint16_t>(kSourcePortBase | ((low ^ (high >> 14)) & 0x3fff));
}

}  // namespace softverbs::roce
