// mlx5dv_create_flow_matcher(3), mlx5dv_create_flow(3) and
// mlx5dv_destroy_flow_matcher: mlx5's steering by PRM match parameters,
// turned into the verbs rules softverbs steers by (ibv_create_flow,
// docs/raw_packet.md). The matcher's mask and the flow's value over the
// outer headers (fte_match_set_lyr_2_4) become Ethernet, IPv4 or IPv6, and
// TCP or UDP specs. A mask on anything else - misc parameters, inner
// headers, metadata, or outer fields such as TCP flags, DSCP, fragments or
// the checksum bits - is EOPNOTSUPP; so is every action but
// MLX5DV_FLOW_ACTION_DEST_IBV_QP.
#include <arpa/inet.h>
#include <string.h>

#include <new>
#include <vector>

#include "abi/ibverbs/softverbs_private.h"
#include "abi/mlx5/devx_internal.h"
#include "verbs/flow_rule.h"

// Opaque in mlx5dv.h; ours: the outer headers' mask, and the count of the
// flows made with it (softverbs_flow_hold), which keeps it from going.
struct mlx5dv_flow_matcher {
  ibv_context* context;
  uint16_t priority;
  uint8_t outer_mask[64];
  uint32_t flows;
};

namespace softverbs::mlx5 {
namespace {

// fte_match_param: the outer headers first (fte_match_set_lyr_2_4, 64
// bytes), then misc parameters, inner headers and the rest; at most 0x180
// bytes here (rdma-core's MAX_MATCH_PARAM_SIZE).
constexpr size_t kOuterBytes = 64;
constexpr size_t kMaxMatchParamBytes = 0x180;
constexpr uint8_t kCriteriaOuter = 1u << 0;
constexpr uint32_t kMlx5FtTypeNicRx = 0;  // MLX5DV_FLOW_TABLE_TYPE_NIC_RX

// What an outer-header field becomes in the verbs specs.
enum class Target : uint8_t {
  kSmac,
  kEthertype,
  kDmac,
  kVlan,       // first_prio, first_cfi, first_vid
  kIpProto,    // ip_protocol
  kIpVersion,  // ip_version (4 bits of byte 18): picks the IPv4 or IPv6 spec
  kTcpSport,
  kTcpDport,
  kTtl,  // ip_ttl_hoplimit
  kUdpSport,
  kUdpDport,
  kSrcIp,  // src_ipv4_src_ipv6 (IPv4 in the last 4 bytes)
  kDstIp,
};

// fte_match_set_lyr_2_4 (PRM; rdma-core's mlx5_ifc.h), the fields softverbs
// matches: byte offset, bytes, and the bits of a partial byte (0: all).
struct OuterField {
  const char* name;
  uint8_t offset;
  uint8_t bytes;
  uint8_t bits;
  Target target;
};
constexpr OuterField kOuterFields[] = {
    {"smac", 0x00, 6, 0, Target::kSmac},
    {"ethertype", 0x06, 2, 0, Target::kEthertype},
    {"dmac", 0x08, 6, 0, Target::kDmac},
    {"first_prio/cfi/vid", 0x0e, 2, 0, Target::kVlan},
    {"ip_protocol", 0x10, 1, 0, Target::kIpProto},
    {"ip_version", 0x12, 1, 0x1e, Target::kIpVersion},
    {"tcp_sport", 0x14, 2, 0, Target::kTcpSport},
    {"tcp_dport", 0x16, 2, 0, Target::kTcpDport},
    {"ip_ttl_hoplimit", 0x1b, 1, 0, Target::kTtl},
    {"udp_sport", 0x1c, 2, 0, Target::kUdpSport},
    {"udp_dport", 0x1e, 2, 0, Target::kUdpDport},
    {"src_ipv4_src_ipv6", 0x20, 16, 0, Target::kSrcIp},
    {"dst_ipv4_dst_ipv6", 0x30, 16, 0, Target::kDstIp},
};

// Whether the mask sets a bit no field of kOuterFields covers (DSCP, ECN,
// the VLAN and fragment flags, TCP flags, IHL, the checksum bits).
bool MasksUnmatchedBits(const uint8_t mask[kOuterBytes]) {
  uint8_t covered[kOuterBytes] = {};
  for (const OuterField& f : kOuterFields) {
    for (int i = 0; i < f.bytes; ++i) covered[f.offset + i] |= f.bits ? f.bits : 0xff;
  }
  for (size_t i = 0; i < kOuterBytes; ++i) {
    if (mask[i] & ~covered[i]) return true;
  }
  return false;
}

bool Any(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i]) return true;
  }
  return false;
}

// The verbs rule of a mask and a value over the outer headers: an attribute
// and its specs, laid out as ibv_create_flow reads them.
class VerbsRule {
 public:
  // 0, or the errno (with why) when the mask asks for what specs cannot say.
  int Build(const uint8_t mask[kOuterBytes], const uint8_t value[kOuterBytes], uint16_t priority,
            const char** why) {
    auto field = [&](Target t) -> const OuterField& {
      for (const OuterField& f : kOuterFields) {
        if (f.target == t) return f;
      }
      return kOuterFields[0];
    };
    auto masked = [&](Target t) { return Any(mask + field(t).offset, field(t).bytes); };
    // Copies the field's mask and value (network order, as both carry it).
    auto take = [&](Target t, void* m, void* v, size_t n, size_t skip = 0) {
      const OuterField& f = field(t);
      memcpy(m, mask + f.offset + skip, n);
      memcpy(v, value + f.offset + skip, n);
    };
    attr_.type = IBV_FLOW_ATTR_NORMAL;
    attr_.priority = priority;
    attr_.port = 1;
    if (masked(Target::kSmac) || masked(Target::kDmac) || masked(Target::kEthertype) ||
        masked(Target::kVlan)) {
      ibv_flow_spec_eth eth{};
      eth.type = IBV_FLOW_SPEC_ETH;
      eth.size = sizeof(eth);
      take(Target::kSmac, eth.mask.src_mac, eth.val.src_mac, 6);
      take(Target::kDmac, eth.mask.dst_mac, eth.val.dst_mac, 6);
      take(Target::kEthertype, &eth.mask.ether_type, &eth.val.ether_type, 2);
      take(Target::kVlan, &eth.mask.vlan_tag, &eth.val.vlan_tag, 2);
      Add(eth);
    }
    // The IP version: ip_version, else the ether type.
    int version = 0;
    if (mask[0x12] & 0x1e) {
      if ((mask[0x12] & 0x1e) != 0x1e) {
        *why = "a partial mask of ip_version";
        return EOPNOTSUPP;
      }
      version = (value[0x12] >> 1) & 0xf;
    } else if (mask[6] == 0xff && mask[7] == 0xff) {
      const uint16_t type = static_cast<uint16_t>(value[6] << 8 | value[7]);
      version = type == 0x0800 ? 4 : type == 0x86dd ? 6 : 0;
    }
    const bool l3 = masked(Target::kSrcIp) || masked(Target::kDstIp) || masked(Target::kIpProto) ||
                    masked(Target::kTtl);
    if ((l3 || mask[0x12] & 0x1e) && version != 4 && version != 6) {
      *why = "IP fields without ip_version (or the ether type) 4 or 6";
      return EOPNOTSUPP;
    }
    if (version == 4) {
      ibv_flow_spec_ipv4_ext ip{};
      ip.type = IBV_FLOW_SPEC_IPV4_EXT;
      ip.size = sizeof(ip);
      if (Any(mask + 0x20, 12) || Any(mask + 0x30, 12)) {
        *why = "IPv6 address bits with ip_version 4";
        return EINVAL;
      }
      take(Target::kSrcIp, &ip.mask.src_ip, &ip.val.src_ip, 4, 12);
      take(Target::kDstIp, &ip.mask.dst_ip, &ip.val.dst_ip, 4, 12);
      take(Target::kIpProto, &ip.mask.proto, &ip.val.proto, 1);
      take(Target::kTtl, &ip.mask.ttl, &ip.val.ttl, 1);
      Add(ip);
    } else if (version == 6) {
      ibv_flow_spec_ipv6 ip{};
      ip.type = IBV_FLOW_SPEC_IPV6;
      ip.size = sizeof(ip);
      take(Target::kSrcIp, ip.mask.src_ip, ip.val.src_ip, 16);
      take(Target::kDstIp, ip.mask.dst_ip, ip.val.dst_ip, 16);
      take(Target::kIpProto, &ip.mask.next_hdr, &ip.val.next_hdr, 1);
      take(Target::kTtl, &ip.mask.hop_limit, &ip.val.hop_limit, 1);
      Add(ip);
    }
    const bool tcp = masked(Target::kTcpSport) || masked(Target::kTcpDport);
    const bool udp = masked(Target::kUdpSport) || masked(Target::kUdpDport);
    if (tcp && udp) {
      *why = "both TCP and UDP ports";
      return EINVAL;
    }
    if ((tcp || udp) && version == 0) {
      *why = "ports without ip_version (or the ether type) 4 or 6";
      return EOPNOTSUPP;
    }
    if (tcp || udp) {
      ibv_flow_spec_tcp_udp ports{};
      ports.type = tcp ? IBV_FLOW_SPEC_TCP : IBV_FLOW_SPEC_UDP;
      ports.size = sizeof(ports);
      take(tcp ? Target::kTcpSport : Target::kUdpSport, &ports.mask.src_port, &ports.val.src_port,
           2);
      take(tcp ? Target::kTcpDport : Target::kUdpDport, &ports.mask.dst_port, &ports.val.dst_port,
           2);
      Add(ports);
    }
    bytes_.insert(bytes_.begin(), reinterpret_cast<const uint8_t*>(&attr_),
                  reinterpret_cast<const uint8_t*>(&attr_) + sizeof(attr_));
    return 0;
  }
  ibv_flow_attr* attr() { return reinterpret_cast<ibv_flow_attr*>(bytes_.data()); }

 private:
  template <typename Spec>
  void Add(const Spec& spec) {
    bytes_.insert(bytes_.end(), reinterpret_cast<const uint8_t*>(&spec),
                  reinterpret_cast<const uint8_t*>(&spec) + sizeof(spec));
    attr_.num_of_specs++;
    attr_.size = static_cast<uint16_t>(attr_.size + sizeof(spec));
  }
  ibv_flow_attr attr_{};
  std::vector<uint8_t> bytes_;  // the specs, then the attribute before them
};

// Copies a match parameter's first 64 bytes (the outer headers; zeros past
// a shorter one).
void OuterHeaders(const mlx5dv_flow_match_parameters* p, uint8_t out[kOuterBytes]) {
  memset(out, 0, kOuterBytes);
  memcpy(out, p->match_buf, p->match_sz < kOuterBytes ? p->match_sz : kOuterBytes);
}

}  // namespace
}  // namespace softverbs::mlx5

using softverbs::mlx5::Reject;
using softverbs::mlx5::RejectNull;
namespace sm = softverbs::mlx5;

SV_MLX5_EXPORT mlx5dv_flow_matcher* mlx5dv_create_flow_matcher(ibv_context* context,
                                                               mlx5dv_flow_matcher_attr* attr) {
  if (!context || !attr) {
    return RejectNull(EINVAL, "mlx5dv_create_flow_matcher: %s is NULL",
                      !context ? "context" : "attr");
  }
  if (!softverbs_is_device(context->device)) {
    return RejectNull(EOPNOTSUPP, "mlx5dv_create_flow_matcher: the context is not softverbs'");
  }
  if (attr->comp_mask & ~static_cast<uint64_t>(MLX5DV_FLOW_MATCHER_MASK_FT_TYPE)) {
    return RejectNull(EINVAL, "mlx5dv_create_flow_matcher: comp_mask has unknown bits");
  }
  if ((attr->comp_mask & MLX5DV_FLOW_MATCHER_MASK_FT_TYPE) &&
      static_cast<uint32_t>(attr->ft_type) != sm::kMlx5FtTypeNicRx) {
    return RejectNull(EOPNOTSUPP,
                      "mlx5dv_create_flow_matcher: ft_type %u: softverbs steers received "
                      "frames only (NIC_RX)",
                      static_cast<uint32_t>(attr->ft_type));
  }
  if (attr->type != IBV_FLOW_ATTR_NORMAL) {
    return RejectNull(EOPNOTSUPP, "mlx5dv_create_flow_matcher: type %u is not NORMAL",
                      static_cast<uint32_t>(attr->type));
  }
  if (attr->flags) {
    return RejectNull(
        attr->flags & ~static_cast<uint32_t>(IBV_FLOW_ATTR_FLAGS_EGRESS) ? EINVAL : EOPNOTSUPP,
        "mlx5dv_create_flow_matcher: flags 0x%x (egress rules are not supported)", attr->flags);
  }
  if (attr->priority > softverbs::verbs::kMaxFlowPriority) {
    return RejectNull(EINVAL, "mlx5dv_create_flow_matcher: priority %u is above %u", attr->priority,
                      softverbs::verbs::kMaxFlowPriority);
  }
  const mlx5dv_flow_match_parameters* mask = attr->match_mask;
  if (!mask || mask->match_sz > sm::kMaxMatchParamBytes) {
    return RejectNull(EINVAL, "mlx5dv_create_flow_matcher: match_mask is NULL or above %zu bytes",
                      sm::kMaxMatchParamBytes);
  }
  const auto* bytes = reinterpret_cast<const uint8_t*>(mask->match_buf);
  if (attr->match_criteria_enable & ~sm::kCriteriaOuter ||
      (mask->match_sz > sm::kOuterBytes &&
       sm::Any(bytes + sm::kOuterBytes, mask->match_sz - sm::kOuterBytes))) {
    return RejectNull(EOPNOTSUPP,
                      "mlx5dv_create_flow_matcher: criteria 0x%x: softverbs matches the outer "
                      "headers only (no misc parameters, inner headers or metadata)",
                      attr->match_criteria_enable);
  }
  auto* matcher = new (std::nothrow) mlx5dv_flow_matcher{};
  if (!matcher) return RejectNull(ENOMEM, "mlx5dv_create_flow_matcher: out of memory");
  sm::OuterHeaders(mask, matcher->outer_mask);
  if (!(attr->match_criteria_enable & sm::kCriteriaOuter) && sm::Any(matcher->outer_mask, 64)) {
    delete matcher;
    return RejectNull(EINVAL,
                      "mlx5dv_create_flow_matcher: the mask sets outer header bits but "
                      "match_criteria_enable does not name the outer headers");
  }
  if (sm::MasksUnmatchedBits(matcher->outer_mask)) {
    delete matcher;
    return RejectNull(EOPNOTSUPP,
                      "mlx5dv_create_flow_matcher: the mask sets outer header bits softverbs "
                      "does not match (DSCP, ECN, VLAN and fragment flags, TCP flags, IHL, "
                      "checksum bits)");
  }
  matcher->context = context;
  matcher->priority = attr->priority;
  return matcher;
}

SV_MLX5_EXPORT int mlx5dv_destroy_flow_matcher(mlx5dv_flow_matcher* matcher) {
  if (!matcher) return Reject(EINVAL, "mlx5dv_destroy_flow_matcher: matcher is NULL");
  const uint32_t flows = __atomic_load_n(&matcher->flows, __ATOMIC_ACQUIRE);
  if (flows) {
    return Reject(EBUSY, "mlx5dv_destroy_flow_matcher: %u flow(s) made with it still live", flows);
  }
  delete matcher;
  return 0;
}

SV_MLX5_EXPORT ibv_flow* mlx5dv_create_flow(mlx5dv_flow_matcher* matcher,
                                            mlx5dv_flow_match_parameters* match_value,
                                            size_t num_actions, mlx5dv_flow_action_attr actions[]) {
  if (!matcher || !match_value || (num_actions && !actions)) {
    return RejectNull(EINVAL, "mlx5dv_create_flow: %s is NULL",
                      !matcher       ? "matcher"
                      : !match_value ? "match_value"
                                     : "actions");
  }
  if (match_value->match_sz > sm::kMaxMatchParamBytes) {
    return RejectNull(EINVAL, "mlx5dv_create_flow: match_value is above %zu bytes",
                      sm::kMaxMatchParamBytes);
  }
  ibv_qp* qp = nullptr;
  for (size_t i = 0; i < num_actions; ++i) {
    if (actions[i].type != MLX5DV_FLOW_ACTION_DEST_IBV_QP) {
      return RejectNull(EOPNOTSUPP,
                        "mlx5dv_create_flow: action %zu of type %u: softverbs forwards to a QP "
                        "only (no drop, tag, counters, DEVX destinations or flow actions)",
                        i, static_cast<uint32_t>(actions[i].type));
    }
    if (qp) return RejectNull(EINVAL, "mlx5dv_create_flow: two destination QPs");
    qp = actions[i].qp;
  }
  if (!qp) return RejectNull(EINVAL, "mlx5dv_create_flow: no MLX5DV_FLOW_ACTION_DEST_IBV_QP");
  if (qp->context != matcher->context) {
    return RejectNull(EINVAL, "mlx5dv_create_flow: the QP is of another context");
  }
  uint8_t value[sm::kOuterBytes];
  sm::OuterHeaders(match_value, value);
  sm::VerbsRule rule;
  const char* why = "";
  if (int err = rule.Build(matcher->outer_mask, value, matcher->priority, &why)) {
    return RejectNull(err, "mlx5dv_create_flow: the matcher's mask has %s", why);
  }
  ibv_flow* flow = ibv_create_flow(qp, rule.attr());
  if (!flow) return nullptr;  // ibv_create_flow explained it and set errno
  softverbs_flow_hold(flow, &matcher->flows);
  return flow;
}
