// kernel_view::Entries and Write: the files of softverbs0's kernel view for a
// given port (GID table), and how the tree on disk follows them.
#include "common/kernel_view.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace softverbs::kernel_view {
namespace {

constexpr const char* kPort = "sys/class/infiniband/softverbs0/ports/1/";

GidTable TableWithGids(int count) {
  GidTable t{};
  snprintf(t.netdev, sizeof(t.netdev), "veth7");
  const uint8_t mac[6] = {0x02, 0x42, 0xc6, 0x33, 0x64, 0x05};
  memcpy(t.mac, mac, 6);
  t.mtu = 1500;
  t.count = count;
  for (int i = 0; i < count; ++i) {
    uint8_t raw[16] = {0xfe, 0x80};
    raw[15] = static_cast<uint8_t>(i / 2 + 1);
    memcpy(t.gids[i].raw, raw, 16);
    t.gids[i].type = i % 2 ? GidType::kRoceV2 : GidType::kRoceV1;
  }
  return t;
}

const Entry* Find(const std::vector<Entry>& entries, const std::string& path) {
  for (const auto& e : entries) {
    if (e.path == path) return &e;
  }
  return nullptr;
}

std::string Content(const std::vector<Entry>& entries, const std::string& path) {
  const Entry* e = Find(entries, path);
  return e ? e->content : "<missing>";
}

TEST(KernelView, DeviceFilesFollowTheFacts) {
  auto entries = Entries(TableWithGids(2));
  // EUI-64 of 02:42:c6:33:64:05: U/L bit flipped, ff:fe in the middle.
  EXPECT_EQ(Content(entries, "sys/class/infiniband/softverbs0/node_guid"), "0042:c6ff:fe33:6405\n");
  EXPECT_EQ(Content(entries, "sys/class/infiniband/softverbs0/node_type"), "1: CA\n");
  EXPECT_EQ(Content(entries, std::string(kPort) + "state"), "4: ACTIVE\n");
  EXPECT_EQ(Content(entries, std::string(kPort) + "phys_state"), "5: LinkUp\n");
  EXPECT_EQ(Content(entries, std::string(kPort) + "rate"), "10 Gb/sec (4X SDR)\n");
  EXPECT_EQ(Content(entries, std::string(kPort) + "link_layer"), "Ethernet\n");
  EXPECT_EQ(Content(entries, std::string(kPort) + "pkeys/0"), "0xffff\n");
  const Entry* net = Find(entries, "sys/class/infiniband/softverbs0/device/net/veth7");
  ASSERT_NE(net, nullptr);
  EXPECT_EQ(net->kind, Kind::kSymlink);
  EXPECT_EQ(net->content, "/sys/class/net/veth7");
  const Entry* node = Find(entries, "dev/infiniband/uverbs0");
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->kind, Kind::kCharDevice);
  EXPECT_EQ(node->content, "231:192\n");
  EXPECT_EQ(Content(entries, "sys/class/infiniband_verbs/uverbs0/dev"), "231:192\n");
}

TEST(KernelView, EveryGidSlotAttributesOnlyForUsedOnes) {
  auto entries = Entries(TableWithGids(2));
  EXPECT_EQ(Content(entries, std::string(kPort) + "gids/1"),
            "fe80:0000:0000:0000:0000:0000:0000:0001\n");
  EXPECT_EQ(Content(entries, std::string(kPort) + "gids/15"),
            "0000:0000:0000:0000:0000:0000:0000:0000\n");
  EXPECT_EQ(Content(entries, std::string(kPort) + "gid_attrs/types/0"), "IB/RoCE v1\n");
  EXPECT_EQ(Content(entries, std::string(kPort) + "gid_attrs/types/1"), "RoCE v2\n");
  EXPECT_EQ(Content(entries, std::string(kPort) + "gid_attrs/ndevs/1"), "veth7\n");
  EXPECT_EQ(Find(entries, std::string(kPort) + "gid_attrs/types/2"), nullptr);
  EXPECT_EQ(Find(entries, std::string(kPort) + "gid_attrs/ndevs/2"), nullptr);
}

TEST(KernelView, LookupAnswersFilesByTheirPublicPath) {
  auto entries = Entries(TableWithGids(2));
  std::string value;
  ASSERT_TRUE(Lookup(entries, "/sys/class/infiniband/softverbs0/fw_ver", &value));
  EXPECT_FALSE(value.empty());
  EXPECT_FALSE(Lookup(entries, "/sys/class/infiniband/softverbs0/no_such_file", &value));
  // Not a file: a link and the device node are not sysfs attributes.
  EXPECT_FALSE(Lookup(entries, "/dev/infiniband/uverbs0", &value));
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(KernelView, WriteFollowsTheEntriesAndRemovesStaleFiles) {
  char tmpl[] = "/tmp/sv-kv-unit-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string root = std::string(tmpl) + "/kernel-view";
  std::string why;
  ASSERT_EQ(Write(root, Entries(TableWithGids(4)), &why), 0) << why;
  const std::string types3 = root + "/" + kPort + "gid_attrs/types/3";
  EXPECT_EQ(ReadAll(types3), "RoCE v2\n");
  struct stat st;
  ASSERT_EQ(stat((root + "/dev/infiniband/uverbs0").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666u);
  ASSERT_EQ(stat((root + "/" + kPort + "state").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u);
  // The interface lost an address: two GIDs fewer, their files go.
  ASSERT_EQ(Write(root, Entries(TableWithGids(2)), &why), 0) << why;
  EXPECT_NE(access(types3.c_str(), F_OK), 0);
  EXPECT_EQ(ReadAll(root + "/" + kPort + "gids/3"), "0000:0000:0000:0000:0000:0000:0000:0000\n");
  // Writing the same entries again changes nothing (same inode).
  ASSERT_EQ(stat((root + "/" + kPort + "rate").c_str(), &st), 0);
  ino_t before = st.st_ino;
  ASSERT_EQ(Write(root, Entries(TableWithGids(2)), &why), 0) << why;
  ASSERT_EQ(stat((root + "/" + kPort + "rate").c_str(), &st), 0);
  EXPECT_EQ(st.st_ino, before);
  std::string cmd = std::string("rm -rf ") + tmpl;
  EXPECT_EQ(system(cmd.c_str()), 0);
}

}  // namespace
}  // namespace softverbs::kernel_view
