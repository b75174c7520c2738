// Device-level verbs: the device list, open/close, device/port/GID/P_Key
// queries and the *_str helpers (fork support: fork_test.cc).
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "test_env.h"

// Private to rdma-core (IBVERBS_PRIVATE_34, <infiniband/driver.h>); ibv_devinfo
// uses it.
extern "C" int ibv_query_gid_type(ibv_context* context, uint8_t port_num, unsigned int index,
                                  int* type);

namespace softverbs::it {
namespace {

TEST(DeviceList, ListsSoftverbs0WithNameGuidIndex) {
  int n = -1;
  ibv_device** list = ibv_get_device_list(&n);
  ASSERT_NE(list, nullptr);
  ASSERT_EQ(n, 1);
  EXPECT_EQ(list[1], nullptr) << "the list is NULL-terminated";
  EXPECT_STREQ(ibv_get_device_name(list[0]), "softverbs0");
  EXPECT_NE(ibv_get_device_guid(list[0]), 0u);
  EXPECT_EQ(ibv_get_device_index(list[0]), 0);
  ibv_free_device_list(list);
  // num_devices may be NULL.
  list = ibv_get_device_list(nullptr);
  ASSERT_NE(list, nullptr);
  ibv_free_device_list(list);
}

TEST(DeviceList, GuidMatchesQueryDevice) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ASSERT_GE(n, 1);
  ibv_context* ctx = ibv_open_device(list[0]);
  ASSERT_NE(ctx, nullptr);
  ibv_device_attr attr{};
  ASSERT_EQ(ibv_query_device(ctx, &attr), 0);
  EXPECT_EQ(attr.node_guid, ibv_get_device_guid(list[0]));
  EXPECT_EQ(ctx->device, list[0]);
  EXPECT_EQ(ibv_close_device(ctx), 0);
  ibv_free_device_list(list);
}

TEST(DeviceList, OpenTwiceGivesIndependentContexts) {
  ibv_context* a = OpenDevice();
  ibv_context* b = OpenDevice();
  ASSERT_TRUE(a && b);
  EXPECT_NE(a, b);
  EXPECT_EQ(MyClients().size(), 2u) << "each context is a client of the daemon";
  EXPECT_EQ(ibv_close_device(a), 0);
  EXPECT_EQ(MyClients().size(), 1u) << "closing a context releases its client";
  EXPECT_EQ(ibv_close_device(b), 0);
  EXPECT_EQ(MyClients().size(), 0u);
}

class DeviceTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NE(ctx_ = OpenDevice(), nullptr); }
  void TearDown() override {
    if (ctx_) {
      EXPECT_EQ(ibv_close_device(ctx_), 0);
    }
  }
  ibv_context* ctx_ = nullptr;
};

TEST_F(DeviceTest, QueryDeviceReportsLimits) {
  ibv_device_attr attr{};
  ASSERT_EQ(ibv_query_device(ctx_, &attr), 0);
  EXPECT_EQ(attr.phys_port_cnt, 1);
  EXPECT_GT(attr.max_qp, 0);
  EXPECT_GT(attr.max_qp_wr, 0);
  EXPECT_GT(attr.max_sge, 0);
  EXPECT_GT(attr.max_cqe, 0);
  EXPECT_GT(attr.max_mr_size, 0u);
  EXPECT_GE(attr.max_pkeys, 1);
  // rdma-core's test_device requires these (a non-zero vendor: Soft-RoCE's).
  EXPECT_EQ(attr.vendor_id, 0xffffffu);
  EXPECT_NE(attr.node_guid, 0u);
  EXPECT_NE(attr.sys_image_guid, 0u);
  EXPECT_GE(attr.page_size_cap, 4096u);
  EXPECT_TRUE(attr.device_cap_flags & IBV_DEVICE_XRC);
  EXPECT_TRUE(attr.device_cap_flags & IBV_DEVICE_CURR_QP_STATE_MOD);
}

TEST_F(DeviceTest, QueryDeviceExAgreesWithQueryDevice) {
  ibv_device_attr attr{};
  ASSERT_EQ(ibv_query_device(ctx_, &attr), 0);
  ibv_device_attr_ex ex{};
  ASSERT_EQ(ibv_query_device_ex(ctx_, nullptr, &ex), 0);
  EXPECT_EQ(memcmp(&ex.orig_attr, &attr, sizeof(attr)), 0);
  EXPECT_EQ(ex.phys_port_cnt_ex, 1u);
  ibv_query_device_ex_input input{};
  ASSERT_EQ(ibv_query_device_ex(ctx_, &input, &ex), 0);
}

TEST_F(DeviceTest, QueryDeviceExRejectsUnknownInputCompMask) {
  ibv_query_device_ex_input input{};
  input.comp_mask = 1;
  ibv_device_attr_ex ex{};
  EXPECT_EQ(ibv_query_device_ex(ctx_, &input, &ex), EINVAL);
}

TEST_F(DeviceTest, QueryPortIsActiveEthernet) {
  ibv_port_attr port{};
  ASSERT_EQ(ibv_query_port(ctx_, 1, &port), 0);
  EXPECT_EQ(port.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(port.link_layer, IBV_LINK_LAYER_ETHERNET);
  EXPECT_GE(port.active_mtu, IBV_MTU_256);
  EXPECT_LE(port.active_mtu, port.max_mtu);
  EXPECT_GT(port.gid_tbl_len, 0);
  EXPECT_EQ(port.pkey_tbl_len, 1);
}

TEST_F(DeviceTest, QueryPortRejectsPortsOtherThan1) {
  ibv_port_attr port{};
  EXPECT_EQ(ibv_query_port(ctx_, 0, &port), EINVAL);
  EXPECT_EQ(ibv_query_port(ctx_, 2, &port), EINVAL);
}

TEST_F(DeviceTest, GidTableHasRoceV2Entries) {
  ibv_port_attr port{};
  ASSERT_EQ(ibv_query_port(ctx_, 1, &port), 0);
  std::vector<ibv_gid_entry> table(port.gid_tbl_len);
  ssize_t n = ibv_query_gid_table(ctx_, table.data(), table.size(), 0);
  ASSERT_GT(n, 0);
  bool has_v2 = false;
  for (ssize_t i = 0; i < n; ++i) {
    ibv_gid gid{};
    ASSERT_EQ(ibv_query_gid(ctx_, 1, table[i].gid_index, &gid), 0);
    EXPECT_EQ(memcmp(gid.raw, table[i].gid.raw, 16), 0) << "entry " << i;
    ibv_gid_entry one{};
    ASSERT_EQ(ibv_query_gid_ex(ctx_, 1, table[i].gid_index, &one, 0), 0);
    EXPECT_EQ(one.gid_type, table[i].gid_type);
    EXPECT_EQ(one.port_num, 1u);
    has_v2 |= table[i].gid_type == IBV_GID_TYPE_ROCE_V2;
  }
  EXPECT_TRUE(has_v2);
  EXPECT_GE(RoceV2GidIndex(ctx_), 0);
}

TEST_F(DeviceTest, GidQueriesRejectBadInput) {
  ibv_gid gid{};
  errno = 0;
  EXPECT_EQ(ibv_query_gid(ctx_, 2, 0, &gid), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(ibv_query_gid(ctx_, 1, -1, &gid), -1);
  EXPECT_EQ(errno, EINVAL);
  ibv_port_attr port{};
  ASSERT_EQ(ibv_query_port(ctx_, 1, &port), 0);
  errno = 0;
  EXPECT_EQ(ibv_query_gid(ctx_, 1, port.gid_tbl_len, &gid), -1);
  EXPECT_EQ(errno, EINVAL);
  ibv_gid_entry e{};
  EXPECT_EQ(ibv_query_gid_ex(ctx_, 2, 0, &e, 0), EINVAL);
  EXPECT_EQ(ibv_query_gid_ex(ctx_, 1, 0, &e, 1), EINVAL) << "unknown flags";
  // An index inside the table but without a GID: ENODATA (ibv_query_gid_ex(3)).
  std::vector<ibv_gid_entry> table(port.gid_tbl_len);
  ssize_t n = ibv_query_gid_table(ctx_, table.data(), table.size(), 0);
  if (n >= 0 && n < port.gid_tbl_len) {
    EXPECT_EQ(ibv_query_gid_ex(ctx_, 1, port.gid_tbl_len - 1, &e, 0), ENODATA);
  }
  EXPECT_LT(ibv_query_gid_table(ctx_, table.data(), 0, 0), 0) << "no room";
  EXPECT_LT(ibv_query_gid_table(ctx_, table.data(), table.size(), 1), 0) << "unknown flags";
}

TEST_F(DeviceTest, QueryGidTypeMatchesGidEntry) {
  int index = RoceV2GidIndex(ctx_);
  ASSERT_GE(index, 0);
  int type = -1;
  ASSERT_EQ(ibv_query_gid_type(ctx_, 1, index, &type), 0);
  EXPECT_EQ(type, 1) << "IBV_GID_TYPE_SYSFS_ROCE_V2";
  ibv_port_attr port{};
  ASSERT_EQ(ibv_query_port(ctx_, 1, &port), 0);
  errno = 0;
  EXPECT_EQ(ibv_query_gid_type(ctx_, 2, index, &type), -1);
  EXPECT_EQ(errno, EINVAL);
}

TEST_F(DeviceTest, PkeyTableHasTheDefaultPkey) {
  __be16 pkey = 0;
  ASSERT_EQ(ibv_query_pkey(ctx_, 1, 0, &pkey), 0);
  EXPECT_EQ(be16toh(pkey), 0xffff);
  EXPECT_EQ(ibv_get_pkey_index(ctx_, 1, htobe16(0xffff)), 0);
  // ibv_get_pkey_index(3): -1 on error; libibverbs compares entries exactly.
  errno = 0;
  EXPECT_EQ(ibv_get_pkey_index(ctx_, 1, htobe16(0x7fff)), -1) << "not an entry of the table";
  EXPECT_NE(errno, 0);
  EXPECT_EQ(ibv_get_pkey_index(ctx_, 1, htobe16(0x1234)), -1) << "not in the table";
  errno = 0;
  EXPECT_EQ(ibv_get_pkey_index(ctx_, 2, htobe16(0xffff)), -1) << "no port 2";
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(ibv_query_pkey(ctx_, 1, 1, &pkey), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(ibv_query_pkey(ctx_, 2, 0, &pkey), -1);
  EXPECT_EQ(errno, EINVAL);
}

TEST(Strings, HelpersNameKnownValuesAndSurviveUnknownOnes) {
  EXPECT_STREQ(ibv_node_type_str(IBV_NODE_CA), "InfiniBand channel adapter");
  EXPECT_STREQ(ibv_port_state_str(IBV_PORT_ACTIVE), "active");
  EXPECT_STREQ(ibv_event_type_str(IBV_EVENT_SQ_DRAINED), "send queue drained");
  EXPECT_STREQ(ibv_wc_status_str(IBV_WC_SUCCESS), "success");
  EXPECT_STREQ(ibv_wc_status_str(IBV_WC_WR_FLUSH_ERR), "Work Request Flushed Error");
  EXPECT_STREQ(ibv_node_type_str(static_cast<ibv_node_type>(1000)), "unknown");
  EXPECT_STREQ(ibv_port_state_str(static_cast<ibv_port_state>(1000)), "unknown");
  EXPECT_STREQ(ibv_event_type_str(static_cast<ibv_event_type>(1000)), "unknown");
  EXPECT_STREQ(ibv_wc_status_str(static_cast<ibv_wc_status>(1000)), "unknown");
  EXPECT_EQ(ibv_rate_to_mult(IBV_RATE_10_GBPS), 4);
  EXPECT_EQ(mult_to_ibv_rate(4), IBV_RATE_10_GBPS);
  EXPECT_EQ(ibv_rate_to_mbps(IBV_RATE_25_GBPS), 25781);
  EXPECT_EQ(mbps_to_ibv_rate(25781), IBV_RATE_25_GBPS);
}

}  // namespace
}  // namespace softverbs::it
