#include "datapath/mkey_layout.h"

#include <string.h>

#include <atomic>

#include "datapath/engine.h"

namespace softverbs::datapath {

uint64_t MkeyLayoutLength(const UmrEntry* entries, uint32_t num_entries, uint32_t repeat_count) {
  uint64_t block = 0;
  for (uint32_t i = 0; i < num_entries; ++i) block += entries[i].bytes_count;
  return block * repeat_count;
}

void WriteMkeyLayout(MkeyLayout* slot, const UmrEntry* entries, uint32_t num_entries,
                     uint32_t repeat_count, const SigAttr& sig) {
  const uint32_t seq = slot->sequence.load(std::memory_order_relaxed);
  slot->sequence.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  for (uint32_t i = 0; i < num_entries; ++i) {
    slot->entry[i].addr.store(entries[i].addr, std::memory_order_relaxed);
    slot->entry[i].lkey.store(entries[i].lkey, std::memory_order_relaxed);
    slot->entry[i].bytes_count.store(entries[i].bytes_count, std::memory_order_relaxed);
    slot->entry[i].stride.store(entries[i].stride, std::memory_order_relaxed);
  }
  slot->num_entries.store(num_entries, std::memory_order_relaxed);
  slot->repeat_count.store(repeat_count, std::memory_order_relaxed);
  slot->length.store(MkeyLayoutLength(entries, num_entries, repeat_count),
                     std::memory_order_relaxed);
  uint64_t words[4];
  static_assert(sizeof(words) == sizeof(SigAttr));
  memcpy(words, &sig, sizeof(words));
  for (int i = 0; i < 4; ++i) slot->sig[i].store(words[i], std::memory_order_relaxed);
  slot->sequence.store(seq + 2, std::memory_order_release);
}

bool UmrLayoutOf(const SendWr& wr, uint32_t* mkey, uint32_t* new_tag, uint32_t* sets,
                 uint32_t* access, uint32_t* repeat_count, uint32_t* num_entries, UmrEntry* entries,
                 SigAttr* sig) {
  const uint32_t sig_bytes = (wr.swap & kUmrSetsSig) ? sizeof(SigAttr) : 0;
  if (wr.inline_len < sig_bytes) return false;
  const uint32_t entry_bytes = wr.inline_len - sig_bytes;
  if (entry_bytes % sizeof(UmrEntry) != 0 ||
      entry_bytes > limits::kMaxMkeyEntries * sizeof(UmrEntry) || wr.compare_add > UINT32_MAX ||
      (wr.swap & ~(kUmrSetsAccess | kUmrSetsLayout | kUmrSetsSig | kUmrResetsSig))) {
    return false;
  }
  *mkey = wr.imm_data;
  *new_tag = wr.rkey & 0xff;
  *sets = static_cast<uint32_t>(wr.swap);
  *access = wr.bind_access;
  *repeat_count = static_cast<uint32_t>(wr.compare_add);
  *num_entries = entry_bytes / sizeof(UmrEntry);
  memcpy(entries, wr.inline_data, entry_bytes);
  *sig = SigAttr{};
  if (sig_bytes) memcpy(sig, wr.inline_data + entry_bytes, sizeof(SigAttr));
  return true;
}

bool ReadMkeyLayout(const MkeyLayout& slot, MkeyLayoutCopy* out) {
  // The device writes a layout in well under a microsecond, and only while
  // the key is cleared: a reader that keeps meeting a write gives up, as an
  // access that met the key invalidated.
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const uint32_t before = slot.sequence.load(std::memory_order_acquire);
    if (before & 1) continue;
    out->num_entries = slot.num_entries.load(std::memory_order_relaxed);
    out->repeat_count = slot.repeat_count.load(std::memory_order_relaxed);
    out->length = slot.length.load(std::memory_order_relaxed);
    if (out->num_entries > limits::kMaxMkeyEntries) return false;
    for (uint32_t i = 0; i < out->num_entries; ++i) {
      out->entry[i].addr = slot.entry[i].addr.load(std::memory_order_relaxed);
      out->entry[i].lkey = slot.entry[i].lkey.load(std::memory_order_relaxed);
      out->entry[i].bytes_count = slot.entry[i].bytes_count.load(std::memory_order_relaxed);
      out->entry[i].stride = slot.entry[i].stride.load(std::memory_order_relaxed);
      out->entry[i].reserved = 0;
    }
    uint64_t words[4];
    for (int i = 0; i < 4; ++i) words[i] = slot.sig[i].load(std::memory_order_relaxed);
    memcpy(&out->sig, words, sizeof(words));
    std::atomic_thread_fence(std::memory_order_acquire);
    if (slot.sequence.load(std::memory_order_relaxed) == before) return true;
  }
  return false;
}

}  // namespace softverbs::datapath
