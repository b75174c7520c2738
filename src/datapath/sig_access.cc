#include "datapath/sig_access.h"

#include <string.h>

#include <algorithm>
#include <new>

namespace softverbs::datapath {

namespace {

// The pieces of the key's memory [mem_offset, +len), through tmp.
VendorError Collect(KeyMemory& memory, uint64_t mem_offset, uint64_t len, PieceList* tmp,
                    std::vector<MemPiece>* out) {
  tmp->Clear();
  if (VendorError why = memory.Add(mem_offset, len, tmp)) return why;
  out->assign(tmp->piece, tmp->piece + tmp->count);
  return kVendorNone;
}

// The bytes of the key's memory [mem_offset, +len), through tmp.
VendorError ReadMemory(KeyMemory& memory, uint64_t mem_offset, uint64_t len, PieceList* tmp,
                       uint8_t* out) {
  tmp->Clear();
  if (VendorError why = memory.Add(mem_offset, len, tmp)) return why;
  return ReadPieces(tmp->piece, tmp->count, out) ? kVendorNone : kVendorOwnerGone;
}

// Writes the bytes of `mask` of a signature (bit 7 - i: byte i) into the
// pieces that hold the whole signature in memory.
bool WriteSigBytes(const std::vector<MemPiece>& pieces, const uint8_t sig[kMaxSigBytes],
                   uint8_t mask) {
  uint64_t at = 0;
  for (const MemPiece& p : pieces) {
    for (uint64_t k = 0; k < p.len; ++k) {
      const uint64_t i = at + k;
      if (i >= kMaxSigBytes || !(mask & SigByteBit(static_cast<uint32_t>(i)))) continue;
      const MemPiece byte{p.ptr ? p.ptr + k : nullptr, p.mem_fd, p.va + k, 1};
      if (!WritePieces(&byte, 1, &sig[i])) return false;
    }
    at += p.len;
  }
  return true;
}

thread_local uint64_t sig_errors_reported = 0;
thread_local bool in_requester_scope = false;

// The first bad signature an access meets through a key is the one its
// owner hears of.
void Report(SigWork& work, uint32_t key, const SigError& err) {
  if (work.requester) ++sig_errors_reported;
  if (std::find(work.reported.begin(), work.reported.end(), key) != work.reported.end()) return;
  work.reported.push_back(key);
  work.host->ReportSigError(key, err);
}

}  // namespace

uint64_t SigErrorsReportedByThisThread() {
  return sig_errors_reported;
}

RequesterSigScope::RequesterSigScope() : was_(in_requester_scope) {
  in_requester_scope = true;
}
RequesterSigScope::~RequesterSigScope() {
  in_requester_scope = was_;
}
bool RequesterSigScope::active() {
  return in_requester_scope;
}

VendorError AddSignedPieces(Host& host, uint32_t key, const SigAttr& attr, uint64_t mem_length,
                            bool writes, uint64_t offset, uint64_t len, KeyMemory& memory,
                            VendorError range_error, PieceList* out) {
  const SigGeometry g = SigGeometryOf(attr, mem_length);
  if (g.data == 0 || offset > g.wire_length() || len > g.wire_length() - offset) {
    return range_error;
  }
  if (len == 0) return kVendorNone;
  if (!out->sig) {
    out->sig = std::make_shared<SigWork>();
    out->sig->host = &host;
    out->sig->requester = RequesterSigScope::active();
  }
  SigWork& work = *out->sig;
  PieceList tmp;
  uint8_t data[kMaxSigBlock];
  const uint64_t end = offset + len;
  for (uint64_t b = offset / g.wire_block(); b * g.wire_block() < end; ++b) {
    const bool whole = b < g.blocks;
    const uint32_t n = whole ? g.data : g.tail;
    const uint64_t w = b * g.wire_block();  // the block's first data byte on the wire
    const uint64_t m = b * g.mem_block();   // ... in memory
    const uint64_t data_begin = std::max(offset, w);
    const uint64_t data_end = std::min(end, w + n);
    if (data_begin < data_end) {
      if (VendorError why = memory.Add(m + (data_begin - w), data_end - data_begin, out)) {
        return why;
      }
    }
    if (!whole) break;                         // a partial last block is data only
    const uint64_t written_data = out->bytes;  // the list's bytes up to the data's end here
    const bool data_ends_here = w + n > offset && w + n <= end;
    const uint64_t sig_begin = std::max(offset, w + n);
    const uint64_t sig_end = std::min(end, w + n + g.wire_sig);
    const bool wire_sig_here = g.wire_sig != 0 && sig_begin < sig_end;
    const uint32_t sig_first = static_cast<uint32_t>(sig_begin - (w + n));
    const uint32_t sig_count = static_cast<uint32_t>(sig_end - sig_begin);
    if (!writes) {
      // Reading: the memory's signature checked where the block's data
      // ends here, the wire's made where it lies here.
      const bool check_memory = data_ends_here && g.mem_sig != 0 && attr.check_mask != 0;
      if (!check_memory && !wire_sig_here) continue;
      if (VendorError why = ReadMemory(memory, m, n, &tmp, data)) return why;
      uint8_t mem_sig[kMaxSigBytes] = {};
      if (g.mem_sig != 0) {
        if (VendorError why = ReadMemory(memory, m + n, g.mem_sig, &tmp, mem_sig)) return why;
      }
      if (check_memory) {
        uint8_t expected[kMaxSigBytes] = {};
        ComputeSig(attr.mem, b, data, n, expected);
        SigError err{};
        if (SigMismatch(attr.mem, kSigDomainMemory, expected, mem_sig, 0xff, attr.check_mask,
                        &err)) {
          err.offset = w;
          Report(work, key, err);
        }
      }
      if (wire_sig_here) {
        auto& sig = work.scratch.emplace_back();
        sig.fill(0);
        ComputeSig(attr.wire, b, data, n, sig.data());
        for (uint32_t i = 0; i < g.wire_sig; ++i) {
          if (g.mem_sig != 0 && (attr.copy_mask & SigByteBit(i))) sig[i] = mem_sig[i];
        }
        if (!out->Add(MemPiece{sig.data() + sig_first, -1, 0, sig_count})) return range_error;
      }
      continue;
    }
    // Writing: the memory's signature made once the block's data is written,
    // the wire's that arrives here checked once it is.
    if (data_ends_here && g.mem_sig != 0) {
      SigWork::Task& t = work.tasks.emplace_back();
      t.trigger = written_data;
      t.key = key;
      t.attr = attr;
      t.block = b;
      t.wire_offset = w;
      if (VendorError why = Collect(memory, m, n, &tmp, &t.data)) return why;
      if (VendorError why = Collect(memory, m + n, g.mem_sig, &tmp, &t.mem_sig)) return why;
    }
    if (wire_sig_here) {
      auto& sig = work.scratch.emplace_back();
      sig.fill(0);
      if (!out->Add(MemPiece{sig.data(), -1, 0, sig_count})) return range_error;
      SigWork::Task& t = work.tasks.emplace_back();
      t.trigger = out->bytes;
      t.key = key;
      t.attr = attr;
      t.block = b;
      t.wire_offset = w;
      t.wire_sig = sig.data();
      t.wire_sig_first = sig_first;
      t.wire_sig_count = sig_count;
      if (VendorError why = Collect(memory, m, n, &tmp, &t.data)) return why;
      if (g.mem_sig != 0 && (attr.copy_mask & SigByteBits(sig_first, sig_count))) {
        if (VendorError why = Collect(memory, m + n, g.mem_sig, &tmp, &t.mem_sig)) return why;
      }
    }
  }
  return kVendorNone;
}

bool FinishSignedWrite(SigWork& work, uint64_t copied) {
  uint8_t data[kMaxSigBlock];
  size_t kept = 0;
  for (size_t i = 0; i < work.tasks.size(); ++i) {
    SigWork::Task& t = work.tasks[i];
    if (t.trigger > copied) {
      if (kept != i) work.tasks[kept] = std::move(t);
      ++kept;
      continue;
    }
    uint64_t n = 0;
    for (const MemPiece& p : t.data) n += p.len;
    if (n > kMaxSigBlock || !ReadPieces(t.data.data(), static_cast<int>(t.data.size()), data)) {
      return false;
    }
    if (t.wire_sig != nullptr) {
      uint8_t expected[kMaxSigBytes] = {};
      ComputeSig(t.attr.wire, t.block, data, static_cast<uint32_t>(n), expected);
      uint8_t got[kMaxSigBytes] = {};
      memcpy(got + t.wire_sig_first, t.wire_sig, t.wire_sig_count);
      const uint8_t have = SigByteBits(t.wire_sig_first, t.wire_sig_count);
      SigError err{};
      if (SigMismatch(t.attr.wire, kSigDomainWire, expected, got, have, t.attr.check_mask, &err)) {
        err.offset = t.wire_offset;
        Report(work, t.key, err);
      }
      if (!t.mem_sig.empty() && !WriteSigBytes(t.mem_sig, got, have & t.attr.copy_mask)) {
        return false;
      }
      continue;
    }
    uint8_t sig[kMaxSigBytes] = {};
    ComputeSig(t.attr.mem, t.block, data, static_cast<uint32_t>(n), sig);
    uint8_t mask = SigByteBits(0, SigBytes(t.attr.mem));
    if (t.attr.wire.kind != kSigNone) mask &= static_cast<uint8_t>(~t.attr.copy_mask);
    if (!WriteSigBytes(t.mem_sig, sig, mask)) return false;
  }
  work.tasks.resize(kept);
  return true;
}

}  // namespace softverbs::datapath
