// The lock of an atomic on 8 bytes that some executors reach only through
// the owner's /proc/<pid>/mem: the partial first and last pages of an MR
// (which are not backed by shared memory, docs/datapath.md) and on-demand
// MRs. There an atomic is a read-modify-write of the file, so it is made
// atomic among the device's atomics (IBV_ATOMIC_HCA, what softverbs
// advertises) by a POSIX record lock on those 8 bytes of the owner's
// /proc/<pid>/mem. Every executor that reaches them takes it: peers (the
// file the owner handed the device), the device's network transport, and
// the owner itself for its own CPU atomics there (MemPiece carries the file
// when its bytes are such). The kernel drops the locks of a process that
// dies, so a holder killed inside an atomic blocks nobody.
//
// Record locks belong to a process, not a thread: the threads of one
// process also take one mutex. And a process loses all its record locks on
// a file when it closes any of its descriptors of that file, so such
// descriptors are closed with CloseOwnerMemFd, which waits for that mutex.
// A holder that does not let go (a stopped process) is waited for
// kOwnerWordLockWaitMs at most; the atomic then fails. A process that does
// not wait in place for owners (WaitsForOwnerConversions: the device, whose
// one thread serves every QP) tries for kOwnerWordLockTryMs and fails with
// EAGAIN: its network transport keeps the packet and tries again later
// (wire_qp.h, owner waits), 2 s in all.
#pragma once

#include <cstdint>

namespace softverbs::datapath {

inline constexpr int kOwnerWordLockWaitMs = 2000;
inline constexpr int kOwnerWordLockTryMs = 1;

class OwnerWordLock {
 public:
  // Locks [va, va + 8) of the file mem_fd (an owner's /proc/<pid>/mem).
  OwnerWordLock(int mem_fd, uint64_t va);
  ~OwnerWordLock();
  OwnerWordLock(const OwnerWordLock&) = delete;
  OwnerWordLock& operator=(const OwnerWordLock&) = delete;

  // False when another process held the bytes for kOwnerWordLockWaitMs
  // (kOwnerWordLockTryMs; errno EAGAIN): do not touch them.
  bool held() const { return held_; }

 private:
  int fd_;
  uint64_t va_;
  bool held_ = false;
  bool recorded_ = false;  // a record lock to release (the file may refuse them)
};

// Closes a descriptor of an owner's /proc/<pid>/mem without dropping a
// record lock another thread of this process holds on that file.
void CloseOwnerMemFd(int fd);

}  // namespace softverbs::datapath
