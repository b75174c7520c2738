#include "roce/ipv4_id_history.h"

#include <algorithm>

namespace softverbs::roce {

bool Ipv4IdHistory::Follows(uint32_t src, uint16_t port, uint16_t id) {
  auto it = std::find_if(sources_.begin(), sources_.end(),
                         [&](const Source& s) { return s.address == src && s.port == port; });
  if (it == sources_.end()) {
    if (sources_.size() < kSources) {
      sources_.push_back({src, port, id, clock_});
    } else {
      auto oldest =
          std::min_element(sources_.begin(), sources_.end(),
                           [](const Source& a, const Source& b) { return a.seen < b.seen; });
      *oldest = {src, port, id, clock_};
    }
    return false;
  }
  const uint16_t step = static_cast<uint16_t>(id - it->last_id);
  it->last_id = id;
  it->seen = clock_;
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
