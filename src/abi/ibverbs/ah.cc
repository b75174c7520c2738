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
  ah->leaves_host = PathLeavesHost(Context::From(pd->context)->gids, *attr);
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

// On RoCE a received datagram always carries a GRH (softverbs writes it in the
// IPv6 GRH layout at the start of the receive buffer); the reply goes back to
// its source GID from the local GID it was sent to.
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
  int sgid_index = -1;
  for (int i = 0; i < ctx->gids.count; ++i) {
    if (memcmp(ctx->gids.gids[i].raw, grh->dgid.raw, 16) == 0 &&
        ctx->gids.gids[i].type == softverbs::GidType::kRoceV2) {
      sgid_index = i;
      break;
    }
  }
  if (sgid_index < 0) {
    for (int i = 0; i < ctx->gids.count; ++i) {
      if (memcmp(ctx->gids.gids[i].raw, grh->dgid.raw, 16) == 0) sgid_index = i;
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
  uint32_t flow = be32toh(grh->version_tclass_flow);
  ah_attr->grh.dgid = grh->sgid;
  ah_attr->grh.flow_label = flow & 0xfffff;
  ah_attr->grh.sgid_index = static_cast<uint8_t>(sgid_index);
  ah_attr->grh.hop_limit = 0xff;
  ah_attr->grh.traffic_class = (flow >> 20) & 0xff;
  return 0;
}

SV_EXPORT ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port_num) {
  if (!pd) return RejectNull(EINVAL, "ibv_create_ah_from_wc: pd is NULL");
  ibv_ah_attr attr;
  if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr) != 0) return nullptr;
  return ibv_create_ah(pd, &attr);
}
