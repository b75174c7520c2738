// What a mapping of this process maps, and which descriptor of it the
// process holds: for tests of registration's memfds (it_pd_mr,
// reliability.kept_backing_names).
#pragma once

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <string>

namespace softverbs::test {

// The inode of the file the mapping at addr maps (/proc/self/maps); 0 if
// none (anonymous memory, or nothing mapped there).
inline uint64_t MappedInode(const void* addr) {
  FILE* f = fopen("/proc/self/maps", "r");
  if (!f) return 0;
  char line[512];
  uint64_t inode = 0;
  while (fgets(line, sizeof(line), f)) {
    unsigned long start = 0, end = 0, ino = 0;
    if (sscanf(line, "%lx-%lx %*s %*s %*s %lu", &start, &end, &ino) == 3 &&
        reinterpret_cast<uintptr_t>(addr) >= start && reinterpret_cast<uintptr_t>(addr) < end) {
      inode = ino;
      break;
    }
  }
  fclose(f);
  return inode;
}

// A descriptor this process holds of the file with inode `ino`, or -1.
inline int DescriptorOfInode(uint64_t ino) {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  int found = -1;
  while (dirent* e = readdir(d)) {
    struct stat st {};
    if (e->d_name[0] == '.') continue;
    const int fd = atoi(e->d_name);
    if (fd != dirfd(d) && fstat(fd, &st) == 0 && st.st_ino == ino) found = fd;
  }
  closedir(d);
  return found;
}

}  // namespace softverbs::test
