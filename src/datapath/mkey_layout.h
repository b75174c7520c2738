// mlx5's indirect memory keys (mlx5dv_create_mkey): the layout a UMR work
// request gives a key (layout.h: UmrEntry, MkeyLayout), its copy out of the
// device table under the layout's sequence lock, and the walk that turns a
// range of the key's zero-based space into ranges of the MRs beneath it.
#pragma once

#include <cstdint>

#include "datapath/layout.h"

namespace softverbs::datapath {

// A layout as a reader copied it (ReadMkeyLayout) or a UMR gives it.
struct MkeyLayoutCopy {
  uint32_t num_entries = 0;
  uint32_t repeat_count = 0;
  uint64_t length = 0;  // sum of bytes_count * repeat_count
  UmrEntry entry[limits::kMaxMkeyEntries] = {};
  SigAttr sig = {};  // a signature key's block signature (enabled 0: none)
};

// The bytes a layout of these entries addresses.
uint64_t MkeyLayoutLength(const UmrEntry* entries, uint32_t num_entries, uint32_t repeat_count);

// Writes a layout and its block signature (the daemon; the key's MrEntry
// keys are cleared).
void WriteMkeyLayout(MkeyLayout* slot, const UmrEntry* entries, uint32_t num_entries,
                     uint32_t repeat_count, const SigAttr& sig);

// Copies the layout in slot; false if the device kept writing it through
// every attempt (bounded) or it is not one the device writes.
bool ReadMkeyLayout(const MkeyLayout& slot, MkeyLayoutCopy* out);

// A UMR work request (kWrMlx5Umr) carries: imm_data the key (an indirect
// key's lkey; a memory window's rkey for a UMR WQE that binds it, rkey then
// holding the new key's low 8 bits), bind_access its access, compare_add the
// repeat count, the entries in its inline bytes - then, with kUmrSetsSig,
// a SigAttr (inline_len: a multiple of sizeof(UmrEntry), plus
// sizeof(SigAttr) with it) - and in swap which of those it sets (the others
// stay as the key had them, as an mlx5 UMR's mkey_mask leaves them;
// kUmrResetsSig takes the block signature away,
// MLX5DV_MKEY_CONF_FLAG_RESET_SIG_ATTR):
inline constexpr uint64_t kUmrSetsAccess = 1;
inline constexpr uint64_t kUmrSetsLayout = 2;
inline constexpr uint64_t kUmrSetsSig = 4;
inline constexpr uint64_t kUmrResetsSig = 8;
struct SendWr;
// The device's request for it (protocol::ConfigureMkeyRequest's fields);
// false if the WR's inline bytes are not a layout of at most
// kMaxMkeyEntries entries.
bool UmrLayoutOf(const SendWr& wr, uint32_t* mkey, uint32_t* new_tag, uint32_t* sets,
                 uint32_t* access, uint32_t* repeat_count, uint32_t* num_entries, UmrEntry* entries,
                 SigAttr* sig);

// Calls piece(entry, addr, len) for each part of [offset, offset + len) of
// the key's space, in order: len bytes of the entry's MR at addr (its iova
// space). False if the range is not inside the layout or piece said false.
template <typename Piece>
bool ForEachMkeyPiece(const MkeyLayoutCopy& l, uint64_t offset, uint64_t len, Piece&& piece) {
  if (len == 0) return true;
  uint64_t block = 0;
  for (uint32_t i = 0; i < l.num_entries; ++i) block += l.entry[i].bytes_count;
  if (block == 0 || offset > l.length || len > l.length - offset) return false;
  uint64_t r = offset / block;
  uint64_t in_block = offset % block;
  for (; r < l.repeat_count && len > 0; ++r) {
    for (uint32_t i = 0; i < l.num_entries && len > 0; ++i) {
      const UmrEntry& e = l.entry[i];
      if (in_block >= e.bytes_count) {
        in_block -= e.bytes_count;
        continue;
      }
      const uint64_t take = e.bytes_count - in_block < len ? e.bytes_count - in_block : len;
      if (!piece(e, e.addr + r * e.stride + in_block, take)) return false;
      len -= take;
      in_block = 0;
    }
  }
  return len == 0;
}

}  // namespace softverbs::datapath
