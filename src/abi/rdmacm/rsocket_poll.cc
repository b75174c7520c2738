// rpoll and rselect. An rsocket is ready by its own state (data received,
// credits and buffer to send, a request to accept, a connect that ended),
// which progress updates; to sleep, rpoll arms each connected socket's CQ
// and waits in one poll(2) on the sockets' completion channels and event
// channels, together with the ordinary descriptors the caller mixed in:
//
// clang-format off
// | socket          | ready when                                        | sleeps on           |
// |-----------------|---------------------------------------------------|---------------------|
// | listening       | POLLIN: a connection request waits                | its event channel   |
// | connecting      | POLLOUT: the connect ended; + POLLERR if it failed | its event channel  |
// | connected       | POLLIN: data, or the end of the stream            | its completion      |
// |                 | POLLOUT: credits, a target buffer, send buffer    | channel and its     |
// |                 | POLLHUP: disconnected and nothing left to read    | event channel       |
// |                 | POLLERR: a work request failed (QP in error)      |                     |
// | never connected | POLLOUT | POLLHUP, as a fresh TCP socket          | -                   |
// clang-format on
#include <errno.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <sys/select.h>
#include <time.h>

#include <vector>

#include "abi/ibverbs/reject.h"
#include "abi/rdmacm/rsocket_internal.h"

using namespace softverbs::rdmacm::rs;
using softverbs::abi::RejectMinusOne;

#define SV_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000LL + ts.tv_nsec / 1'000'000;
}

bool FdReadable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

// The socket's events now (after a round of progress).
short SocketEvents(Rsocket& rs, short events) {
  std::unique_lock lock(rs.mu);
  if (IsOpening(rs.phase)) {
    if (DriveConnect(rs, lock, true) && errno == EINPROGRESS) return 0;
  }
  short revents = 0;
  switch (rs.phase) {
    case Phase::kListening:
      return HasAccepted(rs) ? (events & POLLIN) : 0;
    case Phase::kFresh:
    case Phase::kBound:
      return 0;  // librdmacm's rs_poll_rs: nothing, until connected or listening
    case Phase::kConnectFailed:
      return (events & (POLLIN | POLLOUT)) | POLLERR;
    default:
      break;
  }
  ProgressOnce(rs);
  if ((events & POLLIN) && (HaveData(rs) || !Readable(rs))) revents |= POLLIN;
  if ((events & POLLOUT) && (CanSend(rs) || !Writable(rs))) revents |= POLLOUT;
  // POLLHUP once the peer's data is all read (unread data first, as a TCP
  // socket gives POLLIN, not POLLHUP, while the peer's last bytes wait).
  if (rs.phase == Phase::kDisconnected && !HaveData(rs)) revents |= POLLHUP;
  if (rs.phase == Phase::kError) revents |= POLLERR;
  return revents;
}

// One look at every descriptor: the count of those ready.
int CheckAll(pollfd* fds, nfds_t nfds, const std::vector<Rsocket*>& sockets) {
  int ready = 0;
  std::vector<pollfd> plain;
  for (nfds_t i = 0; i < nfds; ++i) {
    fds[i].revents = 0;
    if (sockets[i]) {
      fds[i].revents = SocketEvents(*sockets[i], fds[i].events);
    } else if (fds[i].fd >= 0) {
      pollfd p{fds[i].fd, fds[i].events, 0};
      if (poll(&p, 1, 0) > 0) fds[i].revents = p.revents;
    }
    if (fds[i].revents) ready++;
  }
  return ready;
}

// What to sleep on for each descriptor (the sockets armed).
void ArmAll(pollfd* fds, nfds_t nfds, const std::vector<Rsocket*>& sockets,
            std::vector<pollfd>* wait, std::vector<Rsocket*>* owner) {
  wait->clear();
  owner->clear();
  for (nfds_t i = 0; i < nfds; ++i) {
    Rsocket* rs = sockets[i];
    if (!rs) {
      if (fds[i].fd >= 0) {
        wait->push_back({fds[i].fd, fds[i].events, 0});
        owner->push_back(nullptr);
      }
      continue;
    }
    std::lock_guard lock(rs->mu);
    if (rs->phase == Phase::kListening) {  // the acceptor counts what it accepted
      wait->push_back({AcceptedFd(*rs), POLLIN, 0});
      owner->push_back(nullptr);
      continue;
    }
    if (rs->cq) {
      ArmForSleep(*rs);
      wait->push_back({rs->comp->fd, POLLIN, 0});
      owner->push_back(rs);
    }
    wait->push_back({rs->id->channel->fd, POLLIN, 0});
    owner->push_back(nullptr);  // the CM event itself is taken by the socket's next look
  }
}

}  // namespace

SV_EXPORT int rpoll(pollfd* fds, nfds_t nfds, int timeout) {
  if (nfds && !fds) return RejectMinusOne(EFAULT, "rpoll: fds is NULL");
  std::vector<Rsocket*> sockets(nfds);
  for (nfds_t i = 0; i < nfds; ++i) sockets[i] = fds[i].fd >= 0 ? FindSocket(fds[i].fd) : nullptr;
  const int64_t deadline = timeout > 0 ? NowMs() + timeout : 0;
  std::vector<pollfd> wait;
  std::vector<Rsocket*> owner;
  for (;;) {
    int ready = CheckAll(fds, nfds, sockets);
    if (ready || timeout == 0) return ready;
    ArmAll(fds, nfds, sockets, &wait, &owner);
    ready = CheckAll(fds, nfds, sockets);  // what came in while arming
    if (ready) return ready;
    int wait_ms = -1;
    if (timeout > 0) {
      wait_ms = static_cast<int>(deadline - NowMs());
      if (wait_ms <= 0) return 0;
    }
    if (poll(wait.data(), wait.size(), wait_ms) < 0) return -1;
    for (size_t i = 0; i < wait.size(); ++i) {
      if (owner[i] && wait[i].revents) {
        std::lock_guard lock(owner[i]->mu);
        TakeCqEvent(*owner[i]);
      }
    }
    for (Rsocket* rs : sockets) {
      if (!rs) continue;
      std::lock_guard lock(rs->mu);
      if (rs->phase == Phase::kConnected && FdReadable(rs->id->channel->fd)) TakeCmEvent(*rs);
    }
  }
}

SV_EXPORT int rselect(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds,
                      timeval* timeout) {
  if (nfds < 0 || nfds > FD_SETSIZE) {
    return RejectMinusOne(EINVAL, "rselect: nfds %d is outside 0..FD_SETSIZE", nfds);
  }
  std::vector<pollfd> fds;
  for (int fd = 0; fd < nfds; ++fd) {
    short events = 0;
    if (readfds && FD_ISSET(fd, readfds)) events |= POLLIN;
    if (writefds && FD_ISSET(fd, writefds)) events |= POLLOUT;
    if (events || (exceptfds && FD_ISSET(fd, exceptfds))) fds.push_back({fd, events, 0});
  }
  const int ms = timeout ? static_cast<int>(timeout->tv_sec * 1000 + timeout->tv_usec / 1000) : -1;
  int ret = rpoll(fds.data(), fds.size(), ms);
  // As librdmacm's rselect: the sets are emptied whatever rpoll answered;
  // readable is POLLIN or POLLHUP, writable POLLOUT, and anything else
  // (POLLERR, POLLHUP, POLLNVAL) is an exception.
  if (readfds) FD_ZERO(readfds);
  if (writefds) FD_ZERO(writefds);
  if (exceptfds) FD_ZERO(exceptfds);
  if (ret < 0) return ret;
  int count = 0;
  for (const pollfd& p : fds) {
    if (readfds && (p.events & POLLIN) && (p.revents & (POLLIN | POLLHUP))) {
      FD_SET(p.fd, readfds);
      count++;
    }
    if (writefds && (p.events & POLLOUT) && (p.revents & POLLOUT)) {
      FD_SET(p.fd, writefds);
      count++;
    }
    if (exceptfds && (p.revents & ~(POLLIN | POLLOUT))) {
      FD_SET(p.fd, exceptfds);
      count++;
    }
  }
  return count;
}
