// Accepting in the background. A listening rsocket has a thread of its own,
// its acceptor, which takes each connection request off the listening id's
// channel as it comes and accepts it (AcceptRequest: a new socket, its
// endpoint, rdma_accept), as rdma-core's listen service thread does
// (rsocket.c, rs_accept): so a peer's rconnect completes before raccept is
// called, as a TCP connect completes into the listener's backlog, and a
// program that connects to itself from one thread does not wait forever.
// raccept then takes the accepted sockets in order; rpoll sees POLLIN on
// the listening socket while one waits.
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <system_error>

#include "abi/ibverbs/reject.h"
#include "abi/rdmacm/rsocket_internal.h"

namespace softverbs::rdmacm::rs {
namespace {

void AcceptLoop(Rsocket* ls) {
  pollfd p[2] = {{ls->id->channel->fd, POLLIN, 0}, {ls->accept_stop, POLLIN, 0}};
  for (;;) {
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[1].revents) return;
    std::unique_lock lock(ls->mu);
    rdma_cm_id* id = nullptr;
    // Every request waiting (a failed or unexpected event is taken and
    // dropped by rdma_get_request, which then answers -1).
    for (int looks = 0; looks < 64; ++looks) {
      if (rdma_get_request(ls->id, &id) != 0) {
        if (errno == EAGAIN) break;
        continue;
      }
      Rsocket* rs = AcceptRequest(*ls, lock, id);
      if (!rs) continue;
      ls->accepted.push_back(rs);
      const uint64_t one = 1;
      (void)!write(ls->accept_ready, &one, sizeof(one));
    }
  }
}

// Makes the descriptors and starts the thread in this process; after a
// fork the child's copy of the parent's acceptor is no thread of its own:
// it gets one (and new descriptors), and the parent's queue stays the
// parent's.
int EnsureAcceptor(Rsocket& ls) {
  if (ls.acceptor && ls.acceptor_pid == getpid()) return 0;
  if (ls.acceptor) {
    (void)ls.acceptor.release();  // the parent's thread: not ours to join
    ls.accepted.clear();
    close(ls.accept_ready);
    close(ls.accept_stop);
    ls.accept_ready = ls.accept_stop = -1;
  }
  ls.accept_ready = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE);
  ls.accept_stop = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (ls.accept_ready < 0 || ls.accept_stop < 0) {
    const int err = errno;
    if (ls.accept_ready >= 0) close(ls.accept_ready);
    if (ls.accept_stop >= 0) close(ls.accept_stop);
    ls.accept_ready = ls.accept_stop = -1;
    return softverbs::abi::RejectMinusOne(err, "rlisten: no descriptor for the acceptor: %s",
                                          strerror(err));
  }
  try {
    ls.acceptor = std::make_unique<std::thread>(AcceptLoop, &ls);
  } catch (const std::system_error& e) {
    close(ls.accept_ready);
    close(ls.accept_stop);
    ls.accept_ready = ls.accept_stop = -1;
    return softverbs::abi::RejectMinusOne(EAGAIN, "rlisten: cannot start the acceptor: %s",
                                          e.what());
  }
  ls.acceptor_pid = getpid();
  return 0;
}

}  // namespace

int StartAcceptor(Rsocket& ls) {
  return EnsureAcceptor(ls);
}

void StopAcceptor(Rsocket& ls) {
  std::unique_ptr<std::thread> thread;
  {
    std::lock_guard lock(ls.mu);
    if (!ls.acceptor) return;
    if (ls.acceptor_pid == getpid()) {
      const uint64_t one = 1;
      (void)!write(ls.accept_stop, &one, sizeof(one));
      thread = std::move(ls.acceptor);
    } else {
      (void)ls.acceptor.release();  // a forked child: the parent's thread and queue
      ls.accepted.clear();
    }
  }
  // The queue is taken after the thread ended: a request it was accepting
  // when asked to stop is queued before it looks at the stop.
  if (thread) thread->join();
  std::deque<Rsocket*> waiting;
  {
    std::lock_guard lock(ls.mu);
    waiting.swap(ls.accepted);
    if (ls.accept_ready >= 0) close(ls.accept_ready);
    if (ls.accept_stop >= 0) close(ls.accept_stop);
    ls.accept_ready = ls.accept_stop = -1;
  }
  // Accepted, never taken: closed, as a listening TCP socket's backlog is.
  for (Rsocket* rs : waiting) FreeSocket(rs);
}

Rsocket* TakeAccepted(Rsocket& ls, RsLock& lock) {
  if (EnsureAcceptor(ls)) return nullptr;
  while (ls.accepted.empty()) {
    if (ls.nonblocking) {
      errno = EAGAIN;
      return nullptr;
    }
    pollfd p{ls.accept_ready, POLLIN, 0};
    lock.unlock();
    poll(&p, 1, -1);
    lock.lock();
    if (ls.phase != Phase::kListening) {
      return softverbs::abi::RejectNull(EINVAL, "raccept: rsocket %d stopped listening", ls.fd);
    }
  }
  Rsocket* rs = ls.accepted.front();
  ls.accepted.pop_front();
  uint64_t one = 0;
  (void)!read(ls.accept_ready, &one, sizeof(one));  // semaphore: one less
  return rs;
}

bool HasAccepted(Rsocket& ls) {
  EnsureAcceptor(ls);
  return !ls.accepted.empty();
}

int AcceptedFd(Rsocket& ls) {
  EnsureAcceptor(ls);
  return ls.accept_ready;
}

}  // namespace softverbs::rdmacm::rs
