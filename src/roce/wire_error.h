// Why a RoCEv2 packet was not built or not accepted: one named reason per
// check, for the log channel and the counters.
#pragma once

#include <cstddef>
#include <cstdint>

namespace softverbs::roce {

enum class WireError : uint8_t {
  kOk,
  kTooShort,           // fewer bytes than the headers its opcode needs (or than a BTH)
  kNotIp,              // IP version neither 4 nor 6
  kIpOptions,          // IPv4 header with options (softverbs neither sends nor takes them)
  kNotUdp,             // IP protocol / next header not UDP
  kNotRoce,            // UDP destination port not 4791
  kBadLength,          // IP or UDP length disagrees with the bytes received
  kBadVersion,         // BTH TVer not 0
  kBadOpcode,          // BTH opcode not an operation of its transport (ibta_opcode.h)
  kUnexpectedPayload,  // payload on an opcode that carries none (or a pad count there)
  kBadIcrc,            // ICRC does not match the packet
  kBufferTooSmall,     // build: the output buffer cannot hold the packet
};

inline constexpr size_t kWireErrorCount = static_cast<size_t>(WireError::kBufferTooSmall) + 1;

// "too short", "bad ICRC", ... (static strings).
const char* WireErrorName(WireError error);

}  // namespace softverbs::roce
