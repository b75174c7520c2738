// Block signatures of mlx5's signature memory keys (T10-DIF, CRC-32,
// CRC-32C): the arithmetic alone - a block's signature, the check of one
// that arrived, and where blocks and signatures lie in a key's two domains.
// The access through a key that applies them is sig_access.h.
#pragma once

#include <cstdint>

#include "datapath/layout.h"

namespace softverbs::datapath {

inline constexpr uint32_t kMaxSigBytes = 8;
// The largest block (MLX5DV_BLOCK_SIZE_4160).
inline constexpr uint32_t kMaxSigBlock = 4160;

// mlx5dv_sig_mask's bit of byte i of a signature.
constexpr uint8_t SigByteBit(uint32_t i) {
  return static_cast<uint8_t>(0x80u >> i);
}
// The bits of bytes [first, first + count).
constexpr uint8_t SigByteBits(uint32_t first, uint32_t count) {
  uint8_t bits = 0;
  for (uint32_t i = first; i < first + count && i < kMaxSigBytes; ++i) bits |= SigByteBit(i);
  return bits;
}

// The bytes a domain's signature takes after each block: 0, 4 or 8.
uint32_t SigBytes(const SigDomain& d);

// A domain softverbs computes: a known kind (kSigNone included) and, for a
// signature, one of mlx5's block sizes.
bool ValidSigDomain(const SigDomain& d);

// The signature of block `block` of a domain (its `len` data bytes), as the
// domain stores it (big-endian fields), in out[0, SigBytes(d)).
void ComputeSig(const SigDomain& d, uint64_t block, const uint8_t* data, uint32_t len,
                uint8_t out[kMaxSigBytes]);

// What an access that found a bad signature reports for the key (the fields
// of mlx5's signature error CQE that mlx5dv_mkey_check decodes).
inline constexpr uint8_t kSigDomainWire = 0;
inline constexpr uint8_t kSigDomainMemory = 1;
inline constexpr uint8_t kSigBadGuard = 1 << 0;
inline constexpr uint8_t kSigBadAppTag = 1 << 1;
inline constexpr uint8_t kSigBadRefTag = 1 << 2;
struct SigError {
  uint8_t domain;    // kSigDomainWire or kSigDomainMemory: whose signature was bad
  uint8_t syndrome;  // kSigBad*: the fields that differ (a CRC is a guard)
  uint8_t kind;      // the bad signature's SigKind
  uint8_t reserved;
  uint32_t reserved2;
  // The signature's 8 bytes as one big-endian number (T10-DIF: guard << 48 |
  // application tag << 32 | reference tag; a CRC-32: crc << 32).
  uint64_t expected;
  uint64_t actual;
  uint64_t offset;  // the bad block's first data byte, in the key's wire space
};
static_assert(sizeof(SigError) == 32);

// Checks the signature bytes `got` of block `block` (only the bytes of
// have_mask are there; bit 7 - i is byte i) against `expected` for the
// bytes of check_mask, with T10-DIF's escapes (an application tag of 0xffff,
// and a reference tag of 0xffffffff with it, where the domain says so). True
// if a checked byte differs: *err says how (its offset left to the caller).
bool SigMismatch(const SigDomain& d, uint8_t domain, const uint8_t expected[kMaxSigBytes],
                 const uint8_t got[kMaxSigBytes], uint8_t have_mask, uint8_t check_mask,
                 SigError* err);

// Where a signature key's blocks lie: in memory (its layout) each block's
// data is followed by the memory's signature, on the wire (what an access
// through the key sees) by the wire's. A last block shorter than data +
// memory signature is data only, signed in neither domain.
struct SigGeometry {
  uint32_t data = 0;      // data bytes a block
  uint32_t mem_sig = 0;   // signature bytes after each block in memory
  uint32_t wire_sig = 0;  // ... on the wire
  uint64_t blocks = 0;    // whole blocks
  uint32_t tail = 0;      // data bytes of a last, partial block
  uint64_t mem_block() const { return uint64_t{data} + mem_sig; }
  uint64_t wire_block() const { return uint64_t{data} + wire_sig; }
  uint64_t wire_length() const { return blocks * wire_block() + tail; }
};
// The geometry of a key whose layout addresses mem_length bytes.
SigGeometry SigGeometryOf(const SigAttr& attr, uint64_t mem_length);

// The checks the device makes of a UMR's block signature: both domains
// valid, at least one signed, of one block size if both are, a copy mask
// only where both domains are of one kind. Returns nullptr or why not.
const char* SigAttrProblem(const SigAttr& attr);

// Raw checksums, exposed for the tests: CRC-32 and CRC-32C (reflected, the
// given initial value, the final value inverted), CRC-16/T10-DIF and the IP
// checksum (the complement of the one's-complement sum of big-endian words,
// starting from seed).
uint32_t Crc32(uint32_t init, const uint8_t* data, uint64_t len);
uint32_t Crc32c(uint32_t init, const uint8_t* data, uint64_t len);
uint16_t Crc16T10Dif(uint16_t init, const uint8_t* data, uint64_t len);
uint16_t IpChecksum(uint16_t seed, const uint8_t* data, uint64_t len);

}  // namespace softverbs::datapath
