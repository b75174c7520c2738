#include "roce/ipv4_id_history.h"

#include <algorithm>

namespace softverbs::roce {

bool Ipv4IdHistory::Follows(uint32_t src, uint16_t port, uint16_t id) {
  const uint64_t key = uint64_t{src} << 16 | port;
  auto it = sources_.find(key);
  if (it == sources_.end()) {
    if (sources_.size() >= kSources) {
      sources_.erase(std::min_element(
          sources_.begin(), sources_.end(),
          [](const auto& a, const auto& b) { return a.second.seen < b.second.seen; }));
    }
    sources_.emplace(key, Source{id, clock_});
    return false;
  }
  const uint16_t step = static_cast<uint16_t>(id - it->second.last_id);
  it->second = {id, clock_};
  return step >= 1 && step <= kWindow;
}

bool Ipv4IdHistory::Accept(uint32_t src, uint16_t src_port, uint16_t id, bool gsi) {
  ++clock_;
  // Both kept up to date: no short cut between them.
  const bool by_flow = Follows(src, src_port, id);
  const bool by_host = Follows(src, kAnyPort, id);
  return gsi || by_flow || by_host;
}

}  // namespace softverbs::roce
