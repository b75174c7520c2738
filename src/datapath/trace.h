// The engine's trace: SOFTVERBS_TRACE=engine writes every state change of
// the shared-memory engine - the requester's send-queue state, the
// responder's answer, the completer's verdict - to the log channel
// (SOFTVERBS_LOG says where; nothing without it). Read once; off, a trace
// point costs a load and a branch.
#pragma once

#include <cstdarg>

namespace softverbs::datapath {

inline constexpr const char* kTraceEnv = "SOFTVERBS_TRACE";

namespace detail {
extern const bool engine_trace_on;  // set when the library is loaded
}
inline bool EngineTraceOn() {
  return detail::engine_trace_on;
}
// printf-style; the line is prefixed with "engine: ".
void TraceEngine(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace softverbs::datapath
