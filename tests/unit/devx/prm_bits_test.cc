#include "prm_bits.h"

#include <gtest/gtest.h>

#include <vector>

#include "prm_test_box.h"

namespace softverbs::devx {
namespace {

using prm_test::ReadBits;

TEST(PrmBitsTest, OpcodeIsTheHighHalfOfDwordZero) {
  std::vector<uint8_t> box(8, 0);
  SetField(box, {0x00, 16}, 0x0503);
  SetField(box, {0x10, 16}, 0xbeef);
  EXPECT_EQ(box[0], 0x05);
  EXPECT_EQ(box[1], 0x03);
  EXPECT_EQ(box[2], 0xbe);
  EXPECT_EQ(box[3], 0xef);
  EXPECT_EQ(GetField(box, {0x00, 16}), 0x0503u);
}

TEST(PrmBitsTest, NarrowFieldsKeepTheirNeighbours) {
  std::vector<uint8_t> box(16, 0xff);
  SetField(box, {0x49, 4}, 0x0);  // qpc.log_rq_size, DW2[22:19]
  EXPECT_EQ(GetField(box, {0x49, 4}), 0u);
  EXPECT_EQ(ReadBits(box, 0x40, 9), 0x1ffu);
  EXPECT_EQ(ReadBits(box, 0x4d, 19), 0x7ffffu);
}

TEST(PrmBitsTest, AgreesWithTheIndependentBitReader) {
  std::vector<uint8_t> box(16, 0);
  const Field fields[] = {{0x00, 4}, {0x08, 8}, {0x13, 2}, {0x28, 24}, {0x43, 5}, {0x60, 32}};
  uint32_t value = 0x9e3779b9;
  for (const Field& field : fields) {
    SetField(box, field, value);
    const uint32_t mask = field.width == 32 ? 0xffffffffu : (1u << field.width) - 1;
    EXPECT_EQ(ReadBits(box, field.offset, field.width), value & mask);
    EXPECT_EQ(GetField(box, field), value & mask);
    value = value * 2654435761u + 1;
  }
}

TEST(PrmBitsTest, SixtyFourBitFieldsAreBigEndian) {
  std::vector<uint8_t> box(16, 0);
  SetField64(box, ByteField(0x08, 8), 0x0102030405060708ull);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(box[8 + i], i + 1);
  EXPECT_EQ(GetField64(box, ByteField(0x08, 8)), 0x0102030405060708ull);
}

TEST(PrmBitsTest, ShortBoxesReadZeroAndDropWrites) {
  std::vector<uint8_t> box(6, 0xff);
  EXPECT_EQ(GetField(box, {0x20, 32}), 0xffff0000u);
  EXPECT_EQ(GetField(box, {0x40, 24}), 0u);
  SetField(box, {0x20, 32}, 0x12345678);
  EXPECT_EQ(box[4], 0x12);
  EXPECT_EQ(box[5], 0x34);
  SetField(box, {0x400, 8}, 1);  // entirely past the end: nothing happens
}

TEST(PrmBitsTest, CopyFieldMovesAnUnalignedWideField) {
  std::vector<uint8_t> src(64), dst(64, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 37 + 1);
  const Field path{0x0c, 352};  // starts mid-dword, spans 12 dwords
  CopyField(dst, src, path);
  EXPECT_EQ(ReadBits(dst, 0x0c, 64), ReadBits(src, 0x0c, 64));
  EXPECT_EQ(ReadBits(dst, 0x0c + 288, 64), ReadBits(src, 0x0c + 288, 64));
  EXPECT_EQ(ReadBits(dst, 0, 12), 0u);
  EXPECT_EQ(ReadBits(dst, 0x0c + 352, 64), 0u);
}

TEST(PrmBitsTest, SubBoxOfAShortBoxIsEmpty) {
  std::vector<uint8_t> box(8);
  EXPECT_TRUE(SubBox(std::span<uint8_t>(box), 8).empty());
  EXPECT_EQ(SubBox(std::span<uint8_t>(box), 2).size(), 6u);
}

}  // namespace
}  // namespace softverbs::devx
