#include "datapath/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

namespace softverbs::datapath {

bool EngineTraceOn() {
  static const bool on = [] {
    const char* v = getenv(kTraceEnv);
    return v != nullptr && strstr(v, "engine") != nullptr && LogEnabled();
  }();
  return on;
}

void TraceEngine(const char* fmt, ...) {
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  Log("engine: %s", line);
}

}  // namespace softverbs::datapath
