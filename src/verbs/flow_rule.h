// Flow steering of raw packet QPs (ibv_create_flow): the rule an
// ibv_flow_attr and the specs after it describe, checked as the kernel's
// uverbs and mlx5 check them, and the choice of the QPs an Ethernet frame
// goes to. Pure functions: the library turns the application's attribute
// into a FlowRule, the daemon keeps the rules and steers every frame a raw
// packet QP sends (docs/raw_packet.md).
#ifndef SOFTVERBS_VERBS_FLOW_RULE_H_
#define SOFTVERBS_VERBS_FLOW_RULE_H_

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace softverbs::verbs {

// The specs a rule holds, each at most once (FlowRule::layers).
enum FlowLayer : uint32_t {
  kFlowLayerEth = 1u << 0,
  kFlowLayerIpv4 = 1u << 1,
  kFlowLayerIpv6 = 1u << 2,
  kFlowLayerTcp = 1u << 3,
  kFlowLayerUdp = 1u << 4,
};

// The most specs one attribute may carry (the kernel's
// IB_FLOW_SPEC_SUPPORT_LAYERS) and the highest priority of a rule (mlx5's
// flow tables: 0..15, lower first).
inline constexpr uint32_t kMaxFlowSpecs = 10;
inline constexpr uint16_t kMaxFlowPriority = 15;

// One rule, as the device keeps it (it travels in the control protocol: a
// plain struct). Values and masks are the specs' own filters, multi-byte
// fields in network order as the specs and the frame carry them, each value
// already ANDed with its mask; a layer not in `layers` is not looked at, and
// a field whose mask is 0 matches anything.
struct FlowRule {
  uint32_t type;      // ibv_flow_attr_type
  uint32_t flags;     // ibv_flow_flags: IBV_FLOW_ATTR_FLAGS_DONT_TRAP or 0
  uint16_t priority;  // 0..kMaxFlowPriority, lower first
  uint16_t reserved;
  uint32_t layers;  // FlowLayer bits
  ibv_flow_eth_filter eth_val;
  ibv_flow_eth_filter eth_mask;
  // IPv4: the IPV4 spec fills src_ip and dst_ip, IPV4_EXT the rest too.
  ibv_flow_ipv4_ext_filter ipv4_val;
  ibv_flow_ipv4_ext_filter ipv4_mask;
  ibv_flow_ipv6_filter ipv6_val;
  ibv_flow_ipv6_filter ipv6_mask;
  ibv_flow_tcp_udp_filter l4_val;  // TCP or UDP, as layers says
  ibv_flow_tcp_udp_filter l4_mask;
};
static_assert(sizeof(ibv_flow_eth_filter) == 16 && sizeof(ibv_flow_ipv4_ext_filter) == 12 &&
              sizeof(ibv_flow_ipv6_filter) == 40 && sizeof(ibv_flow_tcp_udp_filter) == 4);
static_assert(sizeof(FlowRule) == 160);

struct FlowVerdict {
  int err = 0;      // 0 or a positive errno
  std::string why;  // the rule that was broken
  bool ok() const { return err == 0; }
};

// Checks the attribute and the attr.num_of_specs specs that follow it in
// memory (each advancing by its own size, as libibverbs walks them) and
// fills `rule`. EINVAL: comp_mask set, unknown flags, DONT_TRAP on a default
// rule, an unknown type, a port other than 1, a priority above
// kMaxFlowPriority, more than kMaxFlowSpecs specs, a spec smaller than its
// struct, an unknown spec type, a layer twice (IPv4 and IPv6, TCP and UDP
// count as one layer each). EOPNOTSUPP: the EGRESS flag and the spec types
// softverbs does not steer by (inner headers, tunnels, ESP, MPLS, GRE,
// actions).
FlowVerdict ParseFlowAttr(const ibv_flow_attr& attr, FlowRule* rule);

// The headers of an Ethernet frame that rules look at.
struct FrameHeaders {
  bool ethernet = false;  // at least an Ethernet header
  uint8_t dst_mac[6] = {};
  uint8_t src_mac[6] = {};
  uint16_t ether_type = 0;  // network order; after an 802.1Q tag, the inner one
  bool vlan = false;
  uint16_t vlan_tag = 0;  // network order
  bool ipv4 = false;
  bool ipv6 = false;
  uint8_t src_ip[16] = {};  // IPv4: the first 4 bytes
  uint8_t dst_ip[16] = {};
  uint8_t proto = 0;        // IPv4 protocol or IPv6 next header
  uint8_t tos = 0;          // IPv4 TOS or IPv6 traffic class
  uint8_t ttl = 0;          // IPv4 TTL or IPv6 hop limit
  uint32_t flow_label = 0;  // IPv6, network order (20 bits)
  bool l4 = false;          // a TCP or UDP header (proto 6 or 17)
  uint16_t src_port = 0;    // network order
  uint16_t dst_port = 0;
};

// The longest frame head rules look into: Ethernet, an 802.1Q tag, an IPv4
// header with options or an IPv6 header, and a TCP or UDP header's ports.
inline constexpr size_t kFlowHeadBytes = 96;

// Reads the headers from the first `len` bytes of a frame (at most
// kFlowHeadBytes are looked at). Headers cut short are absent.
FrameHeaders ParseFrameHeaders(const uint8_t* frame, size_t len);

// Whether a NORMAL or SNIFFER rule's specs match the frame.
bool FlowMatches(const FlowRule& rule, const FrameHeaders& frame);

// A rule and the QP it steers to; rss: that QP spreads what it takes over
// the receive work queues of its indirection table (RssIndex).
struct SteeredFlow {
  FlowRule rule;
  uint32_t qpn;
  uint32_t rss;
};

// The QPs a frame sent by QP `sender` goes to, each once, in ascending
// order: every SNIFFER rule's; the NORMAL rules that match at the first
// priority (lowest value) where one does - and, where all of those carry
// DONT_TRAP, at the following priorities too -; a frame no NORMAL rule
// trapped goes to the ALL_DEFAULT rules, and, multicast, to the MC_DEFAULT
// rules. Never back to the sender.
std::vector<uint32_t> SteerFrame(std::span<const SteeredFlow> flows, const FrameHeaders& frame,
                                 uint32_t sender);

// ---- RSS (receive side scaling) ----------------------------------------

// The fields an RSS QP may hash (ibv_rx_hash_fields): the IPv4 and IPv6
// addresses and the TCP and UDP ports; not IPsec's SPI, not inner headers.
inline constexpr uint64_t kRssHashFields = IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4 |
                                           IBV_RX_HASH_SRC_IPV6 | IBV_RX_HASH_DST_IPV6 |
                                           IBV_RX_HASH_SRC_PORT_TCP | IBV_RX_HASH_DST_PORT_TCP |
                                           IBV_RX_HASH_SRC_PORT_UDP | IBV_RX_HASH_DST_PORT_UDP;
// The Toeplitz key's length (mlx5 takes 40 bytes and no other).
inline constexpr uint32_t kRssKeyBytes = 40;

// The Toeplitz hash of n input bytes under key (key_len >= n + 4).
uint32_t ToeplitzHash(const uint8_t* key, size_t key_len, const uint8_t* input, size_t n);

// The hash of a frame's fields that `fields` selects, in Microsoft's RSS
// order (source address, destination address, source port, destination
// port); a field the frame lacks (an IPv6 field of an IPv4 frame, a TCP
// port of a UDP frame) is left out.
uint32_t RssHash(const FrameHeaders& frame, uint64_t fields, const uint8_t key[kRssKeyBytes]);

}  // namespace softverbs::verbs

#endif  // SOFTVERBS_VERBS_FLOW_RULE_H_
