#include "roce/fault_injector.h"

#include <limits>
#include <utility>

namespace softverbs::roce {
namespace {

// splitmix64 (Steele, Lea, Flood 2014): a good 64-bit mix of a counter.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Two independent draws for packet n: its fate and where a corruption hits.
uint64_t Draw(uint64_t seed, uint64_t n, uint64_t which) {
  return Mix(Mix(seed) ^ Mix(n * 2 + which));
}

double Uniform(uint64_t bits) {
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

// The BTH's resv8a byte (FECN, BECN) is outside the ICRC: a flip there
// would go unnoticed, so corruption never lands on it.
constexpr size_t kBthVariantByte = 4;

}  // namespace

Fate FaultInjector::FateOf(uint64_t n) const {
  double u = Uniform(Draw(config_.seed, n, 0));
  const std::pair<double, Fate> bands[] = {{config_.drop, Fate::kDrop},
                                           {config_.dup, Fate::kDuplicate},
                                           {config_.reorder, Fate::kReorder},
                                           {config_.delay, Fate::kDelay},
                                           {config_.corrupt, Fate::kCorrupt}};
  for (const auto& [fraction, fate] : bands) {
    if (u < fraction) return fate;
    u -= fraction;
  }
  return Fate::kPass;
}

void FaultInjector::Emit(std::span<const uint8_t> packet, uint64_t tag, const Sink& send) {
  ++counters_.sent;
  send(packet, tag);
}

void FaultInjector::Submit(std::vector<uint8_t> packet, uint64_t tag, uint64_t now_us,
                           const Sink& send) {
  const uint64_t n = counters_.submitted++;
  Poll(now_us, send);
  switch (FateOf(n)) {
    case Fate::kPass:
      Emit(packet, tag, send);
      break;
    case Fate::kDrop:
      ++counters_.dropped;
      break;
    case Fate::kDuplicate:
      ++counters_.duplicated;
      Emit(packet, tag, send);
      Emit(packet, tag, send);
      break;
    case Fate::kReorder:
      ++counters_.reordered;
      reordered_.push_back({now_us + config_.delay_us, tag, std::move(packet)});
      return;  // held: nothing overtook anything
    case Fate::kDelay:
      ++counters_.delayed;
      delayed_.push_back({now_us + config_.delay_us, tag, std::move(packet)});
      break;
    case Fate::kCorrupt:
      ++counters_.corrupted;
      if (packet.size() > kBthVariantByte + 1) {
        const uint64_t bits = Draw(config_.seed, n, 1);
        size_t byte = (bits >> 3) % (packet.size() - 1);
        if (byte >= kBthVariantByte) ++byte;  // skip the BTH's variant byte
        packet[byte] ^= static_cast<uint8_t>(1u << (bits & 7));
      }
      Emit(packet, tag, send);
      break;
  }
  // This packet went (or was dropped or delayed) before the ones held for
  // reordering: they follow it now.
  while (!reordered_.empty()) {
    Emit(reordered_.front().packet, reordered_.front().tag, send);
    reordered_.pop_front();
  }
}

uint64_t FaultInjector::Poll(uint64_t now_us, const Sink& send) {
  while (!delayed_.empty() && delayed_.front().due_us <= now_us) {
    Emit(delayed_.front().packet, delayed_.front().tag, send);
    delayed_.pop_front();
  }
  while (!reordered_.empty() && reordered_.front().due_us <= now_us) {
    Emit(reordered_.front().packet, reordered_.front().tag, send);
    reordered_.pop_front();
  }
  uint64_t next = std::numeric_limits<uint64_t>::max();
  if (!delayed_.empty()) next = delayed_.front().due_us;
  if (!reordered_.empty() && reordered_.front().due_us < next) next = reordered_.front().due_us;
  return next;
}

void FaultInjector::Flush(const Sink& send) {
  Poll(std::numeric_limits<uint64_t>::max(), send);
}

}  // namespace softverbs::roce
