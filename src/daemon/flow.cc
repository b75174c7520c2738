// Flow steering rules of raw packet QPs (ibv_create_flow, ibv_destroy_flow)
// (docs/raw_packet.md). The library checked the rule's form
// (verbs::ParseFlowAttr); the device checks what only it knows - the QP, its
// type, the room left - keeps the rules, and hands them to the libraries,
// which steer the frames their raw packet QPs send.
#include <errno.h>

#include <algorithm>

#include "common/device_limits.h"
#include "daemon/device.h"
#include "verbs/qp_names.h"

namespace softverbs::daemon {

Verdict Device::CreateFlow(ClientId c, const protocol::CreateFlowRequest& req,
                           protocol::CreateFlowReply* out) {
  // Check.
  QpHandle* qh = FindOwned(qp_handles_, c, req.qp);
  if (!qh) return Verdict::Fail(EINVAL, "create_flow: no such QP in this context");
  Qp& qp = qps_.at(qh->qpn);
  if (qp.type == IBV_QPT_UD) {
    return Verdict::Fail(EOPNOTSUPP, "create_flow: QP 0x" + ToHex(qp.qpn) +
                                         " is UD: softverbs steers flows to raw packet QPs only");
  }
  if (qp.type != IBV_QPT_RAW_PACKET) {
    return Verdict::Fail(EINVAL, "create_flow: QP 0x" + ToHex(qp.qpn) + " is " +
                                     std::string(verbs::QpTypeName(qp.type)) +
                                     ": flows steer to raw packet (and UD) QPs only");
  }
  if (flows_.size() >= static_cast<size_t>(limits::kMaxFlows)) {
    return Verdict::Fail(ENOMEM, "create_flow: the device's " + std::to_string(limits::kMaxFlows) +
                                     " flow rules are in use");
  }
  // Apply.
  const Handle h = NextHandle();
  flows_[h] = {h, c, qp.qpn, req.rule};
  qp.flows++;
  FlowRulesChanged();
  *out = {h, 0};
  return Verdict::Ok();
}

Verdict Device::DestroyFlow(ClientId c, Handle h) {
  Flow* flow = FindOwned(flows_, c, h);
  if (!flow) return Verdict::Fail(EINVAL, "destroy_flow: no such flow in this context");
  qps_.at(flow->qpn).flows--;
  flows_.erase(h);
  FlowRulesChanged();
  return Verdict::Ok();
}

Verdict Device::FlowRules(ClientId c, const protocol::FlowRulesRequest& req,
                          protocol::FlowRulesReply* out, std::vector<verbs::SteeredFlow>* rules) {
  (void)c;
  rules->clear();
  uint32_t index = 0;
  for (const auto& [h, flow] : flows_) {
    if (index++ < req.first) continue;
    if (rules->size() == protocol::kFlowRulesPerReply) break;
    rules->push_back({flow.rule, flow.qpn});
  }
  *out = {table_.FlowEpoch().load(std::memory_order_relaxed), static_cast<uint32_t>(flows_.size()),
          static_cast<uint32_t>(rules->size()), 0};
  return Verdict::Ok();
}

void Device::FlowRulesChanged() {
  table_.FlowEpoch().fetch_add(1, std::memory_order_release);
}

}  // namespace softverbs::daemon
