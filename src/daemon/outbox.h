// A connection's outgoing messages. The daemon is one thread serving every
// client, so it never waits for a client to read: a message the socket does
// not take at once (its buffer is full because the client is not reading)
// waits here, in order, and goes out when the socket is writable again. How
// much may wait is the server's policy (docs/architecture.md, "A client that
// does not read"): at most one reply per connection, at most
// kMaxQueuedEvents async events.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <deque>
#include <vector>

namespace softverbs::daemon {

// As many async events as an mlx5 device's async event queue holds
// (MLX5_NUM_ASYNC_EQE): what a client has not read beyond that (and beyond
// what its socket buffer holds) is dropped and counted.
inline constexpr size_t kMaxQueuedEvents = 4096;

class Outbox {
 public:
  Outbox() = default;
  Outbox(const Outbox&) = delete;
  Outbox& operator=(const Outbox&) = delete;
  ~Outbox();

  enum class Result {
    kSent,    // the socket took it
    kQueued,  // it waits here (the socket is full, or older messages wait)
    kBroken,  // the connection is gone or cannot take it; nothing waits
  };
  // Sends one message (header and body, and fds) on the non-blocking socket,
  // or queues it behind what already waits. Queued fds are duplicated (the
  // objects they belong to may go before the message leaves).
  Result Send(int sock, const void* part1, size_t len1, const void* part2, size_t len2,
              const int* fds = nullptr, size_t nfds = 0);
  // Sends what waits while the socket takes it. False when the connection is
  // broken.
  bool Flush(int sock);

  bool empty() const { return queue_.empty(); }
  size_t size() const { return queue_.size(); }

 private:
  struct Message {
    std::vector<uint8_t> bytes;
    std::vector<int> fds;  // owned
  };
  std::deque<Message> queue_;
};

}  // namespace softverbs::daemon
