#include "abi/ibverbs/device_fatal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "abi/ibverbs/provider.h"
#include "abi/ibverbs/ready_backings.h"
#include "abi/ibverbs/send_queue.h"
#include "abi/ibverbs/write_hold.h"
#include "common/log.h"

namespace softverbs::provider {

namespace {

bool Closed(short revents) {
  return revents & (POLLHUP | POLLERR | POLLNVAL);
}

// The watcher also makes memfds ahead for the context's registrations when
// asked (ready_backings.h): it has nothing else to do, and it is a thread
// of the library's, in which the system calls for them touch no memory of
// the application's.
// EEVDF (Linux 6.12 and later) lets a thread ask for a short time slice
// (sched_attr::sched_runtime of a SCHED_OTHER thread; no privilege needed):
// woken, it then runs at once instead of waiting for the slice of a thread
// that keeps its CPU busy - the registering thread, in a loop of
// registrations. Its work is short (a few memfds), so the short slice
// costs nobody anything. Older kernels refuse or ignore it.
void AskForShortSlices() {
  struct {
    uint32_t size;
    uint32_t sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime;
    uint64_t sched_deadline;
    uint64_t sched_period;
  } attr{};
  attr.size = sizeof(attr);
  attr.sched_policy = SCHED_OTHER;
  attr.sched_nice = static_cast<int32_t>(getpriority(PRIO_PROCESS, 0));
  attr.sched_runtime = 100 * 1000;  // ns: the shortest the kernel allows
  syscall(SYS_sched_setattr, 0, &attr, 0);
}

void WatchLoop(Context* ctx, int control_fd, int stop_fd, int ready_fd) {
  AskForShortSlices();
  // events 0: only the hang-up of the control connection is of interest
  // (its replies are read by DaemonChannel::Call, never here).
  pollfd fds[3] = {{control_fd, 0, 0}, {stop_fd, POLLIN, 0}, {ready_fd, POLLIN, 0}};
  // Waiting in poll it writes nothing but its own stack; before anything
  // else it says so (a registration's hold then counts it as a writer).
  QuietLibraryThread quiet;
  for (;;) {
    quiet.Quiet();
    const int polled = poll(fds, ready_fd >= 0 ? 3 : 2, -1);
    quiet.WillWrite();
    if (polled < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents) return;
    if (Closed(fds[0].revents)) {
      EnterFatalState(ctx);
      return;
    }
    if (ready_fd >= 0 && (fds[2].revents & POLLIN)) {
      uint64_t asks = 0;
      if (read(ready_fd, &asks, sizeof(asks)) == sizeof(asks)) {
        MakeReadyBackings(
            ctx->keeper,
            [](void* context, const int* memfds, size_t count) {
              return static_cast<Context*>(context)->channel.OfferBackings(memfds, count) == 0;
            },
            ctx);
      }
    }
  }
}

// After DEVICE_FATAL the async fd keeps its number (the application may
// have it in a poll set) but refers to an eventfd that never becomes
// readable. The kernel's fd reports POLLERR from then on, which makes a
// loop that polls it spin unless it stops polling; this one lets it sleep.
void QuietAsyncFd(Context* ctx) {
  const int flags = fcntl(ctx->event_fd, F_GETFL);
  int quiet = eventfd(0, EFD_CLOEXEC | (flags >= 0 && (flags & O_NONBLOCK) ? EFD_NONBLOCK : 0));
  if (quiet < 0) return;
  dup3(quiet, ctx->event_fd, O_CLOEXEC);
  close(quiet);
}

}  // namespace

int StartDeviceWatch(Context* ctx) {
  ctx->watch_stop_fd = eventfd(0, EFD_CLOEXEC);
  if (ctx->watch_stop_fd < 0) return errno;
  // Without it registrations make their memfds inline, as before.
  ctx->ready_backings_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  // The watcher takes none of the application's signals.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int err = 0;
  try {
    ctx->watch_thread =
        std::thread(WatchLoop, ctx, ctx->channel.fd(), ctx->watch_stop_fd, ctx->ready_backings_fd);
  } catch (...) {
    err = EAGAIN;
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ctx->watch_pid = getpid();
  if (err) {
    close(ctx->watch_stop_fd);
    ctx->watch_stop_fd = -1;
    if (ctx->ready_backings_fd >= 0) close(ctx->ready_backings_fd);
    ctx->ready_backings_fd = -1;
  }
  return err;
}

void StopDeviceWatch(Context* ctx) {
  if (ctx->watch_stop_fd < 0) return;
  if (getpid() == ctx->watch_pid) {
    uint64_t one = 1;
    ssize_t n = write(ctx->watch_stop_fd, &one, sizeof(one));
    (void)n;
    if (ctx->watch_thread.joinable()) ctx->watch_thread.join();
  } else if (ctx->watch_thread.joinable()) {
    // A fork child has the thread object but not the thread, and shares
    // the stop eventfd with the parent, whose watcher must keep running.
    ctx->watch_thread.detach();
  }
  close(ctx->watch_stop_fd);
  ctx->watch_stop_fd = -1;
  if (ctx->ready_backings_fd >= 0) close(ctx->ready_backings_fd);
  ctx->ready_backings_fd = -1;
}

bool DeviceGone(Context* ctx) {
  if (ctx->fatal.load(std::memory_order_acquire)) return true;
  pollfd p{ctx->channel.fd(), 0, 0};
  if (poll(&p, 1, 0) == 1 && Closed(p.revents)) {
    EnterFatalState(ctx);
    return true;
  }
  return false;
}

void EnterFatalState(Context* ctx) {
  if (ctx->fatal.exchange(true)) return;
  Log("softverbs0: the device is gone (softverbsd exited): IBV_EVENT_DEVICE_FATAL; ports are "
      "down, QPs in error, work requests flushed");
  std::lock_guard lock(ctx->objects_mutex);
  for (Qp* qp : ctx->qps) {
    // The device table outlives the daemon (it is mapped here): the state
    // every post and every peer reads is set where the daemon would have.
    if (qp->entry) qp->entry->state.store(IBV_QPS_ERR, std::memory_order_release);
    qp->ibv.qp_base.state = IBV_QPS_ERR;
    FlushQp(qp);
  }
}

bool TakeFatalEvent(Context* ctx, ibv_async_event* event) {
  EnterFatalState(ctx);
  if (ctx->fatal_reported.exchange(true)) return false;
  event->event_type = IBV_EVENT_DEVICE_FATAL;
  event->element.port_num = 0;
  QuietAsyncFd(ctx);
  return true;
}

}  // namespace softverbs::provider
