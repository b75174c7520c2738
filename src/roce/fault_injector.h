// A seeded, deterministic fault injector for the RoCE packet carrier (the
// kernels here have no netem): it sits between the carrier and its socket,
// takes each outgoing packet (the UDP payload: BTH up to the ICRC) and says
// which packets to put on the wire now. Each packet's fate - pass, drop,
// duplicate, reorder, delay, corrupt (fault_config.h) - is a function of the
// seed and the packet's number alone, so a run with the same seed and the
// same packets suffers the same faults whatever the timing; only when a
// delayed packet is released depends on the clock the carrier passes in.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <vector>

#include "roce/fault_config.h"

namespace softverbs::roce {

enum class Fate : uint8_t { kPass, kDrop, kDuplicate, kReorder, kDelay, kCorrupt };

// What happened so far (for the carrier's counters and the tests).
struct FaultCounters {
  uint64_t submitted = 0;  // packets handed in
  uint64_t sent = 0;       // packets given to the sink (duplicates count twice)
  uint64_t dropped = 0;
  uint64_t duplicated = 0;
  uint64_t reordered = 0;
  uint64_t delayed = 0;
  uint64_t corrupted = 0;
};

class FaultInjector {
 public:
  // Receives each packet to put on the wire, in wire order, with the tag it
  // was submitted with (the carrier's note of where it goes).
  using Sink = std::function<void(std::span<const uint8_t>, uint64_t tag)>;

  explicit FaultInjector(const FaultConfig& config) : config_(config) {}

  // The fate of packet number n (0 first) under this configuration.
  Fate FateOf(uint64_t n) const;

  // Hands in the next outgoing packet at time now_us (any monotonic clock in
  // microseconds). Sends what is due: delayed packets whose time came, then
  // this packet (unless dropped, held or after its copy), then packets held
  // for reordering, which it overtook.
  void Submit(std::vector<uint8_t> packet, uint64_t tag, uint64_t now_us, const Sink& send);

  // Sends delayed packets whose time came, and packets held for reordering
  // longer than delay_us (no later packet came to overtake them). Returns
  // when something still held is due (UINT64_MAX: nothing held).
  uint64_t Poll(uint64_t now_us, const Sink& send);

  // Sends everything still held: delayed packets, then reordered ones.
  void Flush(const Sink& send);

  const FaultCounters& counters() const { return counters_; }

 private:
  struct Held {
    uint64_t due_us;
    uint64_t tag;
    std::vector<uint8_t> packet;
  };
  void Emit(std::span<const uint8_t> packet, uint64_t tag, const Sink& send);

  FaultConfig config_;
  FaultCounters counters_;
  std::deque<Held> delayed_;    // by due time (all delays equal: FIFO)
  std::deque<Held> reordered_;  // waiting for a later packet to overtake them
};

}  // namespace softverbs::roce
