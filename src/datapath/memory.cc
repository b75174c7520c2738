#include "datapath/memory.h"

#include <infiniband/verbs.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <new>

#include "datapath/owner_memory.h"
#include "datapath/owner_word_lock.h"
#include "datapath/placement_order.h"
#include "datapath/sig_access.h"

namespace softverbs::datapath {

MrCheck CheckWindowAccess(const MrEntry& w, uint32_t key, uint32_t pdn, uint32_t owner_client,
                          uint32_t need_access, uint32_t responder_qpn, uint64_t addr, uint64_t len,
                          uint32_t* mr_lkey) {
  const uint32_t published = w.rkey.load(std::memory_order_seq_cst);
  const uint32_t mr = w.window_of.load(std::memory_order_relaxed);
  if (published == 0 || published != key || mr == 0) return MrCheck::kBadKey;
  if (w.owner.load(std::memory_order_relaxed) != owner_client) return MrCheck::kBadOwner;
  if (w.pdn.load(std::memory_order_relaxed) != pdn) return MrCheck::kBadPd;
  const uint32_t qpn = w.bound_qpn.load(std::memory_order_relaxed);
  if (qpn != 0 && qpn != responder_qpn) return MrCheck::kWrongQp;
  if ((w.access.load(std::memory_order_relaxed) & need_access) != need_access) {
    return MrCheck::kNoAccess;
  }
  const uint64_t iova = w.iova.load(std::memory_order_relaxed);
  const uint64_t length = w.length.load(std::memory_order_relaxed);
  if (addr < iova || addr - iova > length || len > length - (addr - iova)) {
    return MrCheck::kOutOfRange;
  }
  *mr_lkey = mr;
  return MrCheck::kOk;
}

bool PieceList::Grow() {
  if (capacity_ >= kMaxPieces) return false;
  const int capacity = std::min(capacity_ * 4, kMaxPieces);
  auto* grown = new (std::nothrow) MemPiece[capacity];
  if (grown == nullptr) return false;
  std::copy(piece, piece + count, grown);
  delete[] heap_;
  heap_ = grown;
  piece = grown;
  capacity_ = capacity;
  return true;
}

void PieceList::CopyFrom(const PieceList& other) {
  count = 0;
  bytes = 0;
  sig = other.sig;
  for (int i = 0; i < other.count; ++i) {
    if (!Add(other.piece[i])) break;  // a list of the same bounds: cannot happen
  }
}

void UseBacking(const SharedMapping& backing, const MrEntry& e, MrMapping* m) {
  const uint64_t begin = e.backed_begin.load(std::memory_order_relaxed);
  const uint64_t end = e.backed_end.load(std::memory_order_relaxed);
  const uint64_t offset = e.backed_offset.load(std::memory_order_relaxed);
  if (!backing.base() || end <= begin || offset > backing.size() ||
      end - begin > backing.size() - offset) {
    return;
  }
  m->backed_begin = begin;
  m->backed_end = end;
  m->backed = static_cast<uint8_t*>(backing.base()) + offset;
}

bool AddMrPieces(const MrMapping& m, const MrEntry& e, uint64_t owner_va, uint64_t len,
                 PieceList* out) {
  // The owner reaches all its bytes directly; those outside the backing it
  // marks with its /proc/self/mem, where peers reach them (an atomic there
  // takes the owner's word lock). A peer maps the backing and reaches the
  // rest through the owner's file.
  const bool own = m.local;
  const uint64_t backed_begin =
      own ? e.backed_begin.load(std::memory_order_relaxed) : m.backed_begin;
  const uint64_t backed_end = own ? e.backed_end.load(std::memory_order_relaxed) : m.backed_end;
  const auto outside = [&](uint64_t at, uint64_t n) {
    return MemPiece{own ? reinterpret_cast<uint8_t*>(at) : nullptr, m.mem_fd, at, n};
  };
  const auto inside = [&](uint64_t at, uint64_t n) {
    return MemPiece{own ? reinterpret_cast<uint8_t*>(at) : m.backed + (at - backed_begin), -1, at,
                    n};
  };
  const uint64_t end = owner_va + len;
  uint64_t at = owner_va;
  // Head: before the backed pages.
  if (at < backed_begin || backed_begin == backed_end) {
    uint64_t stop = backed_begin == backed_end ? end : std::min(end, backed_begin);
    if (!out->Add(outside(at, stop - at))) return false;
    at = stop;
  }
  // Middle: the backed pages.
  if (at < end && at < backed_end) {
    uint64_t stop = std::min(end, backed_end);
    if (!out->Add(inside(at, stop - at))) return false;
    at = stop;
  }
  // Tail.
  if (at < end) return out->Add(outside(at, end - at));
  return true;
}

namespace {

bool MoveBytes(const MemPiece& dst, uint64_t doff, const MemPiece& src, uint64_t soff, uint64_t n) {
  if (dst.ptr && src.ptr) {
    PlaceInOrder(dst.ptr + doff, src.ptr + soff, n);
    return true;
  }
  if (dst.ptr) return ReadOwnerMemory(src.mem_fd, dst.ptr + doff, n, src.va + soff);
  if (src.ptr) return WriteOwnerMemory(dst.mem_fd, src.ptr + soff, n, dst.va + doff);
  uint8_t bounce[4096];
  for (uint64_t done = 0; done < n;) {
    uint64_t k = std::min<uint64_t>(sizeof(bounce), n - done);
    if (!ReadOwnerMemory(src.mem_fd, bounce, k, src.va + soff + done) ||
        !WriteOwnerMemory(dst.mem_fd, bounce, k, dst.va + doff + done)) {
      return false;
    }
    done += k;
  }
  return true;
}

}  // namespace

bool CopyPieces(const PieceList& dst, const PieceList& src) {
  int di = 0, si = 0;
  uint64_t doff = 0, soff = 0;
  uint64_t copied = 0;
  while (di < dst.count && si < src.count) {
    const MemPiece& d = dst.piece[di];
    const MemPiece& s = src.piece[si];
    uint64_t n = std::min(d.len - doff, s.len - soff);
    if (!MoveBytes(d, doff, s, soff, n)) return false;
    copied += n;
    doff += n;
    soff += n;
    if (doff == d.len) ++di, doff = 0;
    if (soff == s.len) ++si, soff = 0;
  }
  return !dst.sig || FinishSignedWrite(*dst.sig, copied);
}

bool ReadPieces(const MemPiece* piece, int n, uint8_t* out) {
  for (int i = 0; i < n; ++i) {
    const MemPiece to{out, -1, 0, piece[i].len};
    if (!MoveBytes(to, 0, piece[i], 0, piece[i].len)) return false;
    out += piece[i].len;
  }
  return true;
}

bool WritePieces(const MemPiece* piece, int n, const uint8_t* in) {
  for (int i = 0; i < n; ++i) {
    const MemPiece from{const_cast<uint8_t*>(in), -1, 0, piece[i].len};
    if (!MoveBytes(piece[i], 0, from, 0, piece[i].len)) return false;
    in += piece[i].len;
  }
  return true;
}

// Bytes some executors reach only through the owner's /proc/<pid>/mem
// (MemPiece::mem_fd set: a partial page of an MR, an on-demand MR) take the
// owner's word lock around the atomic (owner_word_lock.h): there it is a
// read-modify-write of the file, or - for the owner itself, which maps them
// (ptr set too) - a CPU atomic that must not land inside another's.
bool AtomicCompareSwap(const MemPiece& p, uint64_t compare, uint64_t swap, uint64_t* old) {
  if (p.ptr && p.mem_fd < 0) {
    uint64_t expected = compare;
    __atomic_compare_exchange_n(reinterpret_cast<uint64_t*>(p.ptr), &expected, swap, false,
                                __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    *old = expected;
    return true;
  }
  OwnerWordLock lock(p.mem_fd, p.va);
  if (!lock.held()) return false;
  if (p.ptr) {
    uint64_t expected = compare;
    __atomic_compare_exchange_n(reinterpret_cast<uint64_t*>(p.ptr), &expected, swap, false,
                                __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    *old = expected;
    return true;
  }
  uint64_t cur;
  if (!ReadOwnerMemory(p.mem_fd, &cur, 8, p.va)) return false;
  *old = cur;
  return cur != compare || WriteOwnerMemory(p.mem_fd, &swap, 8, p.va);
}

bool AtomicFetchAdd(const MemPiece& p, uint64_t add, uint64_t* old) {
  if (p.ptr && p.mem_fd < 0) {
    *old = __atomic_fetch_add(reinterpret_cast<uint64_t*>(p.ptr), add, __ATOMIC_SEQ_CST);
    return true;
  }
  OwnerWordLock lock(p.mem_fd, p.va);
  if (!lock.held()) return false;
  if (p.ptr) {
    *old = __atomic_fetch_add(reinterpret_cast<uint64_t*>(p.ptr), add, __ATOMIC_SEQ_CST);
    return true;
  }
  uint64_t cur;
  if (!ReadOwnerMemory(p.mem_fd, &cur, 8, p.va)) return false;
  *old = cur;
  cur += add;
  return WriteOwnerMemory(p.mem_fd, &cur, 8, p.va);
}

bool AtomicStore(const MemPiece& p, uint64_t value) {
  if (p.ptr && p.mem_fd < 0) {
    __atomic_store_n(reinterpret_cast<uint64_t*>(p.ptr), value, __ATOMIC_SEQ_CST);
    return true;
  }
  OwnerWordLock lock(p.mem_fd, p.va);
  if (!lock.held()) return false;
  if (p.ptr) {
    __atomic_store_n(reinterpret_cast<uint64_t*>(p.ptr), value, __ATOMIC_SEQ_CST);
    return true;
  }
  return WriteOwnerMemory(p.mem_fd, &value, 8, p.va);
}

}  // namespace softverbs::datapath
