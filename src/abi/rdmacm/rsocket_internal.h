// rsockets (SOCK_STREAM) inside softverbs' librdmacm: one Rsocket per
// descriptor, built on the library's public rdma_cm and verbs calls
// (docs/rdmacm.md, "rsockets"; the wire is rsocket_wire.h).
//
// A socket is a synchronous rdma_cm_id (no channel given: it has a private
// event channel, whose fd is the socket's descriptor, as in rdma-core), an
// RC QP whose send and receive queues complete on one CQ with a completion
// channel, and three registered areas: the send buffer (staging for RDMA
// WRITEs), the receive buffer (the peer writes into its two halves), and
// the target area (the target SGL and iomap the peer writes to tell us
// where to write). Both the event channel and the completion channel are
// non-blocking: every wait is a poll(2) on those two fds (Progress,
// WaitForCm). A listening socket alone has a thread, its acceptor
// (rsocket_accept.cc), as rdma-core's listen service accepts requests
// before raccept asks for them.
#pragma once

#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "abi/rdmacm/rsocket_wire.h"

namespace softverbs::rdmacm::rs {

// Defaults and limits (rdma-core's, so that both ends size alike).
inline constexpr uint32_t kDefaultBufferSize = 1 << 17;  // send and receive buffers
inline constexpr uint16_t kDefaultQueueSize = 384;       // send and receive queue depth
inline constexpr uint16_t kDefaultInline = 64;
inline constexpr uint16_t kMinQueueSize = 16;
inline constexpr uint16_t kMaxQueueSize = 0xFFFE;
inline constexpr uint32_t kSendLowWater = 2048;    // send only with this much send buffer free
inline constexpr uint32_t kFirstTransfer = 2048;   // a send's first WRITE; doubles up to ...
inline constexpr uint32_t kMaxTransfer = 65536;    // ... this
inline constexpr uint32_t kControlSlots = 4;       // SGL and CTRL messages in flight (power of 2)
inline constexpr uint64_t kRecvWrId = 1ull << 63;  // receives; sends carry their immediate

enum class Phase : uint8_t {
  kFresh,           // rsocket()
  kBound,           // rbind()
  kListening,       // rlisten()
  kResolvingAddr,   // rconnect(): rdma_resolve_addr sent
  kResolvingRoute,  // rdma_resolve_route sent
  kConnecting,      // rdma_connect sent (REQ)
  kAccepting,       // raccept(): REP sent, ESTABLISHED not seen yet
  kConnected,       // data may flow (see readable / writable)
  kConnectFailed,   // rconnect failed: error holds why
  kDisconnected,    // DISCONNECT sent and done, or received, or the CM said DISCONNECTED
  kError,           // a work request failed: the QP is in error
};
inline bool IsOpening(Phase p) {
  return p >= Phase::kResolvingAddr && p <= Phase::kAccepting;
}

// A riomap'd buffer of ours.
struct IomapBuffer {
  ibv_mr* mr = nullptr;
  uint64_t offset = 0;
  int index = -1;     // its entry in the peer's target iomap; -1: PROT_NONE, not announced
  bool sent = false;  // announced to the peer (IOMAP_SGL written)
};

// A socket's mutex that tells a signal handler whether the thread it
// interrupted holds (or waits for) an rsocket's mutex: rgetsockopt
// (getsockopt is async-signal-safe; rdma-core's rgetsockopt takes no lock)
// then reads without it rather than wait for itself (iperf3's SIGINT handler
// asks TCP_INFO while its thread is inside rpoll).
class RsMutex {
 public:
  void lock();
  void unlock();
  // Whether the calling thread holds or waits for any RsMutex.
  static bool HeldByThisThread();

 private:
  std::mutex mu_;
};
using RsLock = std::unique_lock<RsMutex>;

struct Rsocket {
  int fd = -1;  // the descriptor: the id's event channel fd
  int domain = AF_INET;
  rdma_cm_id* id = nullptr;
  RsMutex mu;  // everything below; released while a caller sleeps in poll(2)

  Phase phase = Phase::kFresh;
  bool readable = false;      // while connected: no SHUT_RD here, no SHUTDOWN from the peer
  bool writable = false;      // while connected: no SHUT_WR here
  bool shut_wr_here = false;  // rshutdown(SHUT_WR or SHUT_RDWR) was called
  bool nonblocking = false;   // O_NONBLOCK (rfcntl)
  int fd_flags = 0;           // the last rfcntl F_SETFL argument, as given (F_GETFL)
  int error = 0;              // SO_ERROR
  sockaddr_storage peer{};    // rconnect's destination

  // Options (rsetsockopt before the connection; inherited by raccept's sockets).
  uint32_t sbuf_size = kDefaultBufferSize;
  uint32_t rbuf_size = kDefaultBufferSize;
  uint16_t sq_size = kDefaultQueueSize;
  uint16_t rq_size = kDefaultQueueSize;
  uint16_t sq_inline = kDefaultInline;
  uint16_t target_iomap_size = 0;  // entries of our target iomap (RDMA_IOMAPSIZE)
  uint64_t so_options = 0;         // bit per SOL_SOCKET option that is on
  uint64_t tcp_options = 0;        // IPPROTO_TCP
  uint64_t ipv6_options = 0;       // IPPROTO_IPV6
  int keepalive_idle = 0;

  // The endpoint (CreateEndpoint).
  ibv_comp_channel* comp = nullptr;
  ibv_cq* cq = nullptr;
  bool cq_armed = false;
  unsigned cq_events_unacked = 0;

  // Sending: data goes by RDMA WRITE WITH IMMEDIATE into the peer's buffer
  // its target SGL entry names; the send buffer is a ring of staged data.
  uint8_t* sbuf = nullptr;  // sbuf_size bytes, then kControlSlots RsSge for SGL messages
  ibv_mr* smr = nullptr;
  uint32_t sbuf_head = 0;       // where the next staged byte goes
  uint32_t sbuf_avail = 0;      // bytes not in flight
  int sqe_avail = 0;            // send WRs for data (the control slots apart)
  uint16_t sseq_no = 0;         // DATA and IOMAP_SGL messages sent
  uint16_t sseq_comp = 0;       // ... allowed up to here by the peer's credits
  uint32_t ctrl_seqno = 0;      // SGL and CTRL messages posted
  uint32_t ctrl_max_seqno = 0;  // ... may be posted up to here (completed + kControlSlots)
  // Our target area: written by the peer.
  void* target_area = nullptr;
  ibv_mr* target_mr = nullptr;
  volatile RsSge* target_sgl = nullptr;      // kTargetSglEntries
  volatile RsIomap* target_iomap = nullptr;  // target_iomap_size
  uint32_t target_sge = 0;                   // the entry being filled
  // The peer's target area, where our SGL and IOMAP_SGL messages write.
  RsSge remote_sgl{};
  uint32_t remote_sge = 0;
  RsSge remote_iomap{};
  bool swap_sgl = false;  // the peer's byte order differs from ours

  // Receiving: the peer writes into rbuf's halves, each DATA immediate is one
  // entry of rmsg (its length) until read.
  uint8_t* rbuf = nullptr;
  ibv_mr* rmr = nullptr;
  uint32_t rbuf_offset = 0;       // the next byte to read
  uint32_t rbuf_free_offset = 0;  // the half to offer next
  uint32_t rbuf_avail = 0;        // read bytes not yet offered again
  uint16_t rseq_no = 0;           // DATA messages read whole
  uint16_t rseq_comp = 0;         // credits are renewed when rseq_no reaches this
  std::vector<uint32_t> rmsg;     // lengths of unread DATA messages (ring of rq_size + 1)
  uint32_t rmsg_head = 0, rmsg_tail = 0;

  std::list<IomapBuffer> iomaps;  // riomap
  std::vector<bool> iomap_used;   // entries of the peer's target iomap we hold

  // Listening (rsocket_accept.cc): the acceptor thread takes the requests
  // off the channel and accepts them; raccept takes the sockets from
  // `accepted`, which accept_ready counts (an eventfd in semaphore mode:
  // what rpoll sleeps on). accept_stop ends the thread; acceptor_pid is the
  // process it runs in (a forked child starts its own).
  std::deque<Rsocket*> accepted;
  int accept_ready = -1;
  int accept_stop = -1;
  std::unique_ptr<std::thread> acceptor;
  pid_t acceptor_pid = 0;
};

// The descriptor table (rsocket_table.cc).
bool InsertSocket(Rsocket* rs);  // false: its descriptor is past the table (2^20)
void RemoveSocket(Rsocket* rs);
// Gives an accepted socket, as raccept hands it out, the lowest free
// descriptor number (a duplicate of its channel's, which it replaces), as
// if it were made then rather than when the acceptor took its request
// (rsocket_table.cc). Keeps the old number when no descriptor is left.
void RenumberAccepted(Rsocket& rs);
// The socket of fd, or nullptr (then errno = EBADF and a log line naming verb).
Rsocket* LookupSocket(int fd, const char* verb);
Rsocket* FindSocket(int fd);  // quiet: nullptr when fd is no rsocket

// The endpoint (rsocket_endpoint.cc).
int SetNonblocking(int fd);
// QP, CQ, completion channel, registered areas, rq_size receives.
int CreateEndpoint(Rsocket& rs);
// Our RsConnData (needs the endpoint).
void FormatConnData(const Rsocket& rs, RsConnData* c);
// The peer's RsConnData: where our SGL and IOMAP_SGL messages go, its first
// receive buffer half, its credits.
void SaveConnData(Rsocket& rs, const RsConnData& c);
void MarkConnected(Rsocket& rs);
// Out of the table, everything released, the id destroyed.
void FreeSocket(Rsocket* rs);

// Connection (rsocket_connect.cc).
// Advances an opening socket: 0 once connected; -1 with errno EINPROGRESS
// while it waits (nonblocking), or the failure (phase kConnectFailed).
int DriveConnect(Rsocket& rs, RsLock& lock, bool nonblocking);
// Sleeps until the id's event channel has an event (or timeout_ms).
void WaitForCm(Rsocket& rs, RsLock& lock, int timeout_ms);
// Accepts the connection request on id (rdma_get_request's) on the
// listening socket ls, whose lock is held (released meanwhile): the new
// socket, in the table, rdma_accept'ed (it may still wait for ESTABLISHED);
// nullptr when the request was refused (not an rsocket's, no endpoint).
Rsocket* AcceptRequest(Rsocket& ls, RsLock& lock, rdma_cm_id* id);

// Accepting in the background (rsocket_accept.cc).
// Starts ls's acceptor (rlisten). 0, or -1 with errno.
int StartAcceptor(Rsocket& ls);
// Ends it and closes the sockets accepted but not taken (rclose). Without
// ls's lock.
void StopAcceptor(Rsocket& ls);
// raccept: the next accepted socket, waiting for one unless ls is
// non-blocking (then nullptr, EAGAIN). ls's lock is held.
Rsocket* TakeAccepted(Rsocket& ls, RsLock& lock);
// rpoll: whether a socket waits to be taken, and the fd to sleep on.
bool HasAccepted(Rsocket& ls);
int AcceptedFd(Rsocket& ls);

// Progress (rsocket_progress.cc).
using Ready = bool (*)(const Rsocket&);
// Processes completions and CM events, gives credits, until ready(rs): 0;
// -1 with errno EWOULDBLOCK (nonblocking and not ready) or the failure.
int Progress(Rsocket& rs, RsLock& lock, bool nonblocking, Ready ready);
// One round without waiting: credits and completions.
void ProgressOnce(Rsocket& rs);
// Arms the CQ before a sleep in rpoll (look once more afterwards).
void ArmForSleep(Rsocket& rs);
// After a sleep: takes the completion events the channel holds.
void TakeCqEvent(Rsocket& rs);
// Takes the id's pending CM event, if any: DISCONNECTED (the peer closed or
// died without a DISCONNECT message) ends the connection.
void TakeCmEvent(Rsocket& rs);
bool CanSend(const Rsocket& rs);
bool HaveData(const Rsocket& rs);
bool AllSendsDone(const Rsocket& rs);
bool ControlSlotFree(const Rsocket& rs);
inline bool Readable(const Rsocket& rs) {
  return rs.phase == Phase::kConnected && rs.readable;
}
inline bool Writable(const Rsocket& rs) {
  return rs.phase == Phase::kConnected && rs.writable;
}
// Posts one signalled send WR (wr_id = the immediate, host order; or an
// ImmOp::kWrite tag for plain RDMA WRITEs). The caller does the accounting.
int PostSend(Rsocket& rs, ibv_wr_opcode opcode, ibv_sge* sgl, int nsge, uint32_t imm,
             int send_flags, uint64_t remote_addr, uint32_t rkey);
// Posts a CTRL message (it takes a control slot: ControlSlotFree first).
int PostControl(Rsocket& rs, ControlMessage what);

// The length of a send's next RDMA WRITE: kFirstTransfer, doubling up to
// kMaxTransfer while more than that is left (rdma-core's ramp), or what is left.
inline uint32_t NextTransfer(uint32_t* burst, size_t left) {
  if (*burst >= left) return static_cast<uint32_t>(left);
  const uint32_t len = *burst;
  if (*burst < kMaxTransfer) *burst <<= 1;
  return len;
}

// A position in an iovec array.
struct IovCursor {
  const iovec* iov;
  int count;
  int index = 0;
  size_t offset = 0;
};
// Copies len bytes from the cursor to dst (advancing it).
void Gather(IovCursor& from, uint8_t* dst, size_t len);
// Copies len bytes to the cursor from src (advancing it).
void Scatter(IovCursor& to, const uint8_t* src, size_t len);
// Stages len bytes of the cursor for an RDMA WRITE: inline from scratch
// (when len <= the QP's inline size) or in the send ring (one or two
// SGEs). Answers the SGE count; *send_flags gets IBV_SEND_INLINE or 0.
int StageSend(Rsocket& rs, IovCursor& from, uint32_t len, uint8_t* scratch, ibv_sge sge[2],
              int* send_flags);
// The size of scratch for StageSend.
inline constexpr uint32_t kInlineScratch = 1024;
// Announces our riomap'd buffers still unsent (rsocket_iomap.cc).
int SendIomaps(Rsocket& rs, RsLock& lock, bool nonblocking);
bool IomapsPending(const Rsocket& rs);

// Makes a locked socket ready for a transfer (rsocket_io.cc): finishes a
// pending connect; 0, or -1 with errno ENOTCONN or EAGAIN (still connecting).
int PrepareTransfer(const char* verb, Rsocket& rs, RsLock& lock, bool nonblocking);

// The error a transfer gets once the connection is gone: EPIPE after our own
// SHUT_WR, ECONNRESET when the peer went (as a TCP socket answers).
int BrokenPipeErrno(const Rsocket& rs);

}  // namespace softverbs::rdmacm::rs
