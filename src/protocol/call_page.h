// The call page: a context connection's requests and replies through shared
// memory, beside its socket (docs/architecture.md, "The call page").
//
// Every system call costs about 1.2 us on the VMs this runs on, and a
// request/reply pair over the socket takes seven of them (sendmsg, the
// daemon's epoll_wait, recvmsg and sendmsg, the library's poll and recvmsg):
// most of an ibv_reg_mr of a range registered before, or an ibv_dereg_mr.
// The daemon makes one call page per context connection at its hello (a
// sealed memfd: the library can neither shrink nor grow it) and hands it over
// with the device table. A request that carries no descriptor and fits goes
// through the page; the reply comes back through it unless it carries
// descriptors or does not fit, in which case it goes over the socket as
// before and the page says so.
//
// Who writes what (each side only reads the other's words):
//   the library: request_begin, request_seq, request_size, client_sleeping,
//                client_cpu, request[]
//   the daemon:  reply_seq, reply_size, reply_on_socket, daemon_watching,
//                daemon_cpu, taken_seq, reply[]
//
// A request is published seqlock-style: request_begin = seq, the bytes,
// request_seq = seq. The daemon copies the bytes out, then reads
// request_begin again: a different value means a writer came in between (a
// process that shares the connection took over the call lock from one that
// died mid-request), and the copy is thrown away. The daemon only ever parses
// its own copy; the library may write the page at any time.
//
// Waking the daemon: while it looks at a page (daemon_watching = 1, for a
// bounded spin after it served that connection) the request alone is enough.
// Otherwise the library sends a doorbell over the socket (Op::kCallDoorbell,
// no body, no reply), after which the daemon looks at the page. Both sides
// store, then load the other's word, with sequentially consistent ordering
// (the daemon clears daemon_watching and then looks at request_seq once more
// before it sleeps): a request is never left unseen. Serving is idempotent -
// the daemon remembers the last seq it took - so a doorbell for a request it
// already served does nothing.
//
// Waking the library: it looks at reply_seq for a bounded spin (giving its
// CPU away now and then only while taken_seq says the daemon has not taken
// the request yet: it may be waiting for this CPU), then sets
// client_sleeping and sleeps in a futex on reply_seq (timed: between naps it
// looks whether the daemon's socket has hung up); the daemon wakes the futex
// after a reply when client_sleeping is set.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "protocol/messages.h"

namespace softverbs::protocol {

inline constexpr size_t kCallPageSize = 16 * 1024;
inline constexpr size_t kCallPageControlBytes = 128;  // two cache lines of words
inline constexpr size_t kCallPageRequestBytes = 8 * 1024 - kCallPageControlBytes;
inline constexpr size_t kCallPageReplyBytes = 8 * 1024;

struct CallPage {
  // Cache line 0: the library's words.
  std::atomic<uint32_t> request_begin;    // seq of the request being written
  std::atomic<uint32_t> request_seq;      // seq of the last request written whole
  std::atomic<uint32_t> request_size;     // bytes in request[]: RequestHeader + body
  std::atomic<uint32_t> client_sleeping;  // 1: the library sleeps in a futex on reply_seq
  // The CPU the caller ran on when it published the request (sched_getcpu;
  // UINT32_MAX: unknown). A hint: the daemon moves off a caller's CPU
  // (daemon/cpu_sharing.h).
  std::atomic<uint32_t> client_cpu;
  // Bumped by the library when it will call soon, before work of its own
  // (a registration converting its range, DaemonChannel::WakeAhead): a
  // daemon that watches the page then looks for another spin's time, so
  // that it still watches when the call comes; one that does not is rung.
  // A daemon before session 45 ignores it.
  std::atomic<uint32_t> calls_coming;
  uint8_t library_pad[40];
  // Cache line 1: the daemon's words.
  std::atomic<uint32_t> reply_seq;        // seq of the last reply (the futex word)
  std::atomic<uint32_t> reply_size;       // bytes in reply[]: ReplyHeader + body + reason
  std::atomic<uint32_t> reply_on_socket;  // 1: reply_seq's reply went over the socket
  std::atomic<uint32_t> daemon_watching;  // 1: the daemon looks at request_seq unbidden
  // The CPU the daemon ran on when it last took a request from this page
  // (sched_getcpu; UINT32_MAX: unknown). A hint: a caller on the same CPU
  // sleeps at once instead of spinning (it would only keep the daemon from
  // running).
  std::atomic<uint32_t> daemon_cpu;
  // seq of the last request the daemon took from the page (stored with
  // release as it takes it, before it serves it): a caller whose request is
  // taken has a daemon running on some CPU, and nothing to yield its own CPU
  // for. A daemon before session 35 leaves it 0.
  std::atomic<uint32_t> taken_seq;
  uint8_t daemon_pad[40];
  uint8_t request[kCallPageRequestBytes];  // written by the library
  uint8_t reply[kCallPageReplyBytes];      // written by the daemon
};
static_assert(sizeof(CallPage) == kCallPageSize);
static_assert(offsetof(CallPage, reply_seq) == 64);
static_assert(offsetof(CallPage, request) == kCallPageControlBytes);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

// The library: whether a request of `bytes` (header + body) fits.
inline bool FitsCallPage(size_t bytes) {
  return bytes <= kCallPageRequestBytes;
}

// The library: writes header + body and publishes them under seq.
inline void PublishRequest(CallPage* page, uint32_t seq, const RequestHeader& hdr, const void* body,
                           size_t body_len) {
  page->request_begin.store(seq, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  std::memcpy(page->request, &hdr, sizeof(hdr));
  if (body_len) std::memcpy(page->request + sizeof(hdr), body, body_len);
  page->request_size.store(static_cast<uint32_t>(sizeof(hdr) + body_len),
                           std::memory_order_relaxed);
  page->request_seq.store(seq, std::memory_order_seq_cst);
}

// The daemon: copies a request published since `last_taken` into out (which
// holds kCallPageRequestBytes) and sets *seq and *size (a size past the
// request area is cut to it: the header then says another). False when there
// is none, or a torn one (thrown away; its writer publishes again).
inline bool TakeRequest(CallPage* page, uint32_t last_taken, uint8_t* out, uint32_t* seq,
                        size_t* size_out) {
  // seq_cst: after the daemon's store of daemon_watching = 0 (call_page.h's
  // top comment: either this load sees the request, or the library sees 0).
  const uint32_t published = page->request_seq.load(std::memory_order_seq_cst);
  if (published == last_taken || published == 0) return false;  // 0: never a request
  size_t size = page->request_size.load(std::memory_order_relaxed);
  if (size > kCallPageRequestBytes) size = kCallPageRequestBytes;
  std::memcpy(out, page->request, size);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (page->request_begin.load(std::memory_order_relaxed) != published ||
      page->request_seq.load(std::memory_order_relaxed) != published) {
    return false;
  }
  *seq = published;
  *size_out = size;
  return true;
}

}  // namespace softverbs::protocol
