// A client of the daemon's control channel speaking the protocol itself
// (protocol/messages.h, protocol/call_page.h), for tests that send what the
// libraries never would: reliability.control_fuzz, reliability.kept_backing_names.
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/unix_socket.h"
#include "datapath/layout.h"
#include "protocol/messages.h"

namespace softverbs::test {

using protocol::Op;

[[noreturn]] inline void Die(const std::string& what) {
  fprintf(stderr, "%s: %s\n", program_invocation_short_name, what.c_str());
  exit(1);
}

// Dies naming the condition that failed.
#define RAW_CHECK(cond)                                                \
  do {                                                                 \
    if (!(cond)) ::softverbs::test::Die("FAIL: check failed: " #cond); \
  } while (0)

struct Answer {
  int err = 0;
  std::vector<uint8_t> body;
  std::string reason;
};

class Channel {
 public:
  explicit Channel(const std::string& path) : fd_(ConnectSeqpacket(path)) {
    if (fd_ < 0) Die("cannot connect to " + path + ": " + strerror(-fd_));
  }
  ~Channel() { close(fd_); }
  // Sends one request and waits (5 s at most) for its reply.
  // The descriptors the reply carries go to *fds_out (else are closed).
  Answer Call(uint16_t op, const void* body, size_t len, const int* fds = nullptr, size_t nfds = 0,
              std::vector<int>* fds_out = nullptr) {
    protocol::RequestHeader h{protocol::kProtocolVersion, op, 0, static_cast<uint32_t>(len),
                              ++seq_};
    if (int e = SendMessage(fd_, &h, sizeof(h), body, len, fds, nfds)) {
      Die(std::string("the daemon closed the connection at op ") +
          protocol::OpName(static_cast<Op>(op)) + ": " + strerror(e));
    }
    return Receive(op, seq_, fds_out);
  }
  // Waits (5 s at most) for the reply to request seq on the socket.
  Answer Receive(uint16_t op, uint32_t seq, std::vector<int>* fds_out = nullptr) {
    for (;;) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 5000) != 1) {
        Die(std::string("no reply in 5 s to op ") + protocol::OpName(static_cast<Op>(op)));
      }
      // Room for a status reply, as the library makes (daemon_channel.cc).
      static std::vector<uint8_t> buf(4 << 20);
      std::vector<int> got;
      const ssize_t n = ReceiveMessage(fd_, buf.data(), buf.size(), &got);
      for (int f : got) {
        if (fds_out) {
          fds_out->push_back(f);
        } else {
          close(f);
        }
      }
      if (n <= 0) {
        Die(std::string("the daemon closed the connection after op ") +
            protocol::OpName(static_cast<Op>(op)));
      }
      if (static_cast<size_t>(n) < sizeof(protocol::ReplyHeader)) Die("a short reply");
      protocol::ReplyHeader r;
      memcpy(&r, buf.data(), sizeof(r));
      if (r.seq != seq) continue;  // an event pushed on this connection
      Answer a;
      a.err = r.err;
      const size_t body_end = std::min<size_t>(n, sizeof(r) + r.body_size);
      a.body.assign(buf.begin() + sizeof(r), buf.begin() + body_end);
      a.reason.assign(reinterpret_cast<char*>(buf.data()) + body_end,
                      std::min<size_t>(r.reason_len, n - body_end));
      return a;
    }
  }
  int fd() const { return fd_; }
  // The next request's seq (for requests made through the call page).
  uint32_t NextSeq() { return ++seq_; }

 private:
  int fd_;
  uint32_t seq_ = 0;
};

// A context connection, greeted as the library greets it. The files the
// reply carries (the device table, the call page) go to *fds_out if given.
inline void GreetAsContext(Channel& c, std::vector<int>* fds_out = nullptr) {
  const int mem = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
  const int record = memfd_create("raw-client-record", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (mem < 0 || record < 0 || ftruncate(record, datapath::kAccessRecordSize) != 0 ||
      fcntl(record, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    Die("cannot make the hello's files");
  }
  protocol::HelloRequest h{};
  h.role = static_cast<uint32_t>(protocol::Role::kContext);
  h.pid = static_cast<uint32_t>(getpid());
  h.files = protocol::kHelloMemFd | protocol::kHelloAccessRecord;
  const int fds[] = {mem, record};
  Answer a = c.Call(static_cast<uint16_t>(Op::kHello), &h, sizeof(h), fds, 2, fds_out);
  if (a.err) Die("the context hello failed: " + a.reason);
  close(mem);
  close(record);
}

inline void GreetAsCli(Channel& c) {
  protocol::HelloRequest h{};
  h.role = static_cast<uint32_t>(protocol::Role::kCli);
  h.pid = static_cast<uint32_t>(getpid());
  if (c.Call(static_cast<uint16_t>(Op::kHello), &h, sizeof(h)).err) Die("the CLI hello failed");
}

}  // namespace softverbs::test
