// softverbsd's event loop: accepts connections on the per-user socket,
// answers control requests one at a time (single-threaded: the object tables
// need no locks), pushes asynchronous events, and releases a client's objects
// when its connection closes - which is also what happens when the process is
// killed. It never waits for a client: sockets are non-blocking and what a
// client does not read waits in its connection's Outbox, within bounds
// (docs/architecture.md, "A client that does not read").
#pragma once

#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "daemon/cm_service.h"
#include "daemon/cpu_sharing.h"
#include "daemon/device.h"
#include "daemon/outbox.h"
#include "daemon/wire_service.h"
#include "datapath/shm.h"
#include "protocol/call_page.h"
#include "protocol/messages.h"

struct epoll_event;  // <sys/epoll.h>

namespace softverbs::daemon {

struct ServerOptions {
  std::string runtime_dir;
  // Exit after this long without any connection. 0: never.
  std::chrono::seconds idle_timeout{30};
};

// A request body read as T; false, with nothing read, when its size is not
// T's.
template <typename T>
bool ReadBody(const uint8_t* body, size_t len, T* out) {
  if (len != sizeof(T)) return false;
  std::memcpy(out, body, sizeof(T));
  return true;
}

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();

  // Binds the socket. Returns 0 or an errno.
  int Listen();
  // Runs until idle or asked to stop. Returns the exit code.
  int Run();

 private:
  // epoll_pwait2, after a busy spin when the last wait found work
  // (server.cc). timeout_us >= 0.
  int WaitForEvents(::epoll_event* events, int max, int64_t timeout_us);

  struct Connection {
    int fd = -1;
    protocol::Role role{};
    bool greeted = false;
    ClientId client = 0;
    uint64_t token = 0;
    // kContext: the client end of the connection (kHelloSelf), by which
    // ibv_import_device names it from another process.
    dev_t peer_dev = 0;
    ino_t peer_ino = 0;
    Outbox out;                   // what the client has not taken yet
    bool broken = false;          // a send failed for good: closed after this event
    bool reading = true;          // EPOLLIN armed (off while a reply waits in out)
    bool writing = false;         // EPOLLOUT armed (on while out is not empty)
    uint32_t events_dropped = 0;  // async events dropped since the last one queued
    // kContext: the call page (protocol/call_page.h, server_call_page.cc).
    datapath::SharedMapping page_mapping;
    protocol::CallPage* page = nullptr;
    uint32_t page_taken = 0;         // seq of the last request taken from the page
    uint32_t page_replying = 0;      // seq of the page request being served (its reply goes there)
    bool page_watched = false;       // in watched_pages_, daemon_watching set
    uint32_t calls_coming_seen = 0;  // CallPage::calls_coming when last looked at
  };

  void Accept();
  // Accepting failed for lack of descriptors: the client waiting in the
  // backlog is answered with an explained error through the reserved fd.
  void RefuseForLackOfDescriptors();
  void HandleEvent(int fd, uint32_t events);
  void HandleReadable(int fd);
  void HandleWritable(int fd);
  // After a request (from the socket or the call page): closes the
  // connections it doomed and applies what it changed for the network
  // transport.
  void FinishRequest();
  // Arms EPOLLIN/EPOLLOUT as the connection's outbox requires.
  void UpdateInterest(Connection& conn);
  void Close(int fd);
  void Dispatch(Connection& conn, const protocol::RequestHeader& hdr, const uint8_t* body,
                size_t len, std::vector<int>& fds);
  // The call page (server_call_page.cc). OpenCallPage makes a context
  // connection's page and returns its memfd (-1 when none could be made:
  // the library then calls over the socket only).
  int OpenCallPage(Connection& conn);
  // Serves the request published in conn's page since the last one taken,
  // if any (not while a reply waits in its outbox). conn may be gone after
  // it. True if it served one.
  bool ServeCallPage(Connection& conn);
  // Looks at every watched page (while the daemon spins). True if it served.
  bool ServeWatchedPages();
  // Whether a watched page's client said a call comes soon
  // (CallPage::calls_coming) since the last look.
  bool CallsComingOnWatchedPages();
  // Before the daemon sleeps: clears daemon_watching on every watched page,
  // then looks at each once more. True if that served a request (the daemon
  // must not sleep then).
  bool UnwatchCallPages();
  void WatchCallPage(Connection& conn);
  // Puts a page reply in conn's page (or, with fds or too long for it, on
  // the socket, and says so in the page); wakes a sleeping library.
  void ReplyThroughPage(Connection& conn, uint32_t seq, const std::vector<uint8_t>& msg,
                        const std::vector<int>& fds);
  void Reply(Connection& conn, uint32_t seq, const Verdict& v, const void* body, size_t body_len,
             const std::vector<int>& fds = {});
  // The data-path ops (server_datapath.cc): true if op was one of them.
  bool DispatchDatapath(Connection& conn, const protocol::RequestHeader& hdr, const uint8_t* body,
                        size_t len, std::vector<int>& fds);
  // An offered memfd (Op::kOfferBacking, the one fd in fds), kept for conn.
  void TakeOffer(Connection& conn, size_t len, const std::vector<int>& fds);
  // Reads and takes the offers waiting on conn's socket, up to its first
  // other message: before answering a registration (through the page) that
  // names a memfd the device does not keep for conn, whose offer it may
  // have overtaken.
  void TakePendingOffers(Connection& conn);
  void PushEvent(ClientId client, const protocol::AsyncEventRecord& rec);
  void PushCmEvent(int fd, const protocol::CmEventRecord& rec);

  ServerOptions options_;
  Device device_;
  CmService cm_{device_.gids(), device_.active_mtu()};  // librdmacm's connection manager
  // The network transport: RoCE v2 for QPs whose path leaves the host.
  WireService wire_{device_, [this](int fd, bool add) { WatchWireFd(fd, add); }};
  void WatchWireFd(int fd, bool add);
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  bool busy_ = false;
  CpuSharing cpu_sharing_;  // off the CPU of a caller it shares
  // Rounds in a row whose packets were held back for the next one (Run).
  static constexpr uint32_t kMaxHeldRounds = 8;
  uint32_t held_rounds_ = 0;  // the last wake-up served a control request (WaitForEvents spins)
  // Kept open to be given up when accept4 runs out of descriptors, so that a
  // waiting client can still be told why (and not left hanging).
  int reserve_fd_ = -1;
  // While accepting is paused (no descriptor, none reserved): when to resume.
  std::chrono::steady_clock::time_point accept_resume_{};
  bool accept_paused_ = false;
  bool stopping_ = false;
  ClientId next_client_ = 1;
  std::map<int, Connection> connections_;
  std::vector<int> doomed_;  // broken connections, closed once the current event is handled
  std::map<ClientId, int> event_fds_;  // client -> its event connection
  std::vector<int> watched_pages_;     // connections whose call page the daemon looks at
  // Requests served, by how they came (`softverbs status` "control").
  struct CallCounts {
    uint64_t by_socket = 0;
    uint64_t by_page = 0;
    uint64_t doorbells = 0;
    uint64_t backings_offered = 0;         // kOfferBacking messages (not requests: no reply)
    uint64_t backing_memfds_offered = 0;   // the descriptors they carried (a batch made ahead: several)
    uint64_t offers_refused = 0;           // of them, not taken (the first few logged)
    uint64_t offers_read_early = 0;        // of them, read ahead of a registration naming them
    uint64_t socket_answered_by_page = 0;  // by_socket ones with kReplyThroughPage
  } calls_;
};

}  // namespace softverbs::daemon
