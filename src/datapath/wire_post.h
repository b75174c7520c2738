// Work requests a context posts to the device's network transport (docs/
// roce.md, "The network transport"): a QP whose path leaves the host is
// served by the device, as a NIC serves the work requests in its send
// queue. The context writes them into its doorbell ring, shared memory it
// hands to the device once (protocol kWireDoorbell), and wakes the device
// through the doorbell socket only when the device said it is going to
// sleep.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "datapath/engine.h"

namespace softverbs::datapath {

struct WirePostRecord {
  uint32_t qpn;       // the posting QP (the device checks the poster owns it)
  uint32_t reserved;  // 0
  SendWr wr;          // as the library's posting checks accepted it
};
// Library and device are one build (the protocol version says so): the
// record is the same on both sides.
static_assert(sizeof(WirePostRecord) == 8 + sizeof(SendWr));

// Records the ring holds. The device takes posts into each QP's own queue
// as soon as it runs, so the ring holds only what it has not seen yet; a
// post into a full ring answers ENOMEM.
inline constexpr uint32_t kWirePostRingSlots = 2048;
static_assert((kWirePostRingSlots & (kWirePostRingSlots - 1)) == 0, "a power of two");

// The doorbell ring: one memfd per context, made and sealed by the context
// (F_SEAL_SHRINK: the device maps it and must never fault on a shrunk
// file; the device refuses a ring without that seal or of another size).
// One producer (the context, under its wire mutex) and one consumer (the
// device). Counters run free and wrap; slot i % kWirePostRingSlots.
struct WirePostRing {
  // Line 0, written by the context: records published so far. A record's
  // bytes are written before this count passes it (release).
  alignas(64) std::atomic<uint32_t> produced;
  uint8_t pad0[60];
  // Line 1, written by the device.
  // Records taken so far: the context's full check reads it. The device
  // keeps its own count and never reads this one back.
  alignas(64) std::atomic<uint32_t> consumed;
  // 1: the device is about to sleep, or sleeps, in epoll_wait. A poster
  // that finds it set after publishing clears it and sends one byte on the
  // doorbell socket. The device sets it before it sleeps and then looks at
  // `produced` once more; each side fences between its store and its load,
  // so a post is never left waiting for a sleeping device.
  std::atomic<uint32_t> device_asleep;
  uint8_t pad1[56];
  // Line 2 on.
  WirePostRecord slots[kWirePostRingSlots];
};
static_assert(offsetof(WirePostRing, consumed) == 64);
static_assert(offsetof(WirePostRing, slots) == 128);
static_assert(sizeof(WirePostRing) == 128 + kWirePostRingSlots * sizeof(WirePostRecord));

// Copies what a work request carries - the fixed fields, the SGEs in use,
// the inline bytes in use - not the whole ~1 KiB of it: a ring slot is
// written by one process's core and read by another's. The counts are read
// once, from dst; counts beyond the limits are copied as they are (the
// device refuses such a record) with no more than the limits' bytes behind
// them. The retry bookkeeping of dst is left zero.
inline void CopyUsedSendWr(SendWr* dst, const SendWr* src) {
  constexpr size_t kHead = offsetof(SendWr, sge);
  auto* d = reinterpret_cast<unsigned char*>(dst);
  const auto* s = reinterpret_cast<const unsigned char*>(src);
  memcpy(d, s, kHead);
  const uint32_t sges = dst->num_sge < kMaxSendSge ? dst->num_sge : kMaxSendSge;
  memcpy(dst->sge, src->sge, sges * sizeof(RecvSge));
  memcpy(&dst->inline_len, &src->inline_len, sizeof(uint32_t));
  const uint32_t bytes = dst->inline_len < kMaxInline ? dst->inline_len : kMaxInline;
  memcpy(dst->inline_data, src->inline_data, bytes);
  dst->first_attempt_ns = 0;
  dst->next_attempt_ns = 0;
  dst->rnr_retries = 0;
  dst->held = false;
}

inline void CopyPostRecord(WirePostRecord* dst, const WirePostRecord* src) {
  dst->qpn = src->qpn;
  dst->reserved = src->reserved;
  CopyUsedSendWr(&dst->wr, &src->wr);
}

}  // namespace softverbs::datapath
