#include "daemon/cpu_sharing.h"

namespace softverbs::daemon {

void CpuSharing::NoteCaller(uint32_t cpu) {
  last_caller_cpu_ = cpu;
  const int own = sched_getcpu();
  if (own >= 0 && cpu == static_cast<uint32_t>(own)) {
    ++shared_calls_;
  } else {
    shared_calls_ = 0;
  }
}

void CpuSharing::MoveOffIfShared() {
  if (shared_calls_ < kSharedCallsBeforeMove) return;
  const Clock::time_point now = now_();
  if (now - last_try_ < kMinInterval) return;
  last_try_ = now;
  // The affinity as it is now: someone may have changed it since the start.
  cpu_set_t allowed;
  const int own = sched_getcpu();
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0 || CPU_COUNT(&allowed) < 2 || own < 0 ||
      own >= CPU_SETSIZE || !CPU_ISSET(own, &allowed)) {
    return;
  }
  cpu_set_t others = allowed;
  CPU_CLR(own, &others);
  // The first call migrates this thread at once; the second lets the
  // scheduler place it anywhere it could before.
  if (sched_setaffinity(0, sizeof(others), &others) != 0) return;
  sched_setaffinity(0, sizeof(allowed), &allowed);
  shared_calls_ = 0;
  ++moves_;
}

}  // namespace softverbs::daemon
