// Which address vectors leave the host (common/gid_table.h PathLeavesHost): a GRH whose
// destination GID is not in the port's GID table, unless it is multicast.
#include <gtest/gtest.h>
#include <string.h>

#include "common/gid_table.h"

namespace softverbs {
namespace {

GidTable TwoGids() {
  GidTable t{};
  const uint8_t link_local[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  const uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 51, 100, 1};
  memcpy(t.gids[0].raw, link_local, 16);
  memcpy(t.gids[1].raw, v4, 16);
  t.count = 2;
  return t;
}

ibv_ah_attr Global(const uint8_t dgid[16]) {
  ibv_ah_attr ah{};
  ah.is_global = 1;
  memcpy(ah.grh.dgid.raw, dgid, 16);
  return ah;
}

TEST(GidTableHas, FindsOnlyItsEntries) {
  GidTable t = TwoGids();
  EXPECT_TRUE(GidTableHas(t, t.gids[0].raw));
  EXPECT_TRUE(GidTableHas(t, t.gids[1].raw));
  uint8_t other[16];
  memcpy(other, t.gids[1].raw, 16);
  other[15] = 2;  // 198.51.100.2
  EXPECT_FALSE(GidTableHas(t, other));
  t.count = 1;  // entries past count do not count
  EXPECT_FALSE(GidTableHas(t, t.gids[1].raw));
}

TEST(PathLeavesHost, OnlyAForeignUnicastGid) {
  const GidTable t = TwoGids();
  EXPECT_FALSE(PathLeavesHost(t, Global(t.gids[1].raw)));
  uint8_t other[16];
  memcpy(other, t.gids[1].raw, 16);
  other[15] = 2;
  EXPECT_TRUE(PathLeavesHost(t, Global(other)));
  const uint8_t mcast[16] = {0xff, 0x0e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7};
  EXPECT_FALSE(PathLeavesHost(t, Global(mcast)));
  ibv_ah_attr no_grh = Global(other);
  no_grh.is_global = 0;  // no GRH: local, as before
  EXPECT_FALSE(PathLeavesHost(t, no_grh));
}

}  // namespace
}  // namespace softverbs
