#include <poll.h>
// The DEVX data path end to end (docs/devx.md, "Data path"): DEVX RC QPs
// that move data with mlx5 WQEs and report mlx5 CQEs - between two
// processes, with a verbs QP, and with the error CQEs and QP state a
// ConnectX gives for bad keys; a requester killed mid-traffic leaves nothing
// behind.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <thread>

#include "devx_queue.h"

namespace devx_it {
namespace {

constexpr uint32_t kMsg = 256;
constexpr int kSends = 100;
constexpr uint32_t kImm = 0x03020100;
// The child's buffer: receive buffers at [0, 16 KiB), RDMA_WRITE/READ at
// [16 KiB, 20 KiB), the atomics' counter here.
constexpr uint32_t kCounter = 24576;

// What a responder publishes about itself (through a pipe).
struct Peer {
  uint32_t qpn;
  uint32_t rkey;
  uint64_t addr;
};

bool ReadAll(int fd, void* buf, size_t len) {
  auto* p = static_cast<uint8_t*>(buf);
  while (len) {
    ssize_t n = read(fd, p, len);
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

// A DEVX context with a PD and a registered buffer, for one side.
struct Side {
  Side() {
    ctx = OpenDevx();
    if (!ctx) return;
    pd = ibv_alloc_pd(ctx);
    buf.assign(64 * 1024, 0);
    mr = ibv_reg_mr(pd, buf.data(), buf.size(),
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                        IBV_ACCESS_REMOTE_ATOMIC);
    if (mr) queue = std::make_unique<DevxQueue>(ctx, PdnOf(pd));
  }
  ~Side() {
    queue.reset();
    if (mr) ibv_dereg_mr(mr);
    if (pd) ibv_dealloc_pd(pd);
    if (ctx) ibv_close_device(ctx);
  }
  bool ok() const { return queue && queue->ok(); }
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_mr* mr = nullptr;
  std::vector<uint8_t> buf;
  std::unique_ptr<DevxQueue> queue;
};

// The child: a DEVX responder. Receives kSends SEND_IMMs and checks each
// (CQE opcode, immediate, byte count, data), then waits for the parent's
// writes, reads and atomics on its buffer and exits 0 if all was right.
int RunResponder(int to_parent, int from_parent) {
  Side side;
  if (!side.ok()) return 10;
  Peer me{side.queue->qpn(), side.mr->rkey, reinterpret_cast<uintptr_t>(side.buf.data())};
  uint32_t parent_qpn = 0;
  if (write(to_parent, &me, sizeof(me)) != sizeof(me)) return 11;
  if (!ReadAll(from_parent, &parent_qpn, sizeof(parent_qpn))) return 12;
  for (uint32_t i = 0; i < kQueueEntries; ++i) {
    side.queue->PostRecv(side.mr->lkey, side.buf.data() + i * kMsg, kMsg);
  }
  if (!side.queue->ToRts(parent_qpn)) return 13;
  const char ready = 'r';
  if (write(to_parent, &ready, 1) != 1) return 14;
  for (int i = 0; i < kSends; ++i) {
    Cqe cqe = side.queue->Poll();
    if (cqe.opcode != MLX5_CQE_RESP_SEND_IMM) return 20;
    if (cqe.imm != kImm + static_cast<uint32_t>(i) || cqe.byte_cnt != kMsg) return 21;
    if (cqe.wqe_counter != static_cast<uint16_t>(i)) return 22;
    const uint8_t* got = side.buf.data() + (i % kQueueEntries) * kMsg;
    for (uint32_t b = 0; b < kMsg; ++b) {
      if (got[b] != static_cast<uint8_t>(i + b)) return 23;
    }
    // The buffer is free again once checked: the WQE for message i + 64 uses it.
    side.queue->PostRecv(side.mr->lkey, side.buf.data() + (i % kQueueEntries) * kMsg, kMsg);
  }
  // The parent writes, reads and runs atomics, then says it is done.
  char done = 0;
  if (!ReadAll(from_parent, &done, 1)) return 30;
  uint64_t counter;
  memcpy(&counter, side.buf.data() + kCounter, 8);
  if (counter != 100 + 5)
    return 31;  // the parent's FA +5 and CS 105 -> 105 (no swap: compare fails)
  for (uint32_t b = 0; b < 4096; ++b) {
    if (side.buf[16384 + b] != static_cast<uint8_t>(b * 7)) return 32;
  }
  return 0;
}

TEST(DevxTraffic, TwoProcessesSendImmWriteReadAndAtomics) {
  int up[2], down[2];
  ASSERT_EQ(pipe(up), 0);
  ASSERT_EQ(pipe(down), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(up[0]);
    close(down[1]);
    _exit(RunResponder(up[1], down[0]));
  }
  close(up[1]);
  close(down[0]);
  Side side;
  ASSERT_TRUE(side.ok()) << strerror(errno);
  Peer peer{};
  ASSERT_TRUE(ReadAll(up[0], &peer, sizeof(peer)));
  const uint32_t my_qpn = side.queue->qpn();
  ASSERT_EQ(write(down[1], &my_qpn, sizeof(my_qpn)), static_cast<ssize_t>(sizeof(my_qpn)));
  ASSERT_TRUE(side.queue->ToRts(peer.qpn));
  char ready = 0;
  ASSERT_TRUE(ReadAll(up[0], &ready, 1));

  // SEND_IMM: the data and immediate of each reach the child (it checks).
  for (int i = 0; i < kSends; ++i) {
    uint8_t* msg = side.buf.data() + (i % 8) * kMsg;
    for (uint32_t b = 0; b < kMsg; ++b) msg[b] = static_cast<uint8_t>(i + b);
    side.queue->PostSend(MLX5_OPCODE_SEND_IMM, {DataSeg(kMsg, side.mr->lkey, msg)},
                         htobe32(kImm + static_cast<uint32_t>(i)));
    Cqe cqe = side.queue->Poll();
    ASSERT_EQ(cqe.opcode, MLX5_CQE_REQ) << "send " << i << " syndrome " << int(cqe.syndrome);
    EXPECT_EQ(cqe.wqe_opcode, MLX5_OPCODE_SEND_IMM);
    EXPECT_EQ(cqe.qpn, my_qpn);
  }

  // RDMA_WRITE 4 KiB into the child's buffer, RDMA_READ it back.
  uint8_t* out = side.buf.data() + 16384;
  for (uint32_t b = 0; b < 4096; ++b) out[b] = static_cast<uint8_t>(b * 7);
  side.queue->PostSend(MLX5_OPCODE_RDMA_WRITE,
                       {RaddrSeg(peer.addr + 16384, peer.rkey), DataSeg(4096, side.mr->lkey, out)});
  Cqe write_cqe = side.queue->Poll();
  ASSERT_EQ(write_cqe.opcode, MLX5_CQE_REQ) << int(write_cqe.syndrome);
  EXPECT_EQ(write_cqe.wqe_opcode, MLX5_OPCODE_RDMA_WRITE);
  uint8_t* back = side.buf.data() + 32768;
  side.queue->PostSend(MLX5_OPCODE_RDMA_READ, {RaddrSeg(peer.addr + 16384, peer.rkey),
                                               DataSeg(4096, side.mr->lkey, back)});
  Cqe read_cqe = side.queue->Poll();
  ASSERT_EQ(read_cqe.opcode, MLX5_CQE_REQ) << int(read_cqe.syndrome);
  EXPECT_EQ(read_cqe.byte_cnt, 4096u);
  EXPECT_EQ(memcmp(back, out, 4096), 0) << "RDMA_READ returned other bytes than were written";

  // Atomics on the child's 8 bytes at kCounter (host byte order, as verbs
  // atomics on softverbs): write 100, fetch-and-add 5 (old 100), compare
  // 104-and-swap 1 fails (old 105).
  uint64_t hundred = 100;
  memcpy(side.buf.data() + 40960, &hundred, 8);
  side.queue->PostSend(MLX5_OPCODE_RDMA_WRITE,
                       {RaddrSeg(peer.addr + kCounter, peer.rkey),
                        DataSeg(8, side.mr->lkey, side.buf.data() + 40960)});
  ASSERT_EQ(side.queue->Poll().opcode, MLX5_CQE_REQ);
  uint64_t* old = reinterpret_cast<uint64_t*>(side.buf.data() + 49152);
  side.queue->PostSend(MLX5_OPCODE_ATOMIC_FA, {RaddrSeg(peer.addr + kCounter, peer.rkey),
                                               AtomicSeg(5, 0), DataSeg(8, side.mr->lkey, old)});
  Cqe fa = side.queue->Poll();
  ASSERT_EQ(fa.opcode, MLX5_CQE_REQ) << int(fa.syndrome);
  EXPECT_EQ(fa.wqe_opcode, MLX5_OPCODE_ATOMIC_FA);
  EXPECT_EQ(*old, 100u);
  side.queue->PostSend(MLX5_OPCODE_ATOMIC_CS, {RaddrSeg(peer.addr + kCounter, peer.rkey),
                                               AtomicSeg(1, 104), DataSeg(8, side.mr->lkey, old)});
  ASSERT_EQ(side.queue->Poll().opcode, MLX5_CQE_REQ);
  EXPECT_EQ(*old, 105u);

  const char done = 'd';
  ASSERT_EQ(write(down[1], &done, 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the responder's check that failed (see RunResponder)";
}

// Two DEVX QPs of one process (two contexts), connected.
class DevxPair : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(a_.ok() && b_.ok()) << strerror(errno);
    ASSERT_TRUE(a_.queue->ToRts(b_.queue->qpn()));
    ASSERT_TRUE(b_.queue->ToRts(a_.queue->qpn()));
  }
  Side a_, b_;
};

TEST_F(DevxPair, BadRkeyIsRemoteAccessErrorAndTheQpGoesToErr) {
  a_.queue->PostSend(MLX5_OPCODE_RDMA_WRITE,
                     {RaddrSeg(reinterpret_cast<uintptr_t>(b_.buf.data()), b_.mr->rkey ^ 0x80),
                      DataSeg(64, a_.mr->lkey, a_.buf.data())});
  Cqe cqe = a_.queue->Poll();
  EXPECT_EQ(cqe.opcode, MLX5_CQE_REQ_ERR);
  EXPECT_EQ(cqe.syndrome, MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR);
  EXPECT_EQ(cqe.wqe_opcode, MLX5_OPCODE_RDMA_WRITE);
  EXPECT_EQ(cqe.wqe_counter, 0);
  EXPECT_EQ(a_.queue->State(), kQpErr) << "QUERY_QP must report the error state";
  // The next WQE is flushed.
  a_.queue->PostSend(MLX5_OPCODE_SEND, {DataSeg(8, a_.mr->lkey, a_.buf.data())});
  Cqe flushed = a_.queue->Poll();
  EXPECT_EQ(flushed.opcode, MLX5_CQE_REQ_ERR);
  EXPECT_EQ(flushed.syndrome, MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
  EXPECT_EQ(flushed.wqe_counter, 1);
}

TEST_F(DevxPair, BadLkeyIsLocalProtectionError) {
  a_.queue->PostSend(MLX5_OPCODE_RDMA_WRITE,
                     {RaddrSeg(reinterpret_cast<uintptr_t>(b_.buf.data()), b_.mr->rkey),
                      DataSeg(64, a_.mr->lkey + 0x100, a_.buf.data())});
  Cqe cqe = a_.queue->Poll();
  EXPECT_EQ(cqe.opcode, MLX5_CQE_REQ_ERR);
  EXPECT_EQ(cqe.syndrome, MLX5_CQE_SYNDROME_LOCAL_PROT_ERR);
  EXPECT_EQ(a_.queue->State(), kQpErr);
}

TEST_F(DevxPair, UnsupportedOpcodeIsLocalQpOperationError) {
  a_.queue->PostSend(MLX5_OPCODE_UMR, {DataSeg(8, a_.mr->lkey, a_.buf.data())});
  Cqe cqe = a_.queue->Poll();
  EXPECT_EQ(cqe.opcode, MLX5_CQE_REQ_ERR);
  EXPECT_EQ(cqe.syndrome, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);
  EXPECT_EQ(a_.queue->State(), kQpErr);
}

// A DMA MMO WQE (opmod MMO_DMA: metadata, source, destination, as
// mlx5dv_wr_memcpy builds it) copies between two ranges of the QP's PD and
// completes as a requester CQE of opcode MMO; the MMO of an engine the
// device lacks is LOCAL_QP_OP_ERR and moves the QP to ERR.
TEST_F(DevxPair, DmaMmoCopiesWithinTheQpsPd) {
  constexpr uint8_t kMmoDma = 0x1;  // libmlx5's MLX5_OPC_MOD_MMO_DMA
  for (size_t i = 0; i < 4096; ++i) a_.buf[i] = static_cast<uint8_t>(i * 13 + 1);
  const std::array<uint8_t, 16> metadata{};
  a_.queue->PostSend(MLX5_OPCODE_MMO,
                     {metadata, DataSeg(4096, a_.mr->lkey, a_.buf.data()),
                      DataSeg(4096, a_.mr->lkey, a_.buf.data() + 8192)},
                     0, kMmoDma);
  Cqe cqe = a_.queue->Poll();
  EXPECT_EQ(cqe.opcode, MLX5_CQE_REQ);
  EXPECT_EQ(cqe.wqe_opcode, MLX5_OPCODE_MMO);
  EXPECT_EQ(cqe.wqe_counter, 0);
  EXPECT_EQ(memcmp(a_.buf.data() + 8192, a_.buf.data(), 4096), 0);
  EXPECT_EQ(a_.buf[8192 + 4096], 0) << "the copy went past its length";
  EXPECT_EQ(a_.queue->State(), kQpRts);

  a_.queue->PostSend(MLX5_OPCODE_MMO,
                     {metadata, DataSeg(64, a_.mr->lkey, a_.buf.data()),
                      DataSeg(64, a_.mr->lkey, a_.buf.data() + 16384)},
                     0, kMmoDma + 1);
  Cqe refused = a_.queue->Poll();
  EXPECT_EQ(refused.opcode, MLX5_CQE_REQ_ERR);
  EXPECT_EQ(refused.syndrome, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);
  EXPECT_EQ(a_.buf[16384], 0);
  EXPECT_EQ(a_.queue->State(), kQpErr);
}

// A DEVX QP and a verbs RC QP of another context talk to each other.
TEST(DevxWithVerbs, DevxQpAndVerbsQpExchangeSends) {
  Side devx;
  ASSERT_TRUE(devx.ok()) << strerror(errno);
  ibv_context* vctx = ibv_open_device(FindSoftverbs());
  ASSERT_NE(vctx, nullptr);
  ibv_pd* pd = ibv_alloc_pd(vctx);
  std::vector<uint8_t> vbuf(8192, 0);
  ibv_mr* mr = ibv_reg_mr(pd, vbuf.data(), vbuf.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_cq* cq = ibv_create_cq(vctx, 16, nullptr, nullptr, 0);
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap = {8, 8, 1, 1, 0};
  ibv_qp* qp = ibv_create_qp(pd, &init);
  ASSERT_NE(qp, nullptr);
  // RoCE: the path has a GID (this host's, index 0); no remote access.
  ASSERT_TRUE(ConnectVerbsRc(vctx, qp, devx.queue->qpn(), 0));
  ASSERT_TRUE(devx.queue->ToRts(qp->qp_num));

  // verbs -> DEVX: a SEND with immediate lands in the DEVX receive WQE.
  devx.queue->PostRecv(devx.mr->lkey, devx.buf.data(), 64);
  memcpy(vbuf.data(), "from verbs", 11);
  ibv_sge sge{reinterpret_cast<uintptr_t>(vbuf.data()), 11, mr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.imm_data = htobe32(77);
  wr.send_flags = IBV_SEND_SIGNALED;
  ASSERT_EQ(ibv_post_send(qp, &wr, &bad), 0);
  Cqe recv = devx.queue->Poll();
  EXPECT_EQ(recv.opcode, MLX5_CQE_RESP_SEND_IMM);
  EXPECT_EQ(recv.imm, 77u);
  EXPECT_EQ(recv.byte_cnt, 11u);
  EXPECT_STREQ(reinterpret_cast<char*>(devx.buf.data()), "from verbs");
  ibv_wc wc{};
  int n = 0;
  for (int i = 0; i < 1000000 && n == 0; ++i) n = ibv_poll_cq(cq, 1, &wc);
  ASSERT_EQ(n, 1);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);

  // DEVX -> verbs: a SEND from a DEVX WQE completes an ibv_recv_wr.
  ibv_sge rsge{reinterpret_cast<uintptr_t>(vbuf.data() + 4096), 64, mr->lkey};
  ibv_recv_wr rwr{}, *rbad = nullptr;
  rwr.wr_id = 42;
  rwr.sg_list = &rsge;
  rwr.num_sge = 1;
  ASSERT_EQ(ibv_post_recv(qp, &rwr, &rbad), 0);
  memcpy(devx.buf.data() + 1024, "from devx", 10);
  devx.queue->PostSend(MLX5_OPCODE_SEND, {DataSeg(10, devx.mr->lkey, devx.buf.data() + 1024)});
  Cqe sent = devx.queue->Poll();
  EXPECT_EQ(sent.opcode, MLX5_CQE_REQ) << int(sent.syndrome);
  n = 0;
  for (int i = 0; i < 10000000 && n == 0; ++i) n = ibv_poll_cq(cq, 1, &wc);
  ASSERT_EQ(n, 1);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.wr_id, 42u);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV);
  EXPECT_EQ(wc.byte_len, 10u);
  EXPECT_STREQ(reinterpret_cast<char*>(vbuf.data() + 4096), "from devx");

  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
  EXPECT_EQ(ibv_close_device(vctx), 0);
}

// A DEVX requester SIGKILLed in the middle of RDMA writes: its objects
// (DEVX QP, CQ, UMEMs and their shadows) are gone from the device, and the
// responder's engine keeps serving.
TEST(DevxKill, RequesterKilledMidTrafficLeavesNothingBehind) {
  Side responder;
  ASSERT_TRUE(responder.ok()) << strerror(errno);
  int up[2], down[2];
  ASSERT_EQ(pipe(up), 0);
  ASSERT_EQ(pipe(down), 0);
  const Peer me{responder.queue->qpn(), responder.mr->rkey,
                reinterpret_cast<uintptr_t>(responder.buf.data())};
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Side side;
    if (!side.ok()) _exit(10);
    const uint32_t qpn = side.queue->qpn();
    if (write(up[1], &qpn, sizeof(qpn)) != sizeof(qpn)) _exit(11);
    char go = 0;
    if (!ReadAll(down[0], &go, 1) || !side.queue->ToRts(me.qpn)) _exit(12);
    if (write(up[1], &go, 1) != 1) _exit(13);
    for (uint64_t i = 0; i < 100'000'000; ++i) {  // bounded: the parent kills it long before
      side.queue->PostSend(MLX5_OPCODE_RDMA_WRITE, {RaddrSeg(me.addr, me.rkey),
                                                    DataSeg(4096, side.mr->lkey, side.buf.data())});
      if (side.queue->Poll().opcode != MLX5_CQE_REQ) _exit(14);
    }
    _exit(0);
  }
  uint32_t child_qpn = 0;
  ASSERT_TRUE(ReadAll(up[0], &child_qpn, sizeof(child_qpn)));
  ASSERT_TRUE(responder.queue->ToRts(child_qpn));
  ASSERT_EQ(write(down[1], "g", 1), 1);
  char started = 0;
  ASSERT_TRUE(ReadAll(up[0], &started, 1)) << "the requester could not connect";
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the requester stopped on its own: " << WEXITSTATUS(status);
  // The daemon releases the dead client: no DEVX objects or UMEMs remain.
  nlohmann::json client;
  for (int i = 0; i < 200; ++i) {
    client = ClientOf(Status(), child);
    if (client.is_null()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(client.is_null()) << client.dump();
  // The responder still works: its QP can be used by a new peer.
  Side again;
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(again.queue->ToRts(responder.queue->qpn()));
  EXPECT_EQ(responder.queue->State(), kQpRts);
}

}  // namespace
}  // namespace devx_it

namespace devx_it {
namespace {

// A verbs RC QP of `pd` on `cq` (RESET).
ibv_qp* RcQp(ibv_pd* pd, ibv_cq* cq) {
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap = {16, 16, 1, 1, 0};
  return ibv_create_qp(pd, &init);
}

// mlx5dv_init_obj of a verbs QP and its CQ: their mlx5 views.
bool InitDvQpAndCq(ibv_qp* qp, ibv_cq* cq, mlx5dv_qp* dv_qp, mlx5dv_cq* dv_cq) {
  mlx5dv_obj obj{};
  obj.qp.in = qp;
  obj.qp.out = dv_qp;
  obj.cq.in = cq;
  obj.cq.out = dv_cq;
  return mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ) == 0;
}

// A's CQ: made by ibv_create_cq (64-byte CQEs in its mlx5 view), or by
// mlx5dv_create_cq asking for 128-byte CQEs.
ibv_cq* CreateCqWithCqes(ibv_context* ctx, uint32_t cqe_size) {
  if (cqe_size == 64) return ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  ibv_cq_init_attr_ex attr{};
  attr.cqe = 16;
  attr.wc_flags = IBV_WC_STANDARD_FLAGS;
  mlx5dv_cq_init_attr dv{};
  dv.comp_mask = MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE;
  dv.cqe_size = static_cast<uint16_t>(cqe_size);
  ibv_cq_ex* cq = mlx5dv_create_cq(ctx, &attr, &dv);
  return cq ? ibv_cq_ex_to_cq(cq) : nullptr;
}

// Two contexts on softverbs0, A's and B's, with a PD each, closed after the
// test; a test destroys what it made on them.
class VerbsPeers : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ctx = ibv_open_device(FindSoftverbs());
    b_ctx = ibv_open_device(FindSoftverbs());
    ASSERT_TRUE(a_ctx && b_ctx);
    a_pd = ibv_alloc_pd(a_ctx);
    b_pd = ibv_alloc_pd(b_ctx);
    ASSERT_TRUE(a_pd && b_pd);
  }
  void TearDown() override {
    if (a_pd) ibv_dealloc_pd(a_pd);
    if (b_pd) ibv_dealloc_pd(b_pd);
    if (a_ctx) ibv_close_device(a_ctx);
    if (b_ctx) ibv_close_device(b_ctx);
  }
  ibv_context* a_ctx = nullptr;
  ibv_context* b_ctx = nullptr;
  ibv_pd* a_pd = nullptr;
  ibv_pd* b_pd = nullptr;
};

// A SEND_INVAL WQE (the rkey in the control segment's immediate) from A's
// mlx5 view invalidates the type 2 window B bound to its QP: B's receive
// completes with IBV_WC_WITH_INV and the key; a second one names a window
// no longer valid, which B refuses: A's CQE says REMOTE_INVAL_REQ_ERR.
TEST_F(VerbsPeers, Mlx5SendInvalInvalidatesTheRespondersWindow) {
  std::vector<uint8_t> a_buf(4096, 0), b_buf(8192, 0);
  ibv_mr* a_mr = ibv_reg_mr(a_pd, a_buf.data(), a_buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* b_mr = ibv_reg_mr(b_pd, b_buf.data(), b_buf.size(),
                            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND);
  ibv_cq* a_cq = ibv_create_cq(a_ctx, 16, nullptr, nullptr, 0);
  ibv_cq* b_cq = ibv_create_cq(b_ctx, 16, nullptr, nullptr, 0);
  ibv_qp* a_qp = RcQp(a_pd, a_cq);
  ibv_qp* b_qp = RcQp(b_pd, b_cq);
  ibv_mw* mw = ibv_alloc_mw(b_pd, IBV_MW_TYPE_2);
  ASSERT_TRUE(a_mr && b_mr && a_cq && b_cq && a_qp && b_qp && mw) << strerror(errno);
  ASSERT_TRUE(ConnectVerbsRc(a_ctx, a_qp, b_qp->qp_num, IBV_ACCESS_REMOTE_WRITE));
  ASSERT_TRUE(ConnectVerbsRc(b_ctx, b_qp, a_qp->qp_num, IBV_ACCESS_REMOTE_WRITE));
  const auto poll = [](ibv_cq* cq, ibv_wc* wc) {
    int n = 0;
    for (int i = 0; i < 50000000 && n == 0; ++i) n = ibv_poll_cq(cq, 1, wc);
    return n == 1;
  };
  // B binds the window to its QP.
  const uint32_t rkey = ibv_inc_rkey(mw->rkey);
  ibv_send_wr bind{}, *bad = nullptr;
  bind.wr_id = 1;
  bind.opcode = IBV_WR_BIND_MW;
  bind.send_flags = IBV_SEND_SIGNALED;
  bind.bind_mw.mw = mw;
  bind.bind_mw.rkey = rkey;
  bind.bind_mw.bind_info = {b_mr, reinterpret_cast<uintptr_t>(b_buf.data()), 4096,
                            IBV_ACCESS_REMOTE_WRITE};
  ASSERT_EQ(ibv_post_send(b_qp, &bind, &bad), 0);
  ibv_wc wc{};
  ASSERT_TRUE(poll(b_cq, &wc));
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);

  mlx5dv_qp dv_qp{};
  mlx5dv_cq dv_cq{};
  ASSERT_TRUE(InitDvQpAndCq(a_qp, a_cq, &dv_qp, &dv_cq));
  for (uint16_t index = 0; index < 2; ++index) {
    ibv_sge rsge{reinterpret_cast<uintptr_t>(b_buf.data() + 4096), 64, b_mr->lkey};
    ibv_recv_wr rwr{}, *rbad = nullptr;
    rwr.wr_id = 10 + index;
    rwr.sg_list = &rsge;
    rwr.num_sge = 1;
    ASSERT_EQ(ibv_post_recv(b_qp, &rwr, &rbad), 0);
    auto* ctrl = reinterpret_cast<mlx5_wqe_ctrl_seg*>(static_cast<uint8_t*>(dv_qp.sq.buf) +
                                                      index * dv_qp.sq.stride);
    mlx5dv_set_ctrl_seg(ctrl, index, MLX5_OPCODE_SEND_INVAL, 0, a_qp->qp_num,
                        MLX5_WQE_CTRL_CQ_UPDATE, 2, 0, htobe32(rkey));
    mlx5dv_set_data_seg(reinterpret_cast<mlx5_wqe_data_seg*>(ctrl + 1), 16, a_mr->lkey,
                        reinterpret_cast<uintptr_t>(a_buf.data()));
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&dv_qp.dbrec[MLX5_SND_DBR], htobe32(index + 1u), __ATOMIC_RELEASE);
    mlx5_cqe64* cqe = WaitCqe(dv_cq, index);
    ASSERT_NE(cqe, nullptr) << "SEND_INVAL " << index;
    if (index == 0) {
      EXPECT_EQ(mlx5dv_get_cqe_opcode(cqe), MLX5_CQE_REQ);
      ASSERT_TRUE(poll(b_cq, &wc));
      EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
      EXPECT_EQ(wc.wr_id, 10u);
      EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_INV);
      EXPECT_EQ(wc.invalidated_rkey, rkey);
    } else {
      ASSERT_EQ(mlx5dv_get_cqe_opcode(cqe), MLX5_CQE_REQ_ERR);
      EXPECT_EQ(reinterpret_cast<mlx5_err_cqe*>(cqe)->syndrome,
                MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR);
    }
    dv_cq.dbrec[0] = htobe32(index + 1u);
  }
  ibv_destroy_qp(a_qp);
  ibv_destroy_qp(b_qp);
  ibv_dealloc_mw(mw);
  ibv_destroy_cq(a_cq);
  ibv_destroy_cq(b_cq);
  ibv_dereg_mr(a_mr);
  ibv_dereg_mr(b_mr);
}

// mlx5dv_init_obj on verbs queues: mlx5 WQEs posted on a verbs RC QP's
// buffers are executed, and its CQ's completions arrive as mlx5 CQEs - in
// the second half of each entry when the CQ has 128-byte CQEs.
class DvOnVerbs : public VerbsPeers, public ::testing::WithParamInterface<uint32_t> {};

TEST_P(DvOnVerbs, Mlx5WqesOnAVerbsQpAndCqesOnItsCq) {
  const uint32_t cqe_size = GetParam();
  std::vector<uint8_t> a_buf(8192, 0), b_buf(8192, 0);
  ibv_mr* a_mr = ibv_reg_mr(a_pd, a_buf.data(), a_buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* b_mr = ibv_reg_mr(b_pd, b_buf.data(), b_buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_cq* a_cq = CreateCqWithCqes(a_ctx, cqe_size);
  ASSERT_NE(a_cq, nullptr) << strerror(errno);
  ibv_cq* b_cq = ibv_create_cq(b_ctx, 16, nullptr, nullptr, 0);
  ibv_qp* a_qp = RcQp(a_pd, a_cq);
  ibv_qp* b_qp = RcQp(b_pd, b_cq);
  ASSERT_TRUE(a_qp && b_qp);
  ASSERT_TRUE(ConnectVerbsRc(a_ctx, a_qp, b_qp->qp_num));
  ASSERT_TRUE(ConnectVerbsRc(b_ctx, b_qp, a_qp->qp_num));

  mlx5dv_qp dv_qp{};
  mlx5dv_cq dv_cq{};
  ASSERT_TRUE(InitDvQpAndCq(a_qp, a_cq, &dv_qp, &dv_cq));
  ASSERT_NE(dv_qp.sq.buf, nullptr);
  ASSERT_NE(dv_qp.dbrec, nullptr);
  ASSERT_NE(dv_cq.buf, nullptr);
  ASSERT_EQ(dv_cq.cqe_size, cqe_size);
  EXPECT_EQ(dv_qp.sq.stride, 64u);

  // A -> B: an mlx5 SEND WQE on the verbs QP's send queue.
  ibv_sge rsge{reinterpret_cast<uintptr_t>(b_buf.data()), 64, b_mr->lkey};
  ibv_recv_wr rwr{}, *rbad = nullptr;
  rwr.wr_id = 7;
  rwr.sg_list = &rsge;
  rwr.num_sge = 1;
  ASSERT_EQ(ibv_post_recv(b_qp, &rwr, &rbad), 0);
  memcpy(a_buf.data(), "mlx5 wqe", 9);
  auto* ctrl = static_cast<mlx5_wqe_ctrl_seg*>(dv_qp.sq.buf);
  mlx5dv_set_ctrl_seg(ctrl, 0, MLX5_OPCODE_SEND, 0, a_qp->qp_num, MLX5_WQE_CTRL_CQ_UPDATE, 2, 0, 0);
  mlx5dv_set_data_seg(reinterpret_cast<mlx5_wqe_data_seg*>(ctrl + 1), 9, a_mr->lkey,
                      reinterpret_cast<uintptr_t>(a_buf.data()));
  __atomic_thread_fence(__ATOMIC_RELEASE);
  __atomic_store_n(&dv_qp.dbrec[MLX5_SND_DBR], htobe32(1), __ATOMIC_RELEASE);
  ibv_wc wc{};
  int n = 0;
  for (int i = 0; i < 50000000 && n == 0; ++i) n = ibv_poll_cq(b_cq, 1, &wc);
  ASSERT_EQ(n, 1);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.wr_id, 7u);
  EXPECT_STREQ(reinterpret_cast<char*>(b_buf.data()), "mlx5 wqe");

  // A's CQ: the send's CQE.
  mlx5_cqe64* sent = WaitCqe(dv_cq, 0);
  ASSERT_NE(sent, nullptr);
  EXPECT_EQ(mlx5dv_get_cqe_opcode(sent), MLX5_CQE_REQ);
  dv_cq.dbrec[0] = htobe32(1);

  // B -> A: an mlx5 receive WQE on the verbs QP's receive queue.
  mlx5dv_set_data_seg(static_cast<mlx5_wqe_data_seg*>(dv_qp.rq.buf), 64, a_mr->lkey,
                      reinterpret_cast<uintptr_t>(a_buf.data() + 4096));
  __atomic_thread_fence(__ATOMIC_RELEASE);
  __atomic_store_n(&dv_qp.dbrec[MLX5_RCV_DBR], htobe32(1), __ATOMIC_RELEASE);
  memcpy(b_buf.data() + 1024, "verbs send", 11);
  ibv_sge ssge{reinterpret_cast<uintptr_t>(b_buf.data() + 1024), 11, b_mr->lkey};
  ibv_send_wr swr{}, *sbad = nullptr;
  swr.sg_list = &ssge;
  swr.num_sge = 1;
  swr.opcode = IBV_WR_SEND;
  swr.send_flags = IBV_SEND_SIGNALED;
  ASSERT_EQ(ibv_post_send(b_qp, &swr, &sbad), 0);
  mlx5_cqe64* received = WaitCqe(dv_cq, 1);
  ASSERT_NE(received, nullptr);
  EXPECT_EQ(mlx5dv_get_cqe_opcode(received), MLX5_CQE_RESP_SEND);
  EXPECT_EQ(be32toh(received->byte_cnt), 11u);
  EXPECT_STREQ(reinterpret_cast<char*>(a_buf.data() + 4096), "verbs send");

  EXPECT_EQ(ibv_destroy_qp(a_qp), 0);
  EXPECT_EQ(ibv_destroy_qp(b_qp), 0);
  EXPECT_EQ(ibv_destroy_cq(a_cq), 0);
  EXPECT_EQ(ibv_destroy_cq(b_cq), 0);
  ibv_dereg_mr(a_mr);
  ibv_dereg_mr(b_mr);
}

INSTANTIATE_TEST_SUITE_P(CqeSizes, DvOnVerbs, ::testing::Values(64u, 128u),
                         [](const auto& info) { return "Cqe" + std::to_string(info.param); });

// A CQ given its mlx5 view, and signaled 8-byte RDMA WRITEs that complete
// on it: RC QP A (on the CQ) writes to its connected peer B in one context.
// Its objects go with it.
struct WritesOnAnMlx5Cq {
  // `cq`: a CQ of `ctx` (this takes it over); false if a step failed.
  bool Make(ibv_context* context, ibv_cq* made) {
    ctx = context;
    cq = made;
    pd = ibv_alloc_pd(ctx);
    peer_cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
    if (!pd || !cq || !peer_cq) return false;
    a = RcQp(pd, cq);
    b = RcQp(pd, peer_cq);
    if (!a || !b || !ConnectVerbsRc(ctx, a, b->qp_num) || !ConnectVerbsRc(ctx, b, a->qp_num))
      return false;
    mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    mlx5dv_obj obj{};
    obj.cq.in = cq;
    obj.cq.out = &dv;
    return mr && mlx5dv_init_obj(&obj, MLX5DV_OBJ_CQ) == 0;
  }
  bool Write() {
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf.data()), 8, mr->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(buf.data() + 1024);
    wr.wr.rdma.rkey = mr->rkey;
    return ibv_post_send(a, &wr, &bad) == 0;
  }
  ~WritesOnAnMlx5Cq() {
    // A CQ goes after its QPs.
    for (ibv_qp* qp : {a, b}) EXPECT_EQ(qp ? ibv_destroy_qp(qp) : 0, 0);
    for (ibv_cq* c : {cq, peer_cq}) EXPECT_EQ(c ? ibv_destroy_cq(c) : 0, 0);
    if (mr) ibv_dereg_mr(mr);
    if (pd) ibv_dealloc_pd(pd);
  }
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_cq* peer_cq = nullptr;
  ibv_qp* a = nullptr;
  ibv_qp* b = nullptr;
  std::vector<uint8_t> buf = std::vector<uint8_t>(4096, 0);
  ibv_mr* mr = nullptr;
  mlx5dv_cq dv{};
};

// A CQ made with IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN: its mlx5 view gets
// every CQE though the consumer index in its doorbell record stays 0 (UCX's
// release builds never write it), three times around the CQ; without the
// flag the view stops once it is full.
TEST(DvCqOnVerbs, IgnoreOverrunWritesOnWhateverTheConsumerIndex) {
  ibv_context* ctx = ibv_open_device(FindSoftverbs());
  ASSERT_NE(ctx, nullptr);
  for (bool ignore : {true, false}) {
    SCOPED_TRACE(ignore ? "IGNORE_OVERRUN" : "no flag");
    ibv_cq_init_attr_ex attr{};
    attr.cqe = 4;
    attr.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
    attr.flags = ignore ? IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN : 0;
    ibv_cq_ex* cq_ex = ibv_create_cq_ex(ctx, &attr);
    ASSERT_NE(cq_ex, nullptr) << strerror(errno);
    WritesOnAnMlx5Cq w;
    ASSERT_TRUE(w.Make(ctx, ibv_cq_ex_to_cq(cq_ex))) << strerror(errno);
    const uint32_t rounds = 3 * w.dv.cqe_cnt;
    uint32_t seen = 0;
    for (uint32_t i = 0; i < rounds; ++i) {
      ASSERT_TRUE(w.Write());
      // Long enough for a CQE that comes; bounded for one that does not.
      mlx5_cqe64* cqe = WaitCqe(w.dv, i, ignore || i < w.dv.cqe_cnt ? 20000000 : 200000);
      if (cqe == nullptr) break;
      EXPECT_EQ(mlx5dv_get_cqe_opcode(cqe), MLX5_CQE_REQ);
      ++seen;
    }
    // The consumer index was never written.
    EXPECT_EQ(seen, ignore ? rounds : w.dv.cqe_cnt);
  }
  ibv_close_device(ctx);
}

// A verbs UD QP (made RTS with `qkey`) of `pd` on `cq`.
ibv_qp* UdQpInRts(ibv_pd* pd, ibv_cq* cq, uint32_t qkey) {
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = cq;
  init.qp_type = IBV_QPT_UD;
  init.cap = {16, 16, 1, 1, 0};
  ibv_qp* qp = ibv_create_qp(pd, &init);
  if (qp == nullptr) return nullptr;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qkey = qkey;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
    return nullptr;
  a = {};
  a.qp_state = IBV_QPS_RTR;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE)) return nullptr;
  a.qp_state = IBV_QPS_RTS;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN)) return nullptr;
  return qp;
}

// mlx5dv_init_obj on a verbs UD QP: an mlx5 UD SEND WQE - its datagram
// segment's address vector naming the peer's QP, Q_Key and GID - is sent
// as a datagram (the peer receives the GRH and the bytes, from this QP),
// and a datagram to this QP lands in an mlx5 receive WQE, its CQE saying
// the source QP, a GRH in the buffer (flags_rqpn bit 28) and the RoCE v2
// packet type in its SL (as UCX's ud_mlx5 reads it).
TEST_F(VerbsPeers, Mlx5UdWqesOnAVerbsUdQp) {
  constexpr uint32_t kQkey = 0x11111111;
  constexpr uint32_t kGrh = 40;
  ibv_cq* a_cq = ibv_create_cq(a_ctx, 16, nullptr, nullptr, 0);
  ibv_cq* b_cq = ibv_create_cq(b_ctx, 16, nullptr, nullptr, 0);
  ASSERT_TRUE(a_cq && b_cq);
  ibv_qp* a = UdQpInRts(a_pd, a_cq, kQkey);
  ibv_qp* b = UdQpInRts(b_pd, b_cq, kQkey);
  ASSERT_TRUE(a && b) << strerror(errno);
  std::vector<uint8_t> a_buf(4096, 0), b_buf(4096, 0);
  ibv_mr* a_mr = ibv_reg_mr(a_pd, a_buf.data(), a_buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* b_mr = ibv_reg_mr(b_pd, b_buf.data(), b_buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_TRUE(a_mr && b_mr);
  ibv_gid gid{};
  ASSERT_EQ(ibv_query_gid(a_ctx, 1, 0, &gid), 0);
  mlx5dv_qp dv_qp{};
  mlx5dv_cq dv_cq{};
  ASSERT_TRUE(InitDvQpAndCq(a, a_cq, &dv_qp, &dv_cq));
  ASSERT_TRUE(dv_qp.sq.buf && dv_qp.rq.buf && dv_qp.dbrec);

  // A -> B: control, datagram (the address vector) and data segments.
  ibv_sge rsge{reinterpret_cast<uintptr_t>(b_buf.data()), 256, b_mr->lkey};
  ibv_recv_wr rwr{}, *rbad = nullptr;
  rwr.wr_id = 9;
  rwr.sg_list = &rsge;
  rwr.num_sge = 1;
  ASSERT_EQ(ibv_post_recv(b, &rwr, &rbad), 0);
  const char datagram[] = "an mlx5 UD WQE";
  memcpy(a_buf.data(), datagram, sizeof(datagram));
  auto* wqe = static_cast<uint8_t*>(dv_qp.sq.buf);
  mlx5dv_set_ctrl_seg(reinterpret_cast<mlx5_wqe_ctrl_seg*>(wqe), 0, MLX5_OPCODE_SEND, 0, a->qp_num,
                      MLX5_WQE_CTRL_CQ_UPDATE, 5, 0, 0);
  auto* av = reinterpret_cast<mlx5_wqe_av*>(wqe + 16);
  av->key.qkey.qkey = htobe32(kQkey);
  av->dqp_dct = htobe32(b->qp_num | MLX5_EXTENDED_UD_AV);
  av->hop_limit = 64;
  av->grh_gid_fl = htobe32(1u << 30);  // a GRH, source GID index 0
  memcpy(av->rgid, gid.raw, 16);
  mlx5dv_set_data_seg(reinterpret_cast<mlx5_wqe_data_seg*>(wqe + 64), sizeof(datagram), a_mr->lkey,
                      reinterpret_cast<uintptr_t>(a_buf.data()));
  __atomic_thread_fence(__ATOMIC_RELEASE);
  // 80 bytes: two basic blocks, which the send counter counts.
  __atomic_store_n(&dv_qp.dbrec[MLX5_SND_DBR], htobe32(2), __ATOMIC_RELEASE);
  ibv_wc wc{};
  int n = 0;
  for (int i = 0; i < 50000000 && n == 0; ++i) n = ibv_poll_cq(b_cq, 1, &wc);
  ASSERT_EQ(n, 1);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.wr_id, 9u);
  EXPECT_EQ(wc.src_qp, a->qp_num);
  EXPECT_EQ(wc.byte_len, kGrh + sizeof(datagram));
  EXPECT_TRUE(wc.wc_flags & IBV_WC_GRH);
  EXPECT_STREQ(reinterpret_cast<char*>(b_buf.data() + kGrh), datagram);
  mlx5_cqe64* sent = WaitCqe(dv_cq, 0);
  ASSERT_NE(sent, nullptr);
  EXPECT_EQ(mlx5dv_get_cqe_opcode(sent), MLX5_CQE_REQ);
  dv_cq.dbrec[0] = htobe32(1);

  // B -> A: a verbs datagram into an mlx5 receive WQE of A.
  mlx5dv_set_data_seg(static_cast<mlx5_wqe_data_seg*>(dv_qp.rq.buf), 256, a_mr->lkey,
                      reinterpret_cast<uintptr_t>(a_buf.data() + 1024));
  __atomic_thread_fence(__ATOMIC_RELEASE);
  __atomic_store_n(&dv_qp.dbrec[MLX5_RCV_DBR], htobe32(1), __ATOMIC_RELEASE);
  ibv_ah_attr ah_attr{};
  ah_attr.port_num = 1;
  ah_attr.is_global = 1;
  ah_attr.grh.hop_limit = 64;
  ah_attr.grh.dgid = gid;
  ibv_ah* ah = ibv_create_ah(b_pd, &ah_attr);
  ASSERT_NE(ah, nullptr) << strerror(errno);
  const char reply[] = "a verbs datagram";
  memcpy(b_buf.data() + 512, reply, sizeof(reply));
  ibv_sge ssge{reinterpret_cast<uintptr_t>(b_buf.data() + 512), sizeof(reply), b_mr->lkey};
  ibv_send_wr swr{}, *sbad = nullptr;
  swr.sg_list = &ssge;
  swr.num_sge = 1;
  swr.opcode = IBV_WR_SEND;
  swr.wr.ud.ah = ah;
  swr.wr.ud.remote_qpn = a->qp_num;
  swr.wr.ud.remote_qkey = kQkey;
  // The engine takes a posted receive WQE at its next look (within a
  // millisecond when idle); a datagram that comes before finds no receive
  // and is dropped, as UD drops it. So: send again until one lands (one
  // receive WQE: at most one can).
  mlx5_cqe64* received = nullptr;
  for (int attempt = 0; attempt < 200 && received == nullptr; ++attempt) {
    ASSERT_EQ(ibv_post_send(b, &swr, &sbad), 0);
    received = WaitCqe(dv_cq, 1, 20000);
  }
  ASSERT_NE(received, nullptr);
  EXPECT_EQ(mlx5dv_get_cqe_opcode(received), MLX5_CQE_RESP_SEND);
  EXPECT_EQ(be32toh(received->byte_cnt), kGrh + sizeof(reply));
  const uint32_t flags_rqpn = be32toh(received->flags_rqpn);
  EXPECT_EQ(flags_rqpn & 0xffffff, b->qp_num);
  EXPECT_TRUE(flags_rqpn & (1u << 28)) << "a GRH in the buffer";
  // RoCE v2 (UDP) over IPv4 for an IPv4-mapped GID, else over IPv6.
  const bool ipv4 = gid.raw[10] == 0xff && gid.raw[11] == 0xff;
  EXPECT_EQ((flags_rqpn >> 24) & 0xf, ipv4 ? 0xau : 0x9u);
  EXPECT_EQ(be16toh(received->wqe_counter), 0u);
  EXPECT_STREQ(reinterpret_cast<char*>(a_buf.data() + 1024 + kGrh), reply);

  EXPECT_EQ(ibv_destroy_ah(ah), 0);
  EXPECT_EQ(ibv_destroy_qp(a), 0);
  EXPECT_EQ(ibv_destroy_qp(b), 0);
  EXPECT_EQ(ibv_destroy_cq(a_cq), 0);
  EXPECT_EQ(ibv_destroy_cq(b_cq), 0);
  ibv_dereg_mr(a_mr);
  ibv_dereg_mr(b_mr);
}

// A CQ's mlx5 view armed as libmlx5's mlx5_arm_cq arms it - the arm word
// in the doorbell record and the doorbell (sn, cmd, ci, CQ number) written
// to cq_uar + MLX5_CQ_DOORBELL - raises the completion event on the CQ's
// channel at the next CQE, or at once when an unpolled CQE is there; no
// event comes unarmed.
TEST(DvCqOnVerbs, ArmingThroughTheDoorbellRaisesTheCompletionEvent) {
  ibv_context* ctx = ibv_open_device(FindSoftverbs());
  ASSERT_NE(ctx, nullptr);
  ibv_comp_channel* channel = ibv_create_comp_channel(ctx);
  ASSERT_NE(channel, nullptr);
  {
    WritesOnAnMlx5Cq w;
    ASSERT_TRUE(w.Make(ctx, ibv_create_cq(ctx, 16, nullptr, channel, 0))) << strerror(errno);
    ibv_cq* cq = w.cq;
    mlx5dv_cq& dv_cq = w.dv;
    ASSERT_NE(dv_cq.cq_uar, nullptr);

    // The doorbell record's words (libmlx5's MLX5_CQ_SET_CI, MLX5_CQ_ARM_DB).
    constexpr int kSetCi = 0, kArmDb = 1;
    uint32_t sn = 0, ci = 0;
    const auto arm = [&] {
      const uint32_t word = (sn & 3) << 28 | MLX5_CQ_DB_REQ_NOT | (ci & 0xffffff);
      dv_cq.dbrec[kArmDb] = htobe32(word);
      const uint64_t doorbell = uint64_t{word} << 32 | dv_cq.cqn;
      __atomic_store_n(
          reinterpret_cast<uint64_t*>(static_cast<uint8_t*>(dv_cq.cq_uar) + MLX5_CQ_DOORBELL),
          htobe64(doorbell), __ATOMIC_RELEASE);
    };
    const auto write_once = [&] { return w.Write(); };
    // An event within `ms` milliseconds: read, checked and acknowledged.
    const auto event_within = [&](int ms) {
      pollfd p{channel->fd, POLLIN, 0};
      if (poll(&p, 1, ms) != 1) return false;
      ibv_cq* ev_cq = nullptr;
      void* ev_ctx = nullptr;
      if (ibv_get_cq_event(channel, &ev_cq, &ev_ctx) != 0 || ev_cq != cq) return false;
      ibv_ack_cq_events(cq, 1);
      ++sn;  // as libmlx5's mlx5_cq_event
      return true;
    };
    const auto consume = [&] {
      mlx5_cqe64* cqe = WaitCqe(dv_cq, ci);
      if (cqe == nullptr) return false;
      ++ci;
      dv_cq.dbrec[kSetCi] = htobe32(ci & 0xffffff);
      return mlx5dv_get_cqe_opcode(cqe) == MLX5_CQE_REQ;
    };

    // Unarmed: a CQE and no event.
    ASSERT_TRUE(write_once());
    ASSERT_TRUE(consume());
    EXPECT_FALSE(event_within(100));
    // Armed, then a CQE: one event.
    arm();
    ASSERT_TRUE(write_once());
    EXPECT_TRUE(event_within(5000));
    ASSERT_TRUE(consume());
    EXPECT_FALSE(event_within(100));  // one event per arm
    // A CQE not yet polled when the CQ is armed: the event comes at once.
    ASSERT_TRUE(write_once());
    ASSERT_NE(WaitCqe(dv_cq, ci), nullptr);
    arm();
    EXPECT_TRUE(event_within(5000));
    ASSERT_TRUE(consume());
    // The same arm rung twice is one arm; armed again after the event, the
    // next CQE raises the next event.
    arm();
    arm();
    ASSERT_TRUE(write_once());
    EXPECT_TRUE(event_within(5000));
    ASSERT_TRUE(consume());
    EXPECT_FALSE(event_within(100));

  }  // the CQ goes before its channel
  EXPECT_EQ(ibv_destroy_comp_channel(channel), 0);
  ibv_close_device(ctx);
}

// mlx5dv_init_obj on device memory: its bytes, as libmlx5 maps a
// ConnectX's memory. Stores there are what ibv_memcpy_to_dm writes (and
// what a peer's RDMA READ of a DM MR brings back); a peer's RDMA WRITE into
// the DM MR is read there.
using DvDmOnVerbs = VerbsPeers;

TEST_F(DvDmOnVerbs, TheDmsBytesAreItsMemory) {
  ibv_alloc_dm_attr dm_attr{};
  dm_attr.length = 256;
  ibv_dm* dm = ibv_alloc_dm(a_ctx, &dm_attr);
  ASSERT_NE(dm, nullptr) << strerror(errno);
  ibv_mr* dm_mr = ibv_reg_dm_mr(a_pd, dm, 0, 256,
                                IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE |
                                    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
  ASSERT_NE(dm_mr, nullptr) << strerror(errno);
  mlx5dv_dm dv_dm{};
  dv_dm.comp_mask = MLX5DV_DM_MASK_REMOTE_VA;
  mlx5dv_obj obj{};
  obj.dm.in = dm;
  obj.dm.out = &dv_dm;
  ASSERT_EQ(mlx5dv_init_obj(&obj, MLX5DV_OBJ_DM), 0);
  ASSERT_NE(dv_dm.buf, nullptr);
  EXPECT_EQ(dv_dm.length, 256u);
  EXPECT_EQ(dv_dm.comp_mask, 0u);  // no remote VA: no MEMIC operations here
  auto* bytes = static_cast<volatile uint8_t*>(dv_dm.buf);

  // A store through the view is what ibv_memcpy_from_dm reads; a copy to
  // the DM is what the view reads.
  const char stored[] = "stored in the view!";  // 20 bytes: whole words
  for (size_t i = 0; i < sizeof(stored); ++i) bytes[i] = static_cast<uint8_t>(stored[i]);
  char back[sizeof(stored)] = {};
  ASSERT_EQ(ibv_memcpy_from_dm(back, dm, 0, sizeof(back)), 0);
  EXPECT_STREQ(back, stored);
  const char copied[] = "copied to the DM";  // 17 bytes -> 20 with the padding below
  char padded[20] = {};
  memcpy(padded, copied, sizeof(copied));
  ASSERT_EQ(ibv_memcpy_to_dm(dm, 64, padded, sizeof(padded)), 0);
  EXPECT_EQ(memcmp(const_cast<uint8_t*>(bytes) + 64, padded, sizeof(padded)), 0);

  // A peer reads the view's store and writes what the view then reads.
  ibv_cq* a_cq = ibv_create_cq(a_ctx, 16, nullptr, nullptr, 0);
  ibv_cq* b_cq = ibv_create_cq(b_ctx, 16, nullptr, nullptr, 0);
  ibv_qp* a_qp = RcQp(a_pd, a_cq);
  ibv_qp* b_qp = RcQp(b_pd, b_cq);
  ASSERT_TRUE(a_qp && b_qp);
  ASSERT_TRUE(
      ConnectVerbsRc(a_ctx, a_qp, b_qp->qp_num, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE));
  ASSERT_TRUE(ConnectVerbsRc(b_ctx, b_qp, a_qp->qp_num));
  std::vector<char> b_buf(256, 0);
  ibv_mr* b_mr = ibv_reg_mr(b_pd, b_buf.data(), b_buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(b_mr, nullptr);
  const auto rdma = [&](ibv_wr_opcode opcode, uint64_t dm_offset, char* local, uint32_t len) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(local), len, b_mr->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = opcode;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = dm_offset;  // zero-based
    wr.wr.rdma.rkey = dm_mr->rkey;
    if (ibv_post_send(b_qp, &wr, &bad) != 0) return false;
    ibv_wc wc{};
    int n = 0;
    for (int i = 0; i < 50000000 && n == 0; ++i) n = ibv_poll_cq(b_cq, 1, &wc);
    return n == 1 && wc.status == IBV_WC_SUCCESS;
  };
  ASSERT_TRUE(rdma(IBV_WR_RDMA_READ, 0, b_buf.data(), sizeof(stored)));
  EXPECT_STREQ(b_buf.data(), stored);
  const char written[] = "written by the peer";  // 20 bytes
  memcpy(b_buf.data() + 128, written, sizeof(written));
  ASSERT_TRUE(rdma(IBV_WR_RDMA_WRITE, 128, b_buf.data() + 128, sizeof(written)));
  EXPECT_EQ(memcmp(const_cast<uint8_t*>(bytes) + 128, written, sizeof(written)), 0);

  EXPECT_EQ(ibv_destroy_qp(a_qp), 0);
  EXPECT_EQ(ibv_destroy_qp(b_qp), 0);
  EXPECT_EQ(ibv_destroy_cq(a_cq), 0);
  EXPECT_EQ(ibv_destroy_cq(b_cq), 0);
  EXPECT_EQ(ibv_dereg_mr(b_mr), 0);
  EXPECT_EQ(ibv_dereg_mr(dm_mr), 0);
  EXPECT_EQ(ibv_free_dm(dm), 0);
}

// mlx5dv_init_obj on a verbs SRQ: libmlx5's linked list of receive WQEs
// (head 0, tail the last WQE, next_wqe_index in index order, 32-byte
// WQEs for one SGE). Receive WQEs posted by following the list - here
// first relinked out of index order after its head, then posted and freed
// as libmlx5's mlx5_post_srq_recv and mlx5_free_srq_wqe do, for three times
// the list's length - take the messages in list order, and each receive CQE
// names its WQE's index (wqe_counter).
using DvSrqOnVerbs = VerbsPeers;

TEST_F(DvSrqOnVerbs, Mlx5ReceiveWqesFollowTheSrqsList) {
  std::vector<uint8_t> a_buf(8192, 0), b_buf(8192, 0);
  ibv_mr* a_mr = ibv_reg_mr(a_pd, a_buf.data(), a_buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* b_mr = ibv_reg_mr(b_pd, b_buf.data(), b_buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_TRUE(a_mr && b_mr);
  ibv_srq_init_attr srq_attr{};
  srq_attr.attr.max_wr = 8;
  srq_attr.attr.max_sge = 1;
  ibv_srq* srq = ibv_create_srq(a_pd, &srq_attr);
  ASSERT_NE(srq, nullptr) << strerror(errno);
  ibv_cq* a_cq = ibv_create_cq(a_ctx, 64, nullptr, nullptr, 0);
  ibv_cq* b_cq = ibv_create_cq(b_ctx, 64, nullptr, nullptr, 0);
  ASSERT_TRUE(a_cq && b_cq);
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = a_cq;
  init.srq = srq;
  init.qp_type = IBV_QPT_RC;
  init.cap = {16, 0, 1, 0, 0};
  ibv_qp* a_qp = ibv_create_qp(a_pd, &init);
  ibv_qp* b_qp = RcQp(b_pd, b_cq);
  ASSERT_TRUE(a_qp && b_qp) << strerror(errno);
  ASSERT_TRUE(ConnectVerbsRc(a_ctx, a_qp, b_qp->qp_num));
  ASSERT_TRUE(ConnectVerbsRc(b_ctx, b_qp, a_qp->qp_num));

  mlx5dv_srq dv_srq{};
  dv_srq.comp_mask = MLX5DV_SRQ_MASK_SRQN;
  mlx5dv_cq dv_cq{};
  mlx5dv_obj obj{};
  obj.srq.in = srq;
  obj.srq.out = &dv_srq;
  obj.cq.in = a_cq;
  obj.cq.out = &dv_cq;
  ASSERT_EQ(mlx5dv_init_obj(&obj, MLX5DV_OBJ_SRQ | MLX5DV_OBJ_CQ), 0);
  ASSERT_NE(dv_srq.buf, nullptr);
  ASSERT_NE(dv_srq.dbrec, nullptr);
  EXPECT_EQ(dv_srq.stride, 32u);
  EXPECT_EQ(dv_srq.head, 0u);
  const uint32_t count = dv_srq.tail + 1;
  ASSERT_GE(count, 4u);
  ASSERT_EQ(count & (count - 1), 0u) << "the list holds a power of two of WQEs";
  EXPECT_TRUE(dv_srq.comp_mask & MLX5DV_SRQ_MASK_SRQN);
  auto* list = static_cast<uint8_t*>(dv_srq.buf);
  const auto next_of = [&](uint32_t i) {
    return reinterpret_cast<mlx5_wqe_srq_next_seg*>(list + size_t{i} * dv_srq.stride);
  };
  for (uint32_t i = 0; i < count; ++i) {
    EXPECT_EQ(be16toh(next_of(i)->next_wqe_index), (i + 1) % count) << "WQE " << i;
  }

  uint32_t cq_index = 0;
  // libmlx5's post: the WQE at head gets the buffer, head follows its next
  // index, the counter in the doorbell record counts the posts.
  uint32_t head = 0, tail = dv_srq.tail, posted = 0;
  const auto post = [&](uint32_t index) {
    mlx5dv_set_data_seg(reinterpret_cast<mlx5_wqe_data_seg*>(next_of(index) + 1), 64, a_mr->lkey,
                        reinterpret_cast<uintptr_t>(a_buf.data() + 64 * index));
    ++posted;
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&dv_srq.dbrec[0], htobe32(posted & 0xffff), __ATOMIC_RELEASE);
  };
  const auto send = [&](const std::string& text) {
    memcpy(b_buf.data(), text.c_str(), text.size() + 1);
    ibv_sge sge{reinterpret_cast<uintptr_t>(b_buf.data()), static_cast<uint32_t>(text.size() + 1),
                b_mr->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (ibv_post_send(b_qp, &wr, &bad) != 0) return false;
    ibv_wc wc{};
    int n = 0;
    for (int i = 0; i < 50000000 && n == 0; ++i) n = ibv_poll_cq(b_cq, 1, &wc);
    return n == 1 && wc.status == IBV_WC_SUCCESS;
  };
  const auto expect_received = [&](uint32_t index, const std::string& text) {
    mlx5_cqe64* cqe = WaitCqe(dv_cq, cq_index++);
    ASSERT_NE(cqe, nullptr) << "no CQE for " << text;
    EXPECT_EQ(mlx5dv_get_cqe_opcode(cqe), MLX5_CQE_RESP_SEND);
    EXPECT_EQ(be16toh(cqe->wqe_counter), index) << text;
    EXPECT_EQ(be32toh(cqe->byte_cnt), text.size() + 1);
    EXPECT_STREQ(reinterpret_cast<char*>(a_buf.data() + 64 * index), text.c_str());
    dv_cq.dbrec[0] = htobe32(cq_index & 0xffffff);
  };

  // The list relinked after its head, 0 -> 3 -> 1 -> 2 (a ConnectX starts
  // at the head it was created with and follows next_wqe_index): four posts
  // take those WQEs, and four messages land in that order.
  const uint32_t order[] = {0, 3, 1, 2};
  next_of(0)->next_wqe_index = htobe16(3);
  next_of(3)->next_wqe_index = htobe16(1);
  next_of(1)->next_wqe_index = htobe16(2);
  next_of(2)->next_wqe_index = htobe16(4 % count);
  // The WQEs after 3 stay linked after 2: the list still holds them all.
  for (uint32_t i = 0; i < 4; ++i) {
    post(head);
    head = be16toh(next_of(head)->next_wqe_index);
  }
  for (uint32_t i = 0; i < 4; ++i) {
    const std::string text = "relinked " + std::to_string(i);
    ASSERT_TRUE(send(text));
    ASSERT_NO_FATAL_FAILURE(expect_received(order[i], text));
  }
  // libmlx5's free: a consumed WQE goes after the tail. Then one post and
  // one message at a time, three times around the list.
  const auto free_wqe = [&](uint32_t index) {
    next_of(tail)->next_wqe_index = htobe16(static_cast<uint16_t>(index));
    tail = index;
  };
  for (uint32_t index : order) free_wqe(index);
  for (uint32_t round = 0; round < 3 * count; ++round) {
    const uint32_t index = head;
    post(index);
    head = be16toh(next_of(index)->next_wqe_index);
    const std::string text = "message " + std::to_string(round);
    ASSERT_TRUE(send(text));
    ASSERT_NO_FATAL_FAILURE(expect_received(index, text));
    free_wqe(index);
  }

  EXPECT_EQ(ibv_destroy_qp(a_qp), 0);
  EXPECT_EQ(ibv_destroy_qp(b_qp), 0);
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
  EXPECT_EQ(ibv_destroy_cq(a_cq), 0);
  EXPECT_EQ(ibv_destroy_cq(b_cq), 0);
  ibv_dereg_mr(a_mr);
  ibv_dereg_mr(b_mr);
}

}  // namespace
}  // namespace devx_it
