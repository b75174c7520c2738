// Reaching registered memory: key checks (key, PD, access, bounds) and the
// pieces a range of an MR is made of for the executing process - bytes it
// maps directly (the MR's memfd-backed whole pages, or its own memory) and
// bytes it reaches through the owner's /proc/self/mem (the partial head and
// tail pages the MR shares with unregistered data).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "datapath/layout.h"
#include "datapath/shm.h"

namespace softverbs::datapath {

// How this process reaches one MR. The host keeps one per key it used.
struct MrMapping {
  uint32_t generation = 0;    // MrEntry::generation it was made for
  bool local = false;         // the MR is in this process: owner va == our va
  uint8_t* backed = nullptr;  // our address of the owner's backed_begin
  uint64_t backed_begin = 0;  // owner va range reachable through `backed`
  uint64_t backed_end = 0;
  int mem_fd = -1;  // the owner's /proc/<pid>/mem (not owned here); the owner's own: its lock file
};

// Makes m reach MR e's backed pages through `backing`, this process's
// mapping of the MR's memfd or SysV segment - unless the backed range does
// not lie inside it: then those bytes stay reached through the owner's
// /proc/<pid>/mem, as unbacked ones.
void UseBacking(const SharedMapping& backing, const MrEntry& e, MrMapping* m);

struct SigWork;  // sig_access.h

// A contiguous part of a range: directly addressable, or via pread/pwrite.
struct MemPiece {
  uint8_t* ptr;  // direct access; nullptr: use mem_fd at va
  // The owner's /proc/<pid>/mem when some executor reaches these bytes only
  // through it (then an atomic takes the owner's word lock); else -1.
  int mem_fd;
  uint64_t va;
  uint64_t len;
};

// The pieces of one side of an access. The first kInlinePieces live in the
// list (on the executing thread's stack: a work request's SGEs reach at most
// three pieces each, a partial page at either end and the backed middle);
// an indirect memory key's layout can make many more (an interleaved key of
// small entries), and then the list moves to the heap, up to kMaxPieces.
inline constexpr int kInlinePieces = 128;
inline constexpr int kMaxPieces = 1 << 16;
struct PieceList {
  PieceList() = default;
  PieceList(const PieceList& other) { CopyFrom(other); }
  PieceList& operator=(const PieceList& other) {
    if (this != &other) CopyFrom(other);
    return *this;
  }
  ~PieceList() { delete[] heap_; }

  MemPiece* piece = inline_;  // count pieces
  int count = 0;
  uint64_t bytes = 0;
  // Pieces of a signature key's wire space that the list writes: what is
  // left to do once they are written (CopyPieces does it), and the scratch
  // bytes of wire signatures the pieces name. Shared by copies of the list.
  std::shared_ptr<SigWork> sig;
  void Clear() {
    count = 0;
    bytes = 0;
  }
  // False when the list holds kMaxPieces already (or the heap refused).
  bool Add(const MemPiece& p) {
    if (p.len == 0) return true;
    if (count == capacity_ && !Grow()) return false;
    piece[count++] = p;
    bytes += p.len;
    return true;
  }

 private:
  bool Grow();  // memory.cc
  void CopyFrom(const PieceList& other);
  MemPiece inline_[kInlinePieces];
  MemPiece* heap_ = nullptr;
  int capacity_ = kInlinePieces;
};

enum class MrCheck {
  kOk,
  kBadKey,      // no MR with this key (or invalidated)
  kBadPd,       // MR of another PD
  kBadOwner,    // lkey of another process
  kNoAccess,    // the MR lacks the needed access right
  kOutOfRange,  // [addr, addr+len) not inside the MR
  kWrongQp,     // a type 2 window bound to another QP
  // Every check passed, but the key is an indirect memory key (kMrIndirect):
  // its bytes are those of the MRs its layout names (keyed_access.h), not
  // at an address of the entry. A caller that does not walk layouts treats
  // it as a key it cannot use.
  kIndirect,
};

// Checks an access of `len` bytes at `addr` (an address in the key's iova
// space) through `key`. `remote`: key is an rkey. On kOk, *owner_va is the
// owner's virtual address of addr. The caller is counted inside the access
// (MrGuards, keyed_access.h) unless the MR is its own.
// Inline: every work request checks two keys.
inline MrCheck CheckMrAccess(const MrEntry& e, uint32_t key, bool remote, uint32_t pdn,
                             uint32_t owner_client, uint32_t need_access, uint64_t addr,
                             uint64_t len, uint64_t* owner_va) {
  const uint32_t published =
      remote ? e.rkey.load(std::memory_order_seq_cst) : e.lkey.load(std::memory_order_seq_cst);
  if (published == 0 || published != key) return MrCheck::kBadKey;
  if (e.owner.load(std::memory_order_relaxed) != owner_client) return MrCheck::kBadOwner;
  if (e.pdn.load(std::memory_order_relaxed) != pdn) return MrCheck::kBadPd;
  if ((e.access.load(std::memory_order_relaxed) & need_access) != need_access) {
    return MrCheck::kNoAccess;
  }
  const uint64_t iova = e.iova.load(std::memory_order_relaxed);
  const uint64_t length = e.length.load(std::memory_order_relaxed);
  if (addr < iova || addr - iova > length || len > length - (addr - iova)) {
    return MrCheck::kOutOfRange;
  }
  if (e.access.load(std::memory_order_relaxed) & kMrIndirect) return MrCheck::kIndirect;
  *owner_va = e.addr.load(std::memory_order_relaxed) + (addr - iova);
  return MrCheck::kOk;
}

// Checks a remote access of `len` bytes at `addr` through rkey `key` of a
// bound memory window (MrEntry::window_of != 0): the window's PD, owner,
// access rights and bounds and, for a type 2 window, the QP it is bound to
// (`responder_qpn`, the QP the request arrived on). On kOk, *mr_lkey is the
// lkey of the MR the window lies in; addr is an address of that MR too (a
// window's iova is in its MR's iova space). The caller then reaches the
// bytes through the MR, as a local access of its own with that lkey.
MrCheck CheckWindowAccess(const MrEntry& w, uint32_t key, uint32_t pdn, uint32_t owner_client,
                          uint32_t need_access, uint32_t responder_qpn, uint64_t addr, uint64_t len,
                          uint32_t* mr_lkey);

// Splits [owner_va, +len) of MR e into pieces this process can reach
// through m. The owner's own pieces (m.local) are all direct; those outside
// e's backed pages carry m.mem_fd too (the owner's /proc/self/mem, where
// peers reach them), which an atomic there locks (owner_word_lock.h).
bool AddMrPieces(const MrMapping& m, const MrEntry& e, uint64_t owner_va, uint64_t len,
                 PieceList* out);

// Copies min(dst.bytes, src.bytes) bytes, then finishes dst's signature
// work (sig_access.h) for them. Returns false if a pread/pwrite
// through an owner's /proc/<pid>/mem failed, errno as ReadOwnerMemory sets
// it (owner_memory.h: EIO may clear later, ESRCH - the owner is gone).
bool CopyPieces(const PieceList& dst, const PieceList& src);

// The bytes of n pieces, in order, into out / from in (errno as CopyPieces).
bool ReadPieces(const MemPiece* piece, int n, uint8_t* out);
bool WritePieces(const MemPiece* piece, int n, const uint8_t* in);

// A 64-bit atomic at one 8-byte aligned piece. Returns false on failure
// (errno as CopyPieces; nothing was written).
bool AtomicCompareSwap(const MemPiece& p, uint64_t compare, uint64_t swap, uint64_t* old);
bool AtomicFetchAdd(const MemPiece& p, uint64_t add, uint64_t* old);
// An 8-byte store at one aligned piece, at once (IBV_WR_ATOMIC_WRITE).
bool AtomicStore(const MemPiece& p, uint64_t value);

}  // namespace softverbs::datapath
