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

// The 40 GRH bytes of a RoCE v2 datagram hold its real network header
// (union rdma_network_hdr): an IPv6 header, or 20 bytes of padding and an
// IPv4 header (version 4, IHL 5, a valid checksum). Fills the source and
// destination GIDs (IPv4-mapped for IPv4), flow label and traffic class.
struct NetworkHeader {
  uint8_t sgid[16];
  uint8_t dgid[16];
  uint32_t flow_label = 0;
  uint8_t traffic_class = 0;
};

bool Ipv4HeaderValid(const uint8_t* h) {
  if (h[0] != 0x45) return false;  // version 4, IHL 5
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += (h[i] << 8) | h[i + 1];
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return sum == 0xffff;
}

NetworkHeader ReadNetworkHeader(const ibv_grh& grh) {
  NetworkHeader n;
  const auto* raw = reinterpret_cast<const uint8_t*>(&grh);
  const uint32_t flow = be32toh(grh.version_tclass_flow);
  const bool ipv6 = (flow >> 28) == 6;
  if (!ipv6 || Ipv4HeaderValid(raw + 20)) {
    const uint8_t* ip = raw + 20;
    memset(n.sgid, 0, 16);
    memset(n.dgid, 0, 16);
    n.sgid[10] = n.sgid[11] = n.dgid[10] = n.dgid[11] = 0xff;
    memcpy(n.sgid + 12, ip + 12, 4);
    memcpy(n.dgid + 12, ip + 16, 4);
    n.traffic_class = ip[1];
    return n;
  }
  memcpy(n.sgid, grh.sgid.raw, 16);
  memcpy(n.dgid, grh.dgid.raw, 16);
  n.flow_label = flow & 0xfffff;
  n.traffic_class = (flow >> 20) & 0xff;
  return n;
}

}  // namespace

// On RoCE a received datagram always carries a GRH: on one host softverbs
// writes it in the IPv6 layout, from the network the real IP header as rxe
// does (ReadNetworkHeader); the reply goes back to its source GID from the
// local GID it was sent to.
SV_EXPORT int ibv_init_ah_from_wc(ibv_context* context, uint8_t port_num, ibv_wc* wc, ibv_grh* grh,
                                  ibv_ah_attr* ah_attr) {
  if (!context || !wc || !ah_attr) {
    return RejectMinusOne(EINVAL, "ibv_init_ah_from_wc: %s is NULL",
                          !context ? "context"
                          : !wc    ? "wc"
                                   : "ah_attr");
  }
  if (port_num != 1) {
    return RejectMinusOne(EINVAL, "ibv_init_ah_from_wc: port %u does not exist (port 1 only)",
                          port_num);
  }
  if (!(wc->wc_flags & IBV_WC_GRH) || !grh) {
    return RejectMinusOne(
        EINVAL, "ibv_init_ah_from_wc: a RoCE completion without IBV_WC_GRH cannot be answered");
  }
  const Context* ctx = Context::From(context);
  const NetworkHeader net = ReadNetworkHeader(*grh);
  int sgid_index = -1;
  for (int i = 0; i < ctx->gids.count; ++i) {
    if (memcmp(ctx->gids.gids[i].raw, net.dgid, 16) == 0 &&
        ctx->gids.gids[i].type == softverbs::GidType::kRoceV2) {
      sgid_index = i;
      break;
    }
  }
  if (sgid_index < 0) {
    for (int i = 0; i < ctx->gids.count; ++i) {
      if (memcmp(ctx->gids.gids[i].raw, net.dgid, 16) == 0) sgid_index = i;
    }
  }
  if (sgid_index < 0) {
    return RejectMinusOne(ENOENT,
                          "ibv_init_ah_from_wc: the GRH's destination GID is not in the GID table");
  }
  memset(ah_attr, 0, sizeof(*ah_attr));
  ah_attr->dlid = wc->slid;
  ah_attr->sl = wc->sl;
  ah_attr->src_path_bits = wc->dlid_path_bits;
  ah_attr->port_num = port_num;
  ah_attr->is_global = 1;
  memcpy(ah_attr->grh.dgid.raw, net.sgid, 16);
  ah_attr->grh.flow_label = net.flow_label;
  ah_attr->grh.sgid_index = static_cast<uint8_t>(sgid_index);
  ah_attr->grh.hop_limit = 0xff;
  ah_attr->grh.traffic_class = net.traffic_class;
  return 0;
}

SV_EXPORT ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port_num) {
  if (!pd) return RejectNull(EINVAL, "ibv_create_ah_from_wc: pd is NULL");
  ibv_ah_attr attr;
  if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr) != 0) return nullptr;
  return ibv_create_ah(pd, &attr);
}
