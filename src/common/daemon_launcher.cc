#include "common/daemon_launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

#include "common/log.h"
#include "common/runtime_dir.h"
#include "common/unix_socket.h"

namespace softverbs {
namespace {

int SpawnDaemon(const std::string& binary, const std::string& dir) {
  std::string log = dir + "/softverbsd.log";
  const char* argv[] = {binary.c_str(), "--runtime-dir", dir.c_str(), nullptr};
  pid_t pid = fork();
  if (pid < 0) return errno;
  if (pid == 0) {
    // Only async-signal-safe calls from here on: the caller may be threaded.
    setsid();
    if (fork() != 0) _exit(0);
    int devnull = open("/dev/null", O_RDONLY);
    int out = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    dup2(devnull, 0);
    dup2(out >= 0 ? out : devnull, 1);
    dup2(out >= 0 ? out : devnull, 2);
    // A test harness waiting for EOF on a pipe must not wait for the daemon.
    syscall(SYS_close_range, 3, ~0u, 0);
    execvp(argv[0], const_cast<char* const*>(argv));
    _exit(127);
  }
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return 0;
}

}  // namespace

int ConnectToDaemon(const std::string& daemon_binary, std::string* why) {
  std::string warning;
  std::string dir = RuntimeDirPath(&warning);
  if (!warning.empty()) {
    static std::atomic<bool> said{false};  // once per process
    if (!said.exchange(true)) Log("softverbs runtime directory: %s", warning.c_str());
  }
  if (int err = EnsureRuntimeDir(dir, why)) return -err;
  std::string path = DaemonSocketPath(dir);
  int fd = ConnectSeqpacket(path);
  if (fd >= 0 || daemon_binary.empty()) {
    if (fd < 0) *why = "no softverbs daemon is running in " + dir;
    return fd;
  }
  if (int err = SpawnDaemon(daemon_binary, dir)) {
    *why = "cannot start " + daemon_binary;
    return -err;
  }
  for (int i = 0; i < 500; ++i) {
    fd = ConnectSeqpacket(path);
    if (fd >= 0) return fd;
    timespec ts{0, 10 * 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
  *why = "softverbsd did not come up in " + dir + " (see " + dir + "/softverbsd.log)";
  return fd;
}

}  // namespace softverbs
