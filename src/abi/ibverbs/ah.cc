// Address handles, including those built from a received work completion.
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "abi/ibverbs/exports.h"
#include "abi/ibverbs/provider.h"
#include "abi/ibverbs/reject.h"
#include "common/gid_table.h"
#include "common/log.h"

using namespace softverbs::provider;
using softverbs::Log;
namespace protocol = softverbs::protocol;

namespace {

// The address vector libmlx5's mlx5_create_ah makes for a RoCE port: the
// static rate and SL, the GRH's traffic class, hop limit, source GID index
// and flow label (no "GRH" bit: on RoCE every packet has one), the
// destination GID. The destination MAC and the RoCE v2 source port (rlid)
// are left zero: softverbs' queues do not read them.
void FillMlx5Av(const ibv_ah_attr& attr, mlx5_wqe_av* av) {
  *av = {};
  av->stat_rate_sl = static_cast<uint8_t>((attr.static_rate << 4) | ((attr.sl & 0x7) << 1));
  if (!attr.is_global) return;
  av->tclass = attr.grh.traffic_class;
  av->hop_limit = attr.grh.hop_limit;
  av->grh_gid_fl = htobe32(uint32_t{attr.grh.sgid_index} << 20 | (attr.grh.flow_label & 0xfffff));
  memcpy(av->rgid, attr.grh.dgid.raw, sizeof(av->rgid));
}

}  // namespace

SV_EXPORT ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  if (!pd || !attr) return RejectNull(EINVAL, "ibv_create_ah: %s is NULL", !pd ? "pd" : "attr");
  protocol::CreateAhRequest req{};
  req.pd = FromPublic<Pd>(pd)->handle;
  req.attr = *attr;
  protocol::CreateAhReply rep{};
  if (int err = Context::From(pd->context)->channel.Call(protocol::Op::kCreateAh, req, &rep)) {
    return FailNull<ibv_ah>(err);
  }
  auto* ah = new Ah{};
  ah->handle = rep.handle;
  ah->attr = *attr;
  const Context* ctx = Context::From(pd->context);
  ah->leaves_host = PathLeavesHost(ctx->gids, *attr) ||
                    MulticastGoesOnLink(ctx->gids, *attr, ctx->multicast_gids);
  FillMlx5Av(*attr, &ah->mlx5_av);
  ah->ibv.context = pd->context;
  ah->ibv.pd = pd;
  ah->ibv.handle = rep.handle;
  return &ah->ibv;
}

SV_EXPORT int ibv_destroy_ah(ibv_ah* ah) {
  if (!ah) return Reject(EINVAL, "ibv_destroy_ah: ah is NULL");
  Ah* a = FromPublic<Ah>(ah);
  protocol::HandleRequest req{a->handle, 0};
  if (int err = Context::From(ah->context)->channel.Call(protocol::Op::kDestroyAh, req)) {
    return err;
  }
  delete a;
  return 0;
}

namespace {

// The 40 GRH bytes of a RoCE datagram hold its real network header (union
// rdma_network_hdr): an IPv6 header (or an IB GRH, RoCE v1), or 20 bytes of
// padding and an IPv4 header. Which one, as libibverbs decides it
// (get_grh_header_version): not version 6 in the first word is IPv4 if the
// IPv4 version is 4 (else unknown); version 6 is still IPv4 when the IPv4
// header has IHL 5 and a valid checksum.
enum class GrhHeader { kIpv4, kIpv6, kUnknown };

GrhHeader GrhHeaderVersion(const ibv_grh& grh) {
  const auto* ip4 = reinterpret_cast<const uint8_t*>(&grh) + 20;
  if ((be32toh(grh.version_tclass_flow) >> 28) != 6) {
    return (ip4[0] >> 4) == 4 ? GrhHeader::kIpv4 : GrhHeader::kUnknown;
  }
  if ((ip4[0] & 0xf) != 5) return GrhHeader::kIpv6;
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += (ip4[i] << 8) | ip4[i + 1];
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return sum == 0xffff ? GrhHeader::kIpv4 : GrhHeader::kIpv6;
}

// The index of `gid` of exactly `type` in port 1's table, as
// ibv_find_gid_index; -1 with errno EINVAL (the kernel's answer to the
// query past the table's end) when it is not there.
int FindGidIndex(const Context& ctx, uint8_t port_num, const uint8_t* gid,
                 softverbs::GidType type) {
  if (port_num == 1) {
    for (int i = 0; i < ctx.gids.count; ++i) {
      if (ctx.gids.gids[i].type == type && memcmp(ctx.gids.gids[i].raw, gid, 16) == 0) return i;
    }
  }
  return RejectMinusOne(EINVAL,
                        "ibv_init_ah_from_wc: the destination GID (of the GRH's type) is not in "
                        "port %u's GID table",
                        port_num);
}

void V4Mapped(const uint8_t* ipv4, uint8_t* gid) {
  memset(gid, 0, 16);
  gid[10] = gid[11] = 0xff;
  memcpy(gid + 12, ipv4, 4);
}

}  // namespace

// As libibverbs v44: the attributes are zeroed and the WC's fields copied
// whatever follows; without IBV_WC_GRH that is all (0: on RoCE,
// ibv_create_ah then refuses the AH without GRH). With it, the reply goes
// to the header's source from the local GID it was sent to, found with the
// GRH's type (RoCE v2 for IPv4 and for IPv6 with next header UDP, v1 for
// next header 0x1b); hop limit and traffic class are the header's. On one
// host softverbs writes the IPv6 layout (next header UDP, hop limit 64),
// from the network the real IP header, as rxe does.
SV_EXPORT int ibv_init_ah_from_wc(ibv_context* context, uint8_t port_num, ibv_wc* wc, ibv_grh* grh,
                                  ibv_ah_attr* ah_attr) {
  if (!context || !wc || !ah_attr) {
    return RejectMinusOne(EINVAL, "ibv_init_ah_from_wc: %s is NULL",
                          !context ? "context"
                          : !wc    ? "wc"
                                   : "ah_attr");
  }
  memset(ah_attr, 0, sizeof(*ah_attr));
  if (grh) ah_attr->grh.flow_label = be32toh(grh->version_tclass_flow) & 0xfffff;
  ah_attr->dlid = wc->slid;
  ah_attr->sl = wc->sl;
  ah_attr->src_path_bits = wc->dlid_path_bits;
  ah_attr->port_num = port_num;
  if (!(wc->wc_flags & IBV_WC_GRH)) return 0;
  if (!grh) return RejectMinusOne(EINVAL, "ibv_init_ah_from_wc: IBV_WC_GRH, but grh is NULL");
  ah_attr->is_global = 1;
  const Context& ctx = *Context::From(context);
  switch (GrhHeaderVersion(*grh)) {
    case GrhHeader::kIpv4: {
      const auto* ip4 = reinterpret_cast<const uint8_t*>(grh) + 20;
      if ((ip4[16] & 0xf0) == 0xe0) {
        return RejectMinusOne(EINVAL, "ibv_init_ah_from_wc: the IPv4 destination is multicast");
      }
      uint8_t local[16];
      V4Mapped(ip4 + 16, local);
      const int index = FindGidIndex(ctx, port_num, local, softverbs::GidType::kRoceV2);
      if (index < 0) return -1;
      V4Mapped(ip4 + 12, ah_attr->grh.dgid.raw);
      ah_attr->grh.sgid_index = static_cast<uint8_t>(index);
      ah_attr->grh.hop_limit = ip4[8];      // TTL
      ah_attr->grh.traffic_class = ip4[1];  // TOS
      return 0;
    }
    case GrhHeader::kIpv6: {
      if (grh->dgid.raw[0] == 0xff) {
        return RejectMinusOne(EINVAL, "ibv_init_ah_from_wc: the GRH's destination is multicast");
      }
      ah_attr->grh.dgid = grh->sgid;
      softverbs::GidType type;
      if (grh->next_hdr == IPPROTO_UDP) {
        type = softverbs::GidType::kRoceV2;
      } else if (grh->next_hdr == 0x1b) {  // an IB GRH: RoCE v1
        type = softverbs::GidType::kRoceV1;
      } else {
        return RejectMinusOne(EPROTONOSUPPORT,
                              "ibv_init_ah_from_wc: the GRH's next header 0x%x is neither UDP "
                              "(RoCE v2) nor 0x1b (RoCE v1)",
                              grh->next_hdr);
      }
      const int index = FindGidIndex(ctx, port_num, grh->dgid.raw, type);
      if (index < 0) return -1;
      ah_attr->grh.sgid_index = static_cast<uint8_t>(index);
      ah_attr->grh.hop_limit = grh->hop_limit;
      ah_attr->grh.traffic_class = (be32toh(grh->version_tclass_flow) >> 20) & 0xff;
      return 0;
    }
    case GrhHeader::kUnknown:
      break;
  }
  return RejectMinusOne(EPROTONOSUPPORT,
                        "ibv_init_ah_from_wc: the GRH holds neither an IPv6 nor an IPv4 header");
}

SV_EXPORT ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port_num) {
  if (!pd) return RejectNull(EINVAL, "ibv_create_ah_from_wc: pd is NULL");
  ibv_ah_attr attr;
  if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr) != 0) return nullptr;
  return ibv_create_ah(pd, &attr);
}
