// Address handles: RoCE needs a GRH, the sgid_index must exist, and AHs can
// be built from a received work completion.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "test_env.h"

namespace softverbs::it {
namespace {

class AhTest : public ContextTest {
 protected:
  void ExpectCreateFails(ibv_ah_attr attr, int err, const char* what) {
    size_t before = MyObjectCount("ah");
    errno = 0;
    ibv_ah* ah = ibv_create_ah(pd_, &attr);
    EXPECT_EQ(ah, nullptr) << what;
    EXPECT_EQ(errno, err) << what;
    if (ah) ibv_destroy_ah(ah);
    EXPECT_EQ(MyObjectCount("ah"), before) << what;
  }
};

TEST_F(AhTest, CreateAndDestroyWithGrh) {
  ibv_ah_attr attr = LoopbackAh(ctx_);
  ibv_ah* ah = ibv_create_ah(pd_, &attr);
  ASSERT_NE(ah, nullptr) << strerror(errno);
  EXPECT_EQ(ah->pd, pd_);
  EXPECT_EQ(ah->context, ctx_);
  EXPECT_EQ(MyObjectCount("ah"), 1u);
  EXPECT_EQ(ibv_dealloc_pd(pd_), EBUSY) << "the AH holds the PD";
  EXPECT_EQ(ibv_destroy_ah(ah), 0);
  EXPECT_EQ(MyObjectCount("ah"), 0u);
}

TEST_F(AhTest, RoceRequiresGrh) {
  ibv_ah_attr attr = LoopbackAh(ctx_);
  attr.is_global = 0;
  attr.dlid = 1;
  ExpectCreateFails(attr, EINVAL, "no GRH on RoCE");
}

TEST_F(AhTest, SgidIndexMustBeInTheTable) {
  ibv_port_attr port{};
  ASSERT_EQ(ibv_query_port(ctx_, 1, &port), 0);
  ibv_ah_attr attr = LoopbackAh(ctx_);
  attr.grh.sgid_index = static_cast<uint8_t>(port.gid_tbl_len);
  ExpectCreateFails(attr, EINVAL, "sgid_index beyond gid_tbl_len");
  attr.grh.sgid_index = 255;
  ExpectCreateFails(attr, EINVAL, "sgid_index 255");
}

TEST_F(AhTest, PortMustExist) {
  ibv_ah_attr attr = LoopbackAh(ctx_);
  attr.port_num = 2;
  ExpectCreateFails(attr, EINVAL, "port 2");
}

// The index of a RoCE v2 GID of port 1 that is IPv4-mapped (-1 if none);
// its IPv4 address in *ipv4.
int V4MappedRoceV2GidIndex(ibv_context* ctx, uint8_t* ipv4) {
  ibv_port_attr port{};
  if (ibv_query_port(ctx, 1, &port) != 0) return -1;
  static const uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  for (int i = 0; i < port.gid_tbl_len; ++i) {
    ibv_gid_entry e{};
    if (ibv_query_gid_ex(ctx, 1, i, &e, 0) != 0 || e.gid_type != IBV_GID_TYPE_ROCE_V2) continue;
    if (memcmp(e.gid.raw, kPrefix, 12) == 0) {
      memcpy(ipv4, e.gid.raw + 12, 4);
      return i;
    }
  }
  return -1;
}

// An IPv6-layout GRH (RoCE v2: next header UDP) from 192.0.2.77 to `local`.
ibv_grh Ipv6Grh(const ibv_gid& local) {
  ibv_grh grh{};
  grh.version_tclass_flow = htonl((6u << 28) | (0x12u << 20) | 0x345);
  grh.next_hdr = IPPROTO_UDP;
  grh.hop_limit = 61;
  grh.dgid = local;
  grh.sgid.raw[10] = grh.sgid.raw[11] = 0xff;
  grh.sgid.raw[12] = 192;
  grh.sgid.raw[14] = 2;
  grh.sgid.raw[15] = 77;
  return grh;
}

TEST_F(AhTest, InitAhFromWcAnswersTheSender) {
  int v2 = RoceV2GidIndex(ctx_);
  ASSERT_GE(v2, 0);
  ibv_gid local{};
  ASSERT_EQ(ibv_query_gid(ctx_, 1, v2, &local), 0);
  ibv_grh grh = Ipv6Grh(local);
  ibv_wc wc{};
  wc.wc_flags = IBV_WC_GRH;
  wc.sl = 0;
  ibv_ah_attr attr{};
  ASSERT_EQ(ibv_init_ah_from_wc(ctx_, 1, &wc, &grh, &attr), 0);
  EXPECT_EQ(attr.is_global, 1);
  EXPECT_EQ(attr.port_num, 1);
  EXPECT_EQ(memcmp(attr.grh.dgid.raw, grh.sgid.raw, 16), 0) << "reply goes to the source";
  EXPECT_EQ(attr.grh.sgid_index, v2) << "from the GID the datagram reached";
  EXPECT_EQ(attr.grh.flow_label, 0x345u);
  EXPECT_EQ(attr.grh.traffic_class, 0x12);
  EXPECT_EQ(attr.grh.hop_limit, 61) << "the GRH's, as libibverbs";
  ibv_ah* ah = ibv_create_ah_from_wc(pd_, &wc, &grh, 1);
  ASSERT_NE(ah, nullptr) << strerror(errno);
  EXPECT_EQ(ibv_destroy_ah(ah), 0);
}

// From the network an IPv4 datagram's GRH holds 20 bytes of padding and its
// IPv4 header (rxe and softverbs alike): TTL and TOS are the reply's.
TEST_F(AhTest, InitAhFromWcReadsAnIpv4Header) {
  uint8_t ipv4[4];
  const int v2 = V4MappedRoceV2GidIndex(ctx_, ipv4);
  if (v2 < 0) GTEST_SKIP() << "no IPv4 address on this host's GID table";
  ibv_grh grh{};
  auto* ip = reinterpret_cast<uint8_t*>(&grh) + 20;
  const uint8_t header[20] = {0x45, 0x28, 0,   60, 0, 0,  0x40, 0, 33, IPPROTO_UDP,
                              0,    0,    192, 0,  2, 77, 0,    0, 0,  0};
  memcpy(ip, header, 20);
  memcpy(ip + 16, ipv4, 4);
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += (ip[i] << 8) | ip[i + 1];
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  ip[10] = static_cast<uint8_t>(~sum >> 8);
  ip[11] = static_cast<uint8_t>(~sum);
  ibv_wc wc{};
  wc.wc_flags = IBV_WC_GRH;
  ibv_ah_attr attr{};
  ASSERT_EQ(ibv_init_ah_from_wc(ctx_, 1, &wc, &grh, &attr), 0);
  EXPECT_EQ(attr.grh.sgid_index, v2);
  const uint8_t source[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 77};
  EXPECT_EQ(memcmp(attr.grh.dgid.raw, source, 16), 0);
  EXPECT_EQ(attr.grh.hop_limit, 33);
  EXPECT_EQ(attr.grh.traffic_class, 0x28);
  // A multicast IPv4 destination is not looked for.
  ip[16] = 239;
  errno = 0;
  EXPECT_EQ(ibv_init_ah_from_wc(ctx_, 1, &wc, &grh, &attr), -1);
  EXPECT_EQ(errno, EINVAL);
}

// As libibverbs v44: without IBV_WC_GRH the attributes are the WC's and 0
// (ibv_create_ah then refuses an AH without GRH on RoCE); with it, the
// GRH's destination must be one of the port's GIDs of the GRH's type.
TEST_F(AhTest, InitAhFromWcRejectsBadInput) {
  int v2 = RoceV2GidIndex(ctx_);
  ASSERT_GE(v2, 0);
  ibv_gid local{};
  ASSERT_EQ(ibv_query_gid(ctx_, 1, v2, &local), 0);
  ibv_wc wc{};
  wc.slid = 7;
  wc.sl = 2;
  ibv_grh grh = Ipv6Grh(local);
  ibv_ah_attr attr;
  memset(&attr, 0xa5, sizeof(attr));
  EXPECT_EQ(ibv_init_ah_from_wc(ctx_, 1, &wc, &grh, &attr), 0) << "no IBV_WC_GRH";
  EXPECT_EQ(attr.is_global, 0);
  EXPECT_EQ(attr.dlid, 7);
  EXPECT_EQ(attr.sl, 2);
  EXPECT_EQ(attr.port_num, 1);
  EXPECT_EQ(attr.grh.sgid_index, 0) << "zeroed";
  errno = 0;
  EXPECT_EQ(ibv_create_ah_from_wc(pd_, &wc, &grh, 1), nullptr) << "RoCE needs the GRH";
  EXPECT_EQ(errno, EINVAL);
  wc.wc_flags = IBV_WC_GRH;
  errno = 0;
  EXPECT_EQ(ibv_init_ah_from_wc(ctx_, 1, &wc, nullptr, &attr), -1) << "IBV_WC_GRH, grh NULL";
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(ibv_init_ah_from_wc(ctx_, 2, &wc, &grh, &attr), -1) << "port 2";
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(attr.port_num, 2) << "the WC's fields are set before the lookup fails";
  grh.next_hdr = 0x1b;  // RoCE v1: the same address's entry of that type
  ASSERT_EQ(ibv_init_ah_from_wc(ctx_, 1, &wc, &grh, &attr), 0) << "v1 header";
  ibv_gid_entry v1{};
  ASSERT_EQ(ibv_query_gid_ex(ctx_, 1, attr.grh.sgid_index, &v1, 0), 0);
  EXPECT_EQ(v1.gid_type, IBV_GID_TYPE_ROCE_V1);
  EXPECT_EQ(memcmp(v1.gid.raw, local.raw, 16), 0);
  grh.next_hdr = IPPROTO_TCP;
  errno = 0;
  EXPECT_EQ(ibv_init_ah_from_wc(ctx_, 1, &wc, &grh, &attr), -1) << "next header TCP";
  EXPECT_EQ(errno, EPROTONOSUPPORT);
  grh.next_hdr = IPPROTO_UDP;
  grh.dgid.raw[0] = 0xff;  // multicast
  errno = 0;
  EXPECT_EQ(ibv_init_ah_from_wc(ctx_, 1, &wc, &grh, &attr), -1) << "multicast destination";
  EXPECT_EQ(errno, EINVAL);
  // A GRH whose destination is not one of our GIDs.
  grh.dgid.raw[0] = 0x20;
  grh.dgid.raw[15] = 0x99;
  errno = 0;
  EXPECT_EQ(ibv_init_ah_from_wc(ctx_, 1, &wc, &grh, &attr), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ibv_create_ah_from_wc(pd_, &wc, &grh, 1), nullptr);
  // Neither IPv6 nor IPv4.
  ibv_grh unknown{};
  errno = 0;
  EXPECT_EQ(ibv_init_ah_from_wc(ctx_, 1, &wc, &unknown, &attr), -1);
  EXPECT_EQ(errno, EPROTONOSUPPORT);
  EXPECT_EQ(MyObjectCount("ah"), 0u);
}

}  // namespace
}  // namespace softverbs::it
