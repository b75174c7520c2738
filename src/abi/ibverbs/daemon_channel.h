// A context's connection to softverbsd: synchronous request/reply calls.
// Rejections come back with the rule that was broken, which Call() prints on
// the log channel.
//
// A process forked from the context's owner inherits the connection, as a
// child inherits the uverbs fd, and may call through it too (rdma-core's
// tests allocate from children). So the call lock and the sequence counter
// live in a MAP_SHARED page the child inherits: a robust process-shared mutex
// serialises every process's request/reply pair, and a reply whose seq is not
// the caller's (left by a process that died between its request and its
// reply) is skipped.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "protocol/call_page.h"
#include "protocol/messages.h"

namespace softverbs::provider {

class DaemonChannel {
 public:
  DaemonChannel() = default;
  DaemonChannel(const DaemonChannel&) = delete;
  DaemonChannel& operator=(const DaemonChannel&) = delete;
  ~DaemonChannel();

  // Connects to the user's daemon, starting one if none runs. Returns 0 or an
  // errno.
  int Connect(protocol::Role role);
  int fd() const { return fd_; }
  // Gives up ownership of the socket (the caller keeps the fd).
  int Release();
  // Takes fd, another descriptor of `from`'s connection (ibv_import_device),
  // and calls through it under `from`'s call lock, which lives as long as
  // either channel: two contexts then share one connection.
  void Adopt(const DaemonChannel& from, int fd);
  // Closes the connection (a later Connect opens a new one).
  void Disconnect();
  // Maps the call page the daemon's hello reply carried (fd stays the
  // caller's): from then on, calls without descriptors go through it
  // (protocol/call_page.h). Returns 0 or an errno (the socket still works).
  int AttachCallPage(int fd);
  // Whether the daemon's end has closed (seen by a call).
  bool gone() const { return gone_.load(std::memory_order_acquire); }

  // Sends op with req (and fds) and waits for the reply. Returns the daemon's
  // verdict (0 or positive errno); ENODEV when the daemon is gone, except
  // for the ops that release a resource, which then succeed (the resource
  // went with the device, device_fatal.h); on success copies up to rep_len bytes of the
  // reply body into rep. *rep_body_len, if given, receives the body length.
  // fds the reply carries are appended to *fds_out (closed when it is null).
  // A failed call also leaves its errno in errno, as a failed command to the
  // kernel does under rdma-core (programs print strerror(errno) after a
  // verb that returns the errno value).
  int Call(protocol::Op op, const void* req, size_t req_len, void* rep, size_t rep_len,
           const int* fds = nullptr, size_t nfds = 0, size_t* rep_body_len = nullptr,
           std::vector<int>* fds_out = nullptr);

  // Sends the daemon a registration's new memfd ahead of the registration
  // that names it (Op::kOfferBacking; no reply, no call lock: a message of
  // the SOCK_SEQPACKET socket is whole). Returns 0 or an errno.
  int OfferBacking(int memfd) { return OfferBackings(&memfd, 1); }
  // The same with up to kMaxFdsPerMessage memfds in one message (memfds
  // made ahead, ready_backings.h).
  int OfferBackings(const int* memfds, size_t count);

  // A call comes soon (a registration converts its range first): a daemon
  // that watches the call page is told to go on watching (CallPage::
  // calls_coming; no system call), one that does not is rung now (a
  // doorbell that names no request), so that it is awake and watching when
  // the call comes instead of being woken by it.
  void WakeAhead();

  // A fixed-size request and reply.
  template <typename Req, typename Rep>
  int Call(protocol::Op op, const Req& req, Rep* rep) {
    return Call(op, &req, sizeof(req), rep, sizeof(*rep));
  }
  // A fixed-size request whose reply carries no body.
  template <typename Req>
  int Call(protocol::Op op, const Req& req) {
    return Call(op, &req, sizeof(req), nullptr, 0);
  }

 private:
  // Wakes a daemon that does not watch the call page (Op::kCallDoorbell,
  // no reply; seq 0 names no request). 0 or an errno.
  int RingDoorbell(uint32_t seq);
  struct SharedCallState;  // daemon_channel.cc
  class CallLock;
  // Call without the errno: the request/reply exchange itself.
  int Exchange(protocol::Op op, const void* req, size_t req_len, void* rep, size_t rep_len,
               const int* fds, size_t nfds, size_t* rep_body_len, std::vector<int>* fds_out);
  // Receives the reply to request `seq`, skipping stale ones.
  ssize_t ReceiveReply(uint32_t seq, std::vector<uint8_t>& buf, std::vector<int>* fds_out);
  // The request through the call page; its reply (from the page, or from
  // the socket when the page says so) into buf. Returns its size, or < 0
  // when the daemon has gone.
  ssize_t CallThroughPage(const protocol::RequestHeader& hdr, const void* req, size_t req_len,
                          std::vector<uint8_t>& buf, std::vector<int>* fds_out);
  // The reply to seq as the page gives it: from the page, or from the
  // socket when the page says so. Its size, or < 0 when the daemon has gone.
  ssize_t ReceivePageReply(uint32_t seq, std::vector<uint8_t>& buf, std::vector<int>* fds_out);
  // Waits until the page holds the reply to seq. False: the daemon hung up.
  bool AwaitPageReply(uint32_t seq);
  // The call page, shared like the call lock (forked children, adopters).
  std::shared_ptr<protocol::CallPage> page_;
  // Mapped at Connect, shared with forked children and adopting channels.
  std::shared_ptr<SharedCallState> shared_;
  int fd_ = -1;
  std::atomic<bool> gone_{false};
  // How long the call in progress looks for its reply before it sleeps
  // (set by Exchange, under the call lock).
  int64_t reply_spin_ns_ = 0;
};

}  // namespace softverbs::provider
