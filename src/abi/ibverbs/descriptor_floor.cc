#include "abi/ibverbs/descriptor_floor.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

namespace softverbs::provider {
namespace {

constexpr rlim_t kDescriptorStep = 1024;  // the soft limit is raised by this much at a time

struct DescriptorFloor {
  rlim_t floor = FD_SETSIZE;
  bool room_above = false;  // the hard limit was above the floor
};

const DescriptorFloor& Floor() {
  static const DescriptorFloor f = [] {
    DescriptorFloor d;
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return d;
    if (limit.rlim_cur != RLIM_INFINITY) d.floor = std::max<rlim_t>(d.floor, limit.rlim_cur);
    d.room_above = limit.rlim_max > d.floor;
    return d;
  }();
  return f;
}

}  // namespace

bool RaiseSoftDescriptorLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return false;
  const rlim_t base = std::max(limit.rlim_cur, Floor().floor);
  limit.rlim_cur =
      limit.rlim_max - base < kDescriptorStep ? limit.rlim_max : base + kDescriptorStep;
  return setrlimit(RLIMIT_NOFILE, &limit) == 0;
}

int MoveAboveApplication(int fd) {
  if (!Floor().room_above) return fd;
  const int floor = static_cast<int>(std::min<rlim_t>(Floor().floor, INT32_MAX));
  if (fd >= floor) return fd;
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, floor);
  if (moved < 0 && (errno == EINVAL || errno == EMFILE) && RaiseSoftDescriptorLimit()) {
    moved = fcntl(fd, F_DUPFD_CLOEXEC, floor);
  }
  if (moved < 0) return fd;
  close(fd);
  return moved;
}

bool SpareDescriptor(int fd) {
  if (Floor().room_above && static_cast<rlim_t>(fd) >= Floor().floor) return true;
  rlimit limit{};
  return getrlimit(RLIMIT_NOFILE, &limit) == 0 &&
         (limit.rlim_cur == RLIM_INFINITY ||
          static_cast<rlim_t>(fd) + kDescriptorStep <= limit.rlim_cur);
}

}  // namespace softverbs::provider
