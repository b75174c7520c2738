// Registering memory of a SysV shared memory segment (shmget/shmat: what
// perftest's --use_hugepages and UCX's huge-page memory pools register).
// The segment is shared memory already and cannot shrink, so it is not
// converted: peers attach the segment itself and reach its pages directly
// (docs/datapath.md, "Registered memory"), and the application's sharing
// of it with its other processes stays. A peer that cannot attach it (here:
// in an IPC namespace of its own) reaches it through the owner's
// /proc/<pid>/mem, slower but the same bytes.
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "peer_process.h"
#include "test_env.h"

namespace softverbs::it {
namespace {

constexpr size_t kSegment = 64 * 1024;
constexpr size_t kWriteAt = 8192;     // the peer's RDMA WRITE of kChunk bytes
constexpr size_t kReadAt = 0;         // the peer's RDMA READ of kChunk bytes
constexpr size_t kCounterAt = 16384;  // the peer's fetch-and-adds
constexpr size_t kChunk = 4096;
constexpr int kAdds = 1000;

// What the owner tells the peer.
struct Target {
  RemoteMr mr;
  int shmid;
};

// What the peer reports.
struct PeerReport {
  int failed_step;      // 0: all went well
  int read_matches;     // the READ brought the owner's pattern
  int attached;         // the peer's maps show the segment attached
  uint64_t last_fetch;  // the last fetch-and-add's old value
};

// Whether this process maps SysV segment shmid ("/SYSV..." with the id as inode).
bool MapsSegment(int shmid) {
  FILE* maps = fopen("/proc/self/maps", "r");
  if (!maps) return false;
  char line[512];
  bool found = false;
  while (!found && fgets(line, sizeof(line), maps)) {
    unsigned long long inode = 0;
    int name_at = 0;
    if (sscanf(line, "%*s %*s %*s %*s %llu %n", &inode, &name_at) == 1 &&
        strncmp(line + name_at, "/SYSV", 5) == 0 && inode == static_cast<unsigned>(shmid)) {
      found = true;
    }
  }
  fclose(maps);
  return found;
}

int PostAndWait(ibv_qp* qp, ibv_cq* cq, ibv_send_wr* wr) {
  ibv_send_wr* bad = nullptr;
  wr->send_flags = IBV_SEND_SIGNALED;
  if (ibv_post_send(qp, wr, &bad) != 0) return -1;
  ibv_wc wc{};
  if (PollOne(cq, &wc) != 1) return -1;
  return wc.status;
}

// The peer: writes a pattern, reads the owner's, adds kAdds times, reports.
[[noreturn]] void RunPeer(int up, int down, bool own_ipc_namespace) {
  if (own_ipc_namespace && unshare(CLONE_NEWIPC) != 0) _exit(20);
  ibv_context* ctx = OpenDevice();
  ibv_pd* pd = ctx ? ibv_alloc_pd(ctx) : nullptr;
  ibv_cq* cq = pd ? ibv_create_cq(ctx, 8, nullptr, nullptr, 0) : nullptr;
  ibv_qp* qp = cq ? RcQp(pd, cq) : nullptr;
  std::vector<uint8_t> local(kChunk + 8);
  ibv_mr* mr = qp ? ibv_reg_mr(pd, local.data(), local.size(), IBV_ACCESS_LOCAL_WRITE) : nullptr;
  if (!mr) _exit(10);
  Target t{};
  if (write(up, &qp->qp_num, 4) != 4 || !ReadAll(down, &t, sizeof(t))) _exit(11);
  if (!ConnectRc(ctx, qp, t.mr.qpn)) _exit(12);
  PeerReport r{};
  ibv_sge sge{reinterpret_cast<uintptr_t>(local.data()), kChunk, mr->lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  memset(local.data(), 0x5a, kChunk);
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.wr.rdma = {t.mr.addr + kWriteAt, t.mr.rkey};
  if (PostAndWait(qp, cq, &wr) != IBV_WC_SUCCESS) r.failed_step = 1;
  memset(local.data(), 0, kChunk);
  wr.opcode = IBV_WR_RDMA_READ;
  wr.wr.rdma = {t.mr.addr + kReadAt, t.mr.rkey};
  if (!r.failed_step && PostAndWait(qp, cq, &wr) != IBV_WC_SUCCESS) r.failed_step = 2;
  r.read_matches = 1;
  for (size_t i = 0; i < kChunk; ++i) r.read_matches &= local[i] == static_cast<uint8_t>(i * 7);
  ibv_sge fetched{reinterpret_cast<uintptr_t>(local.data() + kChunk), 8, mr->lkey};
  wr.sg_list = &fetched;
  wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  wr.wr.atomic = {t.mr.addr + kCounterAt, 1, 0, t.mr.rkey};
  for (int i = 0; i < kAdds && !r.failed_step; ++i) {
    if (PostAndWait(qp, cq, &wr) != IBV_WC_SUCCESS) r.failed_step = 3;
  }
  memcpy(&r.last_fetch, local.data() + kChunk, 8);
  r.attached = MapsSegment(t.shmid);
  if (write(up, &r, sizeof(r)) != sizeof(r)) _exit(13);
  _exit(0);
}

// A process that shares the segment with the owner (attached before the
// registration, as another process of the application): on its cue it
// checks the peer's write and the counter, and writes a word of its own.
[[noreturn]] void RunSharer(volatile uint8_t* segment, int up, int down) {
  char cue = 0;
  if (!ReadAll(down, &cue, 1)) _exit(1);
  uint8_t ok = 1;
  for (size_t i = 0; i < kChunk; ++i) ok &= segment[kWriteAt + i] == 0x5a;
  uint64_t counter = 0;
  memcpy(&counter, const_cast<uint8_t*>(segment) + kCounterAt, 8);
  ok &= counter == kAdds;
  segment[kSegment - 1] = 0x77;
  if (write(up, &ok, 1) != 1) _exit(2);
  _exit(0);
}

struct Child {
  pid_t pid = -1;
  int up = -1;
  int down = -1;
};

template <typename Run>
Child Start(Run run) {
  int up[2], down[2];
  Child c;
  if (pipe(up) != 0 || pipe(down) != 0) return c;
  c.pid = fork();
  if (c.pid == 0) run(up[1], down[0]);
  close(up[1]);
  close(down[0]);
  c.up = up[0];
  c.down = down[1];
  return c;
}

void RegisterAndServe(bool peer_in_own_ipc_namespace) {
  Child peer = Start([&](int up, int down) { RunPeer(up, down, peer_in_own_ipc_namespace); });
  ASSERT_GT(peer.pid, 0);
  const int shmid = shmget(IPC_PRIVATE, kSegment, IPC_CREAT | 0600);
  ASSERT_GE(shmid, 0) << strerror(errno);
  auto* segment = static_cast<uint8_t*>(shmat(shmid, nullptr, 0));
  ASSERT_NE(segment, reinterpret_cast<uint8_t*>(-1));
  shmctl(shmid, IPC_RMID, nullptr);  // as perftest does: gone with its last attachment
  for (size_t i = 0; i < kChunk; ++i) segment[kReadAt + i] = static_cast<uint8_t>(i * 7);
  Child sharer = Start([&](int up, int down) { RunSharer(segment, up, down); });
  ASSERT_GT(sharer.pid, 0);

  ibv_context* ctx = OpenDevice();
  ASSERT_NE(ctx, nullptr);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 8, nullptr, nullptr, 0);
  ibv_mr* mr = ibv_reg_mr(pd, segment, kSegment,
                          IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                              IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
  ASSERT_NE(mr, nullptr) << strerror(errno);
  // Not converted: the owner still maps the segment itself.
  EXPECT_TRUE(MapsSegment(shmid));
  EXPECT_FALSE(PageIsBacked(segment));
  ibv_qp* qp = RcQp(pd, cq);
  ASSERT_NE(qp, nullptr);
  uint32_t peer_qpn = 0;
  ASSERT_TRUE(ReadAll(peer.up, &peer_qpn, 4)) << "the peer could not start";
  ASSERT_TRUE(ConnectRc(ctx, qp, peer_qpn));
  ibv_qp_attr a{};
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_ACCESS_FLAGS), 0);
  const Target t{{qp->qp_num, mr->rkey, reinterpret_cast<uintptr_t>(segment)}, shmid};
  ASSERT_EQ(write(peer.down, &t, sizeof(t)), static_cast<ssize_t>(sizeof(t)));
  PeerReport r{};
  ASSERT_TRUE(ReadAll(peer.up, &r, sizeof(r))) << "the peer failed";
  EXPECT_EQ(r.failed_step, 0);
  EXPECT_TRUE(r.read_matches);
  EXPECT_EQ(r.last_fetch, static_cast<uint64_t>(kAdds - 1));
  // Through the segment, unless the peer cannot attach it.
  EXPECT_EQ(r.attached, peer_in_own_ipc_namespace ? 0 : 1);
  for (size_t i = 0; i < kChunk; ++i) ASSERT_EQ(segment[kWriteAt + i], 0x5a) << i;
  uint64_t counter = 0;
  memcpy(&counter, segment + kCounterAt, 8);
  EXPECT_EQ(counter, static_cast<uint64_t>(kAdds));
  // The application's other process still shares it, both ways.
  ASSERT_EQ(write(sharer.down, "c", 1), 1);
  uint8_t sharer_ok = 0;
  ASSERT_TRUE(ReadAll(sharer.up, &sharer_ok, 1));
  EXPECT_EQ(sharer_ok, 1) << "the sharer did not see the peer's bytes";
  EXPECT_EQ(segment[kSegment - 1], 0x77) << "the sharer's write is not seen here";

  for (const Child& c : {peer, sharer}) {
    int status = 0;
    EXPECT_EQ(waitpid(c.pid, &status, 0), c.pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  }
  // The device holds the segment while the MR lives (as a NIC pins an MR's
  // pages): attached by the owner and by the device, the children gone.
  shmid_ds ds{};
  ASSERT_EQ(shmctl(shmid, IPC_STAT, &ds), 0) << strerror(errno);
  EXPECT_EQ(ds.shm_nattch, 2u);
  ibv_destroy_qp(qp);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  ASSERT_EQ(shmctl(shmid, IPC_STAT, &ds), 0) << strerror(errno);
  EXPECT_EQ(ds.shm_nattch, 1u) << "the device let the segment go with the MR";
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  shmdt(segment);
}

TEST(SysvSegment, PeersAttachTheSegmentAndItStaysShared) {
  RegisterAndServe(false);
}

TEST(SysvSegment, APeerThatCannotAttachItReachesItThroughTheOwner) {
  if (geteuid() != 0) GTEST_SKIP() << "SKIPPED: a new IPC namespace needs root";
  RegisterAndServe(true);
}

}  // namespace
}  // namespace softverbs::it
