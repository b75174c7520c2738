#include "datapath/block_signature.h"

#include <array>

namespace softverbs::datapath {

namespace {

// Byte-at-a-time tables of the three CRCs.
constexpr std::array<uint32_t, 256> ReflectedTable(uint32_t poly) {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ poly : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint16_t, 256> Crc16Table(uint16_t poly) {
  std::array<uint16_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint16_t c = static_cast<uint16_t>(i << 8);
    for (int k = 0; k < 8; ++k) {
      c = (c & 0x8000) ? static_cast<uint16_t>((c << 1) ^ poly) : static_cast<uint16_t>(c << 1);
    }
    t[i] = c;
  }
  return t;
}
constexpr auto kCrc32Table = ReflectedTable(0xEDB88320u);   // IEEE 802.3, reflected
constexpr auto kCrc32cTable = ReflectedTable(0x82F63B78u);  // Castagnoli, reflected
constexpr auto kCrc16Table = Crc16Table(0x8BB7);            // T10-DIF

uint32_t ReflectedCrc(const std::array<uint32_t, 256>& table, uint32_t init, const uint8_t* data,
                      uint64_t len) {
  uint32_t c = init;
  for (uint64_t i = 0; i < len; ++i) c = table[(c ^ data[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

void PutBe(uint64_t v, uint32_t bytes, uint8_t* out) {
  for (uint32_t i = 0; i < bytes; ++i) out[i] = static_cast<uint8_t>(v >> (8 * (bytes - 1 - i)));
}

uint64_t BeWord(const uint8_t b[kMaxSigBytes]) {
  uint64_t v = 0;
  for (uint32_t i = 0; i < kMaxSigBytes; ++i) v = v << 8 | b[i];
  return v;
}

bool IsDif(const SigDomain& d) {
  return d.kind == kSigT10DifCrc || d.kind == kSigT10DifCsum;
}

}  // namespace

uint32_t Crc32(uint32_t init, const uint8_t* data, uint64_t len) {
  return ReflectedCrc(kCrc32Table, init, data, len);
}
uint32_t Crc32c(uint32_t init, const uint8_t* data, uint64_t len) {
  return ReflectedCrc(kCrc32cTable, init, data, len);
}
uint16_t Crc16T10Dif(uint16_t init, const uint8_t* data, uint64_t len) {
  uint16_t c = init;
  for (uint64_t i = 0; i < len; ++i) {
    c = static_cast<uint16_t>((c << 8) ^ kCrc16Table[((c >> 8) ^ data[i]) & 0xff]);
  }
  return c;
}
uint16_t IpChecksum(uint16_t seed, const uint8_t* data, uint64_t len) {
  uint64_t sum = seed;
  uint64_t i = 0;
  for (; i + 1 < len; i += 2) sum += uint32_t{data[i]} << 8 | data[i + 1];
  if (i < len) sum += uint32_t{data[i]} << 8;
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

uint32_t SigBytes(const SigDomain& d) {
  switch (d.kind) {
    case kSigCrc32:
    case kSigCrc32c:
      return 4;
    case kSigT10DifCrc:
    case kSigT10DifCsum:
      return 8;
    default:
      return 0;
  }
}

bool ValidSigDomain(const SigDomain& d) {
  if (d.kind == kSigNone) return true;
  if (d.kind > kSigT10DifCsum) return false;
  switch (d.block_size) {
    case 512:
    case 520:
    case 4048:
    case 4096:
    case kMaxSigBlock:
      return true;
    default:
      return false;
  }
}

void ComputeSig(const SigDomain& d, uint64_t block, const uint8_t* data, uint32_t len,
                uint8_t out[kMaxSigBytes]) {
  switch (d.kind) {
    case kSigCrc32:
      PutBe(Crc32(d.seed_ones ? 0xFFFFFFFFu : 0, data, len), 4, out);
      return;
    case kSigCrc32c:
      PutBe(Crc32c(d.seed_ones ? 0xFFFFFFFFu : 0, data, len), 4, out);
      return;
    case kSigT10DifCrc:
    case kSigT10DifCsum: {
      const uint16_t seed = d.seed_ones ? 0xffff : 0;
      const uint16_t guard =
          d.kind == kSigT10DifCrc ? Crc16T10Dif(seed, data, len) : IpChecksum(seed, data, len);
      const uint32_t ref = (d.dif_flags & 1 /* MLX5DV_SIG_T10DIF_FLAG_REF_REMAP */)
                               ? static_cast<uint32_t>(d.ref_tag + block)
                               : d.ref_tag;
      PutBe(guard, 2, out);
      PutBe(d.app_tag, 2, out + 2);
      PutBe(ref, 4, out + 4);
      return;
    }
    default:
      return;
  }
}

bool SigMismatch(const SigDomain& d, uint8_t domain, const uint8_t expected[kMaxSigBytes],
                 const uint8_t got[kMaxSigBytes], uint8_t have_mask, uint8_t check_mask,
                 SigError* err) {
  const uint32_t n = SigBytes(d);
  if (IsDif(d)) {
    // MLX5DV_SIG_T10DIF_FLAG_APP_ESCAPE (2), _APP_REF_ESCAPE (4): a block
    // whose tags say so is not checked.
    const bool app_here = (have_mask & 0x30) == 0x30;
    const bool ref_here = (have_mask & 0x0f) == 0x0f;
    const bool app_escaped = app_here && got[2] == 0xff && got[3] == 0xff;
    const bool ref_escaped =
        ref_here && got[4] == 0xff && got[5] == 0xff && got[6] == 0xff && got[7] == 0xff;
    if ((d.dif_flags & 4) ? (app_escaped && ref_escaped) : ((d.dif_flags & 2) && app_escaped)) {
      return false;
    }
  }
  uint8_t syndrome = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const uint8_t bit = SigByteBit(i);
    if (!(have_mask & bit) || !(check_mask & bit) || got[i] == expected[i]) continue;
    if (!IsDif(d) || i < 2) {
      syndrome |= kSigBadGuard;
    } else if (i < 4) {
      syndrome |= kSigBadAppTag;
    } else {
      syndrome |= kSigBadRefTag;
    }
  }
  if (!syndrome) return false;
  uint8_t shown[kMaxSigBytes] = {};
  for (uint32_t i = 0; i < n; ++i) shown[i] = (have_mask & SigByteBit(i)) ? got[i] : 0;
  uint8_t want[kMaxSigBytes] = {};
  for (uint32_t i = 0; i < n; ++i) want[i] = expected[i];
  *err = SigError{domain, syndrome, d.kind, 0, 0, BeWord(want), BeWord(shown), 0};
  return true;
}

SigGeometry SigGeometryOf(const SigAttr& attr, uint64_t mem_length) {
  SigGeometry g;
  g.data = attr.mem.kind != kSigNone ? attr.mem.block_size : attr.wire.block_size;
  g.mem_sig = SigBytes(attr.mem);
  g.wire_sig = SigBytes(attr.wire);
  if (g.data == 0) return g;
  g.blocks = mem_length / g.mem_block();
  const uint64_t rest = mem_length % g.mem_block();
  g.tail = static_cast<uint32_t>(rest < g.data ? rest : g.data);
  return g;
}

const char* SigAttrProblem(const SigAttr& attr) {
  if (!ValidSigDomain(attr.mem) || !ValidSigDomain(attr.wire)) {
    return "a domain's signature kind or block size is not one softverbs computes";
  }
  if (attr.mem.kind == kSigNone && attr.wire.kind == kSigNone) return "neither domain is signed";
  if (attr.mem.kind != kSigNone && attr.wire.kind != kSigNone &&
      attr.mem.block_size != attr.wire.block_size) {
    return "the memory and wire domains have different block sizes";
  }
  // T10-DIF in both (whatever their guards), or one CRC in both.
  const bool one_family = IsDif(attr.mem) ? IsDif(attr.wire) : attr.mem.kind == attr.wire.kind;
  if (attr.copy_mask && (attr.mem.kind == kSigNone || !one_family)) {
    return "a copy mask needs both domains signed alike (T10-DIF in both, or one CRC)";
  }
  return nullptr;
}

}  // namespace softverbs::datapath
