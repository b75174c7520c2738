// Device memory: ibv_alloc_dm / ibv_free_dm, the memcpy verbs and their
// 4-byte rules, zero-based DM MRs, the device-wide capacity, and RDMA traffic
// into and out of a DM MR between two RC QPs.
#include <errno.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "test_env.h"

namespace softverbs::it {
namespace {

constexpr unsigned kDmAccess = IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE |
                               IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

class DmTest : public ContextTest {
 protected:
  void SetUp() override {
    ContextTest::SetUp();
    ibv_device_attr_ex attr{};
    ASSERT_EQ(ibv_query_device_ex(ctx_, nullptr, &attr), 0);
    max_dm_ = attr.max_dm_size;
    ASSERT_GT(max_dm_, 0u) << "softverbs advertises device memory";
  }
  ibv_dm* Alloc(uint64_t length) {
    ibv_alloc_dm_attr a{};
    a.length = length;
    return ibv_alloc_dm(ctx_, &a);
  }
  uint64_t max_dm_ = 0;
};

TEST_F(DmTest, AllocCopyAndFree) {
  ibv_dm* dm = Alloc(256);
  ASSERT_NE(dm, nullptr) << strerror(errno);
  EXPECT_EQ(MyClients()[0]["dm"].size(), 1u);
  std::vector<uint8_t> in(64), out(64, 0);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 7 + 1);
  ASSERT_EQ(ibv_memcpy_to_dm(dm, 128, in.data(), in.size()), 0);
  ASSERT_EQ(ibv_memcpy_from_dm(out.data(), dm, 128, out.size()), 0);
  EXPECT_EQ(in, out);
  EXPECT_EQ(ibv_free_dm(dm), 0);
  EXPECT_EQ(MyClients()[0]["dm"].size(), 0u);
}

TEST_F(DmTest, CopyRulesAreMlx5s) {
  ibv_dm* dm = Alloc(100);
  ASSERT_NE(dm, nullptr);
  uint8_t buf[128] = {};
  EXPECT_EQ(ibv_memcpy_to_dm(dm, 2, buf, 4), EINVAL) << "unaligned offset";
  EXPECT_EQ(ibv_memcpy_from_dm(buf, dm, 4, 6), EINVAL) << "unaligned length";
  EXPECT_EQ(ibv_memcpy_to_dm(dm, 104, buf, 4), EFAULT) << "offset past the end";
  EXPECT_EQ(ibv_memcpy_from_dm(buf, dm, 0, 104), EFAULT) << "length past the end";
  EXPECT_EQ(ibv_memcpy_to_dm(dm, 96, buf, 4), 0) << "the last word";
  EXPECT_EQ(ibv_free_dm(dm), 0);
}

TEST_F(DmTest, AllocRules) {
  ibv_alloc_dm_attr a{};
  a.length = 64;
  a.comp_mask = 1;
  errno = 0;
  EXPECT_EQ(ibv_alloc_dm(ctx_, &a), nullptr);
  EXPECT_EQ(errno, EINVAL) << "unknown comp_mask";
  errno = 0;
  EXPECT_EQ(Alloc(max_dm_ + 1), nullptr);
  EXPECT_EQ(errno, ENOMEM) << "above max_dm_size";
  errno = 0;
  EXPECT_EQ(Alloc(0), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(MyClients()[0]["dm"].size(), 0u) << "failed allocations leave nothing";
}

// The capacity is the device's: two contexts share it.
TEST_F(DmTest, CapacityIsDeviceWide) {
  ibv_dm* most = Alloc(max_dm_ - 64);
  ASSERT_NE(most, nullptr) << strerror(errno);
  ibv_context* other = OpenDevice();
  ASSERT_NE(other, nullptr);
  ibv_alloc_dm_attr a{};
  a.length = 128;
  errno = 0;
  EXPECT_EQ(ibv_alloc_dm(other, &a), nullptr);
  EXPECT_EQ(errno, ENOMEM) << "only 64 bytes are free";
  a.length = 64;
  ibv_dm* last = ibv_alloc_dm(other, &a);
  EXPECT_NE(last, nullptr) << strerror(errno);
  if (last) {
    EXPECT_EQ(ibv_free_dm(last), 0);
  }
  ASSERT_EQ(ibv_close_device(other), 0);
  EXPECT_EQ(ibv_free_dm(most), 0);
  ibv_dm* all = Alloc(max_dm_);
  EXPECT_NE(all, nullptr) << "everything was given back";
  if (all) {
    EXPECT_EQ(ibv_free_dm(all), 0);
  }
}

TEST_F(DmTest, DmMrRules) {
  ibv_dm* dm = Alloc(100);
  ASSERT_NE(dm, nullptr);
  errno = 0;
  EXPECT_EQ(ibv_reg_dm_mr(pd_, dm, 0, 104, kDmAccess), nullptr);
  EXPECT_EQ(errno, EINVAL) << "longer than the DM";
  errno = 0;
  EXPECT_EQ(ibv_reg_dm_mr(pd_, dm, 0, 64, IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EQ(errno, EINVAL) << "not zero-based";
  errno = 0;
  EXPECT_EQ(ibv_reg_dm_mr(pd_, dm, 0, 64, kDmAccess | IBV_ACCESS_MW_BIND), nullptr);
  EXPECT_EQ(errno, EINVAL) << "an access a DM MR cannot carry";
  EXPECT_EQ(MyObjectCount("mr"), 0u);
  ibv_mr* mr = ibv_reg_dm_mr(pd_, dm, 0, 100, kDmAccess);
  ASSERT_NE(mr, nullptr) << strerror(errno);
  EXPECT_EQ(mr->addr, nullptr);
  EXPECT_EQ(mr->length, 100u);
  EXPECT_EQ(ibv_free_dm(dm), EBUSY) << "an MR is registered on it";
  ibv_mr* empty = ibv_reg_dm_mr(pd_, dm, 100, 0, kDmAccess);
  ASSERT_NE(empty, nullptr) << "an empty DM MR is valid, as on mlx5: " << strerror(errno);
  EXPECT_EQ(ibv_dereg_mr(empty), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_free_dm(dm), 0);
}

// RDMA WRITE from host memory into a DM MR and READ back out, between two RC
// QPs of this context; the DM MR is addressed from 0.
TEST_F(DmTest, RdmaTrafficIntoAndOutOfDm) {
  constexpr size_t kLen = 192;
  ibv_dm* dm = Alloc(kLen);
  ASSERT_NE(dm, nullptr);
  ibv_mr* dm_mr = ibv_reg_dm_mr(pd_, dm, 0, kLen, kDmAccess);
  ASSERT_NE(dm_mr, nullptr) << strerror(errno);
  std::vector<uint8_t> host(kLen), back(kLen, 0);
  for (size_t i = 0; i < kLen; ++i) host[i] = static_cast<uint8_t>(0xa5 ^ i);
  ibv_mr* host_mr = ibv_reg_mr(pd_, host.data(), kLen, IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* back_mr = ibv_reg_mr(pd_, back.data(), kLen, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(host_mr, nullptr);
  ASSERT_NE(back_mr, nullptr);

  ibv_qp_init_attr init{};
  init.send_cq = cq_;
  init.recv_cq = cq_;
  init.qp_type = IBV_QPT_RC;
  init.cap = {8, 8, 1, 1, 0};
  init.sq_sig_all = 1;
  ibv_qp* a = ibv_create_qp(pd_, &init);
  ibv_qp* b = ibv_create_qp(pd_, &init);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(ConnectRc(ctx_, a, b->qp_num));
  ASSERT_TRUE(ConnectRc(ctx_, b, a->qp_num));
  auto post_and_wait = [&](ibv_wr_opcode op, ibv_mr* local, uint64_t remote_addr) {
    ibv_sge sge{reinterpret_cast<uint64_t>(local->addr), static_cast<uint32_t>(kLen - 64),
                local->lkey};
    ibv_send_wr wr{};
    wr.opcode = op;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey = dm_mr->rkey;
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(a, &wr, &bad), 0);
    ibv_wc wc{};
    ASSERT_EQ(PollOne(cq_, &wc), 1);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  };
  // Host bytes 0..127 land at DM offset 64 (zero-based address 64).
  post_and_wait(IBV_WR_RDMA_WRITE, host_mr, 64);
  std::vector<uint8_t> in_dm(kLen - 64);
  ASSERT_EQ(ibv_memcpy_from_dm(in_dm.data(), dm, 64, in_dm.size()), 0);
  EXPECT_EQ(0, memcmp(in_dm.data(), host.data(), in_dm.size()));
  // And come back out by RDMA READ.
  post_and_wait(IBV_WR_RDMA_READ, back_mr, 64);
  EXPECT_EQ(0, memcmp(back.data(), host.data(), kLen - 64));
  // An address past the DM MR is a remote access error, as on any MR.
  ibv_sge sge{reinterpret_cast<uint64_t>(host.data()), 16, host_mr->lkey};
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.wr.rdma.remote_addr = kLen - 8;
  wr.wr.rdma.rkey = dm_mr->rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a, &wr, &bad), 0);
  ibv_wc wc{};
  ASSERT_EQ(PollOne(cq_, &wc), 1);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc.status);

  ibv_destroy_qp(a);
  ibv_destroy_qp(b);
  ibv_dereg_mr(host_mr);
  ibv_dereg_mr(back_mr);
  EXPECT_EQ(ibv_dereg_mr(dm_mr), 0);
  EXPECT_EQ(ibv_free_dm(dm), 0);
}

// Children forked from a process share its context, as they share a uverbs
// fd: their calls through it interleave with each other's and are each
// answered (rdma-core's test_multi_process_alloc_dm). Children that exit
// without freeing leave their allocations to the context, as on hardware.
TEST_F(DmTest, ForkedChildrenCallThroughTheInheritedContext) {
  constexpr int kChildren = 5;
  constexpr int kRounds = 20;
  std::vector<pid_t> pids;
  for (int i = 0; i < kChildren; ++i) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int failures = 0;
      for (int r = 0; r < kRounds; ++r) {
        ibv_dm* dm = Alloc(512);
        if (!dm) {
          ++failures;
          continue;
        }
        uint32_t word = static_cast<uint32_t>(r);
        failures += ibv_memcpy_to_dm(dm, 0, &word, 4) != 0;
        failures += ibv_free_dm(dm) != 0;
      }
      ibv_dm* kept = Alloc(64);  // exits holding it
      _exit(failures == 0 && kept ? 0 : 1);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << pid;
  }
  // The context is still usable, and holds what the children kept.
  EXPECT_EQ(MyClients()[0]["dm"].size(), static_cast<size_t>(kChildren));
  ibv_dm* dm = Alloc(64);
  ASSERT_NE(dm, nullptr) << strerror(errno);
  EXPECT_EQ(ibv_free_dm(dm), 0);
}

}  // namespace
}  // namespace softverbs::it
