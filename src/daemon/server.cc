#include "daemon/server.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <random>

#include "common/log.h"
#include "common/runtime_dir.h"
#include "common/unix_socket.h"
#include "daemon/cm_wire.h"
#include "daemon/devx_service.h"

namespace softverbs::daemon {

using protocol::Op;

Server::Server(ServerOptions options) : options_(std::move(options)) {
  device_.set_event_sink(
      [this](ClientId c, const protocol::AsyncEventRecord& rec) { PushEvent(c, rec); });
  cm_.set_event_sink([this](int fd, const protocol::CmEventRecord& rec) { PushCmEvent(fd, rec); });
  ConnectCmToWire(cm_, wire_, device_.active_mtu(), GuidFromMac(device_.gids().mac));
  device_.set_qp_change_sink([this](uint32_t qpn) { wire_.NoteQpChanged(qpn); });
  device_.set_mr_gone_sink([this](uint32_t key) { wire_.NoteMrGone(key); });
}

void Server::WatchWireFd(int fd, bool add) {
  if (!add) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    return;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
}

Server::~Server() {
  for (auto& [fd, conn] : connections_) close(fd);
  if (listen_fd_ >= 0) close(listen_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (reserve_fd_ >= 0) close(reserve_fd_);
}

namespace {

// How long accepting pauses when a connection cannot even be refused (no
// descriptor at all): the daemon must not spin on a failing accept4.
constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);

int OpenReserveFd() {
  return open("/dev/null", O_RDONLY | O_CLOEXEC);
}

}  // namespace

int Server::Listen() {
  // The data path keeps a few fds per CQ, QP, SRQ and MR: take every fd the
  // hard limit allows.
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
  listen_fd_ = ListenSeqpacket(DaemonSocketPath(options_.runtime_dir));
  if (listen_fd_ < 0) return -listen_fd_;
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  reserve_fd_ = OpenReserveFd();
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listen_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  // QP1 answers from the start, as a RoCE NIC's does: another host's CM
  // MADs arrive even before any QP or listener exists here (a REQ for a
  // port nobody listens on gets its REJ).
  wire_.OpenCarriers();
  return 0;
}

// A client that made a request often makes the next one right away
// (registrations, deregistrations, QP setup). Sleeping in epoll_wait and
// being woken by it costs about 8 us on these VMs, a third of a request's
// round trip; so after a wake-up that served a control request, the daemon
// looks again for up to kBusySpin before it sleeps. Bounded: an idle daemon
// sleeps as before. Network traffic (carriers, doorbells) does not make it
// spin: with more busy processes than cores (two perftest processes polling,
// two daemons on two cores) the spin took the core the peer's next step
// needed - 8-byte ib_write_lat across hosts 87 -> 53 us typical, 170 -> 70 us
// average without it (docs/roce.md).
//
// The timeout has microseconds (epoll_pwait2, Linux 5.11): the transport's
// timers are that fine - an RNR wait of 10 us, a kept packet tried again
// every 100 us -, and epoll_wait's milliseconds made each of them last 1 ms
// at least. A kernel without it: milliseconds, rounded up.
int Server::WaitForEvents(epoll_event* events, int max, int64_t timeout_us) {
  constexpr auto kBusySpin = std::chrono::microseconds(50);
  if (busy_) {
    // The watched call pages are looked at between the socket checks.
    auto until = std::chrono::steady_clock::now() + kBusySpin;
    uint32_t round = 0;
    do {
      int n = epoll_wait(epoll_fd_, events, max, 0);
      if (n != 0) return n;
      if (ServeWatchedPages()) return 0;
      // A client said it calls soon (a registration converting its range):
      // another spin's time from now, so that the call finds the daemon
      // awake. Each extension needs a call of the client's to come.
      if (CallsComingOnWatchedPages()) until = std::chrono::steady_clock::now() + kBusySpin;
      // A client the scheduler put on this CPU (it woke the daemon here)
      // gets it back within a few rounds, instead of after the whole spin:
      // a call right after one that woke the daemon took 62-70 us instead
      // of 2. Only then: a yield hands the CPU to any task that wants it,
      // until that one's slice ends - the device's own release thread
      // freeing 64 MiB kept the daemon from its next call for 4 ms while
      // the other CPU was idle (session 35, `perf sched timehist`).
      if (++round % 4 == 0 && cpu_sharing_.LastCallerHere()) sched_yield();
    } while (std::chrono::steady_clock::now() < until);
  }
  // Asleep, the daemon sees a page request only by its doorbell.
  if (timeout_us > 0 && UnwatchCallPages()) return 0;
  if (timeout_us > 0) cpu_sharing_.NoteSleep();
  static bool no_pwait2 = false;
  if (!no_pwait2) {
    const timespec timeout{static_cast<time_t>(timeout_us / 1000000),
                           static_cast<long>(timeout_us % 1000000) * 1000};
    const int n = epoll_pwait2(epoll_fd_, events, max, &timeout, nullptr);
    if (n >= 0 || errno != ENOSYS) return n;
    no_pwait2 = true;
  }
  return epoll_wait(epoll_fd_, events, max, static_cast<int>((timeout_us + 999) / 1000));
}

int Server::Run() {
  using Clock = std::chrono::steady_clock;
  auto idle_since = Clock::now();
  while (!stopping_) {
    epoll_event events[32];
    int64_t timeout_us = (accept_paused_ ? kAcceptBackoff.count() : 1000) * int64_t{1000};
    if (int cm_ms = cm_.MsUntilNextTimer(); cm_ms >= 0 && cm_ms * int64_t{1000} < timeout_us) {
      timeout_us = cm_ms * int64_t{1000};
    }
    if (int64_t wire_us = wire_.UsUntilNextTimer(); wire_us >= 0 && wire_us < timeout_us) {
      timeout_us = wire_us;
    }
    // Posts in a doorbell ring: look at the sockets and go on at once.
    // Else the packets held back from the last rounds go before the device
    // can sleep.
    const bool posts_waiting = wire_.ArmDoorbells();
    if (posts_waiting) timeout_us = 0;
    if (held_rounds_ > 0 && (!posts_waiting || held_rounds_ >= kMaxHeldRounds)) {
      wire_.FlushSends();
      held_rounds_ = 0;
    }
    const uint64_t page_calls = calls_.by_page;
    int n = WaitForEvents(events, 32, timeout_us);
    if (n < 0 && errno != EINTR) return 1;
    busy_ = calls_.by_page != page_calls;  // it served a call page
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd == listen_fd_) {
        Accept();
      } else {
        busy_ = busy_ || !wire_.Owns(events[i].data.fd);
        HandleEvent(events[i].data.fd, events[i].events);
      }
    }
    // Every round looks at the watched call pages: with events ready at
    // every wait (a network transfer's packets) WaitForEvents returns
    // before it looks, and a request that came without a doorbell waited
    // for the traffic to stop.
    if (ServeWatchedPages()) busy_ = true;
    cpu_sharing_.MoveOffIfShared();
    if (accept_paused_ && Clock::now() >= accept_resume_) {
      accept_paused_ = false;
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.fd = listen_fd_;
      epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
    }
    cm_.RunTimers();
    wire_.RunTimers();
    wire_.ApplyChanges();
    // What this round sent goes now, as runs (UDP GSO) where it can - unless
    // the round took posts from a ring: until a ring is found empty (or a
    // run is full) the packets wait for the next round's, so that a context
    // posting a batch makes one run of it and wakes the peer's daemon once.
    if (wire_.TakeRingPosts() > 0) {
      held_rounds_++;
    } else {
      wire_.FlushSends();
      held_rounds_ = 0;
    }
    if (!connections_.empty()) {
      idle_since = Clock::now();
    } else if (options_.idle_timeout.count() > 0 &&
               Clock::now() - idle_since >= options_.idle_timeout) {
      break;
    }
  }
  unlink(DaemonSocketPath(options_.runtime_dir).c_str());
  return 0;
}

void Server::Accept() {
  // A bounded batch: a storm of connections must not starve the clients
  // already served.
  for (int i = 0; i < 64; ++i) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        RefuseForLackOfDescriptors();
      }
      return;
    }
    PeerCredentials creds;
    // One user's processes never reach another user's device, whatever the
    // directory permissions say.
    if (GetPeerCredentials(fd, &creds) != 0 || creds.uid != getuid()) {
      close(fd);
      continue;
    }
    int sndbuf = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
    auto [it, inserted] = connections_.try_emplace(fd);
    it->second.fd = fd;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }
}

void Server::RefuseForLackOfDescriptors() {
  rlimit nofile{};
  getrlimit(RLIMIT_NOFILE, &nofile);
  if (reserve_fd_ >= 0) {
    close(reserve_fd_);
    reserve_fd_ = -1;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      // The client's hello is usually waiting already: answer it by its
      // sequence number (else seq 0, which the library takes as a refusal of
      // the connection). Either way the error goes out before the close, and
      // the library reads it even if its hello then finds the socket closed.
      uint8_t buf[sizeof(protocol::RequestHeader) + sizeof(protocol::HelloRequest)];
      protocol::RequestHeader hdr{};
      ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (n >= static_cast<ssize_t>(sizeof(hdr))) memcpy(&hdr, buf, sizeof(hdr));
      std::string why = "softverbsd has no file descriptor left (RLIMIT_NOFILE " +
                        std::to_string(nofile.rlim_cur) +
                        "): close contexts or objects of this user, or raise the hard limit";
      protocol::ReplyHeader rh{hdr.seq, ENOMEM, 0, static_cast<uint16_t>(why.size()), 0};
      SendMessage(fd, &rh, sizeof(rh), why.data(), why.size());
      close(fd);
      static bool logged = false;  // once: the log must not grow with every refusal
      if (!logged) {
        fprintf(stderr, "softverbsd: %s; refusing new clients until some are released\n",
                why.c_str());
        logged = true;
      }
    }
    reserve_fd_ = OpenReserveFd();
    if (reserve_fd_ >= 0) return;
  }
  // Nothing to refuse with: stop accepting for a moment rather than spin.
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
  accept_paused_ = true;
  accept_resume_ = std::chrono::steady_clock::now() + kAcceptBackoff;
}

void Server::HandleEvent(int fd, uint32_t events) {
  if (wire_.Owns(fd)) {
    wire_.OnReadable(fd);
    wire_.ApplyChanges();
    return;
  }
  auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  if ((events & (EPOLLHUP | EPOLLERR)) && !it->second.reading) {
    // Gone while a reply waited: nothing it sent still matters.
    Close(fd);
    return;
  }
  if (events & EPOLLOUT) HandleWritable(fd);
  if (events & EPOLLIN) wire_.TakeEveryRingPost();  // posted before the request
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) HandleReadable(fd);
  FinishRequest();
  // A doorbell (or an outbox that drained) leaves a page request to serve.
  if (auto conn = connections_.find(fd); conn != connections_.end() && conn->second.page) {
    ServeCallPage(conn->second);
  }
}

void Server::FinishRequest() {
  // Closing releases objects, which may raise events and doom others.
  while (!doomed_.empty()) {
    int doomed = doomed_.back();
    doomed_.pop_back();
    Close(doomed);
  }
  // A request may have changed QPs the network transport serves.
  wire_.ApplyChanges();
}

void Server::HandleWritable(int fd) {
  auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  Connection& conn = it->second;
  if (!conn.out.Flush(fd)) {
    doomed_.push_back(fd);
    return;
  }
  UpdateInterest(conn);
}

void Server::UpdateInterest(Connection& conn) {
  // A reply waiting means the client is not reading: its next requests wait
  // in its own socket until it does (it is the only one held back).
  const bool writing = !conn.out.empty();
  const bool reading = conn.role == protocol::Role::kEvents || !writing;
  if (writing == conn.writing && reading == conn.reading) return;
  conn.writing = writing;
  conn.reading = reading;
  epoll_event ev{};
  ev.events = (reading ? EPOLLIN : 0u) | (writing ? EPOLLOUT : 0u);
  ev.data.fd = conn.fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, conn.fd, &ev);
}

void Server::Close(int fd) {
  auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  const protocol::Role role = it->second.role;
  const bool greeted = it->second.greeted;
  const ClientId client = it->second.client;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  close(fd);
  connections_.erase(it);
  std::erase(watched_pages_, fd);
  if (role == protocol::Role::kContext && greeted) {
    wire_.RemoveClient(client);
    device_.ClientLeft(client);
    // Its rdma_cm ids end as if destroyed, and its event channels close.
    for (int channel_fd : cm_.RemoveClient(client)) Close(channel_fd);
    if (auto ev = event_fds_.find(client); ev != event_fds_.end()) {
      // The event connection belongs to the same context; it ends with it.
      int efd = ev->second;
      event_fds_.erase(ev);
      Close(efd);
    }
  } else if (role == protocol::Role::kCmEvents) {
    cm_.RemoveChannel(fd);
  } else if (role == protocol::Role::kEvents) {
    if (auto ev = event_fds_.find(client); ev != event_fds_.end() && ev->second == fd) {
      event_fds_.erase(ev);
      // Another context sharing the connection (ibv_import_device) takes the
      // events over.
      for (const auto& [other_fd, other] : connections_) {
        if (other.role == protocol::Role::kEvents && other.greeted && other.client == client) {
          event_fds_.emplace(client, other_fd);
          break;
        }
      }
    }
  }
}

void Server::HandleReadable(int fd) {
  static thread_local std::vector<uint8_t> buf(protocol::kMaxMessageSize);
  std::vector<int> fds;
  ssize_t n = ReceiveMessage(fd, buf.data(), buf.size(), &fds);
  if (n == -EAGAIN || n == -EWOULDBLOCK) return;  // nothing after all (a stale readiness)
  if (n <= 0) {
    for (int f : fds) close(f);
    Close(fd);
    return;
  }
  auto it = connections_.find(fd);
  if (it == connections_.end() || static_cast<size_t>(n) < sizeof(protocol::RequestHeader)) {
    for (int f : fds) close(f);
    Close(fd);
    return;
  }
  protocol::RequestHeader hdr;
  memcpy(&hdr, buf.data(), sizeof(hdr));
  if (hdr.version != protocol::kProtocolVersion ||
      hdr.body_size != n - sizeof(protocol::RequestHeader)) {
    Reply(it->second, hdr.seq,
          Verdict::Fail(EPROTO, "protocol version or size mismatch (library and daemon differ)"),
          nullptr, 0);
    for (int f : fds) close(f);
    return;
  }
  if (hdr.op != static_cast<uint16_t>(Op::kCallDoorbell) &&
      hdr.op != static_cast<uint16_t>(Op::kOfferBacking)) {
    ++calls_.by_socket;
  }
  // A context that calls (here: a request with descriptors) often calls
  // again at once, through its page.
  WatchCallPage(it->second);
  // Its reply through the page, if it asks (the library then waits there).
  if ((hdr.flags & protocol::kReplyThroughPage) && it->second.page && hdr.seq != 0) {
    it->second.page_replying = hdr.seq;
    ++calls_.socket_answered_by_page;
  }
  Dispatch(it->second, hdr, buf.data() + sizeof(hdr), hdr.body_size, fds);
  if (auto again = connections_.find(fd); again != connections_.end()) {
    again->second.page_replying = 0;
  }
  for (int f : fds) close(f);
}

void Server::TakeOffer(Connection& conn, size_t len, const std::vector<int>& fds) {
  // No reply: the registration naming the memfd follows through the page
  // (watched since this message came, HandleEvent).
  // One memfd (a registration's, offered as it converts) or a few (made
  // ahead for the registrations to come).
  ++calls_.backings_offered;
  calls_.backing_memfds_offered += fds.size();
  Verdict v = len != 0 || fds.empty()
                  ? Verdict::Fail(EPROTO, "offer_backing: no body and one memfd or more expected")
                  : Verdict::Ok();
  for (size_t i = 0; v.ok() && i < fds.size(); ++i) {
    v = device_.KeepOfferedBacking(conn.client, fds[i]);
  }
  // No reply to carry the reason: the log has the first few (a client
  // sending nothing else could fill it), the status the count.
  constexpr uint64_t kRefusalsLogged = 8;
  if (!v.ok() && ++calls_.offers_refused <= kRefusalsLogged) {
    fprintf(stderr, "softverbsd: client %u: %s (its registration naming it is told ESTALE)%s\n",
            static_cast<unsigned>(conn.client), v.why.c_str(),
            calls_.offers_refused == kRefusalsLogged ? "; further refused offers are counted "
                                                       "in the status, not logged"
                                                     : "");
  }
}

void Server::TakePendingOffers(Connection& conn) {
  // The offer went over the socket before the registration was written to
  // the page, but the daemon may see the page first. Only offers are read
  // here, in order, up to the first other message (which waits for the
  // event loop, as it would have); each is a bare header with one memfd.
  // Bounded: the library offers one memfd per registration, and may have
  // a few from other threads' registrations ahead of this one.
  constexpr int kMostTaken = 64;
  for (int taken = 0; taken < kMostTaken; ++taken) {
    protocol::RequestHeader hdr;
    const ssize_t peeked = recv(conn.fd, &hdr, sizeof(hdr), MSG_PEEK | MSG_DONTWAIT);
    if (peeked != static_cast<ssize_t>(sizeof(hdr)) || hdr.version != protocol::kProtocolVersion ||
        hdr.op != static_cast<uint16_t>(Op::kOfferBacking) || hdr.body_size != 0) {
      return;
    }
    std::vector<int> fds;
    protocol::RequestHeader again;
    if (ReceiveMessage(conn.fd, &again, sizeof(again), &fds) !=
        static_cast<ssize_t>(sizeof(again))) {
      for (int f : fds) close(f);
      return;  // cannot be (it was peeked whole): the event loop sees the rest
    }
    ++calls_.offers_read_early;
    TakeOffer(conn, 0, fds);
    for (int f : fds) close(f);
  }
}

void Server::Reply(Connection& conn, uint32_t seq, const Verdict& v, const void* body,
                   size_t body_len, const std::vector<int>& fds) {
  std::vector<uint8_t> msg(sizeof(protocol::ReplyHeader) + body_len + v.why.size());
  protocol::ReplyHeader hdr{
      seq, v.err, static_cast<uint32_t>(body_len),
      static_cast<uint16_t>(v.ok() ? 0 : std::min<size_t>(v.why.size(), 4000)), 0};
  memcpy(msg.data(), &hdr, sizeof(hdr));
  if (body_len) memcpy(msg.data() + sizeof(hdr), body, body_len);
  if (hdr.reason_len) memcpy(msg.data() + sizeof(hdr) + body_len, v.why.data(), hdr.reason_len);
  msg.resize(sizeof(hdr) + body_len + hdr.reason_len);
  std::vector<int> valid_fds;
  if (v.ok()) {
    for (int fd : fds) {
      if (fd >= 0) valid_fds.push_back(fd);
    }
  }
  if (conn.page && seq != 0 && seq == conn.page_replying) {
    conn.page_replying = 0;  // one reply per request
    return ReplyThroughPage(conn, seq, msg, valid_fds);
  }
  Outbox::Result r =
      conn.out.Send(conn.fd, msg.data(), msg.size(), nullptr, 0,
                    valid_fds.empty() ? nullptr : valid_fds.data(), valid_fds.size());
  if (r == Outbox::Result::kBroken) {
    doomed_.push_back(conn.fd);
    return;
  }
  UpdateInterest(conn);
}

// rdma_cm events are never dropped (an application waits for each one); a
// channel that does not read them is bounded by what its ids can cause.
void Server::PushCmEvent(int fd, const protocol::CmEventRecord& rec) {
  auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  Connection& conn = it->second;
  if (conn.out.Send(conn.fd, &rec, sizeof(rec), nullptr, 0) == Outbox::Result::kBroken) {
    doomed_.push_back(conn.fd);
    return;
  }
  UpdateInterest(conn);
}

void Server::PushEvent(ClientId client, const protocol::AsyncEventRecord& rec) {
  auto it = event_fds_.find(client);
  if (it == event_fds_.end()) return;
  auto conn_it = connections_.find(it->second);
  if (conn_it == connections_.end()) return;
  Connection& conn = conn_it->second;
  if (conn.out.size() >= kMaxQueuedEvents) {
    // The client's event queue overflowed (it does not read its async fd):
    // as a full hardware event queue, later events are lost. They are
    // counted, shown by `softverbs status`, and the next event delivered
    // says how many were lost before it (the library logs it).
    ++conn.events_dropped;
    device_.CountDroppedEvent(client);
    return;
  }
  protocol::AsyncEventRecord out = rec;
  out.dropped_before = conn.events_dropped;
  conn.events_dropped = 0;
  Outbox::Result r = conn.out.Send(conn.fd, &out, sizeof(out), nullptr, 0);
  if (r == Outbox::Result::kBroken) {
    doomed_.push_back(conn.fd);
    return;
  }
  UpdateInterest(conn);
}

namespace {

std::string CommandOf(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/comm");
  std::string comm;
  std::getline(f, comm);
  return comm;
}

}  // namespace

void Server::Dispatch(Connection& conn, const protocol::RequestHeader& hdr, const uint8_t* body,
                      size_t len, std::vector<int>& fds) {
  const Op op = static_cast<Op>(hdr.op);
  auto reply = [&](const Verdict& v, const auto& out) {
    Reply(conn, hdr.seq, v, &out, sizeof(out));
  };
  auto reply_empty = [&](const Verdict& v) { Reply(conn, hdr.seq, v, nullptr, 0); };
  auto bad_size = [&] { reply_empty(Verdict::Fail(EPROTO, "malformed request body")); };
#define SV_BODY(T, name) \
  T name;                \
  if (!ReadBody(body, len, &name)) return bad_size()

  if (!conn.greeted) {
    if (op != Op::kHello) return reply_empty(Verdict::Fail(EPROTO, "hello expected first"));
    SV_BODY(protocol::HelloRequest, req);
    conn.role = static_cast<protocol::Role>(req.role);
    PeerCredentials creds;
    GetPeerCredentials(conn.fd, &creds);
    protocol::HelloReply out{};
    if (conn.role == protocol::Role::kContext) {
      // The files, in HelloFile order.
      size_t next = 0;
      auto take = [&](uint32_t bit) {
        return (req.files & bit) && next < fds.size() ? fds[next++] : -1;
      };
      const int mem_fd = take(protocol::kHelloMemFd);
      const int record_fd = take(protocol::kHelloAccessRecord);
      const int self_fd = take(protocol::kHelloSelf);
      const int join_fd = take(protocol::kHelloJoin);
      ClientId join = 0;
      if (req.files & protocol::kHelloJoin) {
        // The context whose connection the importer holds a descriptor of.
        struct stat st {};
        if (join_fd < 0 || fstat(join_fd, &st) != 0) {
          return reply_empty(Verdict::Fail(EBADF, "import: no descriptor came with the request"));
        }
        for (const auto& [fd, other] : connections_) {
          if (other.role == protocol::Role::kContext && other.greeted && other.peer_ino != 0 &&
              other.peer_ino == st.st_ino && other.peer_dev == st.st_dev) {
            join = other.client;
          }
        }
        if (!join) {
          return reply_empty(Verdict::Fail(
              EINVAL, "import: the descriptor is not the connection of an open softverbs context"));
        }
      }
      // Its access record first: the one refusal after which nothing of the
      // client exists yet.
      const ClientId client = next_client_;
      if (Verdict v = device_.SetClientAccessRecord(client, record_fd); !v.ok()) {
        return reply_empty(v);
      }
      conn.client = next_client_++;
      std::random_device rd;
      conn.token = (static_cast<uint64_t>(rd()) << 32) | rd();
      device_.AddClient({conn.client, creds.pid, creds.uid, CommandOf(creds.pid)});
      if (join) device_.JoinGroup(conn.client, join);
      if (self_fd >= 0) {
        struct stat st {};
        if (fstat(self_fd, &st) == 0) {
          conn.peer_dev = st.st_dev;
          conn.peer_ino = st.st_ino;
        }
      }
      if (mem_fd >= 0) device_.SetClientMemFd(conn.client, dup(mem_fd));
    } else if (conn.role == protocol::Role::kEvents) {
      bool found = false;
      for (auto& [fd, other] : connections_) {
        if (other.role == protocol::Role::kContext && other.greeted &&
            other.token == req.context_token) {
          conn.client = other.client;
          found = true;
        }
      }
      if (!found) return reply_empty(Verdict::Fail(EINVAL, "unknown context token"));
      // A client's events go to its first event connection, as the kernel's
      // to the ufile's default async file: a context imported from it
      // (ibv_import_device) opens another, which gets none.
      event_fds_.emplace(conn.client, conn.fd);
      // Events are small: a small socket buffer keeps the bound on unread
      // events (kMaxQueuedEvents) what decides, whatever the host's wmem.
      int sndbuf = 64 << 10;
      setsockopt(conn.fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
    } else if (conn.role == protocol::Role::kCmEvents) {
      // A librdmacm event channel of the context whose client id it names.
      bool found = false;
      for (auto& [fd, other] : connections_) {
        if (other.role == protocol::Role::kContext && other.greeted &&
            other.client == req.context_token) {
          found = true;
        }
      }
      if (!found) return reply_empty(Verdict::Fail(EINVAL, "unknown context for an event channel"));
      conn.client = static_cast<ClientId>(req.context_token);
      conn.token = cm_.AddChannel(conn.client, conn.fd);
    } else if (conn.role != protocol::Role::kCli) {
      return reply_empty(Verdict::Fail(EPROTO, "unknown role"));
    }
    conn.greeted = true;
    out.context_token = conn.token;
    out.client_id = conn.client;
    out.active_mtu = device_.active_mtu();
    out.gids = device_.gids();
    out.group_id = device_.GroupOf(conn.client);
    out.multicast_gids = wire_.MulticastGids();
    std::vector<int> out_fds;
    int page_fd = -1;
    if (conn.role == protocol::Role::kContext) {
      // The data path: the device table out (the client's files came in
      // above), then the call page, when one could be made.
      if (device_.table_fd() >= 0) {
        out_fds.push_back(device_.table_fd());
        page_fd = OpenCallPage(conn);
        if (page_fd >= 0) out_fds.push_back(page_fd);
      }
    }
    Reply(conn, hdr.seq, Verdict::Ok(), &out, sizeof(out), out_fds);
    if (page_fd >= 0) close(page_fd);  // sent (or duplicated into the outbox)
    return;
  }

  if (conn.role == protocol::Role::kCli) {
    if (op == Op::kStatus) {
      std::string json = device_.StatusJson();
      // The connection manager's ids join the device's report.
      if (json.size() > 1 && json.back() == '}') {
        json.pop_back();
        json += ",\"cm_ids\":" + cm_.StatusJson() + ",\"cm\":" + cm_.CountersJson() +
                ",\"roce\":" + wire_.StatusJson() +
                ",\"control\":{\"requests_by_socket\":" + std::to_string(calls_.by_socket) +
                ",\"requests_by_call_page\":" + std::to_string(calls_.by_page) +
                ",\"call_page_doorbells\":" + std::to_string(calls_.doorbells) +
                ",\"backings_offered\":" + std::to_string(calls_.backings_offered) +
                ",\"backing_memfds_offered\":" + std::to_string(calls_.backing_memfds_offered) +
                ",\"backing_offers_refused\":" + std::to_string(calls_.offers_refused) +
                ",\"backing_offers_read_early\":" + std::to_string(calls_.offers_read_early) +
                ",\"socket_requests_answered_through_call_page\":" +
                std::to_string(calls_.socket_answered_by_page) +
                ",\"moves_off_a_callers_cpu\":" + std::to_string(cpu_sharing_.moves()) + "}}";
      }
      return Reply(conn, hdr.seq, Verdict::Ok(), json.data(), json.size());
    }
    if (op == Op::kShutdown) {
      stopping_ = true;
      return reply_empty(Verdict::Ok());
    }
    return reply_empty(Verdict::Fail(EPERM, "the CLI may only ask for status or shutdown"));
  }
  if (conn.role != protocol::Role::kContext) {
    return reply_empty(Verdict::Fail(EPROTO, "event connections carry no requests"));
  }
  const ClientId c = conn.client;
  if (op == Op::kCallDoorbell) {
    // No reply: the request is in the page, served once this event is
    // handled (HandleEvent), or already, while the daemon looked.
    ++calls_.doorbells;
    return WatchCallPage(conn);
  }
  if (op == Op::kOfferBacking) return TakeOffer(conn, len, fds);
  if (DispatchDatapath(conn, hdr, body, len, fds)) return;
  if (op == Op::kCmMigrateDone) {
    protocol::CmMigrateDone done;
    if (len < sizeof(done)) return bad_size();
    memcpy(&done, body, sizeof(done));
    if (len != sizeof(done) + static_cast<size_t>(done.count) * sizeof(protocol::CmEventRecord)) {
      return bad_size();
    }
    std::vector<protocol::CmEventRecord> records(done.count);
    if (done.count) memcpy(records.data(), body + sizeof(done), len - sizeof(done));
    return reply_empty(cm_.MigrateDone(c, done, records.data()));
  }
  if (op >= Op::kCmCreateId && op <= Op::kCmLeaveMcast) {
    SV_BODY(protocol::CmRequest, req);
    protocol::CmReply out{};
    return reply(cm_.Handle(c, op, req, &out), out);
  }
  switch (op) {
    case Op::kAllocPd: {
      protocol::AllocPdReply out{};
      return reply(device_.AllocPd(c, &out), out);
    }
    case Op::kDeallocPd: {
      SV_BODY(protocol::HandleRequest, req);
      return reply_empty(device_.DeallocPd(c, req.handle));
    }
    case Op::kRegMr: {
      SV_BODY(protocol::RegMrRequest, req);
      protocol::RegMrReply out{};
      return reply(device_.RegMr(c, req, &out), out);
    }
    case Op::kReregMr: {
      SV_BODY(protocol::ReregMrRequest, req);
      protocol::RegMrReply out{};
      return reply(device_.ReregMr(c, req, &out), out);
    }
    case Op::kDeregMr: {
      SV_BODY(protocol::HandleRequest, req);
      protocol::DeregMrReply out{};
      return reply(device_.DeregMr(c, req.handle, &out.peers_inside), out);
    }
    case Op::kAllocMw: {
      SV_BODY(protocol::AllocMwRequest, req);
      protocol::AllocMwReply out{};
      return reply(device_.AllocMw(c, req, &out), out);
    }
    case Op::kDeallocMw: {
      SV_BODY(protocol::HandleRequest, req);
      return reply_empty(device_.DeallocMw(c, req.handle));
    }
    case Op::kBindMw: {
      SV_BODY(protocol::BindMwRequest, req);
      protocol::BindMwReply out{};
      return reply(device_.BindMw(c, req, &out), out);
    }
    case Op::kInvalidateMw: {
      SV_BODY(protocol::InvalidateMwRequest, req);
      return reply_empty(device_.InvalidateMw(c, req));
    }
    case Op::kCreateMkey: {
      SV_BODY(protocol::CreateMkeyRequest, req);
      protocol::CreateMkeyReply out{};
      return reply(device_.CreateMkey(c, req, &out), out);
    }
    case Op::kDestroyMkey: {
      SV_BODY(protocol::HandleRequest, req);
      return reply_empty(device_.DestroyMkey(c, req.handle));
    }
    case Op::kConfigureMkey: {
      SV_BODY(protocol::ConfigureMkeyRequest, req);
      return reply_empty(device_.ConfigureMkey(c, req));
    }
    case Op::kReportSigError: {
      SV_BODY(protocol::ReportSigErrorRequest, req);
      device_.ReportSigError(req.key, req.error);
      return reply_empty(Verdict::Ok());
    }
    case Op::kCancelSends: {
      SV_BODY(protocol::CancelSendsRequest, req);
      protocol::CancelSendsReply out{};
      out.canceled = static_cast<uint32_t>(wire_.CancelSends(c, req.qpn, req.wr_id));
      return reply(Verdict::Ok(), out);
    }
    case Op::kCheckMkey: {
      SV_BODY(protocol::HandleRequest, req);
      protocol::CheckMkeyReply out{};
      return reply(device_.CheckMkey(c, req.handle, &out), out);
    }
    case Op::kQueryPd: {
      SV_BODY(protocol::HandleRequest, req);
      protocol::QueryPdReply out{};
      return reply(device_.QueryPd(c, req.handle, &out), out);
    }
    case Op::kQueryMr: {
      SV_BODY(protocol::HandleRequest, req);
      protocol::QueryMrReply out{};
      return reply(device_.QueryMr(c, req.handle, &out), out);
    }
    case Op::kQueryDm: {
      SV_BODY(protocol::HandleRequest, req);
      protocol::QueryDmReply out{};
      return reply(device_.QueryDm(c, req.handle, &out), out);
    }
    case Op::kCreateCq: {
      SV_BODY(protocol::CreateCqRequest, req);
      protocol::CreateCqReply out{};
      Verdict v = device_.CreateCq(c, req, &out);
      // The data path: the channel's eventfd in, the CQ ring out.
      if (v.ok() && !fds.empty()) device_.AttachCqEventFd(out.handle, dup(fds[0]));
      return Reply(conn, hdr.seq, v, &out, sizeof(out), {device_.CqRingFd(out.handle)});
    }
    case Op::kResizeCq: {
      SV_BODY(protocol::ResizeCqRequest, req);
      protocol::ResizeCqReply out{};
      return reply(device_.ResizeCq(c, req, &out), out);
    }
    case Op::kDestroyCq: {
      SV_BODY(protocol::HandleRequest, req);
      return reply_empty(device_.DestroyCq(c, req.handle));
    }
    case Op::kCreateSrq: {
      SV_BODY(protocol::CreateSrqRequest, req);
      protocol::CreateSrqReply out{};
      Verdict v = device_.CreateSrq(c, req, &out);
      return Reply(conn, hdr.seq, v, &out, sizeof(out), {device_.SrqRingFd(out.handle)});
    }
    case Op::kModifySrq: {
      SV_BODY(protocol::ModifySrqRequest, req);
      return reply_empty(device_.ModifySrq(c, req));
    }
    case Op::kQuerySrq: {
      SV_BODY(protocol::HandleRequest, req);
      protocol::QuerySrqReply out{};
      return reply(device_.QuerySrq(c, req.handle, &out), out);
    }
    case Op::kDestroySrq: {
      SV_BODY(protocol::HandleRequest, req);
      return reply_empty(device_.DestroySrq(c, req.handle));
    }
    case Op::kCreateQp: {
      SV_BODY(protocol::CreateQpRequest, req);
      protocol::CreateQpReply out{};
      Verdict v = device_.CreateQp(c, req, &out);
      return Reply(conn, hdr.seq, v, &out, sizeof(out), {device_.QpRecvQueueFd(out.handle)});
    }
    case Op::kModifyQp: {
      SV_BODY(protocol::ModifyQpRequest, req);
      return reply_empty(device_.ModifyQp(c, req));
    }
    case Op::kSetQpUdpSport: {
      SV_BODY(protocol::SetQpUdpSportRequest, req);
      return reply_empty(device_.SetQpUdpSport(c, req));
    }
    case Op::kAllocReservedQpn: {
      protocol::ReservedQpn out{};
      return reply(device_.AllocReservedQpn(c, &out), out);
    }
    case Op::kFreeReservedQpn: {
      SV_BODY(protocol::ReservedQpn, req);
      return reply_empty(device_.FreeReservedQpn(c, req));
    }
    case Op::kQueryQp: {
      SV_BODY(protocol::HandleRequest, req);
      protocol::QueryQpReply out{};
      return reply(device_.QueryQp(c, req.handle, &out), out);
    }
    case Op::kDestroyQp: {
      SV_BODY(protocol::HandleRequest, req);
      return reply_empty(device_.DestroyQp(c, req.handle));
    }
    case Op::kOpenQp: {
      SV_BODY(protocol::OpenQpRequest, req);
      protocol::OpenQpReply out{};
      return reply(device_.OpenQp(c, req, &out), out);
    }
    case Op::kCreateAh: {
      SV_BODY(protocol::CreateAhRequest, req);
      protocol::CreateAhReply out{};
      return reply(device_.CreateAh(c, req, &out), out);
    }
    case Op::kDestroyAh: {
      SV_BODY(protocol::HandleRequest, req);
      return reply_empty(device_.DestroyAh(c, req.handle));
    }
    case Op::kAttachMcast: {
      SV_BODY(protocol::McastRequest, req);
      return reply_empty(device_.AttachMcast(c, req));
    }
    case Op::kDetachMcast: {
      SV_BODY(protocol::McastRequest, req);
      return reply_empty(device_.DetachMcast(c, req));
    }
    case Op::kCreateFlow: {
      SV_BODY(protocol::CreateFlowRequest, req);
      protocol::CreateFlowReply out{};
      return reply(device_.CreateFlow(c, req, &out), out);
    }
    case Op::kDestroyFlow: {
      SV_BODY(protocol::HandleRequest, req);
      return reply_empty(device_.DestroyFlow(c, req.handle));
    }
    case Op::kCreateRwqIndTable: {
      SV_BODY(protocol::CreateRwqIndTableRequest, req);
      protocol::CreateRwqIndTableReply out{};
      return reply(device_.CreateRwqIndTable(c, req, &out), out);
    }
    case Op::kDestroyRwqIndTable: {
      SV_BODY(protocol::HandleRequest, req);
      return reply_empty(device_.DestroyRwqIndTable(c, req.handle));
    }
    case Op::kOpenXrcd: {
      SV_BODY(protocol::OpenXrcdRequest, req);
      int fd = req.has_fd ? (fds.empty() ? -2 : fds[0]) : -1;
      if (fd == -2) return reply_empty(Verdict::Fail(EBADF, "open_xrcd: fd missing"));
      protocol::OpenXrcdReply out{};
      return reply(device_.OpenXrcd(c, fd, req.oflags, &out), out);
    }
    case Op::kCloseXrcd: {
      SV_BODY(protocol::HandleRequest, req);
      return reply_empty(device_.CloseXrcd(c, req.handle));
    }
    case Op::kDevxOpen: {
      protocol::DevxOpenReply out{};
      return reply(device_.devx().Open(c, &out), out);
    }
    case Op::kDevxCommand: {  // variable-size boxes both ways
      std::vector<uint8_t> out;
      Verdict v = device_.devx().Command(c, body, len, &out);
      return Reply(conn, hdr.seq, v, out.data(), v.ok() ? out.size() : 0);
    }
    case Op::kDevxDestroy: {
      SV_BODY(protocol::DevxDestroyRequest, req);
      return reply_empty(device_.devx().Destroy(c, req));
    }
    case Op::kDevxUmemReg: {
      SV_BODY(protocol::DevxUmemRegRequest, req);
      protocol::DevxUmemRegReply out{};
      return reply(device_.devx().UmemReg(c, req, &out), out);
    }
    case Op::kDevxUmemDereg: {
      SV_BODY(protocol::DevxUmemDeregRequest, req);
      return reply_empty(device_.devx().UmemDereg(c, req));
    }
    default:
      return reply_empty(Verdict::Fail(
          EOPNOTSUPP,
          std::string("operation ") + protocol::OpName(op) + " is not supported by this daemon"));
  }
#undef SV_BODY
}

}  // namespace softverbs::daemon
