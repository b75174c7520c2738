// The log channel (SOFTVERBS_LOG): every rejected verb says which rule it
// broke, in one line naming the verb, and nothing is written when the
// channel is off.
//
//   it_logchannel --log=<file>   SOFTVERBS_LOG=<file>: each bad call below
//                                adds exactly one line to <file>, naming the
//                                verb and the rule (substrings per case).
//   it_logchannel --silent       SOFTVERBS_LOG unset: the same calls write
//                                nothing to stderr.
#include <endian.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "test_env.h"

namespace {

std::string g_log_path;  // empty: silent mode
std::string g_stderr_path;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One bad call: what it must return, and what its line must contain.
struct Case {
  const char* name;
  std::function<long()> call;  // returns what the verb returned (pointers as 0 / 1)
  long expected;
  int expected_errno;  // -1: errno not checked
  std::vector<const char*> must_contain;
};

class LogChannel : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_ = softverbs::it::OpenDevice();
    ASSERT_NE(ctx_, nullptr);
    pd_ = ibv_alloc_pd(ctx_);
    ASSERT_NE(pd_, nullptr);
    channel_ = ibv_create_comp_channel(ctx_);
    ASSERT_NE(channel_, nullptr);
    cq_ = ibv_create_cq(ctx_, 16, nullptr, channel_, 0);
    ASSERT_NE(cq_, nullptr);
    ibv_srq_init_attr sattr{};
    sattr.attr.max_wr = 8;
    sattr.attr.max_sge = 1;
    srq_ = ibv_create_srq(pd_, &sattr);
    ASSERT_NE(srq_, nullptr);
    buf_ = static_cast<char*>(aligned_alloc(4096, 8192));
    mr_ = ibv_reg_mr(pd_, buf_, 8192, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr_, nullptr);
    // A UD QP in RTS, and an RC QP on the SRQ left in RESET.
    ud_ = CreateQp(IBV_QPT_UD, nullptr, 0);
    ASSERT_NE(ud_, nullptr);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qkey = 0x11111111;
    ASSERT_EQ(ibv_modify_qp(ud_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY),
              0);
    a.qp_state = IBV_QPS_RTR;
    ASSERT_EQ(ibv_modify_qp(ud_, &a, IBV_QP_STATE), 0);
    a.qp_state = IBV_QPS_RTS;
    ASSERT_EQ(ibv_modify_qp(ud_, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
    ibv_qp_init_attr init{};
    ASSERT_EQ(ibv_query_qp(ud_, &a, 0, &init), 0);
    ud_cap_ = init.cap;
    rc_srq_ = CreateQp(IBV_QPT_RC, srq_, 0);
    ASSERT_NE(rc_srq_, nullptr);
    rc_ex_ = CreateQp(IBV_QPT_RC, nullptr, IBV_QP_EX_WITH_SEND);
    ASSERT_NE(rc_ex_, nullptr);
    ibv_ah_attr ah_attr = softverbs::it::LoopbackAh(ctx_);
    ah_ = ibv_create_ah(pd_, &ah_attr);
    ASSERT_NE(ah_, nullptr);
  }

  void TearDown() override {
    if (devx_ctx_) ibv_close_device(devx_ctx_);
    if (ah_) ibv_destroy_ah(ah_);
    for (ibv_qp* qp : {rc_ex_, rc_srq_, ud_}) {
      if (qp) ibv_destroy_qp(qp);
    }
    if (mr_) ibv_dereg_mr(mr_);
    free(buf_);
    if (srq_) ibv_destroy_srq(srq_);
    if (cq_) ibv_destroy_cq(cq_);
    if (channel_) ibv_destroy_comp_channel(channel_);
    if (pd_) ibv_dealloc_pd(pd_);
    if (ctx_) ibv_close_device(ctx_);
  }

  ibv_qp* CreateQp(ibv_qp_type type, ibv_srq* srq, uint64_t send_ops) {
    ibv_qp_init_attr_ex attr{};
    attr.qp_type = type;
    attr.send_cq = attr.recv_cq = cq_;
    attr.srq = srq;
    attr.cap.max_send_wr = attr.cap.max_recv_wr = 4;
    attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
    attr.comp_mask = IBV_QP_INIT_ATTR_PD;
    attr.pd = pd_;
    if (send_ops) {
      attr.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
      attr.send_ops_flags = send_ops;
    }
    return ibv_create_qp_ex(ctx_, &attr);
  }

  std::vector<Case> Cases();

  ibv_context* ctx_ = nullptr;
  ibv_context* devx_ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_srq* srq_ = nullptr;
  char* buf_ = nullptr;
  ibv_mr* mr_ = nullptr;
  ibv_qp* ud_ = nullptr;
  ibv_qp_cap ud_cap_{};
  ibv_qp* rc_srq_ = nullptr;
  ibv_qp* rc_ex_ = nullptr;
  ibv_ah* ah_ = nullptr;
};

long Ptr(const void* p) {
  return p ? 1 : 0;
}

// A PRM box with only the opcode set (bits 31:16 of the first dword).
std::vector<uint8_t> Box(size_t bytes, uint16_t opcode) {
  std::vector<uint8_t> box(bytes, 0);
  box[0] = static_cast<uint8_t>(opcode >> 8);
  box[1] = static_cast<uint8_t>(opcode);
  return box;
}

std::vector<Case> LogChannel::Cases() {
  std::vector<Case> c;
  // NULL arguments.
  c.push_back({"create_qp NULL attr",
               [&] { return Ptr(ibv_create_qp(pd_, nullptr)); },
               0,
               EINVAL,
               {"ibv_create_qp:", "attr is NULL"}});
  c.push_back({"create_ah NULL pd",
               [&] {
                 ibv_ah_attr a{};
                 return Ptr(ibv_create_ah(nullptr, &a));
               },
               0,
               EINVAL,
               {"ibv_create_ah:", "pd is NULL"}});
  c.push_back({"modify_qp NULL attr",
               [&] { return long(ibv_modify_qp(ud_, nullptr, 0)); },
               EINVAL,
               -1,
               {"ibv_modify_qp:", "attr is NULL"}});
  c.push_back({"destroy_qp NULL",
               [&] { return long(ibv_destroy_qp(nullptr)); },
               EINVAL,
               -1,
               {"ibv_destroy_qp:", "qp is NULL"}});
  c.push_back({"modify_srq NULL attr",
               [&] { return long(ibv_modify_srq(srq_, nullptr, 0)); },
               EINVAL,
               -1,
               {"ibv_modify_srq:", "attr is NULL"}});
  c.push_back({"reg_mr NULL pd",
               [&] { return Ptr(ibv_reg_mr(nullptr, buf_, 64, 0)); },
               0,
               EINVAL,
               {"ibv_reg_mr:", "pd is NULL"}});
  // Out of range.
  c.push_back({"query_port port 2",
               [&] {
                 ibv_port_attr p{};
                 return long(ibv_query_port(ctx_, 2, &p));
               },
               EINVAL,
               -1,
               {"ibv_query_port:", "port 2 does not exist"}});
  c.push_back({"query_gid index",
               [&] {
                 ibv_gid g{};
                 return long(ibv_query_gid(ctx_, 1, 9999, &g));
               },
               -1,
               EINVAL,
               {"ibv_query_gid:", "index 9999 is outside the GID table"}});
  c.push_back({"query_pkey index",
               [&] {
                 __be16 p;
                 return long(ibv_query_pkey(ctx_, 1, -1, &p));
               },
               -1,
               EINVAL,
               {"ibv_query_pkey:", "index -1 is outside"}});
  c.push_back({"get_pkey_index unknown",
               [&] { return long(ibv_get_pkey_index(ctx_, 1, htobe16(0x1234))); },
               -1,
               ENOENT,
               {"ibv_get_pkey_index:", "P_Key 0x1234 is not in the table"}});
  c.push_back({"create_cq cqe 0",
               [&] { return Ptr(ibv_create_cq(ctx_, 0, nullptr, nullptr, 0)); },
               0,
               EINVAL,
               {"ibv_create_cq:", "cqe 0"}});
  c.push_back({"resize_cq cqe 0",
               [&] { return long(ibv_resize_cq(cq_, 0)); },
               EINVAL,
               -1,
               {"ibv_resize_cq:", "cqe 0 is outside"}});
  // Bad flags and masks.
  c.push_back({"reg_mr unmapped",
               [&] {
                 void* p = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                 long r = Ptr(ibv_reg_mr(pd_, p, 4096, IBV_ACCESS_LOCAL_WRITE));
                 int e = errno;
                 munmap(p, 4096);
                 errno = e;
                 return r;
               },
               0,
               EFAULT,
               {"ibv_reg_mr:", "is not mapped memory"}});
  c.push_back({"rereg_mr unknown flags",
               [&] { return long(ibv_rereg_mr(mr_, 0x4000, nullptr, nullptr, 0, 0)); },
               IBV_REREG_MR_ERR_INPUT,
               EINVAL,
               {"ibv_rereg_mr:", "unknown bits"}});
  c.push_back({"rereg_mr no flags",
               [&] { return long(ibv_rereg_mr(mr_, 0, nullptr, nullptr, 0, 0)); },
               IBV_REREG_MR_ERR_CMD,
               EINVAL,
               {"ibv_rereg_mr:", "flags is 0"}});
  c.push_back({"create_cq_ex wc_flags",
               [&] {
                 ibv_cq_init_attr_ex a{};
                 a.cqe = 4;
                 a.wc_flags = IBV_WC_EX_WITH_FLOW_TAG;
                 return Ptr(ibv_create_cq_ex(ctx_, &a));
               },
               0,
               EOPNOTSUPP,
               {"ibv_create_cq_ex:", "wc_flags"}});
  c.push_back({"create_qp_ex comp_mask",
               [&] {
                 ibv_qp_init_attr_ex a{};
                 a.qp_type = IBV_QPT_RC;
                 a.comp_mask = IBV_QP_INIT_ATTR_PD | (1u << 30);
                 a.pd = pd_;
                 return Ptr(ibv_create_qp_ex(ctx_, &a));
               },
               0,
               EINVAL,
               {"ibv_create_qp_ex:", "has unknown bits"}});
  c.push_back({"open_xrcd comp_mask",
               [&] {
                 ibv_xrcd_init_attr a{};
                 a.comp_mask = IBV_XRCD_INIT_ATTR_FD;
                 a.fd = -1;
                 return Ptr(ibv_open_xrcd(ctx_, &a));
               },
               0,
               EINVAL,
               {"ibv_open_xrcd:", "IBV_XRCD_INIT_ATTR_OFLAGS"}});
  // Wrong object.
  c.push_back({"destroy_comp_channel busy",
               [&] { return long(ibv_destroy_comp_channel(channel_)); },
               EBUSY,
               -1,
               {"ibv_destroy_comp_channel:", "still use the channel"}});
  c.push_back({"get_srq_num basic SRQ",
               [&] {
                 uint32_t n;
                 return long(ibv_get_srq_num(srq_, &n));
               },
               EINVAL,
               -1,
               {"ibv_get_srq_num:", "is not an XRC SRQ"}});
  c.push_back({"qp_to_qp_ex plain QP",
               [&] { return Ptr(ibv_qp_to_qp_ex(ud_)); },
               0,
               EOPNOTSUPP,
               {"ibv_qp_to_qp_ex:", "IBV_QP_INIT_ATTR_SEND_OPS_FLAGS"}});
  c.push_back({"init_ah_from_wc GRH without grh",
               [&] {
                 ibv_wc wc{};
                 wc.wc_flags = IBV_WC_GRH;
                 ibv_ah_attr a{};
                 return long(ibv_init_ah_from_wc(ctx_, 1, &wc, nullptr, &a));
               },
               -1,
               EINVAL,
               {"ibv_init_ah_from_wc:", "IBV_WC_GRH, but grh is NULL"}});
  c.push_back({"dealloc_pd in use (daemon)",
               [&] { return long(ibv_dealloc_pd(pd_)); },
               EBUSY,
               -1,
               {"dealloc_pd", "rejected"}});
  // Bad modify (the daemon's rule, printed by the library).
  c.push_back({"modify RESET->INIT without PORT",
               [&] {
                 ibv_qp_attr a{};
                 a.qp_state = IBV_QPS_INIT;
                 return long(ibv_modify_qp(rc_srq_, &a,
                                           IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS));
               },
               EINVAL,
               -1,
               {"modify_qp", "RESET->INIT on RC requires IBV_QP_PORT"}});
  // Bad post.
  c.push_back({"post_send num_sge",
               [&] {
                 std::vector<ibv_sge> sge(ud_cap_.max_send_sge + 1,
                                          ibv_sge{reinterpret_cast<uintptr_t>(buf_), 8, mr_->lkey});
                 ibv_send_wr wr{}, *bad = nullptr;
                 wr.wr_id = 0x1234;
                 wr.opcode = IBV_WR_SEND;
                 wr.sg_list = sge.data();
                 wr.num_sge = static_cast<int>(sge.size());
                 wr.wr.ud.ah = ah_;
                 return long(ibv_post_send(ud_, &wr, &bad));
               },
               EINVAL,
               -1,
               {"ibv_post_send: WR 0x1234:", "is above the QP's max_send_sge"}});
  c.push_back({"post_send UD without AH",
               [&] {
                 ibv_send_wr wr{}, *bad = nullptr;
                 wr.wr_id = 0x77;
                 wr.opcode = IBV_WR_SEND;
                 return long(ibv_post_send(ud_, &wr, &bad));
               },
               EINVAL,
               -1,
               {"ibv_post_send: WR 0x77:", "without wr.ud.ah"}});
  c.push_back({"post_send RDMA write on UD",
               [&] {
                 ibv_send_wr wr{}, *bad = nullptr;
                 wr.wr_id = 0x78;
                 wr.opcode = IBV_WR_RDMA_WRITE;
                 wr.wr.ud.ah = ah_;
                 return long(ibv_post_send(ud_, &wr, &bad));
               },
               EINVAL,
               -1,
               {"ibv_post_send: WR 0x78:", "opcode 0 is not supported"}});
  c.push_back({"post_send in RESET",
               [&] {
                 ibv_send_wr wr{}, *bad = nullptr;
                 wr.opcode = IBV_WR_SEND;
                 return long(ibv_post_send(rc_ex_, &wr, &bad));
               },
               EINVAL,
               -1,
               {"ibv_post_send:", "is not in RTS"}});
  c.push_back({"post_recv on an SRQ QP",
               [&] {
                 ibv_recv_wr wr{}, *bad = nullptr;
                 return long(ibv_post_recv(rc_srq_, &wr, &bad));
               },
               EINVAL,
               -1,
               {"ibv_post_recv:", "takes its receives from an SRQ"}});
  c.push_back({"post_recv num_sge",
               [&] {
                 ibv_sge sge[8] = {};
                 ibv_recv_wr wr{}, *bad = nullptr;
                 wr.wr_id = 0x99;
                 wr.sg_list = sge;
                 wr.num_sge = 8;
                 return long(ibv_post_recv(ud_, &wr, &bad));
               },
               EINVAL,
               -1,
               {"ibv_post_recv: WR 0x99:", "num_sge 8 is outside"}});
  c.push_back({"wr_rdma_read not in send_ops_flags",
               [&] {
                 ibv_qp_ex* qx = ibv_qp_to_qp_ex(rc_ex_);
                 ibv_wr_start(qx);
                 ibv_wr_rdma_read(qx, 1, 0);
                 return long(ibv_wr_complete(qx));
               },
               EINVAL,
               -1,
               {"ibv_wr_*:", "was not in send_ops_flags"}});
  // Unsupported operations.
  c.push_back({"alloc_null_mr",
               [&] { return Ptr(ibv_alloc_null_mr(pd_)); },
               0,
               EOPNOTSUPP,
               {"ibv_alloc_null_mr", "is not supported by softverbs"}});
  c.push_back({"alloc_mw of type 3",
               [&] { return Ptr(ibv_alloc_mw(pd_, static_cast<ibv_mw_type>(3))); },
               0,
               EINVAL,
               {"alloc_mw", "type 3"}});
  c.push_back({"query_ece (weak stub)",
               [&] {
                 ibv_ece ece{};
                 return long(ibv_query_ece(ud_, &ece));
               },
               EOPNOTSUPP,
               -1,
               {"ibv_query_ece", "is not supported by softverbs"}});
  // DEVX.
  c.push_back({"mlx5dv_init_obj type 0",
               [&] {
                 mlx5dv_obj o{};
                 return long(mlx5dv_init_obj(&o, 0));
               },
               EINVAL,
               EINVAL,
               {"mlx5dv_init_obj:", "obj_type 0x0"}});
  c.push_back({"devx general_cmd unknown opcode (firmware)",
               [&] {
                 auto in = Box(16, 0xb42);
                 std::vector<uint8_t> out(16);
                 return long(mlx5dv_devx_general_cmd(devx_ctx_, in.data(), in.size(), out.data(),
                                                     out.size()));
               },
               EREMOTEIO,
               EREMOTEIO,
               {"mlx5dv_devx_general_cmd failed", "0xb42", "bad operation"}});
  c.push_back({"devx obj_create with a query opcode (kernel layer)",
               [&] {
                 auto in = Box(16, 0x100);  // QUERY_HCA_CAP
                 std::vector<uint8_t> out(16);
                 return Ptr(mlx5dv_devx_obj_create(devx_ctx_, in.data(), in.size(), out.data(),
                                                   out.size()));
               },
               0,
               EINVAL,
               {"mlx5dv_devx_obj_create failed", "does not accept the opcode"}});
  c.push_back({"devx umem_reg_ex dma-buf",
               [&] {
                 mlx5dv_devx_umem_in in{};
                 in.addr = buf_;
                 in.size = 4096;
                 in.comp_mask = MLX5DV_UMEM_MASK_DMABUF;
                 return Ptr(mlx5dv_devx_umem_reg_ex(devx_ctx_, &in));
               },
               0,
               EOPNOTSUPP,
               {"mlx5dv_devx_umem_reg_ex:", "dma-buf"}});
  return c;
}

TEST_F(LogChannel, EveryRejectedCallExplainsItself) {
  int num = 0;
  ibv_device** list = ibv_get_device_list(&num);
  ASSERT_NE(list, nullptr);
  mlx5dv_context_attr dv{};
  dv.flags = MLX5DV_CONTEXT_FLAGS_DEVX;
  devx_ctx_ = mlx5dv_open_device(list[0], &dv);
  ibv_free_device_list(list);
  ASSERT_NE(devx_ctx_, nullptr);

  const std::vector<Case> cases = Cases();
  EXPECT_GE(cases.size(), 30u);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const size_t before = g_log_path.empty() ? 0 : ReadFile(g_log_path).size();
    errno = 0;
    const long got = c.call();
    const int err = errno;
    EXPECT_EQ(got, c.expected);
    if (c.expected_errno >= 0) {
      EXPECT_EQ(err, c.expected_errno);
    }
    if (g_log_path.empty()) continue;
    const std::string added = ReadFile(g_log_path).substr(before);
    const size_t lines = std::count(added.begin(), added.end(), '\n');
    EXPECT_EQ(lines, 1u) << "new log lines:\n" << added;
    for (const char* want : c.must_contain) {
      EXPECT_NE(added.find(want), std::string::npos) << "missing '" << want << "' in: " << added;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode.rfind("--log=", 0) == 0) {
    // The channel reads the variable once, at the first line: set it first.
    g_log_path = mode.substr(6);
    unlink(g_log_path.c_str());
    setenv("SOFTVERBS_LOG", g_log_path.c_str(), 1);
    return RUN_ALL_TESTS();
  }
  if (mode == "--silent") {
    unsetenv("SOFTVERBS_LOG");
    char path[] = "/tmp/softverbs-logchannel-stderr-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return 2;
    unlink(path);
    const int saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    int rc = RUN_ALL_TESTS();
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    const off_t size = lseek(fd, 0, SEEK_END);
    if (size != 0) {
      std::string text(static_cast<size_t>(size), '\0');
      pread(fd, text.data(), text.size(), 0);
      fprintf(stderr, "FAILED: %lld bytes on stderr with SOFTVERBS_LOG unset:\n%s\n",
              static_cast<long long>(size), text.c_str());
      rc = 1;
    }
    return rc;
  }
  fprintf(stderr, "usage: %s --log=<file> | --silent\n", argv[0]);
  return 2;
}
