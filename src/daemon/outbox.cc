#include "daemon/outbox.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common/unix_socket.h"

namespace softverbs::daemon {

namespace {

bool WouldBlock(int err) {
  return err == EAGAIN || err == EWOULDBLOCK;
}

}  // namespace

Outbox::~Outbox() {
  for (Message& m : queue_) {
    for (int fd : m.fds) close(fd);
  }
}

Outbox::Result Outbox::Send(int sock, const void* part1, size_t len1, const void* part2,
                            size_t len2, const int* fds, size_t nfds) {
  if (queue_.empty()) {
    int err = SendMessage(sock, part1, len1, part2, len2, fds, nfds);
    if (err == 0) return Result::kSent;
    if (!WouldBlock(err)) return Result::kBroken;
  }
  Message m;
  m.bytes.resize(len1 + len2);
  if (len1) memcpy(m.bytes.data(), part1, len1);
  if (len2) memcpy(m.bytes.data() + len1, part2, len2);
  for (size_t i = 0; i < nfds; ++i) {
    int copy = dup(fds[i]);
    if (copy < 0) {
      // Out of descriptors: the message cannot be kept whole.
      for (int fd : m.fds) close(fd);
      return Result::kBroken;
    }
    m.fds.push_back(copy);
  }
  queue_.push_back(std::move(m));
  return Result::kQueued;
}

bool Outbox::Flush(int sock) {
  while (!queue_.empty()) {
    Message& m = queue_.front();
    int err = SendMessage(sock, m.bytes.data(), m.bytes.size(), nullptr, 0,
                          m.fds.empty() ? nullptr : m.fds.data(), m.fds.size());
    if (WouldBlock(err)) return true;
    if (err != 0) return false;
    for (int fd : m.fds) close(fd);
    queue_.pop_front();
  }
  return true;
}

}  // namespace softverbs::daemon
