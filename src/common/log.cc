#include "common/log.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mutex>

namespace softverbs {
namespace {

struct LogSink {
  int fd = -1;
  bool enabled = false;
};

LogSink& Sink() {
  static LogSink sink = [] {
    LogSink s;
    const char* v = getenv(kLogEnv);
    if (!v || !*v || strcmp(v, "0") == 0) return s;
    s.enabled = true;
    if (strcmp(v, "1") == 0 || strcmp(v, "stderr") == 0) {
      s.fd = STDERR_FILENO;
    } else {
      s.fd = open(v, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
      if (s.fd < 0) s.fd = STDERR_FILENO;
    }
    return s;
  }();
  return sink;
}

}  // namespace

bool LogEnabled() {
  return Sink().enabled;
}

void Log(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  VLog(fmt, ap);
  va_end(ap);
}

void VLog(const char* fmt, va_list ap) {
  LogSink& sink = Sink();
  if (!sink.enabled) return;
  char line[1024];
  int n = snprintf(line, sizeof(line), "softverbs[%d]: ", getpid());
  int m = vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
  size_t len = n + (m < 0 ? 0 : std::min<size_t>(m, sizeof(line) - n - 2));
  line[len++] = '\n';
  // One write per line so that lines of concurrent processes do not interleave.
  ssize_t ignored = write(sink.fd, line, len);
  (void)ignored;
}

}  // namespace softverbs
