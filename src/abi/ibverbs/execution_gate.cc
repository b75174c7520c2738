#include "abi/ibverbs/execution_gate.h"

#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <deque>
#include <mutex>

#include "common/log.h"
#include "datapath/timers.h"

namespace softverbs::provider {

bool ExecutionGate::asymmetric_ = false;

namespace {

// The calling thread's record and how deep it is in nested executions.
struct ThreadState {
  ExecutionGate::Record* record = nullptr;
  uint32_t depth = 0;
};
// Initial-exec: every post reads it, and the default model for a shared
// library (general dynamic) costs a __tls_get_addr call each time. 16
// bytes of static TLS, which glibc keeps in reserve for libraries loaded
// later (pyverbs dlopens us).
__attribute__((tls_model("initial-exec"))) thread_local ThreadState state;

int Membarrier(int cmd) {
  return static_cast<int>(syscall(__NR_membarrier, cmd, 0, 0));
}

// Every record ever made (stable addresses: a deque only appends), under
// the registry's mutex.
struct Registry {
  std::mutex mutex;
  std::deque<ExecutionGate::Record> records;
  pthread_key_t exit_key;
  bool decided = false;
};

Registry& TheRegistry() {
  static Registry* r = new Registry;  // never destroyed: threads may exit after main
  return *r;
}

// A thread that exits gives its record back (it cannot be inside then).
void ReleaseRecord(void* p) {
  static_cast<ExecutionGate::Record*>(p)->in_use.store(false, std::memory_order_release);
}

// Whether the waiter's membarrier can order executors (asked once).
bool DecideAsymmetric() {
  const char* force = getenv("SOFTVERBS_TEST_SYMMETRIC_FENCES");
  if (force && *force == '1') return false;
  const int supported = Membarrier(MEMBARRIER_CMD_QUERY);
  if (supported < 0 || !(supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED)) return false;
  return Membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
}

// A forked child has only the thread that forked: the records of the
// others (possibly inside an execution at the fork) are free; the child's
// memory map is new, so it registers for membarrier again.
void AfterForkInChild() {
  Registry& r = TheRegistry();
  new (&r.mutex) std::mutex;  // the parent may have held it in another thread
  for (ExecutionGate::Record& rec : r.records) {
    if (pthread_getspecific(r.exit_key) == &rec) continue;
    rec.in_use.store(false, std::memory_order_relaxed);
    const uint64_t s = rec.seq.load(std::memory_order_relaxed);
    if (s & 1) rec.seq.store(s + 1, std::memory_order_relaxed);
  }
  if (ExecutionGate::Asymmetric()) Membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED);
}

}  // namespace

void ExecutionGate::Decide() {
  Registry& r = TheRegistry();
  std::lock_guard lock(r.mutex);
  DecideLocked();
}

void ExecutionGate::DecideLocked() {
  Registry& r = TheRegistry();
  if (r.decided) return;
  asymmetric_ = DecideAsymmetric();
  pthread_key_create(&r.exit_key, ReleaseRecord);
  pthread_atfork(nullptr, nullptr, AfterForkInChild);
  r.decided = true;
}

// Decided when the library loads: membarrier's registration is a few
// microseconds in a process with one thread, but waits for an RCU grace
// period (12 ms measured here) once the process has several - which every
// RDMA program has by its first post.
__attribute__((constructor)) static void DecideAtLoad() {
  ExecutionGate::Decide();
}

ExecutionGate::Record* ExecutionGate::Register() {
  Registry& r = TheRegistry();
  std::lock_guard lock(r.mutex);
  DecideLocked();
  Record* mine = nullptr;
  for (Record& rec : r.records) {
    if (!rec.in_use.load(std::memory_order_acquire)) {
      mine = &rec;
      break;
    }
  }
  if (!mine) mine = &r.records.emplace_back();
  mine->in_use.store(true, std::memory_order_relaxed);
  pthread_setspecific(r.exit_key, mine);
  return mine;
}

void ExecutionGate::Enter() {
  ThreadState& t = state;
  if (t.depth++ != 0) return;
  if (!t.record) [[unlikely]] {
    t.record = Register();
  }
  const uint64_t s = t.record->seq.load(std::memory_order_relaxed);
  t.record->seq.store(s + 1, std::memory_order_relaxed);
  if (asymmetric_) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
  } else {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
}

void ExecutionGate::Leave() {
  ThreadState& t = state;
  if (--t.depth != 0) return;
  const uint64_t s = t.record->seq.load(std::memory_order_relaxed);
  t.record->seq.store(s + 1, std::memory_order_release);
}

bool ExecutionGate::Inside() {
  return state.depth != 0;
}

void ExecutionGate::Barrier() {
  if (asymmetric_ && Membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return;
  if (asymmetric_) {
    // Cannot fail once registered; if it did, the global command orders
    // every thread of the system (slower, no registration needed).
    Log("execution gate: membarrier(PRIVATE_EXPEDITED) failed (%m); using the global command");
    Membarrier(MEMBARRIER_CMD_GLOBAL);
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

ExecutionGate::Snapshot ExecutionGate::InProgress() {
  Snapshot s;
  Registry& r = TheRegistry();
  std::lock_guard lock(r.mutex);
  if (!r.decided) return s;  // no thread ever executed
  const Record* own = state.record;
  // No other thread has a record: none can be inside, and one that
  // registers later does so under this mutex, after whatever the caller did
  // before (a single-threaded program's dereg needs no barrier).
  bool others = false;
  for (const Record& rec : r.records) {
    if (&rec != own && rec.in_use.load(std::memory_order_acquire)) {
      others = true;
      break;
    }
  }
  if (!others) return s;
  Barrier();
  for (const Record& rec : r.records) {
    if (&rec == own) continue;
    const uint64_t seq = rec.seq.load(std::memory_order_acquire);
    if (seq & 1) s.emplace_back(&rec, seq);
  }
  return s;
}

bool ExecutionGate::AllLeft(const Snapshot& s) {
  for (const auto& [rec, seq] : s) {
    if (rec->seq.load(std::memory_order_acquire) == seq) return false;
  }
  return true;
}

bool ExecutionGate::WaitForExecutions(int64_t timeout_ns) {
  const Snapshot s = InProgress();
  if (AllLeft(s)) return true;
  const uint64_t start = datapath::NowNs();
  for (int spins = 0; !AllLeft(s); ++spins) {
    if (spins < 1000) {
      sched_yield();
      continue;
    }
    if (datapath::NowNs() - start >= static_cast<uint64_t>(timeout_ns)) return false;
    usleep(50);
  }
  return true;
}

}  // namespace softverbs::provider
