// rsockets' wire protocol (SOCK_STREAM), as rdma-core's librdmacm v44 speaks
// it (its docs/rsocket and rsocket(7)), so that a softverbs host and a host
// running rdma-core's librdmacm understand each other:
//
//  - the connection's private data (REQ and REP) is one RsConnData;
//  - every message is an RDMA WRITE WITH IMMEDIATE, the 32-bit immediate
//    (big endian on the wire, as every immediate) saying what it is;
//  - the data of a DATA message lands in the peer's receive buffer at the
//    address its target SGL entry names; an SGL message also writes one
//    RsSge into the peer's target SGL; an IOMAP_SGL message one RsIomap into
//    the peer's target iomap.
//
// This header holds only the facts of the protocol (layouts, numbers); the
// socket behind them is rsocket_internal.h (docs/rdmacm.md, "rsockets").
#pragma once

#include <cstddef>
#include <cstdint>

namespace softverbs::rdmacm::rs {

// ---------------------------------------------------------------------------
// The immediate data of every message: bits 31..29 the operation, 28..0 its
// argument.
//
// clang-format off
// | op | name      | argument (bits 28..0)                 | bytes written to the peer          |
// |----|-----------|---------------------------------------|------------------------------------|
// | 0  | DATA      | bytes of application data             | the data, into its receive buffer  |
// | 1  | reserved  |                                       |                                    |
// | 2  | WRITE     | never sent: tags riowrite's plain RDMA WRITEs in our own wr_id             |
// | 3  | reserved  |                                       |                                    |
// | 4  | SGL       | credits: it may send until its DATA + | none, or one RsSge into its target |
// |    |           | IOMAP_SGL count (16 bits) reaches this| SGL (a free half of our buffer)    |
// | 5  | reserved  |                                       |                                    |
// | 6  | IOMAP_SGL | the index of the target iomap entry   | one RsIomap into its target iomap  |
// | 7  | CTRL      | a ControlMessage                      | none                               |
// clang-format on
// ---------------------------------------------------------------------------
enum class ImmOp : uint32_t {
  kData = 0,
  kWrite = 2,
  kSgl = 4,
  kIomapSgl = 6,
  kCtrl = 7,
};
inline constexpr uint32_t kImmArgMask = 0x1FFFFFFF;

constexpr uint32_t MakeImm(ImmOp op, uint32_t arg) {
  return (static_cast<uint32_t>(op) << 29) | (arg & kImmArgMask);
}
constexpr ImmOp ImmOpOf(uint32_t imm) {
  return static_cast<ImmOp>(imm >> 29);
}
constexpr uint32_t ImmArgOf(uint32_t imm) {
  return imm & kImmArgMask;
}

static_assert(MakeImm(ImmOp::kSgl, 768) == 0x80000300);
static_assert(ImmOpOf(0xE0000002) == ImmOp::kCtrl && ImmArgOf(0xE0000002) == 2);
static_assert(ImmArgOf(MakeImm(ImmOp::kData, 0x3FFFFFFF)) == kImmArgMask);

// The argument of a CTRL message.
enum class ControlMessage : uint32_t {
  kDisconnect = 0,  // the sender will neither send nor receive any more
  kKeepalive = 1,   // nothing (rdma-core sends it for SO_KEEPALIVE; we accept and ignore it)
  kShutdown = 2,    // the sender will send no more (it still receives)
};

// ---------------------------------------------------------------------------
// Buffers named to the peer. Host byte order of the writer in RDMA-written
// entries (the peer swaps them when the connection data's NET flags differ);
// big endian inside RsConnData.
// ---------------------------------------------------------------------------
struct RsSge {
  uint64_t addr;    // virtual address of the buffer at its owner
  uint32_t key;     // its rkey
  uint32_t length;  // bytes (in RsConnData.target_sgl: entries)
};
static_assert(sizeof(RsSge) == 16);
static_assert(offsetof(RsSge, key) == 8 && offsetof(RsSge, length) == 12);

// An entry of the target iomap: the peer's riomap'd buffer `sge`, which
// riowrite reaches at offsets [offset, offset + sge.length).
struct RsIomap {
  uint64_t offset;  // the offset riomap answered at the buffer's owner
  RsSge sge;
};
static_assert(sizeof(RsIomap) == 24);

inline constexpr uint8_t kConnVersion = 1;
inline constexpr uint8_t kConnFlagNet = 1 << 0;    // the sender is big endian
inline constexpr uint8_t kConnFlagIomap = 1 << 1;  // target_iomap_size is meaningful

// The private data of the REQ (rconnect) and the REP (raccept). 40 bytes.
struct RsConnData {
  uint8_t version;            // kConnVersion; anything else is refused
  uint8_t flags;              // kConnFlagNet | kConnFlagIomap
  uint16_t credits_be;        // the sender's receive queue depth: the peer's first SGL credit
  uint8_t reserved[3];        // zero
  uint8_t target_iomap_size;  // iomap entries after the target SGL, scaled (EncodeIomapSize)
  RsSge target_sgl;           // big endian: the sender's target SGL (length = entries, 2)
  RsSge data_buf;             // big endian: the first half of the sender's receive buffer
};
static_assert(sizeof(RsConnData) == 40);
static_assert(offsetof(RsConnData, target_iomap_size) == 7);
static_assert(offsetof(RsConnData, target_sgl) == 8 && offsetof(RsConnData, data_buf) == 24);

// Entries of a target SGL: the two halves of the receive buffer take turns.
inline constexpr uint32_t kTargetSglEntries = 2;

// The iomap size travels in 8 bits: up to 128 as itself, above as
// 0x80 | (size >> 8) (so sizes above 128 are multiples of 256).
constexpr uint8_t EncodeIomapSize(uint32_t size) {
  return static_cast<uint8_t>(size <= 128 ? size : (0x80u | (size >> 8)));
}
constexpr uint32_t DecodeIomapSize(uint8_t scaled) {
  return scaled <= 128 ? scaled : static_cast<uint32_t>(scaled & 0x7F) << 8;
}
static_assert(DecodeIomapSize(EncodeIomapSize(1)) == 1);
static_assert(DecodeIomapSize(EncodeIomapSize(512)) == 512);

}  // namespace softverbs::rdmacm::rs
