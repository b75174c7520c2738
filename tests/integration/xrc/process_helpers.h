// Helpers for tests whose roles run in separate processes: each child opens
// its own device context (as an independent application would), talks to the
// parent over pipes, and reports through its exit status.
#pragma once

#include <infiniband/verbs.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <functional>

namespace softverbs::it {

struct Pipe {
  int rd = -1;
  int wr = -1;
  Pipe() {
    int fds[2];
    if (pipe(fds) == 0) {
      rd = fds[0];
      wr = fds[1];
    }
  }
  void Send(uint32_t v) const {
    ssize_t n = write(wr, &v, sizeof(v));
    (void)n;
  }
  // Waits up to 20 s for a value; returns UINT32_MAX on EOF or timeout, so
  // that a peer process that failed before answering fails the test
  // instead of hanging it (both ends stay open in every process).
  uint32_t Receive() const {
    pollfd p{rd, POLLIN, 0};
    if (poll(&p, 1, 20000) != 1) return UINT32_MAX;
    uint32_t v;
    return read(rd, &v, sizeof(v)) == sizeof(v) ? v : UINT32_MAX;
  }
};

// Runs body in a child process; body returns the child's exit code.
inline pid_t Spawn(const std::function<int()>& body) {
  pid_t pid = fork();
  if (pid == 0) _exit(body());
  return pid;
}

// Waits for a child; returns its exit code, or 128+signal.
inline int Reap(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

inline ibv_context* OpenSoftverbs() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n < 1) return nullptr;
  ibv_context* ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  return ctx;
}

}  // namespace softverbs::it
