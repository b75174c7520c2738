// A DEVX client killed with SIGKILL: the daemon destroys its DEVX objects
// before its verbs objects (the DEVX QP holds the verbs CQ) and nothing of it
// is left in `softverbs status --json`.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "devx_env.h"

namespace devx_it {
namespace {

// The child: a verbs PD and CQ, a DEVX QP on them, a DEVX CQ and PD, then it
// reports ready and waits to be killed.
[[noreturn]] void RunChild(int ready_fd) {
  ibv_context* ctx = OpenDevx();
  if (ctx == nullptr) _exit(10);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  if (!pd || !cq) _exit(11);
  mlx5dv_pd dv_pd{};
  mlx5dv_cq dv_cq{};
  mlx5dv_obj obj{};
  obj.pd = {pd, &dv_pd};
  obj.cq = {cq, &dv_cq};
  if (mlx5dv_init_obj(&obj, MLX5DV_OBJ_PD | MLX5DV_OBJ_CQ) != 0) _exit(12);
  static std::vector<uint8_t> memory(1 << 18);
  uint32_t umem[4];
  for (int i = 0; i < 4; ++i) {
    auto* u = mlx5dv_devx_umem_reg(ctx, memory.data() + (i << 16), 1 << 16, IBV_ACCESS_LOCAL_WRITE);
    if (u == nullptr) _exit(13);
    umem[i] = u->umem_id;
  }
  Out out(kCreateOut);
  Box qp = CreateQpBox(dv_pd.pdn, dv_cq.cqn, dv_cq.cqn, umem[0], umem[1]);
  if (!mlx5dv_devx_obj_create(ctx, qp.data(), qp.size(), out.data(), out.size())) _exit(14);
  Box dcq = CreateCqBox(umem[2], umem[3], 0);
  if (!mlx5dv_devx_obj_create(ctx, dcq.data(), dcq.size(), out.data(), out.size())) _exit(15);
  Box dpd(16, kAllocPd);
  if (!mlx5dv_devx_obj_create(ctx, dpd.data(), dpd.size(), out.data(), out.size())) _exit(16);
  char ok = 'y';
  if (write(ready_fd, &ok, 1) != 1) _exit(17);
  for (;;) pause();
}

TEST(DevxCleanup, SigkilledClientLeavesNothingBehind) {
  ASSERT_NE(FindSoftverbs(), nullptr);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(pipe_fds[0]);
    RunChild(pipe_fds[1]);
  }
  close(pipe_fds[1]);
  char ready = 0;
  ASSERT_EQ(read(pipe_fds[0], &ready, 1), 1) << "the child failed to set up";
  close(pipe_fds[0]);

  nlohmann::json before = ClientOf(Status(), child);
  ASSERT_FALSE(before.is_null());
  ASSERT_TRUE(before.contains("devx"));
  EXPECT_EQ(before["devx"]["objects"].size(), 3u);
  EXPECT_EQ(before["devx"]["umems"].size(), 4u);
  // The DEVX QP holds the verbs CQ as its send and its receive CQ.
  EXPECT_EQ(before["cq"][0]["users"].get<int>(), 2);

  ASSERT_EQ(kill(child, SIGKILL), 0);
  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(WIFSIGNALED(wstatus));

  nlohmann::json after = before;
  for (int i = 0; i < 100 && !after.is_null(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    after = ClientOf(Status(), child);
  }
  EXPECT_TRUE(after.is_null()) << "still listed: " << after.dump();

  // The device still works for a new DEVX client, verbs objects and all.
  ibv_context* ctx = OpenDevx();
  ASSERT_NE(ctx, nullptr);
  Box pd(16, kAllocPd);
  Out out(kCreateOut);
  mlx5dv_devx_obj* obj = mlx5dv_devx_obj_create(ctx, pd.data(), pd.size(), out.data(), out.size());
  ASSERT_NE(obj, nullptr);
  EXPECT_EQ(mlx5dv_devx_obj_destroy(obj), 0);
  ibv_close_device(ctx);
}

}  // namespace
}  // namespace devx_it
