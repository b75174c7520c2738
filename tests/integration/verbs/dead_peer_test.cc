// A peer inside an access of an MR when the owner deregisters it (issue 10,
// point 2). The peer is held inside the access (after its key check, before
// its bytes move) by the test hook SOFTVERBS_TEST_STALL_IN_ACCESS_US (read
// once per process: this binary runs nothing else before the fork).
// - Alive, the owner's ibv_dereg_mr waits for it, as hardware finishes its
//   DMA before the deregistration completes: when the dereg returns, the
//   peer's bytes are in the buffer (its access record counted it inside,
//   and the device summed that count after clearing the keys).
// - Killed there, it is inside nothing any more: its record went with it,
//   so the dereg has nobody to wait for (bounded by 2 s on the clock in any
//   case; it waited 20-34 s when the bound counted 10 us sleeps), and the
//   library's log channel must not report a dereg that gave up waiting.
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "peer_process.h"
#include "test_env.h"

namespace softverbs::it {
namespace {

constexpr uint8_t kPattern = 0x5a;

// The peer: connects to the target and writes kPattern into its MR,
// stalling inside the access for stall_us.
[[noreturn]] void RunPeer(int up, int down, const char* stall_us) {
  setenv("SOFTVERBS_TEST_STALL_IN_ACCESS_US", stall_us, 1);
  ibv_context* ctx = OpenDevice();
  ibv_pd* pd = ctx ? ibv_alloc_pd(ctx) : nullptr;
  ibv_cq* cq = pd ? ibv_create_cq(ctx, 4, nullptr, nullptr, 0) : nullptr;
  ibv_qp* qp = cq ? RcQp(pd, cq) : nullptr;
  static char src[4096];
  memset(src, kPattern, sizeof(src));
  ibv_mr* mr = qp ? ibv_reg_mr(pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE) : nullptr;
  if (!mr) _exit(10);
  RemoteMr target{};
  if (write(up, &qp->qp_num, 4) != 4 || !ReadAll(down, &target, sizeof(target))) _exit(11);
  if (!ConnectRc(ctx, qp, target.qpn)) _exit(12);
  if (write(up, "r", 1) != 1) _exit(13);
  ibv_sge sge{reinterpret_cast<uintptr_t>(src), sizeof(src), mr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.wr.rdma.remote_addr = target.addr;
  wr.wr.rdma.rkey = target.rkey;
  if (ibv_post_send(qp, &wr, &bad) != 0) _exit(14);  // stalls inside the access
  _exit(0);
}

// Waits (10 s at most) until process `pid` is inside clock_nanosleep, read
// from /proc/<pid>/syscall (its first field, the system call's number).
bool WaitUntilInNanosleep(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/syscall";
  for (int i = 0; i < 1000; ++i) {
    std::ifstream f(path);
    long number = -1;
    if (f >> number && number == SYS_clock_nanosleep) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// This process's log channel: one file (the channel reads SOFTVERBS_LOG
// once, at its first line); each case reads what was appended meanwhile.
const std::string& LogPath() {
  static const std::string path = [] {
    char tmpl[] = "/tmp/softverbs-dead-peer-log-XXXXXX";
    const int fd = mkstemp(tmpl);
    if (fd >= 0) close(fd);
    setenv("SOFTVERBS_LOG", tmpl, 1);
    return std::string(tmpl);
  }();
  return path;
}

// The owner's side: an MR of 64 KiB that a peer process, stalled inside its
// write of 4 KiB into it for stall_us, is in the middle of writing.
class PeerInsideAnAccess {
 public:
  explicit PeerInsideAnAccess(const char* stall_us) : stall_us_(stall_us) {}
  ~PeerInsideAnAccess() {
    if (child_ > 0) {
      kill(child_, SIGKILL);
      waitpid(child_, nullptr, 0);
    }
    if (qp_) ibv_destroy_qp(qp_);
    if (cq_) ibv_destroy_cq(cq_);
    if (pd_) ibv_dealloc_pd(pd_);
    if (ctx_) ibv_close_device(ctx_);
  }

  // Starts the peer and returns once it sleeps inside the access.
  void Start() {
    int up[2], down[2];
    ASSERT_EQ(pipe(up), 0);
    ASSERT_EQ(pipe(down), 0);
    child_ = fork();
    ASSERT_GE(child_, 0);
    if (child_ == 0) RunPeer(up[1], down[0], stall_us_);
    close(up[1]);  // so a child that dies early is seen as EOF
    close(down[0]);
    std::ifstream log_file(LogPath());
    log_file.seekg(0, std::ios::end);
    log_start_ = log_file.tellg();
    ctx_ = OpenDevice();
    ASSERT_NE(ctx_, nullptr);
    pd_ = ibv_alloc_pd(ctx_);
    cq_ = ibv_create_cq(ctx_, 4, nullptr, nullptr, 0);
    qp_ = RcQp(pd_, cq_);
    ASSERT_NE(qp_, nullptr);
    mr_ =
        ibv_reg_mr(pd_, buf_.data(), buf_.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    ASSERT_NE(mr_, nullptr);
    uint32_t peer_qpn = 0;
    ASSERT_TRUE(ReadAll(up[0], &peer_qpn, 4));
    ASSERT_TRUE(ConnectRc(ctx_, qp_, peer_qpn));
    const RemoteMr target{qp_->qp_num, mr_->rkey, reinterpret_cast<uintptr_t>(buf_.data())};
    ASSERT_EQ(write(down[1], &target, sizeof(target)), static_cast<ssize_t>(sizeof(target)));
    char ready = 0;
    ASSERT_TRUE(ReadAll(up[0], &ready, 1)) << "the peer could not connect";
    close(up[0]);
    close(down[1]);
    // The peer is now about to enter the access; it sleeps in the stall
    // hook (usleep is clock_nanosleep) once inside.
    ASSERT_TRUE(WaitUntilInNanosleep(child_)) << "the peer never reached the stall";
  }

  // ibv_dereg_mr of the MR: its time in seconds.
  double Dereg() {
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(ibv_dereg_mr(mr_), 0);
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    printf("ibv_dereg_mr: %.3f s\n", waited);
    return waited;
  }

  // The peer's exit: its status from waitpid.
  int Reap() {
    int status = 0;
    EXPECT_EQ(waitpid(child_, &status, 0), child_);
    child_ = -1;
    return status;
  }
  pid_t child() const { return child_; }
  const std::vector<uint8_t>& buffer() const { return buf_; }

  // What our log channel got since Start.
  std::string Log() const {
    std::ifstream after(LogPath());
    after.seekg(log_start_);
    std::stringstream log;
    log << after.rdbuf();
    return log.str();
  }

  // The device still works: a new MR of the same buffer, deregistered.
  void ExpectTheDeviceWorks() {
    ibv_mr* again = ibv_reg_mr(pd_, buf_.data(), buf_.size(), IBV_ACCESS_LOCAL_WRITE);
    EXPECT_NE(again, nullptr);
    if (again) {
      EXPECT_EQ(ibv_dereg_mr(again), 0);
    }
  }

 private:
  const char* stall_us_;
  pid_t child_ = -1;
  std::streamoff log_start_ = 0;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  ibv_mr* mr_ = nullptr;
  std::vector<uint8_t> buf_ = std::vector<uint8_t>(1 << 16);
};

TEST(DeadPeer, DeregWaitsForALivePeerInsideAnAccess) {
  PeerInsideAnAccess peer("800000");  // 0.8 s inside
  ASSERT_NO_FATAL_FAILURE(peer.Start());
  EXPECT_EQ(peer.buffer()[0], 0) << "the peer wrote before its stall";
  const double waited = peer.Dereg();
  // It returned once the peer's bytes were in: all of them, none missing.
  const std::vector<uint8_t>& buf = peer.buffer();
  size_t written = 0;
  while (written < 4096 && buf[written] == kPattern) ++written;
  EXPECT_EQ(written, 4096u) << "the dereg returned while the peer was still inside its write";
  EXPECT_EQ(buf[4096], 0);
  // Not by giving up: the peer left well within the bound.
  EXPECT_GT(waited, 0.2);
  const std::string log = peer.Log();
  EXPECT_EQ(log.find("stayed inside an access"), std::string::npos) << log;
  const int status = peer.Reap();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the peer's post failed";
  peer.ExpectTheDeviceWorks();
}

TEST(DeadPeer, DeregDoesNotWaitForAPeerKilledInsideAnAccess) {
  PeerInsideAnAccess peer("60000000");  // a minute inside: it is killed there
  ASSERT_NO_FATAL_FAILURE(peer.Start());
  ASSERT_EQ(kill(peer.child(), SIGKILL), 0);
  const int status = peer.Reap();
  ASSERT_TRUE(WIFSIGNALED(status))
      << "the peer left the access on its own: " << WEXITSTATUS(status);
  const double waited = peer.Dereg();
  // Correctness of the bound, not speed: 2 s plus scheduling slack; before
  // the fix it was 20-34 s.
  EXPECT_LT(waited, 10.0);
  // The dead peer's record went with it: the dereg did not have to give up
  // waiting for it (it logs when it does).
  const std::string log = peer.Log();
  EXPECT_EQ(log.find("stayed inside an access"), std::string::npos)
      << "the dereg waited out its bound for the dead peer:\n"
      << log;
  EXPECT_EQ(peer.buffer()[0], 0) << "the killed peer's write landed";
  peer.ExpectTheDeviceWorks();
}

}  // namespace
}  // namespace softverbs::it
