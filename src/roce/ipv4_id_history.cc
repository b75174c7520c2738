#include "roce/ipv4_id_history.h"

#include <algorithm>

namespace softverbs::roce {

bool Ipv4IdHistory::Accept(uint32_t src, uint16_t id, bool gsi) {
  ++clock_;
  auto it = std::find_if(sources_.begin(), sources_.end(),
                         [src](const Source& s) { return s.address == src; });
  if (it == sources_.end()) {
    if (sources_.size() < kSources) {
      sources_.push_back({src, id, clock_});
    } else {
      auto oldest =
          std::min_element(sources_.begin(), sources_.end(),
                           [](const Source& a, const Source& b) { return a.seen < b.seen; });
      *oldest = {src, id, clock_};
    }
    return gsi;
  }
  const uint16_t step = static_cast<uint16_t>(id - it->last_id);
  it->last_id = id;
  it->seen = clock_;
  return gsi || (step >= 1 && step <= kWindow);
}

}  // namespace softverbs::roce
