// The connection manager's part of `softverbs status`: every id with its
// owner, state, port space and addresses (what `rdma resource show cm_id`
// lists for the kernel's rdma_cm).
#include <nlohmann/json.hpp>

#include "daemon/cm_service.h"

namespace softverbs::daemon {

std::string CmService::StatusJson() const {
  nlohmann::json ids = nlohmann::json::array();
  for (const auto& [h, id] : ids_) {
    nlohmann::json j{{"id", h},
                     {"client", id.owner},
                     {"state", CmStateName(id.state)},
                     {"port_space", id.port_space},
                     {"qp_type", id.qp_type},
                     {"local", FormatAddr(id.route.src)},
                     {"local_port", PortOf(id.route.src)},
                     {"groups", id.groups.size()}};
    if (id.route.dst.sin6_family) j["remote"] = FormatAddr(id.route.dst);
    ids.push_back(j);
  }
  return ids.dump();
}

std::string CmService::CountersJson() const {
  return nlohmann::json{{"resent", counters_.resent},
                        {"duplicates", counters_.duplicates},
                        {"mras_sent", counters_.mras_sent},
                        {"mras_received", counters_.mras_received},
                        {"rtus_resent", counters_.rtus_resent}}
      .dump();
}

}  // namespace softverbs::daemon
