// The order in which a message's bytes land in the memory they are placed
// in - an RDMA WRITE's target, a SEND's receive buffer, a READ's local
// buffer; on one host and from the network. A NIC writes a message in
// increasing address order (in-order PCIe writes), and programs rely on it:
// they poll a message's last byte for its arrival and then use, or write,
// the bytes before it (qperf's rc_rdma_write_poll_lat waits for a mark in
// the first and the last byte and then writes its own marks into both;
// eager-RDMA protocols put a flag in a message's last bytes).
//
// libc's memcpy gives no order: its vector paths store the last vectors and
// then the first, overlapping stores write a byte twice, and `rep movsb`'s
// fast-string stores may become visible out of order. A reader that saw
// the last byte and wrote the first could find its write undone by the
// copy's second store of it - qperf's ping-pong stalled at every size of
// a page or more (docs/datapath.md, "Placement order").
//
// PlaceInOrder keeps memcpy's speed for the body and orders the end: the
// body by memcpy, then - after a release fence, which on x86 orders every
// store of the body, string and non-temporal ones included (libc ends
// those with sfence), before the stores that follow - the last
// kOrderedTail bytes as forward word stores, the last of which holds the
// message's last byte. A reader that sees the last byte sees every byte of
// the message, and no store of the copy comes after it.
#ifndef SOFTVERBS_DATAPATH_PLACEMENT_ORDER_H_
#define SOFTVERBS_DATAPATH_PLACEMENT_ORDER_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <atomic>

namespace softverbs::datapath {

// Bytes at the end of a message stored word by word, in address order.
inline constexpr size_t kOrderedTail = 64;
// The last bytes of a message, stored after all the others: where a copy
// has no order of its own (the kernel's, through /proc/<pid>/mem), they go
// in a write of their own (WriteOwnerMemory).
inline constexpr size_t kOrderedLastWord = 8;

namespace placement {

// One store of a Word-sized piece of src at dst, not merged with, nor
// moved across, the stores around it by the compiler.
template <typename Word>
[[gnu::always_inline]] inline void StoreWord(uint8_t* dst, const uint8_t* src) {
  Word w;
  memcpy(&w, src, sizeof(Word));
  memcpy(dst, &w, sizeof(Word));
  asm volatile("" ::: "memory");
}

// The stores before it become visible before the ones after it (a compiler
// barrier on x86, whose stores are seen in program order).
[[gnu::always_inline]] inline void Order() {
  std::atomic_thread_fence(std::memory_order_release);
}

// n bytes (Word <= n <= 2 Word) as two words that may overlap (with the
// same bytes): both loaded before either is stored, the first word stored
// first. n == Word is one store: a second store of the word that holds the
// last byte could land after a reader saw it and wrote there.
template <typename Word>
[[gnu::always_inline]] inline void StoreTwoWords(uint8_t* dst, const uint8_t* src, size_t n) {
  if (n == sizeof(Word)) {
    StoreWord<Word>(dst, src);
    return;
  }
  Word first, last;
  memcpy(&first, src, sizeof(Word));
  memcpy(&last, src + n - sizeof(Word), sizeof(Word));
  memcpy(dst, &first, sizeof(Word));
  Order();
  memcpy(dst + n - sizeof(Word), &last, sizeof(Word));
  asm volatile("" ::: "memory");
}

}  // namespace placement

// n <= kOrderedTail bytes in increasing address order, the word holding
// the last byte stored last.
[[gnu::always_inline]] inline void StoreInOrder(uint8_t* dst, const uint8_t* src, size_t n) {
  if (n > 16) {
    size_t at = 0;
    for (; at + 8 < n; at += 8) placement::StoreWord<uint64_t>(dst + at, src + at);
    placement::Order();
    placement::StoreWord<uint64_t>(dst + n - 8, src + n - 8);  // may overlap the one before
  } else if (n >= 8) {
    placement::StoreTwoWords<uint64_t>(dst, src, n);
  } else if (n >= 4) {
    placement::StoreTwoWords<uint32_t>(dst, src, n);
  } else if (n >= 2) {
    placement::StoreTwoWords<uint16_t>(dst, src, n);
  } else if (n == 1) {
    *dst = *src;
  }
}

// Copies n bytes from src to dst as a NIC places a message (above).
[[gnu::always_inline]] inline void PlaceInOrder(uint8_t* dst, const uint8_t* src, size_t n) {
  if (n > kOrderedTail) {
    const size_t body = n - kOrderedTail;
    memcpy(dst, src, body);
    placement::Order();
    dst += body;
    src += body;
    n = kOrderedTail;
  }
  StoreInOrder(dst, src, n);
}

}  // namespace softverbs::datapath

#endif  // SOFTVERBS_DATAPATH_PLACEMENT_ORDER_H_
