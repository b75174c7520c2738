#include "test_env.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

namespace softverbs::it {

ibv_context* OpenDevice() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  EXPECT_NE(list, nullptr);
  if (!list) return nullptr;
  EXPECT_EQ(n, 1);
  ibv_context* ctx = n > 0 ? ibv_open_device(list[0]) : nullptr;
  EXPECT_NE(ctx, nullptr) << "ibv_open_device: " << strerror(errno);
  ibv_free_device_list(list);
  return ctx;
}

std::string RunCommand(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int st = pclose(p);
  if (status) *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

nlohmann::json Status() {
  int status = 0;
  std::string out = RunCommand(std::string(SOFTVERBS_CLI) + " status --json", &status);
  EXPECT_EQ(status, 0) << out;
  auto json = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(json.is_discarded()) << out;
  return json;
}

nlohmann::json MyClients() {
  nlohmann::json mine = nlohmann::json::array();
  nlohmann::json s = Status();
  if (!s.contains("clients")) return mine;
  for (const auto& c : s["clients"]) {
    if (c["pid"].get<int>() == getpid()) mine.push_back(c);
  }
  return mine;
}

size_t MyObjectCount(const std::string& kind) {
  size_t n = 0;
  for (const auto& c : MyClients()) n += c[kind].size();
  return n;
}

int RoceV2GidIndex(ibv_context* ctx) {
  ibv_port_attr port{};
  if (ibv_query_port(ctx, 1, &port) != 0) return -1;
  for (int i = 0; i < port.gid_tbl_len; ++i) {
    ibv_gid_entry e{};
    if (ibv_query_gid_ex(ctx, 1, i, &e, 0) != 0) continue;
    if (e.gid_type == IBV_GID_TYPE_ROCE_V2) return i;
  }
  return -1;
}

ibv_ah_attr LoopbackAh(ibv_context* ctx) {
  ibv_ah_attr ah{};
  ah.port_num = 1;
  ah.is_global = 1;
  int index = RoceV2GidIndex(ctx);
  EXPECT_GE(index, 0) << "no RoCE v2 GID";
  ah.grh.sgid_index = static_cast<uint8_t>(index < 0 ? 0 : index);
  ibv_query_gid(ctx, 1, ah.grh.sgid_index, &ah.grh.dgid);
  ah.grh.hop_limit = 64;
  return ah;
}

bool ConnectRc(ibv_context* ctx, ibv_qp* qp, uint32_t dest_qpn) {
  ibv_qp_attr s{};
  s.qp_state = IBV_QPS_INIT;
  s.port_num = 1;
  s.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  if (ibv_modify_qp(qp, &s, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
    return false;
  }
  s.qp_state = IBV_QPS_RTR;
  s.ah_attr = LoopbackAh(ctx);
  s.path_mtu = IBV_MTU_1024;
  s.dest_qp_num = dest_qpn;
  s.max_dest_rd_atomic = 1;
  s.min_rnr_timer = 12;
  if (ibv_modify_qp(qp, &s,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
    return false;
  }
  s.qp_state = IBV_QPS_RTS;
  s.timeout = 14;
  s.retry_cnt = 7;
  s.rnr_retry = 7;
  s.max_rd_atomic = 1;
  return ibv_modify_qp(qp, &s,
                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                           IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) == 0;
}

int PollOne(ibv_cq* cq, ibv_wc* wc) {
  for (int spins = 0; spins < 20000000; ++spins) {
    int n = ibv_poll_cq(cq, 1, wc);
    if (n != 0) return n;
  }
  return 0;
}

void ContextTest::SetUp() {
  ctx_ = OpenDevice();
  ASSERT_NE(ctx_, nullptr);
  pd_ = ibv_alloc_pd(ctx_);
  ASSERT_NE(pd_, nullptr) << strerror(errno);
  cq_ = ibv_create_cq(ctx_, 64, nullptr, nullptr, 0);
  ASSERT_NE(cq_, nullptr) << strerror(errno);
}

void ContextTest::TearDown() {
  if (cq_) {
    EXPECT_EQ(ibv_destroy_cq(cq_), 0);
  }
  if (pd_) {
    EXPECT_EQ(ibv_dealloc_pd(pd_), 0);
  }
  if (ctx_) {
    EXPECT_EQ(ibv_close_device(ctx_), 0);
  }
}

bool PageIsBacked(const void* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  FILE* maps = fopen("/proc/self/maps", "r");
  if (!maps) return false;
  char line[512];
  bool backed = false;
  while (fgets(line, sizeof(line), maps)) {
    uintptr_t lo = 0, hi = 0;
    if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && lo <= at && at < hi) {
      backed = strstr(line, "softverbs-mr") != nullptr;
      break;
    }
  }
  fclose(maps);
  return backed;
}

int OpenDescriptors() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n;
}

}  // namespace softverbs::it
