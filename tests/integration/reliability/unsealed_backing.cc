// An MR backing its owner could shrink (docs/security.md, "Registered
// memory"): peers and the device's network transport map a registered
// range's backing memfd, and a file its owner truncated would fault them
// (SIGBUS) at their next access. The library seals every backing it makes
// (F_SEAL_SHRINK); the device refuses a backing without that seal - EINVAL,
// explained, no MR made - and goes on answering.
//
// The unsealed backing is made by the library itself, with its sealing
// turned off: this program defines fcntl, which the library's calls reach
// before libc's, and while `g_skip_seals` is set an F_ADD_SEALS does
// nothing (and says it succeeded), as a library that forgot the seal would.
//
// usage (under `softverbs run`): unsealed_backing
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace {

bool g_skip_seals = false;
int g_skipped = 0;

[[noreturn]] void Die(const char* what) {
  fprintf(stderr, "unsealed_backing: FAIL: %s\n", what);
  exit(1);
}

#define CHECK(cond)                           \
  do {                                        \
    if (!(cond)) Die("check failed: " #cond); \
  } while (0)

int Fcntl(int fd, int cmd, long arg) {
  if (g_skip_seals && cmd == F_ADD_SEALS) {
    g_skipped++;
    return 0;
  }
  return static_cast<int>(syscall(SYS_fcntl, fd, cmd, arg));
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  const long arg = va_arg(ap, long);
  va_end(ap);
  return Fcntl(fd, cmd, arg);
}

extern "C" __attribute__((visibility("default"))) int fcntl64(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  const long arg = va_arg(ap, long);
  va_end(ap);
  return Fcntl(fd, cmd, arg);
}

int main() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  CHECK(list && n > 0);
  ibv_context* ctx = ibv_open_device(list[0]);
  CHECK(ctx);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  CHECK(pd);

  // Whole pages, so the library backs them with a memfd of its own - made
  // for the range as it registers: ranges over 64 KiB take none of the
  // memfds the library makes ahead (abi/ibverbs/ready_backings.h), which
  // would be made unsealed too while the seals are skipped.
  static char unsealed[1 << 17] __attribute__((aligned(4096)));
  static char sealed[1 << 17] __attribute__((aligned(4096)));
  memset(unsealed, 1, sizeof(unsealed));
  memset(sealed, 2, sizeof(sealed));

  g_skip_seals = true;
  errno = 0;
  ibv_mr* refused = ibv_reg_mr(pd, unsealed, sizeof(unsealed), IBV_ACCESS_LOCAL_WRITE);
  const int err = errno;
  g_skip_seals = false;
  printf("unsealed backing (%d seal requests skipped): %s, errno %s\n", g_skipped,
         refused ? "registered" : "refused", strerror(err));
  CHECK(g_skipped > 0);  // the library did make a backing and asked to seal it
  CHECK(refused == nullptr);
  CHECK(err == EINVAL);
  // The bytes are still the program's.
  for (size_t i = 0; i < sizeof(unsealed); ++i) CHECK(unsealed[i] == 1);

  // Sealed as the library makes it: registered; the device still answers.
  ibv_mr* mr = ibv_reg_mr(pd, sealed, sizeof(sealed), IBV_ACCESS_LOCAL_WRITE);
  printf("sealed backing: %s\n", mr ? "registered" : strerror(errno));
  CHECK(mr);
  ibv_device_attr attr;
  CHECK(ibv_query_device(ctx, &attr) == 0);
  CHECK(ibv_dereg_mr(mr) == 0);
  CHECK(ibv_dealloc_pd(pd) == 0);
  CHECK(ibv_close_device(ctx) == 0);
  ibv_free_device_list(list);
  printf("OK\n");
  return 0;
}
