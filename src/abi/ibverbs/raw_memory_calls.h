// The registration's own calls to mmap, mremap, munmap and madvise, made
// as raw system calls: an application that hooks those libc functions to
// track its memory (UCX's ucm, for its registration cache) must not take the
// remap of a range onto its backing - which keeps every byte where it was -
// for an unmap of the application's memory, nor see the library's own
// scratch mappings come and go.
#pragma once

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>

namespace softverbs::provider {

// syscall(2) answers -1 with errno set on failure (no address is -1).
inline void* RawMapResult(long r) {
  return r == -1 ? MAP_FAILED : reinterpret_cast<void*>(r);
}

inline void* RawMmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  return RawMapResult(syscall(SYS_mmap, addr, len, prot, flags, fd, off));
}

// mremap(old, old_len, new_len, flags, new_addr): MREMAP_FIXED moves the
// mapping's page tables to new_addr, replacing what was mapped there.
inline void* RawMremap(void* old_addr, size_t old_len, size_t new_len, int flags, void* new_addr) {
  return RawMapResult(syscall(SYS_mremap, old_addr, old_len, new_len, flags, new_addr));
}

inline int RawMunmap(void* addr, size_t len) {
  return static_cast<int>(syscall(SYS_munmap, addr, len));
}

inline int RawMadvise(void* addr, size_t len, int advice) {
  return static_cast<int>(syscall(SYS_madvise, addr, len, advice));
}

}  // namespace softverbs::provider
