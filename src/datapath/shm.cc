#include "datapath/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

namespace softverbs::datapath {

int CreateSharedFile(const char* name, size_t size) {
  int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -errno;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    int err = errno;
    close(fd);
    return -err;
  }
  // Peers map these files; nobody may shrink one under their feet (SIGBUS).
  fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  return fd;
}

void* MapSharedFile(int fd, size_t* size) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return nullptr;
  *size = static_cast<size_t>(st.st_size);
  if (*size == 0) {
    errno = EINVAL;
    return nullptr;
  }
  void* p = mmap(nullptr, *size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : p;
}

void UnmapSharedFile(void* base, size_t size) {
  if (base) munmap(base, size);
}

int SharedMapping::Map(int fd) {
  Reset();
  size_t size = 0;
  void* p = MapSharedFile(fd, &size);
  if (!p) return errno ? errno : EINVAL;
  base_ = p;
  size_ = size;
  return 0;
}

uint64_t IpcNamespaceId() {
  struct stat st {};
  return stat("/proc/self/ns/ipc", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

int SharedMapping::Attach(int shmid, uint64_t ipc_ns) {
  Reset();
  if (ipc_ns == 0 || ipc_ns != IpcNamespaceId()) return EXDEV;
  shmid_ds ds{};
  if (shmctl(shmid, IPC_STAT, &ds) != 0) return errno;
  void* p = shmat(shmid, nullptr, 0);
  if (p == reinterpret_cast<void*>(-1)) return errno;
  base_ = p;
  size_ = ds.shm_segsz;
  attached_ = true;
  return 0;
}

void SharedMapping::Reset() {
  if (attached_) {
    if (base_) shmdt(base_);
  } else {
    UnmapSharedFile(base_, size_);
  }
  base_ = nullptr;
  size_ = 0;
  attached_ = false;
}

}  // namespace softverbs::datapath
