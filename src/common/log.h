// The log channel: every rejected verb says which rule it broke. Off by
// default; SOFTVERBS_LOG=1 (or "stderr") writes to stderr, any other value is
// taken as a file path to append to.
#pragma once

#include <cstdarg>

namespace softverbs {

inline constexpr const char* kLogEnv = "SOFTVERBS_LOG";

// Whether the channel is on. The environment is read once, on the first call
// (a function-local static): later calls cost a load and a branch.
bool LogEnabled();

// printf-style; a line prefixed with "softverbs[<pid>]: " and ended with '\n'.
void Log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void VLog(const char* fmt, va_list ap) __attribute__((format(printf, 1, 0)));

}  // namespace softverbs
