#include "verbs/flow_rule.h"

#include <endian.h>
#include <errno.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>
#include <set>

namespace softverbs::verbs {

namespace {

constexpr uint32_t kKnownFlowFlags = IBV_FLOW_ATTR_FLAGS_DONT_TRAP | IBV_FLOW_ATTR_FLAGS_EGRESS;

FlowVerdict Fail(int err, std::string why) {
  return {err, std::move(why)};
}

// value &= mask, byte by byte, for a filter of n bytes.
void MaskBytes(void* value, const void* mask, size_t n) {
  auto* v = static_cast<uint8_t*>(value);
  const auto* m = static_cast<const uint8_t*>(mask);
  for (size_t i = 0; i < n; ++i) v[i] &= m[i];
}

// Whether (a & mask) == value over n bytes (value is already masked).
bool MatchBytes(const void* a, const void* value, const void* mask, size_t n) {
  const auto* x = static_cast<const uint8_t*>(a);
  const auto* v = static_cast<const uint8_t*>(value);
  const auto* m = static_cast<const uint8_t*>(mask);
  for (size_t i = 0; i < n; ++i) {
    if ((x[i] & m[i]) != v[i]) return false;
  }
  return true;
}

// One spec type softverbs steers by: its struct's size and its layer.
struct SpecKind {
  uint32_t type;
  size_t size;
  uint32_t layer;
};

constexpr SpecKind kSpecKinds[] = {
    {IBV_FLOW_SPEC_ETH, sizeof(ibv_flow_spec_eth), kFlowLayerEth},
    {IBV_FLOW_SPEC_IPV4, sizeof(ibv_flow_spec_ipv4), kFlowLayerIpv4},
    {IBV_FLOW_SPEC_IPV4_EXT, sizeof(ibv_flow_spec_ipv4_ext), kFlowLayerIpv4},
    {IBV_FLOW_SPEC_IPV6, sizeof(ibv_flow_spec_ipv6), kFlowLayerIpv6},
    {IBV_FLOW_SPEC_TCP, sizeof(ibv_flow_spec_tcp_udp), kFlowLayerTcp},
    {IBV_FLOW_SPEC_UDP, sizeof(ibv_flow_spec_tcp_udp), kFlowLayerUdp},
};

// Spec types rdma-core defines that softverbs does not steer by.
bool IsUnsupportedSpecType(uint32_t type) {
  if (type & IBV_FLOW_SPEC_INNER) return true;
  switch (type) {
    case IBV_FLOW_SPEC_ESP:
    case IBV_FLOW_SPEC_VXLAN_TUNNEL:
    case IBV_FLOW_SPEC_GRE:
    case IBV_FLOW_SPEC_MPLS:
    case IBV_FLOW_SPEC_ACTION_TAG:
    case IBV_FLOW_SPEC_ACTION_DROP:
    case IBV_FLOW_SPEC_ACTION_HANDLE:
    case IBV_FLOW_SPEC_ACTION_COUNT:
      return true;
    default:
      return false;
  }
}

// Copies one spec's value and mask into the rule (its kind is known).
void TakeSpec(const uint8_t* spec, uint32_t type, FlowRule* rule) {
  switch (type) {
    case IBV_FLOW_SPEC_ETH: {
      ibv_flow_spec_eth s;
      memcpy(&s, spec, sizeof(s));
      rule->eth_val = s.val;
      rule->eth_mask = s.mask;
      break;
    }
    case IBV_FLOW_SPEC_IPV4: {
      ibv_flow_spec_ipv4 s;
      memcpy(&s, spec, sizeof(s));
      rule->ipv4_val.src_ip = s.val.src_ip;
      rule->ipv4_val.dst_ip = s.val.dst_ip;
      rule->ipv4_mask.src_ip = s.mask.src_ip;
      rule->ipv4_mask.dst_ip = s.mask.dst_ip;
      break;
    }
    case IBV_FLOW_SPEC_IPV4_EXT: {
      ibv_flow_spec_ipv4_ext s;
      memcpy(&s, spec, sizeof(s));
      rule->ipv4_val = s.val;
      rule->ipv4_mask = s.mask;
      break;
    }
    case IBV_FLOW_SPEC_IPV6: {
      ibv_flow_spec_ipv6 s;
      memcpy(&s, spec, sizeof(s));
      rule->ipv6_val = s.val;
      rule->ipv6_mask = s.mask;
      break;
    }
    default: {  // TCP, UDP
      ibv_flow_spec_tcp_udp s;
      memcpy(&s, spec, sizeof(s));
      rule->l4_val = s.val;
      rule->l4_mask = s.mask;
      break;
    }
  }
}

uint16_t Load16(const uint8_t* p) {
  uint16_t v;
  memcpy(&v, p, 2);
  return v;
}

bool IsMulticastMac(const uint8_t mac[6]) {
  return (mac[0] & 1) != 0;
}

}  // namespace

FlowVerdict ParseFlowAttr(const ibv_flow_attr& attr, FlowRule* rule) {
  // Check: the attribute (uverbs' order), then every spec.
  if (attr.comp_mask != 0) return Fail(EINVAL, "comp_mask must be 0");
  if (attr.flags & ~kKnownFlowFlags) {
    return Fail(EINVAL, "flags " + std::to_string(attr.flags) + " have unknown bits");
  }
  const uint32_t type = static_cast<uint32_t>(attr.type);
  const bool is_default = type == IBV_FLOW_ATTR_ALL_DEFAULT || type == IBV_FLOW_ATTR_MC_DEFAULT;
  if ((attr.flags & IBV_FLOW_ATTR_FLAGS_DONT_TRAP) && is_default) {
    return Fail(EINVAL, "DONT_TRAP on a default rule (ALL_DEFAULT, MC_DEFAULT)");
  }
  if (attr.num_of_specs > kMaxFlowSpecs) {
    return Fail(EINVAL, std::to_string(attr.num_of_specs) + " specs, above the most, " +
                            std::to_string(kMaxFlowSpecs));
  }
  if (type > IBV_FLOW_ATTR_SNIFFER) {
    return Fail(EINVAL, "type " + std::to_string(type) + " is not a flow rule type");
  }
  if (attr.port != 1) {
    return Fail(EINVAL, "port " + std::to_string(attr.port) + " does not exist (ports: 1)");
  }
  if (attr.priority > kMaxFlowPriority) {
    return Fail(EINVAL, "priority " + std::to_string(attr.priority) + " is above the lowest, " +
                            std::to_string(kMaxFlowPriority));
  }
  if (attr.flags & IBV_FLOW_ATTR_FLAGS_EGRESS) {
    return Fail(EOPNOTSUPP, "egress rules are not supported by softverbs");
  }
  FlowRule r{};
  r.type = type;
  r.flags = attr.flags;
  r.priority = attr.priority;
  const auto* spec = reinterpret_cast<const uint8_t*>(&attr + 1);
  for (uint32_t i = 0; i < attr.num_of_specs; ++i) {
    ibv_flow_spec_type spec_type;
    uint16_t size;
    memcpy(&spec_type, spec, sizeof(spec_type));
    memcpy(&size, spec + offsetof(ibv_flow_spec_eth, size), sizeof(size));
    const uint32_t t = static_cast<uint32_t>(spec_type);
    const auto kind = std::find_if(std::begin(kSpecKinds), std::end(kSpecKinds),
                                   [t](const SpecKind& k) { return k.type == t; });
    if (kind == std::end(kSpecKinds)) {
      if (IsUnsupportedSpecType(t)) {
        return Fail(EOPNOTSUPP, "spec " + std::to_string(i) + ": type " + std::to_string(t) +
                                    " (inner headers, tunnels, ESP, MPLS, actions) is not "
                                    "supported by softverbs");
      }
      return Fail(EINVAL, "spec " + std::to_string(i) + ": type " + std::to_string(t) +
                              " is not a flow spec type");
    }
    if (size < kind->size) {
      return Fail(EINVAL, "spec " + std::to_string(i) + ": size " + std::to_string(size) +
                              " is below its struct's " + std::to_string(kind->size));
    }
    const uint32_t same_layer =
        kind->layer & (kFlowLayerIpv4 | kFlowLayerIpv6) ? kFlowLayerIpv4 | kFlowLayerIpv6
        : kind->layer & (kFlowLayerTcp | kFlowLayerUdp) ? kFlowLayerTcp | kFlowLayerUdp
                                                        : kind->layer;
    if (r.layers & same_layer) {
      return Fail(EINVAL, "spec " + std::to_string(i) + ": a second spec of the same layer");
    }
    r.layers |= kind->layer;
    TakeSpec(spec, t, &r);
    spec += size;
  }
  // Apply.
  MaskBytes(&r.eth_val, &r.eth_mask, sizeof(r.eth_val));
  MaskBytes(&r.ipv4_val, &r.ipv4_mask, sizeof(r.ipv4_val));
  MaskBytes(&r.ipv6_val, &r.ipv6_mask, sizeof(r.ipv6_val));
  MaskBytes(&r.l4_val, &r.l4_mask, sizeof(r.l4_val));
  *rule = r;
  return {};
}

FrameHeaders ParseFrameHeaders(const uint8_t* frame, size_t len) {
  FrameHeaders h;
  len = std::min(len, kFlowHeadBytes);
  if (len < 14) return h;
  h.ethernet = true;
  memcpy(h.dst_mac, frame, 6);
  memcpy(h.src_mac, frame + 6, 6);
  size_t at = 12;
  h.ether_type = Load16(frame + at);
  at += 2;
  if (h.ether_type == htobe16(0x8100)) {
    if (len < at + 4) return h;
    h.vlan = true;
    h.vlan_tag = Load16(frame + at);
    h.ether_type = Load16(frame + at + 2);
    at += 4;
  }
  const uint8_t* ip = frame + at;
  size_t l4_at = 0;
  if (h.ether_type == htobe16(0x0800) && len >= at + 20 && (ip[0] >> 4) == 4) {
    const size_t ihl = (ip[0] & 0xf) * 4u;
    if (ihl < 20) return h;
    h.ipv4 = true;
    h.tos = ip[1];
    h.ttl = ip[8];
    h.proto = ip[9];
    memcpy(h.src_ip, ip + 12, 4);
    memcpy(h.dst_ip, ip + 16, 4);
    l4_at = at + ihl;
  } else if (h.ether_type == htobe16(0x86dd) && len >= at + 40 && (ip[0] >> 4) == 6) {
    h.ipv6 = true;
    h.tos = static_cast<uint8_t>(((ip[0] & 0xf) << 4) | (ip[1] >> 4));
    const uint32_t label = ((ip[1] & 0xfu) << 16) | (ip[2] << 8) | ip[3];
    h.flow_label = htobe32(label);
    h.proto = ip[6];
    h.ttl = ip[7];
    memcpy(h.src_ip, ip + 8, 16);
    memcpy(h.dst_ip, ip + 24, 16);
    l4_at = at + 40;
  } else {
    return h;
  }
  if ((h.proto == IPPROTO_TCP || h.proto == IPPROTO_UDP) && len >= l4_at + 4) {
    h.l4 = true;
    h.src_port = Load16(frame + l4_at);
    h.dst_port = Load16(frame + l4_at + 2);
  }
  return h;
}

bool FlowMatches(const FlowRule& r, const FrameHeaders& f) {
  if (r.layers & kFlowLayerEth) {
    if (!f.ethernet) return false;
    const ibv_flow_eth_filter frame_eth = [&] {
      ibv_flow_eth_filter e{};
      memcpy(e.dst_mac, f.dst_mac, 6);
      memcpy(e.src_mac, f.src_mac, 6);
      e.ether_type = f.ether_type;
      e.vlan_tag = f.vlan_tag;
      return e;
    }();
    if (r.eth_mask.vlan_tag && !f.vlan) return false;
    if (!MatchBytes(&frame_eth, &r.eth_val, &r.eth_mask, sizeof(frame_eth))) return false;
  }
  if (r.layers & kFlowLayerIpv4) {
    if (!f.ipv4) return false;
    ibv_flow_ipv4_ext_filter ip{};
    memcpy(&ip.src_ip, f.src_ip, 4);
    memcpy(&ip.dst_ip, f.dst_ip, 4);
    ip.proto = f.proto;
    ip.tos = f.tos;
    ip.ttl = f.ttl;
    if (!MatchBytes(&ip, &r.ipv4_val, &r.ipv4_mask, sizeof(ip))) return false;
  }
  if (r.layers & kFlowLayerIpv6) {
    if (!f.ipv6) return false;
    ibv_flow_ipv6_filter ip{};
    memcpy(ip.src_ip, f.src_ip, 16);
    memcpy(ip.dst_ip, f.dst_ip, 16);
    ip.flow_label = f.flow_label;
    ip.next_hdr = f.proto;
    ip.traffic_class = f.tos;
    ip.hop_limit = f.ttl;
    if (!MatchBytes(&ip, &r.ipv6_val, &r.ipv6_mask, sizeof(ip))) return false;
  }
  if (r.layers & (kFlowLayerTcp | kFlowLayerUdp)) {
    const uint8_t proto = (r.layers & kFlowLayerTcp) ? IPPROTO_TCP : IPPROTO_UDP;
    if (!f.l4 || f.proto != proto) return false;
    const ibv_flow_tcp_udp_filter ports{f.dst_port, f.src_port};
    if (!MatchBytes(&ports, &r.l4_val, &r.l4_mask, sizeof(ports))) return false;
  }
  return true;
}

std::vector<uint32_t> SteerFrame(std::span<const SteeredFlow> flows, const FrameHeaders& frame,
                                 uint32_t sender) {
  std::set<uint32_t> to;
  std::set<uint16_t> priorities;
  for (const SteeredFlow& f : flows) {
    if (f.rule.type == IBV_FLOW_ATTR_SNIFFER) to.insert(f.qpn);
    if (f.rule.type == IBV_FLOW_ATTR_NORMAL) priorities.insert(f.rule.priority);
  }
  bool trapped = false;
  for (uint16_t p : priorities) {
    for (const SteeredFlow& f : flows) {
      if (f.rule.type != IBV_FLOW_ATTR_NORMAL || f.rule.priority != p) continue;
      if (!FlowMatches(f.rule, frame)) continue;
      to.insert(f.qpn);
      if (!(f.rule.flags & IBV_FLOW_ATTR_FLAGS_DONT_TRAP)) trapped = true;
    }
    if (trapped) break;
  }
  if (!trapped) {
    const bool multicast = frame.ethernet && IsMulticastMac(frame.dst_mac);
    for (const SteeredFlow& f : flows) {
      if (f.rule.type == IBV_FLOW_ATTR_ALL_DEFAULT ||
          (multicast && f.rule.type == IBV_FLOW_ATTR_MC_DEFAULT)) {
        to.insert(f.qpn);
      }
    }
  }
  to.erase(sender);
  return {to.begin(), to.end()};
}

uint32_t ToeplitzHash(const uint8_t* key, size_t key_len, const uint8_t* input, size_t n) {
  // The 32 key bits at the input bit's position, slid one bit a step.
  uint32_t window = (static_cast<uint32_t>(key[0]) << 24) | (key[1] << 16) | (key[2] << 8) | key[3];
  uint32_t hash = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t next = i + 4 < key_len ? key[i + 4] : 0;
    for (int bit = 7; bit >= 0; --bit) {
      if (input[i] & (1u << bit)) hash ^= window;
      window = (window << 1) | ((next >> bit) & 1u);
    }
  }
  return hash;
}

uint32_t RssHash(const FrameHeaders& f, uint64_t fields, const uint8_t key[kRssKeyBytes]) {
  uint8_t input[36];
  size_t n = 0;
  auto add = [&](const void* p, size_t len) {
    memcpy(input + n, p, len);
    n += len;
  };
  if (f.ipv4) {
    if (fields & IBV_RX_HASH_SRC_IPV4) add(f.src_ip, 4);
    if (fields & IBV_RX_HASH_DST_IPV4) add(f.dst_ip, 4);
  } else if (f.ipv6) {
    if (fields & IBV_RX_HASH_SRC_IPV6) add(f.src_ip, 16);
    if (fields & IBV_RX_HASH_DST_IPV6) add(f.dst_ip, 16);
  }
  if (f.l4) {
    const bool tcp = f.proto == IPPROTO_TCP;
    if (fields & (tcp ? IBV_RX_HASH_SRC_PORT_TCP : IBV_RX_HASH_SRC_PORT_UDP)) add(&f.src_port, 2);
    if (fields & (tcp ? IBV_RX_HASH_DST_PORT_TCP : IBV_RX_HASH_DST_PORT_UDP)) add(&f.dst_port, 2);
  }
  return ToeplitzHash(key, kRssKeyBytes, input, n);
}

}  // namespace softverbs::verbs
