// Block signatures (datapath/block_signature.h, sig_access.h): the three
// checksums against their published check values, a block's signature and
// its check, the geometry of a key's two domains, and the access that signs
// and checks on the way through - in whole and cut into the slices packets
// make of it.
#include "datapath/block_signature.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <vector>

#include "datapath/sig_access.h"
#include "reference_crc.h"

namespace softverbs::datapath {
namespace {

using softverbs_test::BitwiseT10Dif;

const uint8_t kCheck[] = {'1', '2', '3', '4', '5', '6', '7', '8', '9'};

// The "check" value of each CRC's catalogue entry (the CRC of "123456789").
TEST(BlockSignature, ChecksumsMatchTheirPublishedCheckValues) {
  EXPECT_EQ(Crc32(0xFFFFFFFFu, kCheck, 9), 0xCBF43926u);   // CRC-32/ISO-HDLC
  EXPECT_EQ(Crc32c(0xFFFFFFFFu, kCheck, 9), 0xE3069283u);  // CRC-32/ISCSI
  EXPECT_EQ(Crc16T10Dif(0, kCheck, 9), 0xD0DBu);           // CRC-16/T10-DIF
  // RFC 1071's example words 0x0001 0xf203 0xf4f5 0xf6f7: sum 0xddf2.
  const uint8_t words[] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
  EXPECT_EQ(IpChecksum(0, words, sizeof(words)), static_cast<uint16_t>(~0xddf2));
}

SigDomain Dif(uint16_t app, uint32_t ref, uint16_t flags, uint16_t block = 512) {
  return SigDomain{kSigT10DifCrc, 0, flags, block, app, ref};
}

TEST(BlockSignature, AT10DifSignatureIsGuardAppTagAndRefTagBigEndian) {
  std::vector<uint8_t> data(512);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 13);
  uint8_t sig[kMaxSigBytes] = {};
  ComputeSig(Dif(0xabcd, 0x01020304, 1 /* REF_REMAP */), 5, data.data(), 512, sig);
  const uint16_t guard = Crc16T10Dif(0, data.data(), 512);
  const uint8_t want[8] = {static_cast<uint8_t>(guard >> 8),
                           static_cast<uint8_t>(guard),
                           0xab,
                           0xcd,
                           0x01,
                           0x02,
                           0x03,
                           0x09};
  EXPECT_EQ(memcmp(sig, want, 8), 0);
  // Without REF_REMAP every block has the first block's reference tag.
  ComputeSig(Dif(0xabcd, 0x01020304, 0), 5, data.data(), 512, sig);
  EXPECT_EQ(sig[7], 0x04);
}

TEST(BlockSignature, AMismatchNamesTheFieldsThatDifferAndTheEscapesHold) {
  const SigDomain d = Dif(0x1111, 7, 2 /* APP_ESCAPE */);
  const uint8_t want[8] = {0x12, 0x34, 0x11, 0x11, 0, 0, 0, 7};
  uint8_t got[8] = {0x12, 0x34, 0x11, 0x11, 0, 0, 0, 8};
  SigError err{};
  ASSERT_TRUE(SigMismatch(d, kSigDomainWire, want, got, 0xff, 0xff, &err));
  EXPECT_EQ(err.syndrome, kSigBadRefTag);
  EXPECT_EQ(err.expected, 0x1234111100000007ull);
  EXPECT_EQ(err.actual, 0x1234111100000008ull);
  // Not checked: the reference tag's bytes out of the check mask.
  EXPECT_FALSE(SigMismatch(d, kSigDomainWire, want, got, 0xff, 0xf0, &err));
  // Not here: bytes the access did not carry are not judged.
  EXPECT_FALSE(SigMismatch(d, kSigDomainWire, want, got, 0xf0, 0xff, &err));
  // The application tag 0xffff escapes the block (APP_ESCAPE), bad guard or not.
  uint8_t escaped[8] = {0, 0, 0xff, 0xff, 0, 0, 0, 9};
  EXPECT_FALSE(SigMismatch(d, kSigDomainWire, want, escaped, 0xff, 0xff, &err));
  // Without the flag it is an application tag and guard error.
  ASSERT_TRUE(SigMismatch(Dif(0x1111, 7, 0), kSigDomainWire, want, escaped, 0xff, 0xff, &err));
  EXPECT_EQ(err.syndrome, kSigBadGuard | kSigBadAppTag | kSigBadRefTag);
}

TEST(BlockSignature, TheGeometryOfAKeyCountsWholeBlocksOnly) {
  SigAttr a{};
  a.mem = SigDomain{kSigCrc32, 1, 0, 512, 0, 0};
  a.enabled = 1;
  // 2 blocks of 512 + 4 in memory, and 100 bytes of a third: data only.
  SigGeometry g = SigGeometryOf(a, 2 * 516 + 100);
  EXPECT_EQ(g.blocks, 2u);
  EXPECT_EQ(g.tail, 100u);
  EXPECT_EQ(g.wire_length(), 2u * 512 + 100);
  a.wire = Dif(0, 0, 0);
  g = SigGeometryOf(a, 2 * 516);
  EXPECT_EQ(g.wire_length(), 2u * 520);
  EXPECT_STREQ(SigAttrProblem(a), nullptr);
  a.wire.block_size = 4096;
  EXPECT_NE(SigAttrProblem(a), nullptr);
  a.wire.block_size = 513;
  EXPECT_NE(SigAttrProblem(a), nullptr);
}

// A host that records the bad signatures reported.
class RecordingHost final : public Host {
 public:
  uint32_t client_id() const override { return 1; }
  const DeviceTable& table() const override { return table_; }
  PeerQp* FindPeerQp(uint32_t, uint32_t) override { return nullptr; }
  const MrMapping* FindMrMapping(uint32_t, const MrEntry&) override { return nullptr; }
  void SetQpError(uint32_t) override {}
  void SrqLimitReached(uint32_t) override {}
  PeerQp* FindXrcSrq(uint32_t) override { return nullptr; }
  void RaiseQpEvent(uint32_t, ibv_event_type) override {}
  void McastMembers(const uint8_t*, std::vector<uint32_t>*) override {}
  void ReportSigError(uint32_t key, const SigError& err) override { errors.emplace_back(key, err); }
  std::vector<std::pair<uint32_t, SigError>> errors;

 private:
  DeviceTable table_;
};

// A key's memory domain as one buffer of this process.
class BufferMemory final : public KeyMemory {
 public:
  explicit BufferMemory(std::vector<uint8_t>* bytes) : bytes_(bytes) {}
  VendorError Add(uint64_t offset, uint64_t len, PieceList* out) override {
    if (offset + len > bytes_->size()) return kVendorLkeyRange;
    return out->Add(MemPiece{bytes_->data() + offset, -1, 0, len}) ? kVendorNone : kVendorLkeyRange;
  }

 private:
  std::vector<uint8_t>* bytes_;
};

// Reads [offset, +len) of the key's wire space through the access.
std::vector<uint8_t> ReadWire(RecordingHost& host, const SigAttr& a, std::vector<uint8_t>* mem,
                              uint64_t offset, uint64_t len) {
  BufferMemory memory(mem);
  PieceList src;
  EXPECT_EQ(
      AddSignedPieces(host, 7, a, mem->size(), false, offset, len, memory, kVendorLkeyRange, &src),
      kVendorNone);
  std::vector<uint8_t> out(len);
  PieceList dst;
  dst.Add(MemPiece{out.data(), -1, 0, len});
  EXPECT_TRUE(CopyPieces(dst, src));
  return out;
}

// Writes bytes into [offset, +len) of the key's wire space through the access.
void WriteWire(RecordingHost& host, const SigAttr& a, std::vector<uint8_t>* mem, uint64_t offset,
               std::vector<uint8_t> bytes) {
  BufferMemory memory(mem);
  PieceList dst;
  EXPECT_EQ(AddSignedPieces(host, 7, a, mem->size(), true, offset, bytes.size(), memory,
                            kVendorLkeyRange, &dst),
            kVendorNone);
  PieceList src;
  src.Add(MemPiece{bytes.data(), -1, 0, bytes.size()});
  EXPECT_TRUE(CopyPieces(dst, src));
}

// The wire image of blocks of data with a T10-DIF after each (an
// independent bitwise CRC-16/T10-DIF, reference_crc.h).
std::vector<uint8_t> DifWire(const std::vector<uint8_t>& data, uint16_t app, uint32_t ref) {
  std::vector<uint8_t> wire;
  for (size_t b = 0; b * 512 < data.size(); ++b) {
    const uint8_t* p = data.data() + b * 512;
    wire.insert(wire.end(), p, p + 512);
    const uint16_t g = BitwiseT10Dif(p, 512);
    const uint32_t r = ref + static_cast<uint32_t>(b);
    const uint8_t dif[8] = {static_cast<uint8_t>(g >> 8),   static_cast<uint8_t>(g),
                            static_cast<uint8_t>(app >> 8), static_cast<uint8_t>(app),
                            static_cast<uint8_t>(r >> 24),  static_cast<uint8_t>(r >> 16),
                            static_cast<uint8_t>(r >> 8),   static_cast<uint8_t>(r)};
    wire.insert(wire.end(), dif, dif + 8);
  }
  return wire;
}

SigAttr WireDif() {
  SigAttr a{};
  a.wire = Dif(0x5a5a, 1000, 1 /* REF_REMAP */);
  a.check_mask = 0xff;
  a.enabled = 1;
  return a;
}

std::vector<uint8_t> Pattern(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 31 + i / 7);
  return v;
}

TEST(SigAccess, ReadingAWireDifKeyInsertsEachBlocksDif) {
  RecordingHost host;
  std::vector<uint8_t> mem = Pattern(3 * 512);
  const std::vector<uint8_t> want = DifWire(mem, 0x5a5a, 1000);
  EXPECT_EQ(ReadWire(host, WireDif(), &mem, 0, want.size()), want);
  // Any slice of it, as packets take it: the same bytes.
  for (uint64_t at = 0; at < want.size(); at += 100) {
    const uint64_t n = std::min<uint64_t>(100, want.size() - at);
    EXPECT_EQ(ReadWire(host, WireDif(), &mem, at, n),
              std::vector<uint8_t>(want.begin() + at, want.begin() + at + n))
        << "slice at " << at;
  }
  EXPECT_TRUE(host.errors.empty());
}

TEST(SigAccess, WritingAWireDifKeyStripsAndChecksEachBlock) {
  RecordingHost host;
  const std::vector<uint8_t> data = Pattern(3 * 512);
  std::vector<uint8_t> wire = DifWire(data, 0x5a5a, 1000);
  std::vector<uint8_t> mem(3 * 512, 0);
  // In 97-byte slices: each a separate access.
  for (uint64_t at = 0; at < wire.size(); at += 97) {
    const uint64_t n = std::min<uint64_t>(97, wire.size() - at);
    WriteWire(host, WireDif(), &mem, at,
              std::vector<uint8_t>(wire.begin() + at, wire.begin() + at + n));
  }
  EXPECT_EQ(mem, data);
  EXPECT_TRUE(host.errors.empty());
  // Block 1's reference tag is off by one: reported, with its offset; the
  // data lands all the same.
  wire[520 + 519] ^= 1;
  std::fill(mem.begin(), mem.end(), 0);
  WriteWire(host, WireDif(), &mem, 0, wire);
  EXPECT_EQ(mem, data);
  ASSERT_EQ(host.errors.size(), 1u);
  EXPECT_EQ(host.errors[0].first, 7u);
  EXPECT_EQ(host.errors[0].second.domain, kSigDomainWire);
  EXPECT_EQ(host.errors[0].second.syndrome, kSigBadRefTag);
  EXPECT_EQ(host.errors[0].second.offset, 520u);
  EXPECT_EQ(host.errors[0].second.expected & 0xffffffff, 1001u);
  EXPECT_EQ(host.errors[0].second.actual & 0xffffffff, 1001u ^ 1);
}

TEST(SigAccess, AMemoryCrcIsWrittenOnTheWayInAndCheckedOnTheWayOut) {
  RecordingHost host;
  SigAttr a{};
  a.mem = SigDomain{kSigCrc32c, 1, 0, 512, 0, 0};
  a.check_mask = 0xf0;
  a.enabled = 1;
  const std::vector<uint8_t> data = Pattern(2 * 512);
  std::vector<uint8_t> mem(2 * 516, 0xee);
  WriteWire(host, a, &mem, 0, data);
  for (int b = 0; b < 2; ++b) {
    EXPECT_EQ(memcmp(mem.data() + b * 516, data.data() + b * 512, 512), 0);
    const uint32_t crc = Crc32c(0xFFFFFFFFu, data.data() + b * 512, 512);
    const uint8_t be[4] = {static_cast<uint8_t>(crc >> 24), static_cast<uint8_t>(crc >> 16),
                           static_cast<uint8_t>(crc >> 8), static_cast<uint8_t>(crc)};
    EXPECT_EQ(memcmp(mem.data() + b * 516 + 512, be, 4), 0) << "block " << b;
  }
  EXPECT_EQ(ReadWire(host, a, &mem, 0, 1024), data);
  EXPECT_TRUE(host.errors.empty());
  mem[516 + 512] ^= 0x80;
  EXPECT_EQ(ReadWire(host, a, &mem, 0, 1024), data);
  ASSERT_EQ(host.errors.size(), 1u);
  EXPECT_EQ(host.errors[0].second.domain, kSigDomainMemory);
  EXPECT_EQ(host.errors[0].second.syndrome, kSigBadGuard);
  EXPECT_EQ(host.errors[0].second.offset, 512u);
}

TEST(SigAccess, TheCopyMaskCarriesTheMemorysBytesToTheWire) {
  RecordingHost host;
  SigAttr a{};
  a.mem = SigDomain{kSigCrc32, 1, 0, 512, 0, 0};
  a.wire = a.mem;
  a.copy_mask = 0xf0;
  a.enabled = 1;
  std::vector<uint8_t> mem = Pattern(516);
  mem[512] = 0xde, mem[513] = 0xad, mem[514] = 0xbe, mem[515] = 0xef;
  const std::vector<uint8_t> wire = ReadWire(host, a, &mem, 0, 516);
  EXPECT_EQ(std::vector<uint8_t>(wire.begin(), wire.begin() + 512),
            std::vector<uint8_t>(mem.begin(), mem.begin() + 512));
  EXPECT_EQ(wire[512], 0xde);
  EXPECT_EQ(wire[515], 0xef);
  // Nothing checked (no check mask): no error for the bad CRC.
  EXPECT_TRUE(host.errors.empty());
}

TEST(SigAccess, AnAccessPastTheWireSpaceIsRefused) {
  RecordingHost host;
  std::vector<uint8_t> mem(512);
  BufferMemory memory(&mem);
  PieceList out;
  EXPECT_EQ(AddSignedPieces(host, 7, WireDif(), mem.size(), false, 0, 521, memory, kVendorLkeyRange,
                            &out),
            kVendorLkeyRange);
  EXPECT_EQ(AddSignedPieces(host, 7, WireDif(), mem.size(), false, 0, 520, memory, kVendorLkeyRange,
                            &out),
            kVendorNone);
}

}  // namespace
}  // namespace softverbs::datapath
