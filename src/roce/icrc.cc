#include "roce/icrc.h"

#include <zlib.h>
#ifdef SOFTVERBS_HAVE_ISAL
#include <isa-l/crc.h>
#endif
#ifdef __x86_64__
#include <immintrin.h>
#endif

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>

#include "roce/headers.h"
#include "roce/ip_headers.h"

namespace softverbs::roce {
namespace {

constexpr size_t kMaxMasked = sizeof(Ipv6Header) + sizeof(UdpHeader) + sizeof(Bth);
// A packet whose transport part is at most this long is CRCed in one call
// (headers and all copied together): a CRC call's fixed cost is most of the
// work for the small packets of an 8-byte message rate.
constexpr size_t kOneCallBytes = 256;

// zlib's crc32 (CRC-32, reflected 0xEDB88320, pre- and post-inverted);
// ISA-L's crc32_gzip_refl computes the same value with carry-less
// multiplication (roce_unit.RocePacket.SameBytesAsScapy and the captures
// checked by scapy hold either way).
//
// ISA-L's AVX-512 path (longer inputs) returns with the upper halves of the
// vector registers in use (no VZEROUPPER), and on these Xeons every SSE
// instruction the daemon runs after that pays for it: the whole packet
// path took about twice the CPU, and an 8-byte message rate that followed
// a run of 1 KiB packets stayed at 0.6 instead of 1.0 M msg/s until the
// daemon restarted (docs/roce.md). So the upper halves are cleared after
// each call, where the CPU has them (AVX).
#if defined(SOFTVERBS_HAVE_ISAL) && defined(__x86_64__)
// A call: every vector register is the caller's to save, so nothing the
// compiler keeps in one lives across it.
__attribute__((target("avx"), noinline)) void ZeroUpperHalves() {
  _mm256_zeroupper();
}

void AfterVectorCode() {
  static const bool has_avx = __builtin_cpu_supports("avx");
  if (has_avx) ZeroUpperHalves();
}
#elif defined(SOFTVERBS_HAVE_ISAL)
void AfterVectorCode() {}
#endif

uint32_t Crc(uint32_t crc, const uint8_t* p, size_t n) {
#ifdef SOFTVERBS_HAVE_ISAL
  const uint32_t out = crc32_gzip_refl(crc, p, n);
  AfterVectorCode();
  return out;
#else
  return static_cast<uint32_t>(crc32(crc, p, static_cast<uInt>(n)));
#endif
}

// The CRC's linear part of the two ID bytes (big-endian) alone: the
// difference they make to the CRC of any message of the same length.
uint32_t IdBytesLinear(uint16_t id) {
  const uint8_t bytes[2] = {static_cast<uint8_t>(id >> 8), static_cast<uint8_t>(id)};
  static constexpr uint8_t kZero[2] = {0, 0};
  return Crc(0, bytes, 2) ^ Crc(0, kZero, 2);
}

// Bytes of the ICRC's input after the IPv4 ID field: the rest of the IPv4
// header, the UDP header and the transport part.
size_t BytesAfterId(size_t roce_bytes) {
  return sizeof(Ipv4Header) - 6 + sizeof(UdpHeader) + roce_bytes;
}

// The deltas of the 16 ID bits for one length, as an xor basis (the
// vector with top bit b in slot b; its span is exactly the deltas of all
// IDs), cached for the last few lengths.
constexpr int kIdBits = 16;

// The IDs a softverbs run uses (below kIcrcIpv4Ids) are most packets: their
// deltas are kept ready, and found again by a small direct-mapped index
// (slot of a delta -> its ID + 1, 0 empty; a delta that lost its slot to
// another is still found by Reduce).
constexpr uint32_t kSmallIdSlots = 256;

uint32_t SmallIdSlot(uint32_t delta) {
  return (delta * 0x9E3779B1u) >> 24;  // Fibonacci hashing onto 256 slots
}
static_assert(kSmallIdSlots == 1u << 8);

struct IdBasis {
  size_t roce_bytes = SIZE_MAX;
  uint32_t bit_delta[kIdBits] = {};  // the delta of each ID bit alone
  uint32_t by_top_bit[32] = {};
  uint16_t ids[32] = {};                    // the ID whose delta by_top_bit[b] is
  uint32_t small_delta[kIcrcIpv4Ids] = {};  // the delta of each ID below kIcrcIpv4Ids
  uint8_t small_slot[kSmallIdSlots] = {};
};

// v reduced by the basis: 0 when v is in its span; *id collects the ID of
// what was taken away (v's ID, when the remainder is 0).
uint32_t Reduce(const IdBasis& b, uint32_t v, uint16_t* id) {
  *id = 0;
  for (int bit = 31; bit >= 0 && v != 0; --bit) {
    if ((v >> bit & 1) && b.by_top_bit[bit] != 0) {
      v ^= b.by_top_bit[bit];
      *id ^= b.ids[bit];
    }
  }
  return v;
}

uint32_t DeltaOfBits(const IdBasis& b, uint32_t id) {
  uint32_t delta = 0;
  for (; id != 0; id &= id - 1) delta ^= b.bit_delta[std::countr_zero(id)];
  return delta;
}

const IdBasis& BasisFor(size_t roce_bytes) {
  thread_local std::array<IdBasis, 8> cache;
  thread_local size_t next = 0;
  thread_local const IdBasis* last = nullptr;
  if (last && last->roce_bytes == roce_bytes) return *last;
  for (const IdBasis& b : cache) {
    if (b.roce_bytes == roce_bytes) return *(last = &b);
  }
  IdBasis& b = cache[next];
  last = &b;
  next = (next + 1) % cache.size();
  b = IdBasis{};
  b.roce_bytes = roce_bytes;
  const uLong shift = crc32_combine_gen(static_cast<z_off_t>(BytesAfterId(roce_bytes)));
  for (int i = 0; i < kIdBits; ++i) {
    uint32_t v =
        static_cast<uint32_t>(crc32_combine_op(IdBytesLinear(uint16_t(1u << i)), 0, shift));
    b.bit_delta[i] = v;
    uint16_t taken = 0;
    v = Reduce(b, v, &taken);
    for (int bit = 31; bit >= 0 && v != 0; --bit) {
      if (v >> bit & 1) {
        b.by_top_bit[bit] = v;
        b.ids[bit] = static_cast<uint16_t>(taken ^ (1u << i));
        break;
      }
    }
  }
  for (uint32_t id = 1; id < kIcrcIpv4Ids; ++id) {
    b.small_delta[id] = DeltaOfBits(b, id);
    uint8_t& slot = b.small_slot[SmallIdSlot(b.small_delta[id])];
    if (slot == 0) slot = static_cast<uint8_t>(id + 1);
  }
  return b;
}

}  // namespace

uint32_t Ipv4IdIcrcDelta(uint16_t id, size_t roce_bytes) {
  if (id == 0) return 0;
  const IdBasis& b = BasisFor(roce_bytes);
  return id < kIcrcIpv4Ids ? b.small_delta[id] : DeltaOfBits(b, id);
}

bool Ipv4IdOfIcrcDelta(uint32_t delta, size_t roce_bytes, uint16_t* id) {
  const IdBasis& b = BasisFor(roce_bytes);
  if (const uint8_t slot = b.small_slot[SmallIdSlot(delta)];
      slot != 0 && b.small_delta[slot - 1] == delta) {
    *id = static_cast<uint16_t>(slot - 1);
    return true;
  }
  return Reduce(b, delta, id) == 0;
}

void RenumberIpv4Run(uint8_t* run, size_t bytes, size_t segment, uint16_t from_id) {
  for (size_t off = 0, k = 0; off < bytes; off += segment, ++k) {
    const size_t transport = std::min(segment, bytes - off) - kIcrcBytes;
    uint8_t* icrc = run + off + transport;
    StoreIcrc(LoadIcrc(icrc) ^ Ipv4IdIcrcDelta(static_cast<uint16_t>(from_id + k), transport) ^
                  Ipv4IdIcrcDelta(static_cast<uint16_t>(k), transport),
              icrc);
  }
}

uint32_t ComputeIcrc(std::span<const uint8_t> ip_udp, std::span<const uint8_t> roce) {
  std::array<uint8_t, kMaxMasked + kOneCallBytes> masked;
  const bool one_call = roce.size() <= kOneCallBytes;
  const size_t ip_len = ip_udp.size() - sizeof(UdpHeader);
  // The compiler made the byte-counted std::copy of these bytes a `rep
  // movsq`, whose start-up was about 70% of this function's time in an
  // 8-byte message rate: the headers are copied at a size it knows (a few
  // moves), the transport part by memcpy (glibc's vector copy).
  constexpr size_t kIpv4UdpBytes = sizeof(Ipv4Header) + sizeof(UdpHeader);
  constexpr size_t kIpv6UdpBytes = sizeof(Ipv6Header) + sizeof(UdpHeader);
  if (ip_udp.size() == kIpv4UdpBytes) {
    std::memcpy(masked.data(), ip_udp.data(), kIpv4UdpBytes);
  } else {
    std::memcpy(masked.data(), ip_udp.data(), std::min(ip_udp.size(), kIpv6UdpBytes));
  }
  std::memcpy(masked.data() + ip_udp.size(), roce.data(), one_call ? roce.size() : sizeof(Bth));
  if (ip_len == sizeof(Ipv4Header)) {
    auto* ip = reinterpret_cast<Ipv4Header*>(masked.data());
    ip->tos = 0xff;
    ip->ttl = 0xff;
    ip->checksum.set(0xffff);
  } else {
    auto* ip = reinterpret_cast<Ipv6Header*>(masked.data());
    ip->version_class_flow.set(ip->version_class_flow.get() | 0x0fffffff);
    ip->hop_limit = 0xff;
  }
  reinterpret_cast<UdpHeader*>(masked.data() + ip_len)->checksum.set(0xffff);
  reinterpret_cast<Bth*>(masked.data() + ip_udp.size())->fecn_becn_resv6 = 0xff;

  // The CRC of the masked LRH's eight 0xff bytes, with which every ICRC
  // starts (RoCE v2 has no LRH; IBA A17.8.1 counts it as all ones).
  static const uint32_t kMaskedLrhCrc = [] {
    static constexpr uint8_t kMaskedLrh[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    return Crc(0, kMaskedLrh, sizeof(kMaskedLrh));
  }();
  if (one_call) return Crc(kMaskedLrhCrc, masked.data(), ip_udp.size() + roce.size());
  const uint32_t crc = Crc(kMaskedLrhCrc, masked.data(), ip_udp.size() + sizeof(Bth));
  return Crc(crc, roce.data() + sizeof(Bth), roce.size() - sizeof(Bth));
}

void StoreIcrc(uint32_t icrc, uint8_t out[4]) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(icrc >> (8 * i));
}

uint32_t LoadIcrc(const uint8_t in[4]) {
  return uint32_t{in[0]} | uint32_t{in[1]} << 8 | uint32_t{in[2]} << 16 | uint32_t{in[3]} << 24;
}

}  // namespace softverbs::roce
