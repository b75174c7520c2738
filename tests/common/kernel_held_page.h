// A page of this process the kernel cannot reach for now, as under an
// owner's conversion (src/abi/ibverbs/write_hold.h): empty, registered with
// a user-mode-only userfaultfd for missing-page faults, so that the
// kernel's own accesses to it (/proc/self/mem, system calls) answer EIO,
// until Release. This process must not touch the page before Release (its
// own access would wait for a userfaultfd handler that never comes).
//
//   KernelHeldPage held(1);        // one reachable page below it
//   ASSERT_TRUE(held.ok()) << held.error();
//   ... held.page() ...; held.Release();
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace softverbs::datapath::testing {

class KernelHeldPage {
 public:
  static constexpr size_t kPage = 4096;

  // `below` touched pages (0x5a bytes) right below the held one, in the
  // same mapping.
  explicit KernelHeldPage(size_t below = 0) : below_(below) {
    const size_t len = (below_ + 1) * kPage;
    area_ = static_cast<uint8_t*>(
        mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (area_ == MAP_FAILED) {
      area_ = nullptr;
      error_ = std::string("mmap: ") + strerror(errno);
      return;
    }
    memset(area_, 0x5a, below_ * kPage);
    uffd_ = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY));
    uffdio_api api{UFFD_API, 0, 0};
    uffdio_register reg{};
    reg.range = {reinterpret_cast<uintptr_t>(page()), kPage};
    reg.mode = UFFDIO_REGISTER_MODE_MISSING;
    if (uffd_ < 0 || ioctl(uffd_, UFFDIO_API, &api) != 0 ||
        ioctl(uffd_, UFFDIO_REGISTER, &reg) != 0) {
      error_ = std::string("userfaultfd: ") + strerror(errno);
    }
  }
  ~KernelHeldPage() {
    if (uffd_ >= 0) close(uffd_);
    if (area_) munmap(area_, (below_ + 1) * kPage);
  }
  KernelHeldPage(const KernelHeldPage&) = delete;
  KernelHeldPage& operator=(const KernelHeldPage&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  uint8_t* area() const { return area_; }  // the pages below, then the held one
  size_t area_bytes() const { return (below_ + 1) * kPage; }
  uint8_t* page() const { return area_ + below_ * kPage; }
  // The kernel reaches the page again (it reads as zeros).
  bool Release() {
    uffdio_range range{reinterpret_cast<uintptr_t>(page()), kPage};
    return ioctl(uffd_, UFFDIO_UNREGISTER, &range) == 0;
  }

 private:
  size_t below_;
  uint8_t* area_ = nullptr;
  int uffd_ = -1;
  std::string error_;
};

}  // namespace softverbs::datapath::testing
