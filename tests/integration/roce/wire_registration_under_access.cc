// A registration that converts pages the device's network transport is
// reaching through another MR, across hosts (roce.wire_registration_under_access).
// Bytes of an MR that are not on a whole page of it - here 496 8-byte slots
// in the middle of a page - are reached through the owner's /proc/<pid>/mem;
// when the owner then registers a range that holds that page whole, the
// conversion makes them unreachable for its window (docs/datapath.md,
// "Registered memory"). On a NIC a registration never disturbs another MR's
// traffic: every operation succeeds and every byte arrives.
//
// Each round the owner registers a fresh 4 MiB range around the slots' page
// right after the first operation completed, while the peer goes on, one
// operation per slot:
//   write   the client WRITEs slot i of the server's MR  (server converts)
//   send    the client SENDs into a receive on slot i     (server converts)
//   read    the client READs slot i                       (server converts)
//   atomic  the client FETCH_ADDs 1 to slot 0             (server converts)
//   sink    the client READs the server's value i into slot i of its own
//           MR, 16 in flight                              (client converts)
// and the side that received checks every slot. (Reads of converting pages
// are not held up - the hold stops writes - so there is no WRITE or SEND
// from the converting side.)
//
//   wire_registration_under_access server PORT
//   wire_registration_under_access client SERVER_IPV4 PORT
// (WIRE_PHASES=send,sink in both environments: those phases alone.)
#include <sys/mman.h>

#include <string>
#include <thread>

#include "wire_rc_pair.h"

namespace {

using namespace wire_rc_pair;

constexpr int kRounds = 6;
constexpr uint32_t kSlots = 496;         // 8-byte slots on one partial page
constexpr size_t kRange = 32 << 20;      // what the registration converts (a window of ~15 ms)
constexpr size_t kSlotsPage = 16 << 20;  // offset of the slots' page in it
constexpr uint32_t kSlotsOffset = 64;    // first slot in that page
constexpr uint32_t kInFlight = 16;       // phase source
constexpr unsigned kAllRemote = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

enum Phase : uint32_t { kWrite, kSend, kRead, kAtomic, kSink, kPhases };
const char* const kPhaseNames[] = {"write", "send", "read", "atomic", "sink"};

// Whether this run does the phase (WIRE_PHASES, or all).
bool Runs(uint32_t phase) {
  const char* only = getenv("WIRE_PHASES");
  if (only == nullptr || *only == 0) return true;
  const std::string list = std::string(",") + only + ",";
  return list.find(std::string(",") + kPhaseNames[phase] + ",") != std::string::npos;
}

uint64_t Value(uint32_t phase, int round, uint32_t slot) {
  return (uint64_t{0xa5} << 56) | (uint64_t{phase} << 48) | (uint64_t(round) << 32) | (slot + 1);
}

// A fresh range with the slots on a page of it, and an MR of the slots alone.
struct Slots {
  uint8_t* range = nullptr;
  uint64_t* slot = nullptr;
  ibv_mr* mr = nullptr;
};

Slots MakeSlots(ibv_pd* pd, unsigned access) {
  Slots s;
  s.range = static_cast<uint8_t*>(
      mmap(nullptr, kRange, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  WIRE_CHECK(s.range != MAP_FAILED);
  memset(s.range, 0, kRange);  // touched: the registration converts every page
  s.slot = reinterpret_cast<uint64_t*>(s.range + kSlotsPage + kSlotsOffset);
  s.mr = ibv_reg_mr(pd, s.slot, kSlots * 8, access);
  WIRE_CHECK(s.mr != nullptr);
  return s;
}

void FreeSlots(Slots& s) {
  WIRE_CHECK(ibv_dereg_mr(s.mr) == 0);
  munmap(s.range, kRange);
}

// The registration the round is about.
ibv_mr* RegisterRange(ibv_pd* pd, Slots& s) {
  ibv_mr* mr = ibv_reg_mr(pd, s.range, kRange, IBV_ACCESS_LOCAL_WRITE);
  WIRE_CHECK(mr != nullptr);
  return mr;
}

struct Round {
  uint64_t addr;
  uint32_t rkey;
  uint32_t phase;
};

struct Report {
  uint32_t done;        // operations completed successfully
  int32_t status;       // -1: all did; else the ibv_wc_status of the first that failed
  uint32_t mismatches;  // slots (or results) that did not hold what they should
  uint32_t first_bad;   // the first such slot
};

void PostRecv(ibv_qp* qp, uint64_t wr_id, void* p, uint32_t lkey) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(p), 8, lkey};
  ibv_recv_wr wr{}, *bad = nullptr;
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  WIRE_CHECK(ibv_post_recv(qp, &wr, &bad) == 0);
}

void PostSend(ibv_qp* qp, ibv_wr_opcode op, uint64_t wr_id, void* local, uint32_t len,
              uint32_t lkey, uint64_t remote, uint32_t rkey) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(local), len, lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
    wr.wr.atomic.remote_addr = remote;
    wr.wr.atomic.rkey = rkey;
    wr.wr.atomic.compare_add = 1;
  } else {
    wr.wr.rdma.remote_addr = remote;
    wr.wr.rdma.rkey = rkey;
  }
  WIRE_CHECK(ibv_post_send(qp, &wr, &bad) == 0);
}

// The next completion, sleeping between empty polls: on a machine of two
// cores, with the owner busy converting on one, the peer must leave its
// device the other core to send and receive (spinning, it held the packets
// back until the registration was over and nothing overlapped).
ibv_wc PollSleeping(Side& s) {
  ibv_wc wc{};
  for (int waits = 0;; ++waits) {
    const int n = ibv_poll_cq(s.cq, 1, &wc);
    WIRE_CHECK(n >= 0);
    if (n == 1) return wc;
    if (waits > 1'000'000) Die("no completion in 20 s");
    usleep(20);
  }
}

// ---- server

// Checks the slots after the client's report; answers with the mismatches.
void ServerRound(Side& s, int fd, int round, uint32_t phase) {
  const bool converts = phase != kSink;
  Slots slots = MakeSlots(s.pd, kAllRemote);
  if (phase == kRead) {
    for (uint32_t i = 0; i < kSlots; ++i) slots.slot[i] = Value(phase, round, i);
  }
  // The client's sink reads the server's own (wholly registered) buffer.
  auto* own = reinterpret_cast<uint64_t*>(s.mem);
  if (phase == kSink) {
    for (uint32_t i = 0; i < kSlots; ++i) own[i] = Value(phase, round, i);
  }
  if (phase == kSend) {
    for (uint32_t i = 0; i < kSlots; ++i) PostRecv(s.qp, i, &slots.slot[i], slots.mr->lkey);
  }
  const Round r = phase == kSink
                      ? Round{reinterpret_cast<uintptr_t>(own), s.mr->rkey, phase}
                      : Round{reinterpret_cast<uintptr_t>(slots.slot), slots.mr->rkey, phase};
  SendAll(fd, &r, sizeof(r));
  char started = 0;
  RecvAll(fd, &started, 1);
  ibv_mr* whole = converts ? RegisterRange(s.pd, slots) : nullptr;
  Report rep{};
  RecvAll(fd, &rep, sizeof(rep));
  Report check{0, -1, 0, 0};
  const auto expect = [&](uint32_t i, uint64_t got, uint64_t want) {
    if (got != want && check.mismatches++ == 0) check.first_bad = i;
  };
  if (phase == kSend) {
    // Every receive the client's sends consumed completed, successfully.
    for (uint32_t n = 0; n < rep.done; ++n) {
      ibv_wc wc = PollOk(s, "receive");
      WIRE_CHECK(wc.wr_id == n);
    }
  }
  for (uint32_t i = 0; i < rep.done && (phase == kWrite || phase == kSend); ++i) {
    expect(i, slots.slot[i], Value(phase, round, i));
  }
  if (phase == kAtomic) expect(0, slots.slot[0], rep.done);
  SendAll(fd, &check, sizeof(check));
  if (whole) WIRE_CHECK(ibv_dereg_mr(whole) == 0);
  FreeSlots(slots);
  // The receives the client did not use go with a flush at the end; none
  // are left over: the client always sends all kSlots unless one failed.
}

int Server(int port) {
  Side s;
  OpenOptions o;
  o.bytes = kSlots * 8;
  o.mr_access = kAllRemote;
  o.qp_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  o.cqe = 1024;
  o.max_recv_wr = kSlots;
  Open(s, o);
  const int fd = AcceptOne(port);
  ExchangeAndConnect(s, fd, /*server=*/true);
  for (uint32_t phase = 0; phase < kPhases; ++phase) {
    for (int round = 0; round < kRounds && Runs(phase); ++round) ServerRound(s, fd, round, phase);
  }
  return 0;
}

// ---- client

// One round of a phase; the report of what the client saw, checked by the
// server as well.
bool ClientRound(Side& s, int fd, int round) {
  Round r{};
  RecvAll(fd, &r, sizeof(r));
  const uint32_t phase = r.phase;
  auto* result = reinterpret_cast<uint64_t*>(s.mem);  // READ and FETCH_ADD results
  uint64_t* source = result + kSlots;                 // WRITE and SEND payloads
  Report rep{0, -1, 0, 0};
  const auto expect = [&](uint32_t i, uint64_t got, uint64_t want) {
    if (got != want && rep.mismatches++ == 0) rep.first_bad = i;
  };
  bool started = false;
  const auto start = [&] {
    if (started) return;
    started = true;
    SendAll(fd, "s", 1);
  };
  if (phase != kSink) {
    for (uint32_t i = 0; i < kSlots; ++i) {
      const uint64_t remote = r.addr + 8ull * (phase == kAtomic ? 0 : i);
      source[i] = Value(phase, round, i);
      result[i] = 0;
      switch (phase) {
        case kWrite:
          PostSend(s.qp, IBV_WR_RDMA_WRITE, i, &source[i], 8, s.mr->lkey, remote, r.rkey);
          break;
        case kSend:
          PostSend(s.qp, IBV_WR_SEND, i, &source[i], 8, s.mr->lkey, 0, 0);
          break;
        case kRead:
          PostSend(s.qp, IBV_WR_RDMA_READ, i, &result[i], 8, s.mr->lkey, remote, r.rkey);
          break;
        default:
          PostSend(s.qp, IBV_WR_ATOMIC_FETCH_AND_ADD, i, &result[i], 8, s.mr->lkey, remote, r.rkey);
          break;
      }
      const ibv_wc wc = PollSleeping(s);
      if (wc.status != IBV_WC_SUCCESS) {
        rep.status = wc.status;
        break;
      }
      if (phase == kRead) expect(i, result[i], Value(phase, round, i));
      if (phase == kAtomic) expect(i, result[i], i);
      rep.done++;
      start();
    }
  } else {
    // Into the client's own slots, 16 in flight, while a thread of the
    // client registers the range around them.
    Slots slots = MakeSlots(s.pd, IBV_ACCESS_LOCAL_WRITE);
    ibv_mr* whole = nullptr;
    std::thread registrar;
    uint32_t posted = 0;
    while (rep.done < kSlots && rep.status == -1) {
      while (posted < kSlots && posted - rep.done < kInFlight) {
        PostSend(s.qp, IBV_WR_RDMA_READ, posted, &slots.slot[posted], 8, slots.mr->lkey,
                 r.addr + 8ull * posted, r.rkey);
        ++posted;
      }
      const ibv_wc wc = PollSleeping(s);
      if (wc.status != IBV_WC_SUCCESS) {
        rep.status = wc.status;
        break;
      }
      rep.done++;
      if (!started) {
        start();
        registrar = std::thread([&] { whole = RegisterRange(s.pd, slots); });
      }
    }
    if (registrar.joinable()) registrar.join();
    for (uint32_t i = 0; i < rep.done; ++i) expect(i, slots.slot[i], Value(phase, round, i));
    if (whole) WIRE_CHECK(ibv_dereg_mr(whole) == 0);
    FreeSlots(slots);
  }
  start();  // a round that failed at once still lets the server go on
  SendAll(fd, &rep, sizeof(rep));
  Report check{};
  RecvAll(fd, &check, sizeof(check));
  const char* name = kPhaseNames[phase];
  if (rep.status != -1) {
    fprintf(stderr, "%s round %d: operation %u failed: %s\n", name, round, rep.done,
            ibv_wc_status_str(static_cast<ibv_wc_status>(rep.status)));
  }
  if (rep.mismatches) {
    fprintf(stderr, "%s round %d: %u results wrong, the first of slot %u\n", name, round,
            rep.mismatches, rep.first_bad);
  }
  if (check.mismatches) {
    fprintf(stderr, "%s round %d: %u slots wrong on the receiving side, the first %u\n", name,
            round, check.mismatches, check.first_bad);
  }
  return rep.status == -1 && rep.mismatches == 0 && check.mismatches == 0 && rep.done == kSlots;
}

int Client(const char* host, int port) {
  Side s;
  OpenOptions o;
  o.bytes = 2 * kSlots * 8;
  o.cqe = 1024;
  o.max_send_wr = kInFlight * 2;
  Open(s, o);
  const int fd = Dial(host, port);
  ExchangeAndConnect(s, fd, /*server=*/false);
  bool ok = true;
  for (uint32_t phase = 0; phase < kPhases && ok; ++phase) {
    for (int round = 0; round < kRounds && ok && Runs(phase); ++round) {
      ok = ClientRound(s, fd, round);
    }
  }
  if (!ok) return 1;
  printf("OK\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  program = "wire_registration_under_access";
  if (argc == 3 && strcmp(argv[1], "server") == 0) return Server(atoi(argv[2]));
  if (argc == 4 && strcmp(argv[1], "client") == 0) return Client(argv[2], atoi(argv[3]));
  fprintf(stderr, "usage: %s server PORT | client SERVER_IPV4 PORT\n", program);
  return 2;
}
