// Which threads of this process are inside an execution of the engine
// (datapath::Host::EnterExecution), so that another thread can wait for the
// executions in progress to end - a grace period, as in RCU. Two things
// wait for one: ibv_dereg_mr of this process's own MR (nothing this process
// executes touches the MR once the dereg returns), and the peer cache
// before it frees the mappings of peers that are gone (peers.h).
//
// Each thread that executes has a record of its own (a cache line): a
// sequence number that is odd while it is inside. Entering is a plain store
// and leaving a release store - no locked instruction on the post path.
// The ordering entering needs (the record's store before the execution's
// first load of a key or a cached mapping: the other half of the waiter's
// Dekker protocol) comes from the waiter: it runs membarrier(2)
// MEMBARRIER_CMD_PRIVATE_EXPEDITED, which makes every running thread of the
// process execute a full barrier, before it reads the records. Where
// membarrier is not available (an old kernel, a seccomp profile that denies
// it, SOFTVERBS_TEST_SYMMETRIC_FENCES=1), an executor fences itself
// (seq_cst) after its store instead; the choice is made once per process.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

namespace softverbs::provider {

class ExecutionGate {
 public:
  // A thread's record (one cache line, never freed; reused by the next
  // thread once its thread exits).
  struct alignas(64) Record {
    std::atomic<uint64_t> seq{0};  // odd: inside an execution
    std::atomic<bool> in_use{false};
  };
  // (record, seq) of executions that were in progress at a barrier.
  using Snapshot = std::vector<std::pair<const Record*, uint64_t>>;

  // Enter / Leave one execution (nesting allowed: only the outermost
  // counts). Defined out of line: the thread's state is a thread_local of
  // execution_gate.cc alone (a class-scope thread_local read from other
  // files goes through a TLS wrapper, which UBSan reports as a null access).
  static void Enter();
  static void Leave();
  // Whether the calling thread is inside an execution.
  static bool Inside();

  // The executions of other threads in progress now (after a barrier that
  // orders whatever the caller did before against their loads).
  static Snapshot InProgress();
  // Whether every execution of the snapshot has left.
  static bool AllLeft(const Snapshot& s);
  // Waits until every execution in progress in another thread when called
  // has left, at most timeout_ns; false if one was still inside then. The
  // caller must not be inside an execution itself.
  static bool WaitForExecutions(int64_t timeout_ns);
  // Whether executors rely on the waiter's membarrier (else they fence).
  static bool Asymmetric() { return asymmetric_; }
  // Makes the choice (and registers for membarrier) if not made yet; done
  // when the library loads, while a program usually has one thread.
  static void Decide();
  // A full barrier in every running thread of the process
  // (membarrier(2) MEMBARRIER_CMD_PRIVATE_EXPEDITED): after it, whatever a
  // thread stored before its last compiler barrier is visible here, and its
  // loads after it see what the caller stored before the call. The other
  // threads then need no fence of their own (the gate's executors, a
  // BiasedLock's owner). Without membarrier (Asymmetric() false): a fence
  // of the caller's, and those threads fence themselves.
  static void Barrier();

 private:
  // The calling thread's record, made at its first execution.
  static Record* Register();
  static void DecideLocked();

  static bool asymmetric_;  // set once, before the first record exists
};

}  // namespace softverbs::provider
