// A killed process's large registration is freed off the device's serving
// thread (daemon/background_release.h). The device holds the memfd of a
// registration; when the process dies, the device's close is the last
// reference, and the kernel frees the pages in that close (0.3 s for 2 GiB
// on these VMs) - which, done in the thread that serves every client,
// stalled all of them. So a memfd of 1 MiB or more is closed by a thread of
// its own, a smaller one at once.
//
// The daemon runs with SOFTVERBS_TEST_RELEASE_DELAY_MS (the release thread
// waits that long before each release). For each size a child process
// registers a touched buffer through the library and is killed; once the
// device answers a status request without the child among its clients,
// the device holds the child's 64 KiB memfd no more (closed before that
// answer), but still holds its 4 MiB memfd (the answer did not wait for
// it), which it then lets go within the test's patience.
//
//   background_release   (SOFTVERBS_RUNTIME_DIR names the daemon)
#include <dirent.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <string>
#include <vector>

#include "common/runtime_dir.h"
#include "mapped_file.h"
#include "raw_daemon_channel.h"

namespace {

using namespace softverbs;
using namespace softverbs::test;

// Whether process pid has a descriptor open on inode ino.
bool HoldsInode(pid_t pid, uint64_t ino) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  if (!d) Die("cannot read " + dir + ": " + strerror(errno));
  bool found = false;
  while (dirent* e = readdir(d)) {
    struct stat st {};
    if (e->d_name[0] == '.') continue;
    if (stat((dir + "/" + e->d_name).c_str(), &st) == 0 && st.st_ino == ino) found = true;
  }
  closedir(d);
  return found;
}

// Whether the device's status lists a client of process pid.
bool ListsClient(Channel& cli, pid_t pid) {
  Answer a = cli.Call(static_cast<uint16_t>(Op::kStatus), nullptr, 0);
  RAW_CHECK(a.err == 0);
  const std::string json(a.body.begin(), a.body.end());
  return json.find("\"pid\":" + std::to_string(pid) + ",") != std::string::npos ||
         json.find("\"pid\":" + std::to_string(pid) + "}") != std::string::npos;
}

// A child that registers `bytes` of touched anonymous memory, `ranges`
// times (separate mappings), deregisters them if `dereg` (the device then
// keeps their memfds for its connection only), and waits to be killed;
// returns its pid and the inodes of the memfds that back them.
pid_t RegisteringChild(size_t bytes, int ranges, bool dereg, std::vector<uint64_t>* inos) {
  int fds[2];
  RAW_CHECK(pipe(fds) == 0);
  const pid_t pid = fork();
  RAW_CHECK(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    ibv_device** list = ibv_get_device_list(nullptr);
    ibv_context* ctx = list && list[0] ? ibv_open_device(list[0]) : nullptr;
    ibv_pd* pd = ctx ? ibv_alloc_pd(ctx) : nullptr;
    for (int i = 0; i < ranges; ++i) {
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      uint64_t backing = 0;
      if (pd && p != MAP_FAILED) {
        memset(p, 'r', bytes);
        if (ibv_mr* mr = ibv_reg_mr(pd, p, bytes, IBV_ACCESS_LOCAL_WRITE)) {
          backing = MappedInode(p);
          if (dereg && ibv_dereg_mr(mr) != 0) backing = 0;
        }
      }
      if (write(fds[1], &backing, sizeof(backing)) != sizeof(backing)) _exit(1);
    }
    for (;;) pause();
  }
  close(fds[1]);
  for (int i = 0; i < ranges; ++i) {
    uint64_t ino = 0;
    RAW_CHECK(read(fds[0], &ino, sizeof(ino)) == sizeof(ino));
    if (ino == 0) Die("the child could not register " + std::to_string(bytes) + " bytes");
    inos->push_back(ino);
  }
  close(fds[0]);
  return pid;
}

// Kills the child, then asks the device until its status no longer lists
// it (the device has released what the child held, or handed it over).
void KillAndWaitUntilForgotten(Channel& cli, pid_t child) {
  RAW_CHECK(kill(child, SIGKILL) == 0);
  RAW_CHECK(waitpid(child, nullptr, 0) == child);
  for (int i = 0; ListsClient(cli, child); ++i) {
    if (i == 1000) Die("the device still lists the killed child after 10 s");
    usleep(10000);
  }
}

}  // namespace

int main() {
  const char* dir = getenv("SOFTVERBS_RUNTIME_DIR");
  if (!dir) Die("SOFTVERBS_RUNTIME_DIR is not set");
  if (!getenv("SOFTVERBS_TEST_RELEASE_DELAY_MS")) {
    Die("needs a device started with SOFTVERBS_TEST_RELEASE_DELAY_MS");
  }
  // The library starts the device on first use; the children do.
  std::vector<uint64_t> small_inos;
  const pid_t small = RegisteringChild(64 << 10, 1, false, &small_inos);
  const uint64_t small_ino = small_inos[0];
  Channel cli(DaemonSocketPath(dir));
  GreetAsCli(cli);
  ucred cred{};
  socklen_t len = sizeof(cred);
  RAW_CHECK(getsockopt(cli.fd(), SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0);
  const pid_t daemon = cred.pid;

  RAW_CHECK(HoldsInode(daemon, small_ino));
  KillAndWaitUntilForgotten(cli, small);
  if (HoldsInode(daemon, small_ino)) {
    Die("FAIL: the device still holds a killed process's 64 KiB memfd after answering");
  }

  std::vector<uint64_t> large_inos;
  const pid_t large = RegisteringChild(4 << 20, 1, false, &large_inos);
  const uint64_t large_ino = large_inos[0];
  RAW_CHECK(HoldsInode(daemon, large_ino));
  KillAndWaitUntilForgotten(cli, large);
  if (!HoldsInode(daemon, large_ino)) {
    Die("FAIL: the device closed a killed process's 4 MiB memfd before answering (in the thread "
        "that serves every client)");
  }
  for (int i = 0; HoldsInode(daemon, large_ino); ++i) {
    if (i == 3000) Die("FAIL: the device still holds a killed process's 4 MiB memfd after 30 s");
    usleep(10000);
  }

  // Several small memfds the device only keeps for the connection (their
  // MRs deregistered): one batch for the release thread, not a close each
  // in the serving thread (a few microseconds each, as many as 4,096).
  std::vector<uint64_t> kept_inos;
  const pid_t keeper = RegisteringChild(4 << 10, 2, true, &kept_inos);
  for (uint64_t ino : kept_inos) RAW_CHECK(HoldsInode(daemon, ino));
  KillAndWaitUntilForgotten(cli, keeper);
  if (!HoldsInode(daemon, kept_inos[1])) {
    Die("FAIL: the device closed the memfds it kept for a killed process before answering (in "
        "the thread that serves every client)");
  }
  for (int i = 0; HoldsInode(daemon, kept_inos[0]) || HoldsInode(daemon, kept_inos[1]); ++i) {
    if (i == 3000) Die("FAIL: the device still holds the memfds it kept for a killed process");
    usleep(10000);
  }
  printf(
      "background_release: a killed process's 64 KiB memfd closed before the device answered, "
      "its 4 MiB memfd after, off the serving thread, and the two 4 KiB memfds kept for it after "
      "too: ok\n");
  return 0;
}
