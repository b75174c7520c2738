// Pieces of a device in this process's memory, for the transport engines'
// unit tests (tests/unit/datapath/shm_engine_test.cc, tests/unit/roce/
// wire_qp_test.cc): a device table in anonymous memory, CQ rings and
// receive queues in plain vectors, and MRs over the test's own buffers.
#pragma once

#include <sys/mman.h>

#include <cstdint>
#include <vector>

#include "datapath/cq_ring.h"
#include "datapath/device_table.h"
#include "datapath/engine.h"
#include "datapath/recv_queue.h"

namespace softverbs::datapath::testing {

inline constexpr uint32_t kAllRemoteAccess =
    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

// A CQ ring of cqe entries.
struct TestCq {
  std::vector<uint8_t> mem;
  CqRing cq;
  explicit TestCq(uint32_t cqe) : mem(CqFileSize(cqe)) {
    InitCqFile(mem.data(), cqe, 1);
    cq.Attach(mem.data());
  }
  // Takes every completion in the ring, oldest first.
  std::vector<Completion> Drain() {
    std::vector<Completion> out;
    Completion c;
    while (cq.Peek(&c)) {
      cq.Pop();
      out.push_back(c);
    }
    return out;
  }
};

// The receive side of one QP: its own receive queue of 16 WQEs of up to 4
// SGEs and its receive CQ, as PeerQp points to them.
struct TestReceiveSide {
  std::vector<uint8_t> rq_mem = std::vector<uint8_t>(RecvQueueFileSize(16, 4));
  TestCq recv{64};
  PeerQp peer;
  TestReceiveSide(uint32_t qpn, uint32_t owner, uint32_t pdn) {
    InitRecvQueueFile(rq_mem.data(), 16, 4);
    peer.qpn = qpn;
    peer.generation = 1;
    peer.owner = owner;
    peer.pdn = pdn;
    peer.rq.Attach(rq_mem.data());
    peer.recv_cq.Attach(recv.mem.data());
  }
};

// A device table in anonymous memory.
class TestDeviceTable {
 public:
  TestDeviceTable() {
    mem_ = mmap(nullptr, kDeviceTableSize, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    DeviceTable::Init(mem_);
    table_ = DeviceTable(mem_);
  }
  ~TestDeviceTable() { munmap(mem_, kDeviceTableSize); }
  TestDeviceTable(const TestDeviceTable&) = delete;
  TestDeviceTable& operator=(const TestDeviceTable&) = delete;

  const DeviceTable& table() const { return table_; }

  // Publishes QP qpn (generation 1) of `type` in `state`, connected to dest
  // (RC/UC), every remote access allowed, min_rnr_timer 1 (10 us).
  QpEntry* AddQp(uint32_t qpn, uint32_t type, uint32_t dest, uint32_t owner, uint32_t pdn,
                 uint32_t state = IBV_QPS_RTS) {
    QpEntry* e = table_.QpSlot(qpn);
    e->generation.store(1);
    e->type.store(type);
    e->owner.store(owner);
    e->pdn.store(pdn);
    e->access.store(kAllRemoteAccess);
    e->dest_qpn.store(dest);
    e->min_rnr_timer.store(1);
    e->state.store(state);
    e->qpn.store(qpn);
    return e;
  }
  // Registers [p, p + len) under key (as lkey and rkey).
  void AddMr(uint32_t key, void* p, uint64_t len, uint32_t owner, uint32_t pdn,
             uint32_t access = IBV_ACCESS_LOCAL_WRITE | kAllRemoteAccess) {
    MrEntry* e = table_.MrSlot(key);
    e->access.store(access);
    e->owner.store(owner);
    e->pdn.store(pdn);
    e->iova.store(reinterpret_cast<uint64_t>(p));
    e->addr.store(reinterpret_cast<uint64_t>(p));
    e->length.store(len);
    // Backed in whole, as the device publishes a registration of whole
    // pages: its owner reaches every byte directly, atomics included.
    e->backed_begin.store(reinterpret_cast<uint64_t>(p));
    e->backed_end.store(reinterpret_cast<uint64_t>(p) + len);
    e->rkey.store(key);
    e->lkey.store(key);
  }
  // Deregisters it: the keys cleared, as the daemon's dereg does first.
  void RemoveMr(uint32_t key) {
    MrEntry* e = table_.MrSlot(key);
    e->rkey.store(0);
    e->lkey.store(0);
  }

 private:
  void* mem_ = nullptr;
  DeviceTable table_;
};

}  // namespace softverbs::datapath::testing
