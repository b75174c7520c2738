// The process's own memory mappings, as registration needs them: whether a
// range is mapped with the access an MR asks for, whether it is private
// anonymous memory, and which file (a backing memfd) a range maps.
//
// Linux 6.11 answers one address with one ioctl on /proc/self/maps
// (PROCMAP_QUERY): a registration costs a few microseconds instead of
// reading and parsing the whole text of /proc/self/maps (about 100 us on
// these VMs, more in a process with many mappings). Older kernels: the text,
// read once per SelfMaps object.
#pragma once

#include <cstdint>
#include <vector>

namespace softverbs::provider {

struct Vma {
  uint64_t start = 0;
  uint64_t end = 0;
  bool readable = false;
  bool writable = false;
  bool shared = false;
  uint64_t offset = 0;  // file offset of `start`
  uint64_t inode = 0;   // 0: anonymous
  uint32_t dev_major = 0;
  uint32_t dev_minor = 0;
  // A shared mapping of a memfd registration made (kBackingMemfdName): a
  // range converted before. Looked up for shared mappings only.
  bool registration_backing = false;
  // A SysV shared memory segment (shmat; "/SYSV<key>" in /proc/self/maps):
  // `inode` is its id. Looked up for shared mappings only.
  bool sysv_shm = false;
  // The size of the mapping's pages: more than the base page for huge pages
  // (hugetlb), which the kernel unmaps or replaces only whole; 0 when the
  // text of /proc/self/maps did not say (a mapping of base pages).
  uint64_t page_size = 0;
  // Private huge pages without a file (MAP_PRIVATE | MAP_HUGETLB:
  // "/anon_hugepage" in /proc/self/maps, whose `inode` is hugetlbfs's).
  bool anon_hugepage = false;
  // Private memory without a file: a page never touched reads as zeros.
  bool anonymous() const { return (inode == 0 || anon_hugepage) && !shared; }
};

// The name of the memfds registration backs ranges with (mr_backing.cc);
// /proc/self/maps shows them as "/memfd:<name> (deleted)".
inline constexpr char kBackingMemfdName[] = "softverbs-mr";

// Parses one line of /proc/self/maps's text (the fallback's reader). False
// when it is not a mapping's line.
bool ParseMapsLine(const char* line, Vma* out);

// One view of the mappings; make one per registration (the fallback reads
// the text once, at the first question; the ioctl's last answer is kept,
// so the access check and the backing's check of one range ask once).
class SelfMaps {
 public:
  // The mapping that contains addr or, if none does, the next one above it.
  // False when there is none (or the maps cannot be read).
  bool At(uint64_t addr, Vma* out);
  // The caller changed the mappings: ask again from now on.
  void Forget() { have_last_ = false; }

  // Whether [begin, end) is mapped without a gap by mappings that all
  // satisfy pred.
  template <typename Pred>
  bool Covered(uint64_t begin, uint64_t end, Pred pred) {
    for (uint64_t at = begin; at < end;) {
      Vma v;
      if (!At(at, &v) || v.start > at || !pred(v)) return false;
      at = v.end;
    }
    return true;
  }

 private:
  bool loaded_ = false;
  std::vector<Vma> text_;  // the fallback's snapshot, sorted by address
  bool have_last_ = false;
  Vma last_;  // the ioctl's last mapping that contained the address asked
};

}  // namespace softverbs::provider
