// Flow steering of raw packet QPs: ibv_create_flow and ibv_destroy_flow
// (verbs_context ops; rdma-core's inline wrappers call them). The rule's
// form is checked here (verbs::ParseFlowAttr), the QP and the device's room
// by the daemon, which steers the frames (docs/raw_packet.md).
#include <errno.h>

#include <new>

#include "abi/ibverbs/exports.h"
#include "abi/ibverbs/net_raw.h"
#include "abi/ibverbs/ops.h"
#include "abi/ibverbs/provider.h"
#include "abi/ibverbs/reject.h"
#include "abi/ibverbs/softverbs_private.h"
#include "verbs/flow_rule.h"

namespace softverbs::provider {

namespace {

// The library's flow: the public struct, and the count it holds while it
// lives (an mlx5 matcher's, softverbs_flow_hold; nullptr for ibv_create_flow's).
struct Flow {
  ibv_flow ibv;  // first
  uint32_t* holder;
};

}  // namespace

ibv_flow* CreateFlowOp(ibv_qp* qp, ibv_flow_attr* attr) {
  if (!qp || !attr) return RejectNull(EINVAL, "ibv_create_flow: %s is NULL", !qp ? "qp" : "attr");
  if (!HasNetRawCapability()) {
    return RejectNull(EPERM,
                      "ibv_create_flow: the process lacks CAP_NET_RAW, which the kernel asks for "
                      "flow steering");
  }
  protocol::CreateFlowRequest req{};
  const verbs::FlowVerdict verdict = verbs::ParseFlowAttr(*attr, &req.rule);
  if (!verdict.ok()) return RejectNull(verdict.err, "ibv_create_flow: %s", verdict.why.c_str());
  auto* flow = new (std::nothrow) Flow{};
  if (!flow) return RejectNull(ENOMEM, "ibv_create_flow: out of memory");
  req.qp = FromPublic<Qp>(reinterpret_cast<ibv_qp_ex*>(qp))->handle;
  protocol::CreateFlowReply reply{};
  if (int err = Context::From(qp->context)->channel.Call(protocol::Op::kCreateFlow, req, &reply)) {
    delete flow;
    errno = err;
    return nullptr;
  }
  flow->ibv.context = qp->context;
  flow->ibv.handle = reply.handle;
  return &flow->ibv;
}

int DestroyFlowOp(ibv_flow* ibflow) {
  if (!ibflow) return Reject(EINVAL, "ibv_destroy_flow: flow is NULL");
  protocol::HandleRequest req{ibflow->handle};
  if (int err = Context::From(ibflow->context)->channel.Call(protocol::Op::kDestroyFlow, req)) {
    return err;
  }
  Flow* flow = FromPublic<Flow>(ibflow);
  if (flow->holder) __atomic_fetch_sub(flow->holder, 1, __ATOMIC_RELEASE);
  delete flow;
  return 0;
}

}  // namespace softverbs::provider

using namespace softverbs::provider;

SV_EXPORT void softverbs_flow_hold(ibv_flow* ibflow, uint32_t* holder) {
  Flow* flow = FromPublic<Flow>(ibflow);
  __atomic_fetch_add(holder, 1, __ATOMIC_RELAXED);
  flow->holder = holder;
}
