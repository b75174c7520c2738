#include "abi/ibverbs/daemon_channel.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "common/daemon_launcher.h"
#include "common/log.h"
#include "common/runtime_dir.h"
#include "common/unix_socket.h"

namespace softverbs::provider {

namespace {

// The daemon answers most requests within a few tens of microseconds.
// Sleeping in recvmsg and being woken by the reply costs about 8 us more on
// these VMs than looking for it a few times first (a bare Unix-socket round
// trip: 26 -> 18 us), which is a third of a registration or a dereg. So a
// call looks for its reply for up to kReplySpinNs before it sleeps - and
// for up to kWokenReplySpinNs when the daemon was asleep (its call page
// said it was not watching): waking it takes the wake-up of another CPU,
// 50-100 us on these VMs after a few milliseconds idle, and a caller that
// slept meanwhile needed a second one for the reply (a dereg after 1 ms
// idle: 118-136 -> 15-25 us with this, the yields and the daemon's moves
// off a shared CPU; docs/architecture.md, "The call page").
constexpr int64_t kReplySpinNs = 50'000;
constexpr int64_t kWokenReplySpinNs = 250'000;

int64_t MonotonicNs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1'000'000'000LL + t.tv_nsec;
}

// A pause between looks at a word another core writes.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// How long a sleeping call naps in its futex before it looks whether the
// daemon hung up (a daemon that dies never writes the reply).
constexpr int64_t kPageNapNs = 5'000'000;

// One look of a caller spinning for its reply: a pause, and - past the
// first 256 looks, within which the daemon answers most calls it is
// looking for - every 64th time the CPU to whoever else wants it while the
// daemon has not taken the request: the daemon itself may be waiting for
// this CPU, when the scheduler woke it here (then a caller that only paused
// kept it from running for the whole spin: a call right after a dereg that
// woke the daemon took 62-70 us instead of 2). Once it is taken the daemon
// runs elsewhere, and a yield would only hand the CPU to another task until
// that one's slice ends: behind the daemon's release thread freeing 64 MiB
// (about 8 ms in the kernel) a re-registration of a 64 MiB range took 2-4 ms
// instead of 15 us (session 35, `perf sched timehist`).
inline void SpinLook(uint32_t i, const protocol::CallPage* page, uint32_t seq) {
  CpuRelax();
  // (taken_seq is read only when a yield is due: the looks read the
  // daemon's line for reply_seq already.)
  if (i >= 256 && i % 64 == 0 && page->taken_seq.load(std::memory_order_relaxed) != seq) {
    sched_yield();
  }
}

void AwaitReadable(int fd, int64_t spin_ns) {
  const int64_t until = MonotonicNs() + spin_ns;
  pollfd p{fd, POLLIN, 0};
  while (poll(&p, 1, 0) == 0 && MonotonicNs() < until) sched_yield();
}

// softverbsd is found next to the libraries: $SOFTVERBSD, else
// <libdir>/../bin/softverbsd, else <libdir>/softverbsd.
std::string DaemonBinary() {
  if (const char* env = getenv("SOFTVERBSD"); env && *env) return env;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&DaemonBinary), &info) && info.dli_fname) {
    std::string lib = info.dli_fname;
    std::string dir = lib.substr(0, lib.rfind('/'));
    for (const std::string& candidate : {dir + "/../bin/softverbsd", dir + "/softverbsd"}) {
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  return "softverbsd";  // from PATH
}

// The ops that release a resource. Once the device is gone they succeed:
// the resource went with it (rdma-core's verbs_is_destroy_err treats the
// kernel's EIO after a disassociation the same way).
bool ReleasesAResource(protocol::Op op) {
  switch (op) {
    case protocol::Op::kDeallocPd:
    case protocol::Op::kDeregMr:
    case protocol::Op::kDestroyCq:
    case protocol::Op::kDestroySrq:
    case protocol::Op::kDestroyQp:
    case protocol::Op::kDestroyAh:
    case protocol::Op::kDetachMcast:
    case protocol::Op::kCloseXrcd:
    case protocol::Op::kDevxDestroy:
    case protocol::Op::kDevxUmemDereg:
    case protocol::Op::kFreeDm:
      return true;
    default:
      return false;
  }
}

// A stale reply is skipped at most this often per call: each comes from a
// process that died inside a call, and a lost reply must not loop forever.
constexpr int kMaxStaleReplies = 64;

}  // namespace

struct DaemonChannel::SharedCallState {
  pthread_mutex_t mutex;  // PTHREAD_PROCESS_SHARED, PTHREAD_MUTEX_ROBUST
  uint32_t seq;           // the last request's seq, for every process
};

class DaemonChannel::CallLock {
 public:
  explicit CallLock(SharedCallState* s) : s_(s) {
    if (s_ && pthread_mutex_lock(&s_->mutex) == EOWNERDEAD) {
      // Its owner died inside a call; its reply, if any, is skipped by seq.
      pthread_mutex_consistent(&s_->mutex);
    }
  }
  ~CallLock() {
    if (s_) pthread_mutex_unlock(&s_->mutex);
  }

 private:
  SharedCallState* s_;
};

DaemonChannel::~DaemonChannel() {
  if (fd_ >= 0) close(fd_);
}

void DaemonChannel::Adopt(const DaemonChannel& from, int fd) {
  shared_ = from.shared_;
  page_ = from.page_;
  fd_ = fd;
  gone_.store(from.gone(), std::memory_order_release);
}

void DaemonChannel::Disconnect() {
  CallLock lock(shared_.get());
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  page_.reset();
}

int DaemonChannel::AttachCallPage(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return errno;
  if (static_cast<size_t>(st.st_size) != protocol::kCallPageSize) return EPROTO;
  void* p = mmap(nullptr, protocol::kCallPageSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return errno;
  page_ = std::shared_ptr<protocol::CallPage>(
      static_cast<protocol::CallPage*>(p),
      [](protocol::CallPage* page) { munmap(page, protocol::kCallPageSize); });
  return 0;
}

int DaemonChannel::Release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

int DaemonChannel::Connect(protocol::Role role) {
  (void)role;
  std::string why;
  int fd = ConnectToDaemon(DaemonBinary(), &why);
  if (fd < 0) {
    Log("cannot reach the softverbs daemon: %s: %s", why.c_str(), strerror(-fd));
    return -fd;
  }
  if (!shared_) {
    void* page = mmap(nullptr, sizeof(SharedCallState), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) {
      close(fd);
      return errno;
    }
    auto* s = static_cast<SharedCallState*>(page);
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&s->mutex, &attr);
    pthread_mutexattr_destroy(&attr);
    s->seq = 0;
    shared_ = std::shared_ptr<SharedCallState>(
        s, [](SharedCallState* p) { munmap(p, sizeof(SharedCallState)); });
  }
  fd_ = fd;
  gone_.store(false, std::memory_order_release);
  return 0;
}

int DaemonChannel::OfferBackings(const int* memfds, size_t count) {
  if (fd_ < 0 || gone()) return ENODEV;
  const protocol::RequestHeader hdr{protocol::kProtocolVersion,
                                    static_cast<uint16_t>(protocol::Op::kOfferBacking), 0, 0, 0};
  return SendMessage(fd_, &hdr, sizeof(hdr), nullptr, 0, memfds, count);
}

void DaemonChannel::WakeAhead() {
  protocol::CallPage* page = page_.get();
  if (fd_ < 0 || page == nullptr || gone()) return;
  page->calls_coming.fetch_add(1, std::memory_order_seq_cst);
  // A daemon that stops watching after this look is rung by the call itself.
  if (page->daemon_watching.load(std::memory_order_seq_cst) != 0) return;
  RingDoorbell(0);  // names no request
}

int DaemonChannel::RingDoorbell(uint32_t seq) {
  const protocol::RequestHeader bell{protocol::kProtocolVersion,
                                     static_cast<uint16_t>(protocol::Op::kCallDoorbell), 0, 0, seq};
  return SendMessage(fd_, &bell, sizeof(bell), nullptr, 0, nullptr, 0);
}

int DaemonChannel::Call(protocol::Op op, const void* req, size_t req_len, void* rep, size_t rep_len,
                        const int* fds, size_t nfds, size_t* rep_body_len,
                        std::vector<int>* fds_out) {
  const int err = Exchange(op, req, req_len, rep, rep_len, fds, nfds, rep_body_len, fds_out);
  if (err) errno = err;
  return err;
}

int DaemonChannel::Exchange(protocol::Op op, const void* req, size_t req_len, void* rep,
                            size_t rep_len, const int* fds, size_t nfds, size_t* rep_body_len,
                            std::vector<int>* fds_out) {
  CallLock lock(shared_.get());
  if (fd_ < 0) return ENODEV;
  auto device_gone = [&] {
    gone_.store(true, std::memory_order_release);
    return ReleasesAResource(op) ? 0 : ENODEV;
  };
  if (gone()) return device_gone();
  if (++shared_->seq == 0) ++shared_->seq;  // 0 stands for "no request" in the call page
  protocol::RequestHeader hdr{protocol::kProtocolVersion, static_cast<uint16_t>(op), 0,
                              static_cast<uint32_t>(req_len), shared_->seq};
  // Status replies can be large; everything else fits the default buffer,
  // which each thread keeps (zeroing 64 KiB at every call cost more than a
  // small call's own work).
  static thread_local std::vector<uint8_t> call_buf(protocol::kMaxMessageSize);
  std::vector<uint8_t> status_buf;
  if (op == protocol::Op::kStatus) status_buf.resize(4 << 20);
  std::vector<uint8_t>& buf = op == protocol::Op::kStatus ? status_buf : call_buf;
  ssize_t n;
  // Through the call page when there is one, but descriptors (and a
  // status reply, too large for it) travel over the socket; the reply of a
  // request sent there still comes through the page.
  const bool by_page = page_ && op != protocol::Op::kStatus;
  reply_spin_ns_ = page_ && page_->daemon_watching.load(std::memory_order_relaxed) == 0
                       ? kWokenReplySpinNs
                       : kReplySpinNs;
  if (by_page && nfds == 0 && protocol::FitsCallPage(sizeof(hdr) + req_len)) {
    n = CallThroughPage(hdr, req, req_len, buf, fds_out);
  } else {
    if (by_page) hdr.flags = protocol::kReplyThroughPage;
    if (int err = SendMessage(fd_, &hdr, sizeof(hdr), req, req_len, fds, nfds)) {
      if (err != EPIPE && err != ECONNRESET && err != ENOTCONN) {
        Log("%s: the daemon connection failed: %s", protocol::OpName(op), strerror(err));
        return err;
      }
      // The daemon closed the connection; it may have said why first (a
      // daemon out of descriptors refuses new clients that way).
      n = recv(fd_, buf.data(), buf.size(), MSG_DONTWAIT);
    } else {
      n = by_page ? ReceivePageReply(hdr.seq, buf, fds_out) : ReceiveReply(hdr.seq, buf, fds_out);
    }
  }
  if (n < static_cast<ssize_t>(sizeof(protocol::ReplyHeader))) {
    Log("%s: the daemon went away", protocol::OpName(op));
    return device_gone();
  }
  protocol::ReplyHeader rh;
  memcpy(&rh, buf.data(), sizeof(rh));
  const uint8_t* body = buf.data() + sizeof(rh);
  if (rh.err != 0) {
    std::string why(reinterpret_cast<const char*>(body + rh.body_size), rh.reason_len);
    Log("%s rejected (%s): %s", protocol::OpName(op), strerror(rh.err), why.c_str());
    return rh.err;
  }
  if (rep && rep_len) memcpy(rep, body, std::min<size_t>(rep_len, rh.body_size));
  if (rep_body_len) *rep_body_len = rh.body_size;
  return 0;
}

ssize_t DaemonChannel::CallThroughPage(const protocol::RequestHeader& hdr, const void* req,
                                       size_t req_len, std::vector<uint8_t>& buf,
                                       std::vector<int>* fds_out) {
  protocol::CallPage* page = page_.get();
  const int cpu = sched_getcpu();
  const uint32_t own_cpu = cpu >= 0 ? static_cast<uint32_t>(cpu) : UINT32_MAX;
  page->client_cpu.store(own_cpu, std::memory_order_relaxed);
  // A daemon that runs on this CPU gets it only when this thread stops:
  // no spin then (with spinning yields, the scheduler still often kept the
  // caller running for its whole spin - a call took 60 us instead of 7).
  if (own_cpu != UINT32_MAX && page->daemon_cpu.load(std::memory_order_relaxed) == own_cpu) {
    reply_spin_ns_ = 0;
  }
  protocol::PublishRequest(page, hdr.seq, hdr, req, req_len);
  if (page->daemon_watching.load(std::memory_order_seq_cst) == 0) {
    if (RingDoorbell(hdr.seq) != 0) {
      // The daemon closed the connection; it may have said why first.
      return recv(fd_, buf.data(), buf.size(), MSG_DONTWAIT);
    }
  }
  return ReceivePageReply(hdr.seq, buf, fds_out);
}

ssize_t DaemonChannel::ReceivePageReply(uint32_t seq, std::vector<uint8_t>& buf,
                                        std::vector<int>* fds_out) {
  protocol::CallPage* page = page_.get();
  if (!AwaitPageReply(seq)) return -1;
  if (page->reply_on_socket.load(std::memory_order_relaxed) != 0) {
    return ReceiveReply(seq, buf, fds_out);
  }
  const size_t size = std::min<size_t>({page->reply_size.load(std::memory_order_relaxed),
                                        protocol::kCallPageReplyBytes, buf.size()});
  memcpy(buf.data(), page->reply, size);
  return static_cast<ssize_t>(size);
}

bool DaemonChannel::AwaitPageReply(uint32_t seq) {
  protocol::CallPage* page = page_.get();
  auto arrived = [&] { return page->reply_seq.load(std::memory_order_acquire) == seq; };
  const int64_t until = MonotonicNs() + reply_spin_ns_;
  for (uint32_t i = 1; reply_spin_ns_ > 0 && !arrived(); ++i) {
    SpinLook(i, page, seq);
    if (i % 64 == 0 && MonotonicNs() >= until) break;
  }
  while (!arrived()) {
    page->client_sleeping.store(1, std::memory_order_seq_cst);
    const uint32_t seen = page->reply_seq.load(std::memory_order_seq_cst);
    if (seen != seq) {
      const timespec nap{0, kPageNapNs};
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(&page->reply_seq), FUTEX_WAIT, seen, &nap,
              nullptr, 0);
    }
    page->client_sleeping.store(0, std::memory_order_relaxed);
    if (arrived()) break;
    pollfd p{fd_, 0, 0};
    if (poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR | POLLNVAL))) return false;
  }
  return true;
}

ssize_t DaemonChannel::ReceiveReply(uint32_t seq, std::vector<uint8_t>& buf,
                                    std::vector<int>* fds_out) {
  for (int stale = 0; stale <= kMaxStaleReplies; ++stale) {
    std::vector<int> fds;
    AwaitReadable(fd_, reply_spin_ns_);
    ssize_t n = ReceiveMessage(fd_, buf.data(), buf.size(), &fds);
    // A daemon that closes the connection with our request unread (one out
    // of descriptors refuses a new client so, having answered before the
    // request came) makes the first read report ECONNRESET, before the
    // answer queued ahead of it: read that.
    if (n == -ECONNRESET) n = ReceiveMessage(fd_, buf.data(), buf.size(), &fds);
    protocol::ReplyHeader rh{};
    if (n >= static_cast<ssize_t>(sizeof(rh))) memcpy(&rh, buf.data(), sizeof(rh));
    // seq 0 with an error: the daemon refused the connection before it read
    // any request (out of descriptors), and says why.
    const bool refusal = rh.seq == 0 && rh.err != 0;
    if (n < static_cast<ssize_t>(sizeof(rh)) || rh.seq == seq || refusal) {
      for (int fd : fds) {
        if (fds_out) {
          fds_out->push_back(fd);
        } else {
          close(fd);
        }
      }
      return n;
    }
    for (int fd : fds) close(fd);  // the reply of a call whose caller died
  }
  Log("the daemon's replies do not match this call (seq %u)", seq);
  return -1;
}

}  // namespace softverbs::provider
