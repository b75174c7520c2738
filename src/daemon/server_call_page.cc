// The daemon's end of the call page (protocol/call_page.h): requests taken
// from a context connection's shared page, replies put back into it.
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

#include "daemon/server.h"

namespace softverbs::daemon {

using protocol::CallPage;

int Server::OpenCallPage(Connection& conn) {
  const int fd = datapath::CreateSharedFile("softverbs-call-page", protocol::kCallPageSize);
  if (fd < 0) return -1;
  if (conn.page_mapping.Map(fd) != 0 || conn.page_mapping.size() != protocol::kCallPageSize) {
    conn.page_mapping.Reset();
    close(fd);
    return -1;
  }
  conn.page = static_cast<CallPage*>(conn.page_mapping.base());
  conn.page->daemon_cpu.store(UINT32_MAX, std::memory_order_relaxed);
  return fd;
}

void Server::WatchCallPage(Connection& conn) {
  if (!conn.page || conn.page_watched) return;
  conn.page_watched = true;
  conn.page->daemon_watching.store(1, std::memory_order_seq_cst);
  watched_pages_.push_back(conn.fd);
}

bool Server::ServeCallPage(Connection& conn) {
  if (!conn.page || !conn.out.empty()) return false;
  static thread_local uint8_t request[protocol::kCallPageRequestBytes];
  uint32_t seq = 0;
  size_t size = 0;
  if (!protocol::TakeRequest(conn.page, conn.page_taken, request, &seq, &size)) return false;
  conn.page_taken = seq;
  conn.page->taken_seq.store(seq, std::memory_order_release);
  ++calls_.by_page;
  cpu_sharing_.NoteCaller(conn.page->client_cpu.load(std::memory_order_relaxed));
  const int own_cpu = sched_getcpu();
  conn.page->daemon_cpu.store(own_cpu >= 0 ? static_cast<uint32_t>(own_cpu) : UINT32_MAX,
                              std::memory_order_relaxed);
  WatchCallPage(conn);
  const int fd = conn.fd;
  protocol::RequestHeader hdr{};
  conn.page_replying = seq;
  if (size < sizeof(hdr)) {
    Reply(conn, seq, Verdict::Fail(EPROTO, "call page: request shorter than its header"), nullptr,
          0);
  } else {
    memcpy(&hdr, request, sizeof(hdr));
    if (hdr.version != protocol::kProtocolVersion || hdr.body_size != size - sizeof(hdr) ||
        hdr.seq != seq) {
      Reply(conn, seq,
            Verdict::Fail(EPROTO,
                          "call page: protocol version, size or seq mismatch (library and daemon "
                          "differ)"),
            nullptr, 0);
    } else if (static_cast<protocol::Op>(hdr.op) == protocol::Op::kCallDoorbell) {
      Reply(conn, seq, Verdict::Fail(EPROTO, "call page: a doorbell is not a request"), nullptr, 0);
    } else {
      std::vector<int> no_fds;
      wire_.TakeEveryRingPost();  // posted before the request, as for the socket
      Dispatch(conn, hdr, request + sizeof(hdr), hdr.body_size, no_fds);
    }
  }
  // conn may have been closed by now (its request doomed it, or another).
  if (auto it = connections_.find(fd); it != connections_.end()) {
    it->second.page_replying = 0;
  }
  FinishRequest();
  return true;
}

bool Server::ServeWatchedPages() {
  bool served = false;
  // A copy: serving may close connections (and so edit the list).
  const std::vector<int> watched = watched_pages_;
  for (int fd : watched) {
    auto it = connections_.find(fd);
    if (it != connections_.end() && ServeCallPage(it->second)) served = true;
  }
  return served;
}

bool Server::CallsComingOnWatchedPages() {
  bool coming = false;
  for (int fd : watched_pages_) {
    auto it = connections_.find(fd);
    if (it == connections_.end() || !it->second.page) continue;
    const uint32_t now = it->second.page->calls_coming.load(std::memory_order_relaxed);
    if (now != it->second.calls_coming_seen) {
      it->second.calls_coming_seen = now;
      coming = true;
    }
  }
  return coming;
}

bool Server::UnwatchCallPages() {
  const std::vector<int> watched = std::move(watched_pages_);
  watched_pages_.clear();
  for (int fd : watched) {
    auto it = connections_.find(fd);
    if (it == connections_.end() || !it->second.page) continue;
    it->second.page_watched = false;
    it->second.page->daemon_watching.store(0, std::memory_order_seq_cst);
  }
  // A request published before the library could see the flag cleared
  // came without a doorbell: serve it now (which watches its page again).
  bool served = false;
  for (int fd : watched) {
    auto it = connections_.find(fd);
    if (it != connections_.end() && ServeCallPage(it->second)) served = true;
  }
  return served;
}

void Server::ReplyThroughPage(Connection& conn, uint32_t seq, const std::vector<uint8_t>& msg,
                              const std::vector<int>& fds) {
  CallPage* page = conn.page;
  if (fds.empty() && msg.size() <= protocol::kCallPageReplyBytes) {
    memcpy(page->reply, msg.data(), msg.size());
    page->reply_size.store(static_cast<uint32_t>(msg.size()), std::memory_order_relaxed);
    page->reply_on_socket.store(0, std::memory_order_relaxed);
  } else {
    // Descriptors travel only over the socket; the page says where to look.
    Outbox::Result r = conn.out.Send(conn.fd, msg.data(), msg.size(), nullptr, 0,
                                     fds.empty() ? nullptr : fds.data(), fds.size());
    if (r == Outbox::Result::kBroken) doomed_.push_back(conn.fd);
    page->reply_on_socket.store(1, std::memory_order_relaxed);
    UpdateInterest(conn);
  }
  page->reply_seq.store(seq, std::memory_order_seq_cst);
  if (page->client_sleeping.load(std::memory_order_seq_cst) != 0) {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&page->reply_seq), FUTEX_WAKE, INT_MAX, nullptr,
            nullptr, 0);
  }
}

}  // namespace softverbs::daemon
