// What the RoCE fault injector (fault_injector.h) does, parsed from text:
//
//   SOFTVERBS_ROCE_FAULTS="drop=0.01,reorder=0.01,dup=0.001,seed=42"
//
// Keys (each at most once, any order, comma-separated, no spaces):
//   drop=F      fraction of packets not sent
//   dup=F       fraction sent twice, back to back
//   reorder=F   fraction held until the next packet has been sent (it overtakes)
//   delay=F     fraction held for delay_us, while later packets go
//   corrupt=F   fraction sent with one bit flipped (the receiver's ICRC catches it)
//   delay_us=N  how long delay holds a packet (default 1000 microseconds)
//   seed=N      the seed (default 1): the same seed gives the same faults on
//               the same sequence of packets, whatever the timing
//   cm_drop=K[:N][+K[:N]...]
//               the connection manager does not send the first N (default 1)
//               CM MADs of kind K (req, mra, rej, rep, rtu, dreq, drep,
//               sidr_req, sidr_rep): a lost REP, RTU or DREQ on demand, to
//               show the CM's retransmissions (docs/rdmacm.md)
// Each packet suffers at most one fault: F are fractions in [0, 1] whose sum
// is at most 1. Unset or empty: no faults.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace softverbs::roce {

inline constexpr const char* kFaultsEnvironmentVariable = "SOFTVERBS_ROCE_FAULTS";

struct FaultConfig {
  double drop = 0;
  double dup = 0;
  double reorder = 0;
  double delay = 0;
  double corrupt = 0;
  uint32_t delay_us = 1000;
  uint64_t seed = 1;
  // cm_drop: how many of the first CM MADs of each attribute (IBA table 105,
  // 0x10 REQ .. 0x18 SIDR REP, indexed from 0x10) are not sent.
  static constexpr uint16_t kFirstCmAttr = 0x10;
  std::array<uint32_t, 9> cm_drop{};

  bool Any() const { return drop + dup + reorder + delay + corrupt > 0; }
};

// Parses the text above into *out. False with a one-line *error naming the
// offending key or value (nothing else of *out is meaningful then).
bool ParseFaultConfig(std::string_view text, FaultConfig* out, std::string* error);

// ParseFaultConfig of $SOFTVERBS_ROCE_FAULTS (unset: no faults, true).
bool FaultConfigFromEnvironment(FaultConfig* out, std::string* error);

}  // namespace softverbs::roce
