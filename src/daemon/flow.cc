// Flow steering rules of raw packet QPs (ibv_create_flow, ibv_destroy_flow)
// (docs/raw_packet.md). The library checked the rule's form
// (verbs::ParseFlowAttr); the device checks what only it knows - the QP, its
// type, the room left - keeps the rules, and hands them to the libraries,
// which steer the frames their raw packet QPs send.
#include <errno.h>
#include <string.h>

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
  // The rules: ibv_create_flow's, then a raw packet QP's multicast groups
  // (ibv_attach_mcast), each a rule on its MAC at the first priority; an RSS
  // QP's spread over its work queues either way.
  std::vector<verbs::SteeredFlow> all;
  all.reserve(flows_.size());
  for (const auto& [h, flow] : flows_) {
    all.push_back({flow.rule, flow.qpn, qps_.at(flow.qpn).ind_table != 0 ? 1u : 0u});
  }
  for (const auto& [qpn, qp] : qps_) {
    if (qp.type != IBV_QPT_RAW_PACKET) continue;
    for (const std::vector<uint8_t>& gid : qp.mcast_groups) {
      verbs::FlowRule rule{};
      rule.type = IBV_FLOW_ATTR_NORMAL;
      rule.layers = verbs::kFlowLayerEth;
      memcpy(rule.eth_val.dst_mac, gid.data() + 10, 6);
      memset(rule.eth_mask.dst_mac, 0xff, 6);
      all.push_back({rule, qpn, qp.ind_table != 0 ? 1u : 0u});
    }
  }
  rules->clear();
  for (size_t i = req.first; i < all.size() && rules->size() < protocol::kFlowRulesPerReply; ++i) {
    rules->push_back(all[i]);
  }
  *out = {table_.FlowEpoch().load(std::memory_order_relaxed), static_cast<uint32_t>(all.size()),
          static_cast<uint32_t>(rules->size()), 0};
  return Verdict::Ok();
}

Verdict Device::CreateRwqIndTable(ClientId c, const protocol::CreateRwqIndTableRequest& req,
                                  protocol::CreateRwqIndTableReply* out) {
  // Check.
  if (req.log_size > limits::kMaxRwqIndTableLogSize) {
    return Verdict::Fail(EINVAL, "create_rwq_ind_table: log_ind_tbl_size " +
                                     std::to_string(req.log_size) + " is above the most, " +
                                     std::to_string(limits::kMaxRwqIndTableLogSize));
  }
  if (ind_tables_.size() >= static_cast<size_t>(limits::kMaxRwqIndTables)) {
    return Verdict::Fail(ENOMEM, "create_rwq_ind_table: the device's " +
                                     std::to_string(limits::kMaxRwqIndTables) +
                                     " indirection tables are in use");
  }
  const uint32_t size = 1u << req.log_size;
  std::vector<uint32_t> wqns;
  for (uint32_t i = 0; i < size; ++i) {
    QpHandle* qh = FindOwned(qp_handles_, c, req.wq[i]);
    const Qp* wq = qh ? &qps_.at(qh->qpn) : nullptr;
    if (!wq || wq->type != IBV_QPT_RAW_PACKET || wq->ind_table != 0) {
      return Verdict::Fail(EINVAL, "create_rwq_ind_table: entry " + std::to_string(i) +
                                       " is not a receive work queue of this context");
    }
    wqns.push_back(wq->qpn);
  }
  // Apply.
  for (uint32_t wqn : wqns) qps_.at(wqn).in_ind_tables++;
  const Handle h = NextHandle();
  const uint32_t number = next_ind_table_number_++;
  ind_tables_[h] = {h, c, number, std::move(wqns), 0};
  *out = {h, number};
  return Verdict::Ok();
}

Verdict Device::DestroyRwqIndTable(ClientId c, Handle h) {
  RwqIndTable* t = FindOwned(ind_tables_, c, h);
  if (!t) return Verdict::Fail(EINVAL, "destroy_rwq_ind_table: no such table in this context");
  if (t->users != 0) {
    return Verdict::Fail(EBUSY, "destroy_rwq_ind_table: " + std::to_string(t->users) +
                                    " RSS QP(s) still spread over it");
  }
  for (uint32_t wqn : t->wqns) {
    if (auto it = qps_.find(wqn); it != qps_.end()) it->second.in_ind_tables--;
  }
  ind_tables_.erase(h);
  return Verdict::Ok();
}

Verdict Device::RssTable(ClientId c, uint32_t qpn, protocol::RssTableReply* out) {
  (void)c;
  auto qp = qps_.find(qpn);
  if (qp == qps_.end() || qp->second.ind_table == 0) {
    return Verdict::Fail(ENOENT, "rss_table: QP 0x" + ToHex(qpn) + " is not an RSS QP");
  }
  const RwqIndTable& t = ind_tables_.at(qp->second.ind_table);
  *out = {};
  out->fields = qp->second.rx_hash_fields;
  memcpy(out->key, qp->second.rx_hash_key.data(), sizeof(out->key));
  out->size = static_cast<uint32_t>(t.wqns.size());
  std::copy(t.wqns.begin(), t.wqns.end(), out->wqn);
  return Verdict::Ok();
}

void Device::FlowRulesChanged() {
  table_.FlowEpoch().fetch_add(1, std::memory_order_release);
}

}  // namespace softverbs::daemon
