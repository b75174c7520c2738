// verbs/flow_rule: the headers rules look at in a frame, the match of one
// rule, and the choice of the QPs a frame goes to.
#include "verbs/flow_rule.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace softverbs::verbs {
namespace {

// dst, src, [802.1Q tag], ether type, then `rest`.
std::vector<uint8_t> EthernetFrame(uint8_t dst_last, uint16_t ether_type,
                                   const std::vector<uint8_t>& rest, int vlan = -1) {
  std::vector<uint8_t> f = {0x02, 0, 0, 0, 0, dst_last, 0x02, 0, 0, 0, 0, 0xaa};
  if (vlan >= 0) {
    f.insert(f.end(), {0x81, 0x00, static_cast<uint8_t>(vlan >> 8), static_cast<uint8_t>(vlan)});
  }
  f.insert(f.end(), {static_cast<uint8_t>(ether_type >> 8), static_cast<uint8_t>(ether_type)});
  f.insert(f.end(), rest.begin(), rest.end());
  return f;
}

// An IPv4 header of ihl words (options zero) with proto, then the ports.
std::vector<uint8_t> Ipv4(uint8_t proto, int ihl, uint16_t sport, uint16_t dport) {
  std::vector<uint8_t> ip(ihl * 4, 0);
  ip[0] = static_cast<uint8_t>(0x40 | ihl);
  ip[1] = 0x28;  // TOS
  ip[8] = 33;    // TTL
  ip[9] = proto;
  const uint8_t src[4] = {198, 51, 100, 1}, dst[4] = {198, 51, 100, 2};
  memcpy(&ip[12], src, 4);
  memcpy(&ip[16], dst, 4);
  ip.insert(ip.end(), {static_cast<uint8_t>(sport >> 8), static_cast<uint8_t>(sport),
                       static_cast<uint8_t>(dport >> 8), static_cast<uint8_t>(dport), 0, 0, 0, 0});
  return ip;
}

FrameHeaders Parse(const std::vector<uint8_t>& f) {
  return ParseFrameHeaders(f.data(), f.size());
}

TEST(FrameHeaders, AnIpv4UdpFrameBehindAVlanTagWithIpOptions) {
  const FrameHeaders h =
      Parse(EthernetFrame(0x0b, 0x0800, Ipv4(IPPROTO_UDP, 6, 1234, 5678), 0x2c0c));
  ASSERT_TRUE(h.ethernet);
  EXPECT_EQ(h.dst_mac[5], 0x0b);
  EXPECT_EQ(h.src_mac[5], 0xaa);
  EXPECT_TRUE(h.vlan);
  EXPECT_EQ(ntohs(h.vlan_tag), 0x2c0c);
  EXPECT_EQ(ntohs(h.ether_type), 0x0800) << "the type after the tag";
  ASSERT_TRUE(h.ipv4);
  EXPECT_EQ(h.tos, 0x28);
  EXPECT_EQ(h.ttl, 33);
  EXPECT_EQ(h.src_ip[3], 1);
  EXPECT_EQ(h.dst_ip[3], 2);
  ASSERT_TRUE(h.l4) << "the ports after the options";
  EXPECT_EQ(ntohs(h.src_port), 1234);
  EXPECT_EQ(ntohs(h.dst_port), 5678);
}

TEST(FrameHeaders, AnIpv6TcpFrame) {
  std::vector<uint8_t> ip(40, 0);
  ip[0] = 0x6a;  // version 6, traffic class 0xa5, flow label 0x12345
  ip[1] = 0x51;
  ip[2] = 0x23;
  ip[3] = 0x45;
  ip[6] = IPPROTO_TCP;
  ip[7] = 9;
  ip[23] = 1;
  ip[39] = 2;
  ip.insert(ip.end(), {0x10, 0x00, 0x20, 0x00});
  const FrameHeaders h = Parse(EthernetFrame(1, 0x86dd, ip));
  ASSERT_TRUE(h.ipv6);
  EXPECT_EQ(h.tos, 0xa5);
  EXPECT_EQ(ntohl(h.flow_label), 0x12345u);
  EXPECT_EQ(h.proto, IPPROTO_TCP);
  EXPECT_EQ(h.ttl, 9);
  EXPECT_EQ(h.src_ip[15], 1);
  EXPECT_EQ(h.dst_ip[15], 2);
  ASSERT_TRUE(h.l4);
  EXPECT_EQ(ntohs(h.dst_port), 0x2000);
}

TEST(FrameHeaders, HeadersCutShortAreAbsent) {
  const std::vector<uint8_t> f = EthernetFrame(1, 0x0800, Ipv4(IPPROTO_UDP, 5, 1, 2));
  EXPECT_FALSE(ParseFrameHeaders(f.data(), 13).ethernet);
  const FrameHeaders no_ip = ParseFrameHeaders(f.data(), 14 + 19);
  EXPECT_TRUE(no_ip.ethernet);
  EXPECT_FALSE(no_ip.ipv4);
  const FrameHeaders no_ports = ParseFrameHeaders(f.data(), 14 + 20 + 3);
  EXPECT_TRUE(no_ports.ipv4);
  EXPECT_FALSE(no_ports.l4);
  EXPECT_FALSE(Parse(EthernetFrame(1, 0x0806, {1, 2, 3})).ipv4) << "ARP";
}

// An attribute followed by its specs, as ibv_create_flow reads it.
struct Attr {
  std::vector<uint8_t> bytes;
  explicit Attr(uint16_t priority = 0, uint32_t type = IBV_FLOW_ATTR_NORMAL, uint32_t flags = 0) {
    ibv_flow_attr a{};
    a.type = static_cast<ibv_flow_attr_type>(type);
    a.priority = priority;
    a.port = 1;
    a.flags = flags;
    bytes.assign(reinterpret_cast<uint8_t*>(&a), reinterpret_cast<uint8_t*>(&a) + sizeof(a));
  }
  template <typename Spec>
  Attr& Add(const Spec& s) {
    bytes.insert(bytes.end(), reinterpret_cast<const uint8_t*>(&s),
                 reinterpret_cast<const uint8_t*>(&s) + sizeof(s));
    reinterpret_cast<ibv_flow_attr*>(bytes.data())->num_of_specs++;
    return *this;
  }
  ibv_flow_attr& attr() { return *reinterpret_cast<ibv_flow_attr*>(bytes.data()); }
};

ibv_flow_spec_eth DstMac(uint8_t last, uint8_t mask_last = 0xff) {
  ibv_flow_spec_eth s{};
  s.type = IBV_FLOW_SPEC_ETH;
  s.size = sizeof(s);
  s.val.dst_mac[0] = 0x02;
  s.val.dst_mac[5] = last;
  memset(s.mask.dst_mac, 0xff, 5);
  s.mask.dst_mac[5] = mask_last;
  return s;
}

FlowRule Rule(Attr a) {
  FlowRule r{};
  const FlowVerdict v = ParseFlowAttr(a.attr(), &r);
  EXPECT_TRUE(v.ok()) << v.why;
  return r;
}

TEST(FlowRule, ValuesAreMaskedSoAPartialMaskMatchesARange) {
  const FlowRule r = Rule(Attr().Add(DstMac(0x0f, 0xf0)));
  EXPECT_EQ(r.eth_val.dst_mac[5], 0x00) << "0x0f under mask 0xf0";
  EXPECT_TRUE(FlowMatches(r, Parse(EthernetFrame(0x03, 0x0800, {}))));
  EXPECT_FALSE(FlowMatches(r, Parse(EthernetFrame(0x13, 0x0800, {}))));
}

TEST(FlowRule, AVlanMaskNeedsATaggedFrame) {
  ibv_flow_spec_eth s = DstMac(1);
  s.val.vlan_tag = htons(0x00c);
  s.mask.vlan_tag = htons(0x0fff);
  const FlowRule r = Rule(Attr().Add(s));
  EXPECT_FALSE(FlowMatches(r, Parse(EthernetFrame(1, 0x0800, {}))));
  EXPECT_TRUE(FlowMatches(r, Parse(EthernetFrame(1, 0x0800, {}, 0xa00c))));
  EXPECT_FALSE(FlowMatches(r, Parse(EthernetFrame(1, 0x0800, {}, 0x000d))));
}

TEST(FlowRule, L3AndL4SpecsNeedTheirHeaders) {
  ibv_flow_spec_ipv4_ext ip{};
  ip.type = IBV_FLOW_SPEC_IPV4_EXT;
  ip.size = sizeof(ip);
  ip.val.proto = IPPROTO_TCP;
  ip.mask.proto = 0xff;
  ibv_flow_spec_tcp_udp tcp{};
  tcp.type = IBV_FLOW_SPEC_TCP;
  tcp.size = sizeof(tcp);
  tcp.val.dst_port = htons(80);
  tcp.mask.dst_port = 0xffff;
  const FlowRule r = Rule(Attr().Add(ip).Add(tcp));
  EXPECT_TRUE(FlowMatches(r, Parse(EthernetFrame(1, 0x0800, Ipv4(IPPROTO_TCP, 5, 9, 80)))));
  EXPECT_FALSE(FlowMatches(r, Parse(EthernetFrame(1, 0x0800, Ipv4(IPPROTO_UDP, 5, 9, 80)))));
  EXPECT_FALSE(FlowMatches(r, Parse(EthernetFrame(1, 0x0800, Ipv4(IPPROTO_TCP, 5, 9, 81)))));
  EXPECT_FALSE(FlowMatches(r, Parse(EthernetFrame(1, 0x86dd, {}))));
}

TEST(FlowRule, TheKernelsRefusals) {
  FlowRule r{};
  auto err = [&](Attr a) { return ParseFlowAttr(a.attr(), &r).err; };
  Attr bad_mask;
  bad_mask.attr().comp_mask = 1;
  EXPECT_EQ(err(bad_mask), EINVAL);
  EXPECT_EQ(err(Attr(16)), EINVAL) << "priority";
  EXPECT_EQ(err(Attr(0, 4)), EINVAL) << "type";
  EXPECT_EQ(err(Attr(0, IBV_FLOW_ATTR_NORMAL, IBV_FLOW_ATTR_FLAGS_EGRESS)), EOPNOTSUPP);
  EXPECT_EQ(err(Attr(0, IBV_FLOW_ATTR_MC_DEFAULT, IBV_FLOW_ATTR_FLAGS_DONT_TRAP)), EINVAL);
  Attr port;
  port.attr().port = 0;
  EXPECT_EQ(err(port), EINVAL);
  ibv_flow_spec_ipv4 v4{};
  v4.type = IBV_FLOW_SPEC_IPV4;
  v4.size = sizeof(v4);
  ibv_flow_spec_ipv6 v6{};
  v6.type = IBV_FLOW_SPEC_IPV6;
  v6.size = sizeof(v6);
  EXPECT_EQ(err(Attr().Add(v4).Add(v6)), EINVAL) << "two L3 specs";
  ibv_flow_spec_eth short_eth = DstMac(1);
  short_eth.size = 8;
  EXPECT_EQ(err(Attr().Add(short_eth)), EINVAL);
  ibv_flow_spec_eth inner = DstMac(1);
  inner.type = static_cast<ibv_flow_spec_type>(IBV_FLOW_SPEC_ETH | IBV_FLOW_SPEC_INNER);
  EXPECT_EQ(err(Attr().Add(inner)), EOPNOTSUPP);
  Attr many;
  for (int i = 0; i < 11; ++i) many.Add(DstMac(1));
  EXPECT_EQ(err(many), EINVAL) << "more than 10 specs";
}

SteeredFlow Steer(Attr a, uint32_t qpn) {
  return {Rule(std::move(a)), qpn};
}

TEST(SteerFrame, TheFirstMatchingPriorityTrapsUnlessAllItsMatchesDontTrap) {
  const FrameHeaders to1 = Parse(EthernetFrame(1, 0x0800, {}));
  std::vector<SteeredFlow> flows = {
      Steer(Attr(3).Add(DstMac(1)), 30), Steer(Attr(1).Add(DstMac(1)), 10),
      Steer(Attr(1).Add(DstMac(1)), 11), Steer(Attr(0).Add(DstMac(2)), 99)};
  EXPECT_EQ(SteerFrame(flows, to1, 0), (std::vector<uint32_t>{10, 11}));
  flows[1] = Steer(Attr(1, IBV_FLOW_ATTR_NORMAL, IBV_FLOW_ATTR_FLAGS_DONT_TRAP).Add(DstMac(1)), 10);
  EXPECT_EQ(SteerFrame(flows, to1, 0), (std::vector<uint32_t>{10, 11})) << "11 still traps";
  flows[2] = Steer(Attr(1, IBV_FLOW_ATTR_NORMAL, IBV_FLOW_ATTR_FLAGS_DONT_TRAP).Add(DstMac(1)), 11);
  EXPECT_EQ(SteerFrame(flows, to1, 0), (std::vector<uint32_t>{10, 11, 30}));
  EXPECT_EQ(SteerFrame(flows, to1, 11), (std::vector<uint32_t>{10, 30})) << "not to the sender";
}

TEST(SteerFrame, DefaultRulesTakeWhatNoRuleTrappedAndSniffersTakeAll) {
  const std::vector<SteeredFlow> flows = {
      Steer(Attr().Add(DstMac(1)), 1), Steer(Attr(0, IBV_FLOW_ATTR_ALL_DEFAULT), 2),
      Steer(Attr(0, IBV_FLOW_ATTR_MC_DEFAULT), 3), Steer(Attr(0, IBV_FLOW_ATTR_SNIFFER), 4),
      Steer(Attr(0, IBV_FLOW_ATTR_SNIFFER), 1)};
  EXPECT_EQ(SteerFrame(flows, Parse(EthernetFrame(1, 0x0800, {})), 0),
            (std::vector<uint32_t>{1, 4}))
      << "trapped; 1 once";
  EXPECT_EQ(SteerFrame(flows, Parse(EthernetFrame(2, 0x0800, {})), 0),
            (std::vector<uint32_t>{1, 2, 4}))
      << "unicast nobody trapped";
  std::vector<uint8_t> mc = EthernetFrame(2, 0x0800, {});
  mc[0] = 0x01;
  EXPECT_EQ(SteerFrame(flows, Parse(mc), 0), (std::vector<uint32_t>{1, 2, 3, 4}));
}

// Microsoft's RSS verification suite: its key and two IPv4 TCP flows.
constexpr uint8_t kMicrosoftKey[kRssKeyBytes] = {
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
    0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
    0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};

FrameHeaders TcpFlow(const uint8_t src[4], uint16_t sport, const uint8_t dst[4], uint16_t dport) {
  std::vector<uint8_t> ip = Ipv4(IPPROTO_TCP, 5, sport, dport);
  memcpy(&ip[12], src, 4);
  memcpy(&ip[16], dst, 4);
  return Parse(EthernetFrame(1, 0x0800, ip));
}

TEST(Rss, ToeplitzHashesAsMicrosoftsVerificationSuite) {
  const uint8_t src1[4] = {66, 9, 149, 187}, dst1[4] = {161, 142, 100, 80};
  const uint8_t src2[4] = {199, 92, 111, 2}, dst2[4] = {65, 69, 140, 83};
  uint8_t input[8];
  memcpy(input, src1, 4);
  memcpy(input + 4, dst1, 4);
  EXPECT_EQ(ToeplitzHash(kMicrosoftKey, kRssKeyBytes, input, 8), 0x323e8fc2u);
  const uint64_t addresses = IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4;
  const uint64_t tcp = addresses | IBV_RX_HASH_SRC_PORT_TCP | IBV_RX_HASH_DST_PORT_TCP;
  EXPECT_EQ(RssHash(TcpFlow(src1, 2794, dst1, 1766), addresses, kMicrosoftKey), 0x323e8fc2u);
  EXPECT_EQ(RssHash(TcpFlow(src1, 2794, dst1, 1766), tcp, kMicrosoftKey), 0x51ccc178u);
  EXPECT_EQ(RssHash(TcpFlow(src2, 14230, dst2, 4739), addresses, kMicrosoftKey), 0xd718262au);
  EXPECT_EQ(RssHash(TcpFlow(src2, 14230, dst2, 4739), tcp, kMicrosoftKey), 0xc626b0eau);
  // UDP port fields do not hash a TCP frame's ports.
  EXPECT_EQ(RssHash(TcpFlow(src1, 2794, dst1, 1766),
                    addresses | IBV_RX_HASH_SRC_PORT_UDP | IBV_RX_HASH_DST_PORT_UDP, kMicrosoftKey),
            0x323e8fc2u);
}

}  // namespace
}  // namespace softverbs::verbs
