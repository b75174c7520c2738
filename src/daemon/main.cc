// softverbsd: the per-user softverbs device daemon. The libraries start it on
// demand; it exits when no client has been connected for --idle-timeout
// seconds or on `softverbs daemon stop`.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include "common/runtime_dir.h"
#include "common/unix_socket.h"
#include "daemon/server.h"

namespace {

// Takes the runtime directory's lock. While another daemon holds it: if that
// one answers on the socket, it serves and we leave; if it does not, it is
// either exiting (idle) or still starting, so wait for the lock a little.
bool TakeDaemonLock(int lock_fd, const std::string& runtime_dir) {
  for (int i = 0; i < 300; ++i) {
    if (flock(lock_fd, LOCK_EX | LOCK_NB) == 0) return true;
    int fd = softverbs::ConnectSeqpacket(softverbs::DaemonSocketPath(runtime_dir));
    if (fd >= 0) {
      close(fd);
      return false;
    }
    usleep(10 * 1000);
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"softverbsd - the softverbs device daemon"};
  std::string dir_warning;
  std::string runtime_dir = softverbs::RuntimeDirPath(&dir_warning);
  // The environment sets the default so that tests can shorten it for the
  // daemons the libraries start on their own.
  int idle_timeout = 30;
  if (const char* env = getenv("SOFTVERBS_IDLE_TIMEOUT"); env && *env) idle_timeout = atoi(env);
  app.add_option("--runtime-dir", runtime_dir, "per-user runtime directory (mode 0700)");
  app.add_option("--idle-timeout", idle_timeout,
                 "exit after this many seconds without clients (0: never)");
  CLI11_PARSE(app, argc, argv);

  if (!dir_warning.empty() && !app.get_option("--runtime-dir")->count()) {
    fprintf(stderr, "softverbsd: %s\n", dir_warning.c_str());
  }
  std::string why;
  if (int err = softverbs::EnsureRuntimeDir(runtime_dir, &why)) {
    fprintf(stderr, "softverbsd: %s: %s\n", why.c_str(), strerror(err));
    return 1;
  }
  // One daemon per runtime directory: the lock decides who serves.
  int lock_fd =
      open(softverbs::DaemonLockPath(runtime_dir).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd < 0) {
    fprintf(stderr, "softverbsd: cannot open the lock in %s: %s\n", runtime_dir.c_str(),
            strerror(errno));
    return 1;
  }
  if (!TakeDaemonLock(lock_fd, runtime_dir)) return 0;  // another daemon serves this directory
  signal(SIGPIPE, SIG_IGN);

  softverbs::daemon::ServerOptions options;
  options.runtime_dir = runtime_dir;
  options.idle_timeout = std::chrono::seconds(idle_timeout);
  softverbs::daemon::Server server(options);
  if (int err = server.Listen()) {
    fprintf(stderr, "softverbsd: cannot listen in %s: %s\n", runtime_dir.c_str(), strerror(err));
    return 1;
  }
  // SIGTERM/SIGINT end the loop through the default action; the socket file
  // left behind is unlinked by the next daemon before it binds.
  return server.Run();
}
