// One object model for verbs and DEVX (mlx5dv_devx_obj_create(3)'s example),
// mlx5dv_init_obj, the asynchronous query through the cmd_comp fd, and the
// smaller DEVX calls (UMEM, UAR, EQN, query_device).
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <set>

#include "devx_env.h"

namespace devx_it {
namespace {

struct VerbsObjects {
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  uint32_t pdn = 0, cqn = 0;
};

VerbsObjects MakeVerbs(ibv_context* ctx) {
  VerbsObjects v;
  v.pd = ibv_alloc_pd(ctx);
  v.cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  EXPECT_NE(v.pd, nullptr);
  EXPECT_NE(v.cq, nullptr);
  mlx5dv_pd dv_pd{};
  mlx5dv_cq dv_cq{};
  mlx5dv_obj obj{};
  obj.pd.in = v.pd;
  obj.pd.out = &dv_pd;
  obj.cq.in = v.cq;
  obj.cq.out = &dv_cq;
  EXPECT_EQ(mlx5dv_init_obj(&obj, MLX5DV_OBJ_PD | MLX5DV_OBJ_CQ), 0);
  v.pdn = dv_pd.pdn;
  v.cqn = dv_cq.cqn;
  return v;
}

TEST_F(DevxTest, IsSupportedAndQueryDevice) {
  EXPECT_TRUE(mlx5dv_is_supported(FindSoftverbs()));
  mlx5dv_context dv;
  memset(&dv, 0xa5, sizeof(dv));
  dv.comp_mask = ~0ull;  // ask for everything
  ASSERT_EQ(mlx5dv_query_device(ctx_, &dv), 0);
  // As libmlx5: the capability fields are answered (zero: none exists
  // here, but DC ODP); the clock info's update period since there is clock info; the
  // core clock register and LAG ports only when present.
  const uint64_t answered =
      MLX5DV_CONTEXT_MASK_CQE_COMPRESION | MLX5DV_CONTEXT_MASK_SWP |
      MLX5DV_CONTEXT_MASK_STRIDING_RQ | MLX5DV_CONTEXT_MASK_TUNNEL_OFFLOADS |
      MLX5DV_CONTEXT_MASK_DCI_STREAMS | MLX5DV_CONTEXT_MASK_DYN_BFREGS |
      MLX5DV_CONTEXT_MASK_FLOW_ACTION_FLAGS | MLX5DV_CONTEXT_MASK_DC_ODP_CAPS |
      MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD | MLX5DV_CONTEXT_MASK_WR_MEMCPY_LENGTH |
      MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD | MLX5DV_CONTEXT_MASK_CLOCK_INFO_UPDATE;
  EXPECT_EQ(dv.comp_mask, answered);
  EXPECT_GT(dv.max_clock_info_update_nsec, 0u);
  EXPECT_EQ(dv.flags,
            static_cast<uint64_t>(MLX5DV_CONTEXT_FLAGS_CQE_V1 | MLX5DV_CONTEXT_FLAGS_CQE_128B_PAD));
  EXPECT_EQ(dv.version, 0u);
  EXPECT_EQ(dv.cqe_comp_caps.max_num, 0u);
  EXPECT_EQ(dv.striding_rq_caps.supported_qpts, 0u);
  EXPECT_EQ(dv.tunnel_offloads_caps, 0u);
  EXPECT_EQ(dv.max_dynamic_bfregs, 0u);
  // DC QPs take ODP MRs as RC QPs do (a DCT receives through its SRQ).
  EXPECT_EQ(dv.dc_odp_caps, static_cast<uint32_t>(IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_WRITE |
                                                  IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC |
                                                  IBV_ODP_SUPPORT_SRQ_RECV));
  // DMA memcpy is there (commands_test.cc checks the length against
  // QUERY_HCA_CAP's log_dma_mmo_max_size).
  EXPECT_GT(dv.max_wr_memcpy_length, 0u);
  EXPECT_EQ(dv.crypto_caps.flags, 0u);
  dv.comp_mask = MLX5DV_CONTEXT_MASK_HCA_CORE_CLOCK | MLX5DV_CONTEXT_MASK_SWP;
  ASSERT_EQ(mlx5dv_query_device(ctx_, &dv), 0);
  EXPECT_EQ(dv.comp_mask, static_cast<uint64_t>(MLX5DV_CONTEXT_MASK_SWP));
  mlx5dv_context_attr bad{};
  bad.comp_mask = 1;
  EXPECT_EQ(mlx5dv_open_device(FindSoftverbs(), &bad), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

// mlx5dv_query_port(3): what mlx5_ib answers for a port whose e-switch is
// not in switchdev mode - success, every field zero.
TEST_F(DevxTest, QueryPortAnswersAsALegacyModePort) {
  mlx5dv_port port;
  memset(&port, 0xa5, sizeof(port));
  ASSERT_EQ(mlx5dv_query_port(ctx_, 1, &port), 0);
  const mlx5dv_port zero{};
  EXPECT_EQ(memcmp(&port, &zero, sizeof(port)), 0);
  EXPECT_EQ(mlx5dv_query_port(ctx_, 2, &port), EINVAL);
  EXPECT_EQ(mlx5dv_query_port(ctx_, 0, &port), EINVAL);
  EXPECT_EQ(_mlx5dv_query_port(ctx_, 1, &port, sizeof(port) - 1), EINVAL);
}

// mlx5dv_get_clock_info + mlx5dv_ts_to_ns turn the device clock
// (ibv_query_rt_values_ex, completion timestamps) into wall-clock time.
TEST_F(DevxTest, ClockInfoTurnsTheDeviceClockIntoWallClockTime) {
  ibv_values_ex values{};
  values.comp_mask = IBV_VALUES_MASK_RAW_CLOCK;
  ASSERT_EQ(ibv_query_rt_values_ex(ctx_, &values), 0);
  const uint64_t device_ts =
      uint64_t(values.raw_clock.tv_sec) * 1000000000ull + uint64_t(values.raw_clock.tv_nsec);
  mlx5dv_clock_info info{};
  ASSERT_EQ(mlx5dv_get_clock_info(ctx_, &info), 0);
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  const uint64_t now_ns = uint64_t(now.tv_sec) * 1000000000ull + uint64_t(now.tv_nsec);
  const uint64_t wall = mlx5dv_ts_to_ns(&info, device_ts);
  // Read before the clock info and before now: at most now, and close to it
  // (bounded generously for a loaded machine).
  EXPECT_LE(wall, now_ns);
  EXPECT_LT(now_ns - wall, 2000000000ull)
      << "the device time converts to " << (now_ns - wall) / 1e9 << " s ago";
  // A later device time converts to a later wall time, by as much.
  EXPECT_EQ(mlx5dv_ts_to_ns(&info, device_ts + 12345) - wall, 12345u);
  EXPECT_EQ(mlx5dv_get_clock_info(ctx_, nullptr), EINVAL);
}

TEST_F(DevxTest, InitObjReportsTheNumbersTheDaemonKnows) {
  VerbsObjects v = MakeVerbs(ctx_);
  EXPECT_NE(v.pdn, 0u);
  EXPECT_NE(v.cqn, 0u);
  ibv_srq_init_attr sattr{};
  sattr.attr.max_wr = 4;
  sattr.attr.max_sge = 1;
  ibv_srq* srq = ibv_create_srq(v.pd, &sattr);
  ASSERT_NE(srq, nullptr);
  mlx5dv_srq dv_srq{};
  dv_srq.comp_mask = MLX5DV_SRQ_MASK_SRQN;
  mlx5dv_obj obj{};
  obj.srq.in = srq;
  obj.srq.out = &dv_srq;
  ASSERT_EQ(mlx5dv_init_obj(&obj, MLX5DV_OBJ_SRQ), 0);
  EXPECT_EQ(dv_srq.comp_mask, uint64_t{MLX5DV_SRQ_MASK_SRQN});
  // The daemon's own view.
  nlohmann::json me = ClientOf(Status(), getpid());
  ASSERT_FALSE(me.is_null());
  EXPECT_EQ(me["srq"][0]["srqn"].get<uint32_t>(), dv_srq.srqn);
  EXPECT_EQ(me["pd"][0]["pdn"].get<uint32_t>(), v.pdn);
  EXPECT_EQ(me["cq"][0]["cqn"].get<uint32_t>(), v.cqn);
  // Objects softverbs has no mlx5 form for.
  obj = {};
  EXPECT_EQ(mlx5dv_init_obj(&obj, MLX5DV_OBJ_RWQ), EOPNOTSUPP);
  EXPECT_EQ(mlx5dv_init_obj(&obj, 1u << 20), EINVAL);  // no object libmlx5 knows
  // A bit libmlx5 does not know, beside one it does: ignored, as libmlx5.
  obj = {};
  obj.srq.in = srq;
  obj.srq.out = &dv_srq;
  EXPECT_EQ(mlx5dv_init_obj(&obj, MLX5DV_OBJ_SRQ | (1u << 20)), 0);
  ibv_destroy_srq(srq);
  ibv_destroy_cq(v.cq);
  ibv_dealloc_pd(v.pd);
}

// The man page's example: a CQ made with ibv_create_cq, used by number in a
// DEVX CREATE_QP; the verbs CQ (and PD) cannot go while the DEVX QP holds them.
TEST_F(DevxTest, VerbsCqUsedByNumberInDevxQp) {
  VerbsObjects v = MakeVerbs(ctx_);
  uint32_t qpn = 0;
  Out out(kCreateOut);
  mlx5dv_devx_obj* qp = CreateQp(v.pdn, v.cqn, &qpn, &out);
  ASSERT_NE(qp, nullptr) << strerror(errno) << " status " << int(out.status());
  EXPECT_EQ(ibv_destroy_cq(v.cq), EBUSY);
  EXPECT_EQ(ibv_dealloc_pd(v.pd), EBUSY);
  // The QP works on them: the state machine runs.
  Box init = Rst2InitBox(qpn);
  Out o(16);
  EXPECT_EQ(mlx5dv_devx_obj_modify(qp, init.data(), init.size(), o.data(), o.size()), 0);
  EXPECT_EQ(QpState(qp, qpn), kQpInit);
  ASSERT_EQ(mlx5dv_devx_obj_destroy(qp), 0);
  EXPECT_EQ(ibv_destroy_cq(v.cq), 0);
  EXPECT_EQ(ibv_dealloc_pd(v.pd), 0);
}

TEST_F(DevxTest, QpNumbersAreUniqueAcrossVerbsAndDevx) {
  VerbsObjects v = MakeVerbs(ctx_);
  std::set<uint32_t> qpns;
  std::vector<mlx5dv_devx_obj*> devx_qps;
  std::vector<ibv_qp*> verbs_qps;
  for (int i = 0; i < 4; ++i) {
    uint32_t qpn = 0;
    mlx5dv_devx_obj* qp = CreateQp(v.pdn, v.cqn, &qpn);
    ASSERT_NE(qp, nullptr);
    devx_qps.push_back(qp);
    EXPECT_TRUE(qpns.insert(qpn).second) << "DEVX QPN " << qpn << " reused";
    ibv_qp_init_attr attr{};
    attr.send_cq = attr.recv_cq = v.cq;
    attr.qp_type = IBV_QPT_RC;
    attr.cap = {4, 4, 1, 1, 0};
    ibv_qp* vqp = ibv_create_qp(v.pd, &attr);
    ASSERT_NE(vqp, nullptr);
    verbs_qps.push_back(vqp);
    EXPECT_TRUE(qpns.insert(vqp->qp_num).second) << "verbs QPN " << vqp->qp_num << " reused";
  }
  for (auto* qp : devx_qps) EXPECT_EQ(mlx5dv_devx_obj_destroy(qp), 0);
  for (auto* qp : verbs_qps) EXPECT_EQ(ibv_destroy_qp(qp), 0);
  ibv_destroy_cq(v.cq);
  ibv_dealloc_pd(v.pd);
}

TEST_F(DevxTest, AnotherContextsVerbsObjectsAreNotUsable) {
  VerbsObjects v = MakeVerbs(ctx_);
  ibv_context* other = OpenDevx();
  ASSERT_NE(other, nullptr);
  Out out(kCreateOut);
  auto* qp = Create(CreateQpBox(v.pdn, v.cqn, v.cqn, RegUmem(other), RegUmem(other)), &out, other);
  EXPECT_EQ(qp, nullptr);
  EXPECT_EQ(errno, EREMOTEIO);
  EXPECT_EQ(out.status(), kStatusBadResource);
  // Nor its UMEMs.
  Out cout(kCreateOut);
  EXPECT_EQ(Create(CreateCqBox(RegUmem(), RegUmem(), 0), &cout, other), nullptr);
  EXPECT_EQ(cout.status(), kStatusBadResource);
  ibv_close_device(other);
  ibv_destroy_cq(v.cq);
  ibv_dealloc_pd(v.pd);
}

TEST_F(DevxTest, AsyncQueryIsDeliveredThroughThePollableFd) {
  uint32_t pdn = 0, cqn = 0, qpn = 0;
  mlx5dv_devx_obj* pd = CreatePd(&pdn);
  mlx5dv_devx_obj* cq = CreateCq(&cqn);
  mlx5dv_devx_obj* qp = CreateQp(pdn, cqn, &qpn);
  ASSERT_NE(qp, nullptr);
  Box init = Rst2InitBox(qpn);
  Out o(16);
  ASSERT_EQ(mlx5dv_devx_obj_modify(qp, init.data(), init.size(), o.data(), o.size()), 0);

  mlx5dv_devx_cmd_comp* comp = mlx5dv_devx_create_cmd_comp(ctx_);
  ASSERT_NE(comp, nullptr);
  pollfd pfd{comp->fd, POLLIN, 0};
  EXPECT_EQ(poll(&pfd, 1, 0), 0) << "an event before any query";

  Box q = QpBox(kQueryQp, qpn);
  ASSERT_EQ(mlx5dv_devx_obj_query_async(qp, q.data(), q.size(), kQueryQpOut, 0xfeed, comp), 0);
  // A box naming another object fails the call itself; nothing is queued.
  Box wrong = QpBox(kQueryQp, qpn + 7);
  EXPECT_EQ(mlx5dv_devx_obj_query_async(qp, wrong.data(), wrong.size(), kQueryQpOut, 1, comp),
            EINVAL);

  ASSERT_EQ(poll(&pfd, 1, 2000), 1);
  EXPECT_TRUE(pfd.revents & POLLIN);
  // Too small a buffer: ENOSPC, and the event stays.
  std::vector<uint8_t> small(sizeof(mlx5dv_devx_async_cmd_hdr) + 16);
  EXPECT_EQ(mlx5dv_devx_get_async_cmd_comp(
                comp, reinterpret_cast<mlx5dv_devx_async_cmd_hdr*>(small.data()), small.size()),
            ENOSPC);
  std::vector<uint8_t> buf(sizeof(mlx5dv_devx_async_cmd_hdr) + kQueryQpOut);
  auto* hdr = reinterpret_cast<mlx5dv_devx_async_cmd_hdr*>(buf.data());
  ASSERT_EQ(mlx5dv_devx_get_async_cmd_comp(comp, hdr, buf.size()), 0);
  EXPECT_EQ(hdr->wr_id, 0xfeedu);
  std::vector<uint8_t> answer(hdr->out_data, hdr->out_data + kQueryQpOut);
  EXPECT_EQ(ReadBits(answer, 0, 8), kStatusOk);
  EXPECT_EQ(ReadBits(answer, kQpcByte * 8, 4), kQpInit);
  // Only one event was queued: a non-blocking read finds none.
  fcntl(comp->fd, F_SETFL, fcntl(comp->fd, F_GETFL) | O_NONBLOCK);
  EXPECT_EQ(mlx5dv_devx_get_async_cmd_comp(comp, hdr, buf.size()), EAGAIN);

  mlx5dv_devx_destroy_cmd_comp(comp);
  EXPECT_EQ(mlx5dv_devx_obj_destroy(qp), 0);
  EXPECT_EQ(mlx5dv_devx_obj_destroy(cq), 0);
  EXPECT_EQ(mlx5dv_devx_obj_destroy(pd), 0);
}

TEST_F(DevxTest, UmemRegistration) {
  std::vector<uint8_t> memory(8192);
  mlx5dv_devx_umem* a = mlx5dv_devx_umem_reg(ctx_, memory.data(), 4096, IBV_ACCESS_LOCAL_WRITE);
  mlx5dv_devx_umem* b =
      mlx5dv_devx_umem_reg(ctx_, memory.data() + 4096, 4096, IBV_ACCESS_REMOTE_READ);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a->umem_id, 0u);
  EXPECT_NE(a->umem_id, b->umem_id);
  EXPECT_EQ(mlx5dv_devx_umem_reg(ctx_, memory.data(), 4096, IBV_ACCESS_REMOTE_ATOMIC), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(mlx5dv_devx_umem_reg(ctx_, memory.data(), 0, 0), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(mlx5dv_devx_umem_dereg(a), 0);
  EXPECT_EQ(mlx5dv_devx_umem_dereg(b), 0);
}

// The kernel pins a UMEM's pages: a range that is not mapped, or not
// readable, or read-only under a writable access, fails with EFAULT
// (ib_umem_get) and nothing is registered. (Before, such a UMEM was taken,
// and a DEVX queue in it made the data path fault in the process.)
TEST_F(DevxTest, UmemOfMemoryTheAccessDoesNotAllowIsEfault) {
  // This process's UMEMs in the device (softverbs status).
  auto Umems = [] {
    const nlohmann::json me = ClientOf(Status(), getpid());
    return me.is_null() || !me.contains("devx") ? size_t{0} : me["devx"]["umems"].size();
  };
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto* pages = static_cast<uint8_t*>(
      mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(pages, MAP_FAILED);
  ASSERT_EQ(mprotect(pages + page, page, PROT_READ), 0);
  // No access at all, as an unmapped page (the kernel cannot pin either),
  // but kept reserved: a hole made by munmap was filled by the next
  // allocation of the sanitized build's allocator (or of a thread of the
  // library's) before the registration looked at it.
  ASSERT_EQ(mprotect(pages + 2 * page, page, PROT_NONE), 0);
  uint8_t* writable = pages;
  uint8_t* read_only = pages + page;
  uint8_t* unmapped = pages + 2 * page;
  const size_t before = Umems();
  errno = 0;
  EXPECT_EQ(mlx5dv_devx_umem_reg(ctx_, unmapped, page, IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EQ(errno, EFAULT);
  errno = 0;
  EXPECT_EQ(mlx5dv_devx_umem_reg(ctx_, read_only, page, IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EQ(errno, EFAULT);
  errno = 0;  // partly outside: the range runs into the unmapped page
  EXPECT_EQ(mlx5dv_devx_umem_reg(ctx_, writable, 3 * page, IBV_ACCESS_REMOTE_READ), nullptr);
  EXPECT_EQ(errno, EFAULT);
  errno = 0;  // bad flags are EINVAL first, as the kernel checks them first
  EXPECT_EQ(mlx5dv_devx_umem_reg(ctx_, unmapped, page, IBV_ACCESS_REMOTE_ATOMIC), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(Umems(), before) << "a refused UMEM was registered";
  // Read-only memory for reading only is fine.
  mlx5dv_devx_umem* ro = mlx5dv_devx_umem_reg(ctx_, read_only, page, IBV_ACCESS_REMOTE_READ);
  ASSERT_NE(ro, nullptr);
  EXPECT_EQ(Umems(), before + 1);
  EXPECT_EQ(mlx5dv_devx_umem_dereg(ro), 0);
  munmap(pages, 3 * page);
}

TEST_F(DevxTest, EqnAndUar) {
  uint32_t eqn = 99;
  ASSERT_EQ(mlx5dv_devx_query_eqn(ctx_, 0, &eqn), 0);
  // The EQ is accepted by CREATE_CQ.
  Out out(kCreateOut);
  mlx5dv_devx_obj* cq = Create(CreateCqBox(RegUmem(), RegUmem(), eqn), &out);
  EXPECT_NE(cq, nullptr);
  // No such completion EQ: ENOENT (the kernel's mlx5_vector2eqn).
  EXPECT_EQ(mlx5dv_devx_query_eqn(ctx_, ctx_->num_comp_vectors, &eqn), ENOENT);
  mlx5dv_devx_uar* nc1 = mlx5dv_devx_alloc_uar(ctx_, MLX5DV_UAR_ALLOC_TYPE_NC);
  mlx5dv_devx_uar* nc2 = mlx5dv_devx_alloc_uar(ctx_, MLX5DV_UAR_ALLOC_TYPE_NC);
  mlx5dv_devx_uar* bf = mlx5dv_devx_alloc_uar(ctx_, MLX5DV_UAR_ALLOC_TYPE_BF);
  ASSERT_NE(nc1, nullptr);
  ASSERT_NE(bf, nullptr);
  EXPECT_EQ(nc1, nc2);  // the context's singleton NC UAR
  EXPECT_NE(bf->page_id, nc1->page_id);
  EXPECT_EQ(static_cast<char*>(bf->reg_addr) - static_cast<char*>(bf->base_addr), 0x800);
  *static_cast<volatile uint64_t*>(bf->reg_addr) = 0;  // a doorbell write must not fault
  EXPECT_EQ(mlx5dv_devx_alloc_uar(ctx_, 7), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  mlx5dv_devx_free_uar(bf);
  mlx5dv_devx_free_uar(nc1);
  if (cq) {
    EXPECT_EQ(mlx5dv_devx_obj_destroy(cq), 0);
  }
}

// Input libmlx5 and the kernel refuse: unknown open flags (EINVAL, as
// mlx5_alloc_context), a UMEM asking for remote write without local write
// (the kernel's ib_check_mr_access: EINVAL), umem_reg_ex with comp_mask bits
// that do not exist (EOPNOTSUPP) or a page-size bitmap without a size of
// 4 KiB or more (EINVAL).
TEST_F(DevxTest, BadOpenFlagsAndUmemsAreRefusedAsByLibmlx5) {
  ibv_device** list = ibv_get_device_list(nullptr);
  ASSERT_NE(list, nullptr);
  mlx5dv_context_attr attr{};
  attr.flags = MLX5DV_CONTEXT_FLAGS_DEVX | 2;
  errno = 0;
  EXPECT_EQ(mlx5dv_open_device(list[0], &attr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_free_device_list(list);
  static char page[4096] __attribute__((aligned(4096)));
  errno = 0;
  EXPECT_EQ(mlx5dv_devx_umem_reg(ctx_, page, sizeof(page), IBV_ACCESS_REMOTE_WRITE), nullptr);
  EXPECT_EQ(errno, EINVAL);
  mlx5dv_devx_umem_in in{};
  in.addr = page;
  in.size = sizeof(page);
  in.access = IBV_ACCESS_LOCAL_WRITE;
  in.pgsz_bitmap = 4096;
  in.comp_mask = 2;
  errno = 0;
  EXPECT_EQ(mlx5dv_devx_umem_reg_ex(ctx_, &in), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  in.comp_mask = 0;
  in.pgsz_bitmap = 2048;
  errno = 0;
  EXPECT_EQ(mlx5dv_devx_umem_reg_ex(ctx_, &in), nullptr);
  EXPECT_EQ(errno, EINVAL);
  in.pgsz_bitmap = 4096;
  mlx5dv_devx_umem* umem = mlx5dv_devx_umem_reg_ex(ctx_, &in);
  ASSERT_NE(umem, nullptr) << strerror(errno);
  EXPECT_EQ(mlx5dv_devx_umem_dereg(umem), 0);
}

TEST_F(DevxTest, UnimplementedCallsSayEopnotsupp) {
  EXPECT_EQ(
      mlx5dv_devx_create_event_channel(ctx_, MLX5DV_DEVX_CREATE_EVENT_CHANNEL_FLAGS_OMIT_EV_DATA),
      nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  Box q(16, kQueryCq);
  Out out(16);
  ibv_cq* cq = ibv_create_cq(ctx_, 4, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  EXPECT_EQ(mlx5dv_devx_cq_query(cq, q.data(), q.size(), out.data(), out.size()), EOPNOTSUPP);
  ibv_destroy_cq(cq);
}

// mlx5dv_create_cq(3): the CQE size from the attribute, else MLX5_CQE_SIZE,
// else 64 (64 or 128, anything else EINVAL); compression and padding, which
// softverbs does not report, EINVAL as libmlx5 answers on such a device;
// unknown comp_mask and flag bits EINVAL. A refused CQ leaves nothing in the
// device.
TEST_F(DevxTest, CreateDvCqTakesLibmlx5sAttributes) {
  const auto cq_count = [] { return Status()["objects"]["cq"].get<size_t>(); };
  const size_t before = cq_count();
  const auto cqe_size_of = [](ibv_cq_ex* cq) {
    mlx5dv_cq dv{};
    mlx5dv_obj obj{};
    obj.cq.in = ibv_cq_ex_to_cq(cq);
    obj.cq.out = &dv;
    EXPECT_EQ(mlx5dv_init_obj(&obj, MLX5DV_OBJ_CQ), 0);
    return dv.cqe_size;
  };
  const auto create = [&](mlx5dv_cq_init_attr* dv, uint32_t cqe = 8) {
    ibv_cq_init_attr_ex attr{};
    attr.cqe = cqe;
    attr.wc_flags = IBV_WC_STANDARD_FLAGS;
    errno = 0;
    return mlx5dv_create_cq(ctx_, &attr, dv);
  };
  const auto refused = [&](mlx5dv_cq_init_attr dv, uint32_t cqe = 8) {
    ibv_cq_ex* cq = create(&dv, cqe);
    if (cq != nullptr) ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
    return cq == nullptr && errno == EINVAL;
  };
  unsetenv("MLX5_CQE_SIZE");

  ibv_cq_ex* plain = create(nullptr);
  ASSERT_NE(plain, nullptr) << strerror(errno);
  EXPECT_EQ(cqe_size_of(plain), 64u);
  EXPECT_GE(plain->cqe, 8);
  mlx5dv_cq_init_attr dv{};
  dv.comp_mask = MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE;
  dv.cqe_size = 128;
  ibv_cq_ex* big = create(&dv);
  ASSERT_NE(big, nullptr) << strerror(errno);
  EXPECT_EQ(cqe_size_of(big), 128u);
  EXPECT_EQ(cq_count(), before + 2);
  EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(big)), 0);
  EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(plain)), 0);

  dv.cqe_size = 100;
  EXPECT_TRUE(refused(dv));
  dv.cqe_size = 0;
  EXPECT_TRUE(refused(dv));
  dv = {};
  dv.comp_mask = MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE;
  dv.cqe_comp_res_format = MLX5DV_CQE_RES_FORMAT_HASH;
  EXPECT_TRUE(refused(dv));
  dv = {};
  dv.comp_mask = MLX5DV_CQ_INIT_ATTR_MASK_FLAGS | MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE;
  dv.cqe_size = 64;
  dv.flags = MLX5DV_CQ_INIT_ATTR_FLAGS_CQE_PAD;  // padding is of 128-byte CQEs
  EXPECT_TRUE(refused(dv));
  dv.cqe_size = 128;
  ibv_cq_ex* padded = create(&dv);
  ASSERT_NE(padded, nullptr) << strerror(errno);
  EXPECT_EQ(cqe_size_of(padded), 128u);
  EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(padded)), 0);
  dv.flags = MLX5DV_CQ_INIT_ATTR_FLAGS_RESERVED;
  EXPECT_TRUE(refused(dv));
  dv = {};
  dv.comp_mask = MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE << 1;
  EXPECT_TRUE(refused(dv));
  EXPECT_TRUE(refused({}, 0));  // cqe 0

  // The environment, when the attribute does not say.
  setenv("MLX5_CQE_SIZE", "128", 1);
  ibv_cq_ex* from_env = create(nullptr);
  ASSERT_NE(from_env, nullptr) << strerror(errno);
  EXPECT_EQ(cqe_size_of(from_env), 128u);
  EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(from_env)), 0);
  dv = {};
  dv.comp_mask = MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE;
  dv.cqe_size = 64;
  ibv_cq_ex* attr_wins = create(&dv);
  ASSERT_NE(attr_wins, nullptr) << strerror(errno);
  EXPECT_EQ(cqe_size_of(attr_wins), 64u);
  EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(attr_wins)), 0);
  setenv("MLX5_CQE_SIZE", "100", 1);
  EXPECT_TRUE(refused({}));
  unsetenv("MLX5_CQE_SIZE");
  EXPECT_EQ(cq_count(), before);
}

TEST_F(DevxTest, StatusShowsDevxObjectsAndUid) {
  uint32_t pdn = 0, cqn = 0;
  mlx5dv_devx_obj* pd = CreatePd(&pdn);
  mlx5dv_devx_obj* cq = CreateCq(&cqn);
  nlohmann::json me = ClientOf(Status(), getpid());
  ASSERT_FALSE(me.is_null());
  ASSERT_TRUE(me.contains("devx"));
  EXPECT_NE(me["devx"]["uid"].get<int>(), 0);
  std::set<std::pair<std::string, uint32_t>> seen;
  for (const auto& o : me["devx"]["objects"]) {
    seen.insert({o["type"].get<std::string>(), o["number"].get<uint32_t>()});
  }
  EXPECT_TRUE(seen.count({"pd", pdn}));
  EXPECT_TRUE(seen.count({"cq", cqn}));
  EXPECT_EQ(me["devx"]["umems"].size(), 2u);
  EXPECT_EQ(mlx5dv_devx_obj_destroy(cq), 0);
  EXPECT_EQ(mlx5dv_devx_obj_destroy(pd), 0);
  me = ClientOf(Status(), getpid());
  EXPECT_TRUE(me["devx"]["objects"].empty());
}

}  // namespace
}  // namespace devx_it
