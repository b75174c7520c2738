// Shared-memory files: create a memfd of a given size, map one (whole file,
// MAP_SHARED), unmap; or attach a SysV segment. Only libc.
#pragma once

#include <cstddef>
#include <cstdint>

namespace softverbs::datapath {

// A sealed-size memfd of `size` zero bytes, close-on-exec. Returns the fd or
// -errno.
int CreateSharedFile(const char* name, size_t size);

// Maps the whole file read/write. Returns nullptr on failure (errno set);
// *size receives the file's size.
void* MapSharedFile(int fd, size_t* size);

void UnmapSharedFile(void* base, size_t size);

// This process's IPC namespace (the inode of /proc/self/ns/ipc; 0 if it
// cannot be told): a SysV segment id names a segment only within one.
uint64_t IpcNamespaceId();

// A mapping that unmaps itself.
class SharedMapping {
 public:
  SharedMapping() = default;
  SharedMapping(const SharedMapping&) = delete;
  SharedMapping& operator=(const SharedMapping&) = delete;
  ~SharedMapping() { Reset(); }
  // Maps fd (which stays owned by the caller). Returns 0 or an errno.
  int Map(int fd);
  // Attaches the SysV shared memory segment shmid of IPC namespace ipc_ns,
  // read/write, whole (with this process's credentials: the segment's
  // permissions decide). Returns 0 or an errno (EXDEV: this process is in
  // another IPC namespace, where the id may name another segment).
  int Attach(int shmid, uint64_t ipc_ns);
  void Reset();
  void* base() const { return base_; }
  size_t size() const { return size_; }

 private:
  void* base_ = nullptr;
  size_t size_ = 0;
  bool attached_ = false;  // a SysV segment (shmdt), not a file mapping (munmap)
};

}  // namespace softverbs::datapath
