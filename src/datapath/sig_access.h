// An access through a signature key (mlx5dv_wr_set_mkey_sig_block): the key's
// layout is the memory domain, and the access sees the wire domain - each
// whole block's data followed by the wire's signature (block_signature.h).
//
// Reading the key (a SEND's gather, an RDMA READ's source, a WRITE's local
// source) makes the wire's signatures now, from the data in memory (or copies
// the memory's bytes the copy mask names), as pieces of scratch bytes the
// access carries; and checks the memory's signature of every block whose last
// data byte the access reads. Writing the key (a receive, an RDMA WRITE's
// target, a READ response's destination) leaves each wire signature that
// arrives in scratch bytes and, once the copy is over (CopyPieces runs
// FinishSignedWrite), checks it against the data now in memory, and makes the
// memory's signature of every block whose last data byte the access wrote.
// Every part is decided by the bytes of this access alone, so a message that
// arrives in packets - each its own access - is signed and checked as a
// whole. A bad signature does not stop the access (a NIC moves the data too):
// the key's owner learns it from mlx5dv_mkey_check (Host::ReportSigError).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "datapath/block_signature.h"
#include "datapath/engine.h"
#include "datapath/memory.h"

namespace softverbs::datapath {

// How an access reaches a range of the key's memory domain: the layout's
// pieces, each MR beneath checked and counted (keyed_access.cc).
class KeyMemory {
 public:
  virtual VendorError Add(uint64_t mem_offset, uint64_t len, PieceList* out) = 0;

 protected:
  ~KeyMemory() = default;
};

// What a list of pieces that writes signature keys still has to do after
// its copy (PieceList::sig), and the scratch bytes the list's pieces name.
struct SigWork {
  struct Task {
    uint64_t trigger = 0;  // done once the copy wrote this many bytes of the list
    uint32_t key = 0;
    SigAttr attr{};
    uint64_t block = 0;
    uint64_t wire_offset = 0;           // the block's first data byte in the key's wire space
    std::vector<MemPiece> data;         // the block's data in memory
    std::vector<MemPiece> mem_sig;      // the memory's signature bytes to write (or none)
    uint32_t mem_sig_first = 0;         // ... from this byte of the signature on
    const uint8_t* wire_sig = nullptr;  // the wire's signature bytes that arrived (or none)
    uint32_t wire_sig_first = 0;        // ... byte wire_sig_first on
    uint32_t wire_sig_count = 0;
  };
  Host* host = nullptr;
  bool requester = false;                                 // made within a RequesterSigScope
  std::deque<std::array<uint8_t, kMaxSigBytes>> scratch;  // stable addresses
  std::vector<Task> tasks;
  std::vector<uint32_t> reported;  // keys a bad signature was reported for in this access
};

// Adds to out the pieces of [offset, offset + len) of signature key `key`'s
// wire space (`attr`, whose layout addresses mem_length bytes); `writes`:
// the access writes the key. range_error is what a range outside the key
// answers. Returns kVendorNone or the error of the memory beneath.
VendorError AddSignedPieces(Host& host, uint32_t key, const SigAttr& attr, uint64_t mem_length,
                            bool writes, uint64_t offset, uint64_t len, KeyMemory& memory,
                            VendorError range_error, PieceList* out);

// How many bad signatures this thread's requester-side accesses reported
// (Host::ReportSigError): a send queue with signature pipelining compares it
// around each WR. Requester-side: lists made within a RequesterSigScope (a
// WR's own gather or READ destination, a local operation) - a responder's
// list, the peer's key, is the peer's business, though the same thread may
// run it.
uint64_t SigErrorsReportedByThisThread();
class RequesterSigScope {
 public:
  RequesterSigScope();
  ~RequesterSigScope();
  RequesterSigScope(const RequesterSigScope&) = delete;
  RequesterSigScope& operator=(const RequesterSigScope&) = delete;
  static bool active();

 private:
  bool was_;
};

// After a copy wrote `copied` bytes of a list with signature work: checks the
// wire signatures that arrived and writes the memory's, for every block the
// copy completed. False if memory could not be read or written.
bool FinishSignedWrite(SigWork& work, uint64_t copied);

}  // namespace softverbs::datapath
