#include "datapath/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

namespace softverbs::datapath {

namespace {
bool ReadTraceSetting() {
  const char* v = getenv(kTraceEnv);
  return v != nullptr && strstr(v, "engine") != nullptr && LogEnabled();
}
}  // namespace

const bool detail::engine_trace_on = ReadTraceSetting();

void TraceEngine(const char* fmt, ...) {
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  Log("engine: %s", line);
}

}  // namespace softverbs::datapath
