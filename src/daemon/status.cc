// `softverbs status`: the device, its clients and their objects, like
// `rdma resource show`.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/device_limits.h"
#include "daemon/device.h"
#include "daemon/devx_service.h"
#include "verbs/qp_names.h"

namespace softverbs::daemon {

std::string Device::StatusJson() const {
  using nlohmann::json;
  json dev;
  dev["name"] = limits::kDeviceName;
  dev["netdev"] = gids_.netdev;
  dev["gids"] = json::array();
  for (int i = 0; i < gids_.count; ++i) {
    dev["gids"].push_back(
        {{"index", i},
         {"gid", FormatGid(gids_.gids[i].raw)},
         {"type", gids_.gids[i].type == GidType::kRoceV2 ? "RoCE v2" : "RoCE v1"}});
  }
  json clients = json::array();
  for (const auto& [id, info] : clients_) {
    json cl{{"client", id},         {"pid", info.pid},
            {"comm", info.command}, {"group", GroupOf(id)},
            {"live", info.live},    {"async_events_dropped", info.async_events_dropped}};
    json pds = json::array(), mrs = json::array(), cqs = json::array(), srqs = json::array(),
         qps = json::array(), ahs = json::array(), xrcds = json::array();
    for (const auto& [h, pd] : pds_)
      if (pd.owner == id) pds.push_back({{"pdn", pd.pdn}, {"users", pd.users}});
    for (const auto& [h, mr] : mrs_)
      if (mr.owner == id)
        mrs.push_back({{"lkey", mr.lkey},
                       {"rkey", mr.rkey},
                       {"length", mr.length},
                       {"access", mr.access},
                       {"backed", mr.backed()},
                       {"backed_bytes", mr.backed() ? mr.backed_end - mr.backed_begin : 0}});
    for (const auto& [h, cq] : cqs_)
      if (cq.owner == id && !cq.devx)
        cqs.push_back({{"cqn", cq.cqn}, {"cqe", cq.cqe}, {"users", cq.users}});
    for (const auto& [h, srq] : srqs_)
      if (srq.owner == id)
        srqs.push_back({{"srqn", srq.srqn},
                        {"type", srq.type == IBV_SRQT_XRC ? "XRC" : "BASIC"},
                        {"max_wr", srq.max_wr}});
    for (const auto& [h, qh] : qp_handles_) {
      if (qh.owner != id) continue;
      const Qp& qp = qps_.at(qh.qpn);
      qps.push_back({{"qpn", qp.qpn},
                     {"type", std::string(verbs::QpTypeName(qp.type))},
                     {"state", std::string(verbs::QpStateName(qp.state))},
                     {"creator", qp.creator == id}});
    }
    for (const auto& [h, ah] : ahs_)
      if (ah.owner == id) ahs.push_back({{"handle", h}});
    for (const auto& [h, xh] : xrcd_handles_)
      if (xh.owner == id) xrcds.push_back({{"xrcd", xh.xrcd}});
    json mws = json::array();
    for (const auto& [h, mw] : mws_)
      if (mw.owner == id)
        mws.push_back({{"rkey", mw.rkey}, {"type", mw.type}, {"bound", mw.bound}});
    json mkeys = json::array();
    for (const auto& [h, mkey] : mkeys_)
      if (mkey.owner == id)
        mkeys.push_back({{"lkey", mkey.lkey},
                         {"rkey", mkey.rkey},
                         {"configured", mkey.configured},
                         {"entries", mkey.layout.size()},
                         {"max_entries", mkey.max_entries},
                         {"signature", mkey.signature},
                         {"signed", mkey.sig.enabled != 0},
                         {"sig_error_kept", mkey.sig_error_kept}});
    json dms = json::array();
    for (const auto& [h, dm] : dms_)
      if (dm.owner == id) dms.push_back({{"handle", h}, {"size", dm.size}});
    json flows = json::array();
    for (const auto& [h, flow] : flows_)
      if (flow.owner == id) {
        flows.push_back({{"handle", h},
                         {"qpn", flow.qpn},
                         {"type", flow.rule.type},
                         {"priority", flow.rule.priority}});
      }
    json ind_tables = json::array();
    for (const auto& [h, t] : ind_tables_)
      if (t.owner == id) ind_tables.push_back({{"number", t.number}, {"wqs", t.wqns.size()}});
    cl["pd"] = pds;
    cl["mr"] = mrs;
    cl["cq"] = cqs;
    cl["srq"] = srqs;
    cl["qp"] = qps;
    cl["ah"] = ahs;
    cl["xrcd"] = xrcds;
    cl["dm"] = dms;
    cl["mw"] = mws;
    cl["mkey"] = mkeys;
    cl["flow"] = flows;
    cl["rwq_ind_table"] = ind_tables;
    if (devx_) cl["devx"] = devx_->StatusJson(id);
    clients.push_back(cl);
  }
  // Every object the device holds, whoever owns it: what a leak check
  // compares (0 everywhere once every client is gone).
  json objects{{"pd", pds_.size()},
               {"mr", mrs_.size()},
               {"mw", mws_.size()},
               {"mkey", mkeys_.size()},
               {"cq", cqs_.size()},
               {"srq", srqs_.size()},
               {"qp", qps_.size()},
               {"reserved_qpn", reserved_qpns_.size()},
               {"ah", ahs_.size()},
               {"xrcd", xrcds_.size()},
               {"dm", dms_.size()},
               {"flow", flows_.size()},
               {"rwq_ind_table", ind_tables_.size()},
               {"mr_backings", std::count_if(backings_.begin(), backings_.end(),
                                             [](const auto& b) { return b.second.mrs != 0; })},
               // Memfds no MR uses, kept for the connections that passed
               // them (a registration of the range again names them).
               {"mr_backings_kept",
                std::count_if(backings_.begin(), backings_.end(),
                              [](const auto& b) { return b.second.mrs == 0 && b.second.used; })},
               // Memfds offered ahead that no MR used yet (the libraries'
               // memfds made ahead for small registrations).
               {"mr_backings_ready",
                std::count_if(backings_.begin(), backings_.end(),
                              [](const auto& b) { return b.second.mrs == 0 && !b.second.used; })},
               {"mr_segments", segments_.size()}};
  json all{{"device", dev}, {"clients", clients}, {"objects", objects}};
  return all.dump(2);
}

}  // namespace softverbs::daemon
