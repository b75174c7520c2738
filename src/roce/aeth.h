// The AETH syndrome byte (IBA 9.3.6, tables 42-44) and 24-bit PSN
// arithmetic (IBA 9.7.1): what the responder writes in ACKs and NAKs and
// the requester reads back.
#pragma once

#include <cstdint>

namespace softverbs::roce {

// Syndrome bits 6..5.
enum class AckType : uint8_t { kAck = 0, kRnrNak = 1, kReserved = 2, kNak = 3 };

// Syndrome bits 4..0 of a NAK (IBA table 43).
enum class NakCode : uint8_t {
  kPsnSequenceError = 0,        // the requester goes back to the expected PSN
  kInvalidRequest = 1,          // IBV_WC_REM_INV_REQ_ERR
  kRemoteAccessError = 2,       // IBV_WC_REM_ACCESS_ERR (bad rkey, bounds, rights)
  kRemoteOperationalError = 3,  // IBV_WC_REM_OP_ERR
  kInvalidRdRequest = 4,        // RD only
};

// Credit count 31: the responder does not limit the requester (no
// end-to-end flow control), as rxe answers.
inline constexpr uint8_t kUnlimitedCredits = 31;

constexpr AckType AckTypeOf(uint8_t syndrome) {
  return static_cast<AckType>((syndrome >> 5) & 3);
}
// Credit count (ACK), RNR timer code (RNR NAK, datapath/timers.h
// RnrTimerNs) or NakCode (NAK).
constexpr uint8_t SyndromeValue(uint8_t syndrome) {
  return syndrome & 0x1f;
}

constexpr uint8_t AckSyndrome(uint8_t credit_code = kUnlimitedCredits) {
  return static_cast<uint8_t>(credit_code & 0x1f);
}
constexpr uint8_t RnrNakSyndrome(uint8_t rnr_timer_code) {
  return static_cast<uint8_t>(0x20 | (rnr_timer_code & 0x1f));
}
constexpr uint8_t NakSyndrome(NakCode code) {
  return static_cast<uint8_t>(0x60 | static_cast<uint8_t>(code));
}

// PSNs are 24 bits and wrap.
inline constexpr uint32_t kPsnMask = 0xffffff;
constexpr uint32_t PsnAdd(uint32_t psn, uint32_t n) {
  return (psn + n) & kPsnMask;
}
// a - b as a signed distance in the 24-bit circle (-2^23 .. 2^23 - 1): < 0
// when a is before b (an old, duplicate PSN), > 0 when after (a gap).
constexpr int32_t PsnDiff(uint32_t a, uint32_t b) {
  return static_cast<int32_t>(((a - b) & kPsnMask) << 8) >> 8;
}

}  // namespace softverbs::roce
