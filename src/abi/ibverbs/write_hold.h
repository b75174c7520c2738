// Holding the application's writes to a range while registration converts
// it (mr_backing.cc): the copy of the range into its memfd and the remap of
// the memfd over it are not atomic against another thread of the
// application writing the range - a write between the two lands in a page
// the remap then discards. For that time a userfaultfd write-protects the
// range's pages and catches first touches of its empty ones: a thread that
// writes (or first touches) the range waits in its page fault, and once the
// range maps the memfd its access is made again, there. Unprivileged:
// UFFD_USER_MODE_ONLY (Linux 5.11), which vm.unprivileged_userfaultfd = 0
// allows. A system call that reaches such a page meanwhile fails with
// EFAULT instead (a user-mode-only userfaultfd does not hold the kernel's
// own accesses), where without the hold its write would have been lost.
//
// The holding thread must not wait for itself: it blocks its signals for
// that time (a handler of its own that wrote the range would wait for the
// thread it interrupted), a range that holds its stack or its thread-local
// storage is not held, and the code inside a hold writes no other memory -
// no allocation, no log line (a thread stopped there may also hold the
// allocator's or stdio's lock).
//
// A process whose only thread that may write its memory is the registering
// one (the others are the library's own threads that write nothing now:
// each context's watch thread while it waits, QuietLibraryThread) has
// nobody to hold: the hold is then its signals blocked, nothing more - the
// userfaultfd's three system calls saved (about 2.5 of a 4 KiB
// registration's 15 us on the bench's VM). Counted from the link count of
// /proc/self/task at each hold; a quiet thread that is about to write (its
// heap included) waits for such a hold to end. Not seen by that count: a
// task sharing the memory without being a thread of the process
// (clone(CLONE_VM) without CLONE_THREAD; glibc makes such a task only for
// posix_spawn and vfork, whose parent waits).
//
// Where the userfaultfd cannot be had (an older kernel, a seccomp profile
// denying it) or the range cannot be registered with it (memory that is not
// anonymous, a range the application registered with its own), nothing is
// held and the conversion goes on as before; the log channel says so once.
#pragma once

#include <signal.h>

#include <cstdint>

namespace softverbs::provider {

// A thread of the library's that writes no memory of the process while it
// waits counts itself out of the threads a hold must wait for, while it is
// quiet. Made first thing in the thread (quiet), gone last.
class QuietLibraryThread {
 public:
  QuietLibraryThread();
  ~QuietLibraryThread();
  QuietLibraryThread(const QuietLibraryThread&) = delete;
  QuietLibraryThread& operator=(const QuietLibraryThread&) = delete;

  // Before the thread writes any memory but its own stack (the heap, the
  // library's objects): it counts as a writer from now on, once no hold
  // that took it for quiet is under way.
  void WillWrite();
  // It writes nothing again until the next WillWrite.
  void Quiet();

 private:
  bool quiet_ = false;
};

class WriteHold {
 public:
  // Holds writes to the page-aligned [begin, end), if it can.
  WriteHold(uint64_t begin, uint64_t end);
  ~WriteHold() { Release(); }
  WriteHold(const WriteHold&) = delete;
  WriteHold& operator=(const WriteHold&) = delete;

  bool held() const { return held_; }
  // Held by the signals alone: no other thread and no peer can reach the
  // range until the release (see above).
  bool signals_only() const { return held_ && signals_only_; }
  // The range maps something else now (the conversion's remap): the
  // protection went with the old mapping.
  void Replaced() { replaced_ = true; }
  // Lets the waiting threads go on (and lifts the protection if the range
  // was not replaced). Idempotent; the destructor calls it.
  void Release();

 private:
  uint64_t begin_;
  uint64_t end_;
  sigset_t saved_mask_;
  bool held_ = false;
  bool signals_only_ = false;  // the holder is the only writer: signals blocked, no userfaultfd
  bool replaced_ = false;
};

}  // namespace softverbs::provider
