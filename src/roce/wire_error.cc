#include "roce/wire_error.h"

namespace softverbs::roce {

const char* WireErrorName(WireError error) {
  switch (error) {
    case WireError::kOk:
      return "ok";
    case WireError::kTooShort:
      return "too short";
    case WireError::kNotIp:
      return "not IPv4 or IPv6";
    case WireError::kIpOptions:
      return "IPv4 options";
    case WireError::kNotUdp:
      return "not UDP";
    case WireError::kNotRoce:
      return "not UDP port 4791";
    case WireError::kBadLength:
      return "bad length";
    case WireError::kBadVersion:
      return "bad BTH version";
    case WireError::kBadOpcode:
      return "bad opcode";
    case WireError::kUnexpectedPayload:
      return "payload on an opcode without one";
    case WireError::kBadIcrc:
      return "bad ICRC";
    case WireError::kBufferTooSmall:
      return "buffer too small";
  }
  return "unknown";
}

}  // namespace softverbs::roce
