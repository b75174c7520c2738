// The rsocket descriptor table: descriptor -> Rsocket. A descriptor is the
// fd of the socket's private rdma_cm event channel, so it never collides
// with another open file of the process.
//
// Lookups take no lock, as rdma-core's index map (idm_lookup): a signal
// handler may call rgetsockopt (getsockopt is async-signal-safe) while the
// thread it interrupted holds the table's mutex in rsocket or rclose. The
// table is chunks of kChunkSize slots, a chunk made on the first descriptor
// in its range and never freed; writers serialize on the mutex, readers
// load a chunk pointer and a slot.
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

#include "abi/ibverbs/reject.h"
#include "abi/rdmacm/rsocket_internal.h"

namespace softverbs::rdmacm::rs {
namespace {

constexpr int kChunkBits = 10;
constexpr int kChunkSize = 1 << kChunkBits;
constexpr int kChunks = 1 << 10;  // descriptors below 2^20 (a process's hard limit)
struct Chunk {
  std::atomic<Rsocket*> slot[kChunkSize];
};

std::mutex table_mutex;  // writers
std::atomic<Chunk*> chunks[kChunks];

// The slot of fd, made if `make`; nullptr outside the table (or not made).
std::atomic<Rsocket*>* Slot(int fd, bool make) {
  if (fd < 0 || fd >= kChunks * kChunkSize) return nullptr;
  std::atomic<Chunk*>& c = chunks[fd >> kChunkBits];
  Chunk* chunk = c.load(std::memory_order_acquire);
  if (!chunk && make) {
    chunk = new Chunk{};  // kept for the process's life, as the descriptors come back
    c.store(chunk, std::memory_order_release);
  }
  return chunk ? &chunk->slot[fd & (kChunkSize - 1)] : nullptr;
}

// How many RsMutexes the calling thread holds or waits for. Initial-exec,
// as the execution gate's state (abi/ibverbs/execution_gate.cc): no
// __tls_get_addr call (which may allocate: not in a signal handler) and 4
// bytes of the static TLS glibc keeps for libraries loaded later.
__attribute__((tls_model("initial-exec"))) thread_local int held_by_this_thread = 0;

}  // namespace

void RsMutex::lock() {
  ++held_by_this_thread;  // before the wait: a handler must not wait either
  mu_.lock();
}

void RsMutex::unlock() {
  mu_.unlock();
  --held_by_this_thread;
}

bool RsMutex::HeldByThisThread() {
  return held_by_this_thread != 0;
}

bool InsertSocket(Rsocket* rs) {
  std::lock_guard lock(table_mutex);
  std::atomic<Rsocket*>* slot = Slot(rs->fd, true);
  if (!slot) return false;
  slot->store(rs, std::memory_order_release);
  return true;
}

void RemoveSocket(Rsocket* rs) {
  std::lock_guard lock(table_mutex);
  std::atomic<Rsocket*>* slot = Slot(rs->fd, false);
  if (slot && slot->load(std::memory_order_relaxed) == rs) {
    slot->store(nullptr, std::memory_order_release);
  }
}

// Why: Debian's preload library (rdma-core 44's librspreload) maps rpoll's
// answers back into select's sets by walking descriptor numbers upwards
// from 0 and taking the first number whose rsocket is the answer's
// (rpoll_to_select; rdma-core 63 keeps the program's numbers instead,
// commit 7ea19e136). A number the preload does not manage stands for
// itself there, so an rsocket numbered below the placeholder the preload
// gave the program for it has its readiness set on its own, lower number,
// and the program never sees it (iperf3's server waited for data that had
// come). The preload opens the placeholder just before it calls raccept;
// the acceptor thread made the channel's descriptor when the request came,
// usually below it. A number taken in raccept lies above the placeholder,
// as that of a socket made there would.
void RenumberAccepted(Rsocket& rs) {
  const int fd = fcntl(rs.id->channel->fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return;
  std::lock_guard lock(table_mutex);
  std::atomic<Rsocket*>* slot = Slot(fd, true);
  if (!slot) {
    close(fd);
    return;
  }
  slot->store(&rs, std::memory_order_release);
  std::atomic<Rsocket*>* old = Slot(rs.fd, false);
  if (old && old->load(std::memory_order_relaxed) == &rs) {
    old->store(nullptr, std::memory_order_release);
  }
  close(rs.fd);
  rs.fd = fd;
  rs.id->channel->fd = fd;
}

Rsocket* FindSocket(int fd) {
  std::atomic<Rsocket*>* slot = Slot(fd, false);
  return slot ? slot->load(std::memory_order_acquire) : nullptr;
}

Rsocket* LookupSocket(int fd, const char* verb) {
  Rsocket* rs = FindSocket(fd);
  if (!rs) abi::RejectMinusOne(EBADF, "%s: %d is not an rsocket", verb, fd);
  return rs;
}

}  // namespace softverbs::rdmacm::rs
