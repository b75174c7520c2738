// Moves data between two hosts over one RC QP by SEND, RDMA WRITE, RDMA
// READ and atomics, and checks every byte and every atomic result - the
// loss-recovery test of the network transport (roce.wire_transfer_faults,
// docs/roce.md): run with SOFTVERBS_ROCE_FAULTS on both devices, whatever
// the carriers drop, duplicate, reorder or corrupt must be recovered.
//
//   wire_transfer server PORT
//   wire_transfer client SERVER_IPV4 PORT MIB
//
// The QPs' attributes go over a TCP connection. The client then, in rounds
// of 4 MiB: SENDs the round in 64 KiB messages (immediate = message number;
// the server checks each), WRITEs it into the server's buffer and SENDs
// "written" (the server checks the buffer), READs the server's pattern back
// and checks it. Then 2,000 FETCH_ADDs of 1 on a counter of the server's
// (each must return the previous count: executed once each, in order) and
// 500 COMPARE_SWAPs that walk it on. Exit 0 and "OK" when all is right.
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "wire_rc_pair.h"

namespace {

constexpr uint32_t kChunk = 64 * 1024;
constexpr uint32_t kRound = 4 * 1024 * 1024;
constexpr uint32_t kChunksPerRound = kRound / kChunk;
constexpr uint32_t kRecvs = 64;
constexpr uint32_t kWrittenImm = 0x80000000u;
constexpr uint32_t kEndImm = 0xffffffffu;
constexpr int kFetchAdds = 2000;
constexpr int kCompareSwaps = 500;
using wire_rc_pair::kGidIndex;  // the port's IPv4 RoCE v2 GID

[[noreturn]] void Die(const char* what) {
  fprintf(stderr, "wire_transfer: %s\n", what);
  exit(1);
}

#define CHECK(cond)                           \
  do {                                        \
    if (!(cond)) Die("check failed: " #cond); \
  } while (0)

// The byte at offset i of pattern `kind` for `seq`.
uint8_t Pattern(uint32_t kind, uint32_t seq, uint64_t i) {
  uint64_t x = (static_cast<uint64_t>(kind) << 40) ^ (static_cast<uint64_t>(seq) << 20) ^ i;
  x *= 0x9e3779b97f4a7c15ull;
  return static_cast<uint8_t>(x >> 56);
}

void Fill(uint8_t* p, uint32_t len, uint32_t kind, uint32_t seq) {
  for (uint32_t i = 0; i < len; ++i) p[i] = Pattern(kind, seq, i);
}

bool Matches(const uint8_t* p, uint32_t len, uint32_t kind, uint32_t seq) {
  for (uint32_t i = 0; i < len; ++i) {
    if (p[i] != Pattern(kind, seq, i)) return false;
  }
  return true;
}

struct Endpoint {
  uint32_t qpn;
  uint32_t psn;
  uint8_t gid[16];
  uint64_t write_addr;  // the server's write target (kRound bytes)
  uint64_t read_addr;   // the server's read source (kRound bytes)
  uint64_t atomic_addr;
  uint32_t rkey;
  uint32_t reserved;
};

// [send/recv chunks][write area][read area][atomic] in mem.
struct Device : wire_rc_pair::Side {
  size_t size = 0;
};

uint8_t* Chunks(Device& d) {
  return d.mem;
}
uint8_t* WriteArea(Device& d) {
  return d.mem + kRecvs * kChunk;
}
uint8_t* ReadArea(Device& d) {
  return WriteArea(d) + kRound;
}
uint64_t* AtomicWord(Device& d) {
  return reinterpret_cast<uint64_t*>(ReadArea(d) + kRound);
}

void Open(Device& d) {
  wire_rc_pair::OpenOptions o;
  o.bytes = d.size = kRecvs * kChunk + 2 * kRound + 4096;
  o.mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                IBV_ACCESS_REMOTE_ATOMIC;
  o.qp_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  o.cqe = 4 * kRecvs + 64;
  o.max_send_wr = 256;
  o.max_recv_wr = kRecvs;
  wire_rc_pair::Open(d, o);
}

Endpoint Local(Device& d, uint32_t psn) {
  Endpoint e{};
  e.qpn = d.qp->qp_num;
  e.psn = psn;
  ibv_gid gid;
  CHECK(ibv_query_gid(d.ctx, 1, kGidIndex, &gid) == 0);
  memcpy(e.gid, gid.raw, 16);
  e.write_addr = reinterpret_cast<uint64_t>(WriteArea(d));
  e.read_addr = reinterpret_cast<uint64_t>(ReadArea(d));
  e.atomic_addr = reinterpret_cast<uint64_t>(AtomicWord(d));
  e.rkey = d.mr->rkey;
  return e;
}

void Connect(Device& d, const Endpoint& local, const Endpoint& remote) {
  wire_rc_pair::PathOptions o;
  o.sq_psn = local.psn;
  // 33.5 ms: a lost last packet costs one timeout, and seven in a row
  // without progress (235 ms) fail the WR - 4.2 ms (33 ms in all) and then
  // 8.4 ms (67 ms) were exceeded on a 2-core machine running other tests
  // beside (the daemons not scheduled).
  o.timeout = 13;
  o.rd_atomic = 16;
  wire_rc_pair::ConnectQp(d.qp, remote.qpn, remote.psn, remote.gid, o);
}

void PostRecv(Device& d, uint32_t slot) {
  ibv_sge sge{reinterpret_cast<uint64_t>(Chunks(d) + slot * kChunk), kChunk, d.mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  CHECK(ibv_post_recv(d.qp, &wr, &bad) == 0);
}

ibv_wc Poll(Device& d) {
  ibv_wc wc{};
  int n;
  while ((n = ibv_poll_cq(d.cq, 1, &wc)) == 0) {
  }
  CHECK(n == 1);
  if (wc.status != IBV_WC_SUCCESS) {
    fprintf(stderr, "wire_transfer: completion of wr_id %llu: %s (vendor_err 0x%x)\n",
            static_cast<unsigned long long>(wc.wr_id), ibv_wc_status_str(wc.status), wc.vendor_err);
    exit(1);
  }
  return wc;
}

// Posts one WR and waits for its completion (the only one outstanding).
ibv_wc Run(Device& d, ibv_send_wr& wr) {
  wr.send_flags |= IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  CHECK(ibv_post_send(d.qp, &wr, &bad) == 0);
  return Poll(d);
}

void Exchange(int fd, const Endpoint& out, Endpoint* in) {
  CHECK(write(fd, &out, sizeof(out)) == sizeof(out));
  size_t got = 0;
  while (got < sizeof(*in)) {
    ssize_t n = read(fd, reinterpret_cast<char*>(in) + got, sizeof(*in) - got);
    CHECK(n > 0);
    got += static_cast<size_t>(n);
  }
}

int Server(int port) {
  const int ls = wire_rc_pair::Listen(port);
  printf("listening\n");
  fflush(stdout);
  int fd = accept(ls, nullptr, nullptr);
  CHECK(fd >= 0);
  Device d;
  Open(d);
  Fill(ReadArea(d), kRound, 3, 0);
  for (uint32_t i = 0; i < kRecvs; ++i) PostRecv(d, i);
  Endpoint local = Local(d, 0x123456), remote{};
  Exchange(fd, local, &remote);
  Connect(d, local, remote);
  uint64_t sends = 0, rounds = 0, bad = 0;
  for (;;) {
    ibv_wc wc = Poll(d);
    CHECK(wc.opcode == IBV_WC_RECV && (wc.wc_flags & IBV_WC_WITH_IMM));
    const uint32_t imm = ntohl(wc.imm_data);
    const uint8_t* chunk = Chunks(d) + wc.wr_id * kChunk;
    if (imm == kEndImm) break;
    if (imm & kWrittenImm) {
      if (!Matches(WriteArea(d), kRound, 2, imm & ~kWrittenImm)) bad++;
      rounds++;
    } else {
      if (wc.byte_len != kChunk || !Matches(chunk, kChunk, 1, imm)) bad++;
      sends++;
    }
    PostRecv(d, static_cast<uint32_t>(wc.wr_id));
  }
  uint64_t report[3] = {bad, *AtomicWord(d), sends};
  CHECK(write(fd, report, sizeof(report)) == sizeof(report));
  printf("server: %llu SENDs and %llu written rounds checked, %llu bad, counter %llu\n",
         static_cast<unsigned long long>(sends), static_cast<unsigned long long>(rounds),
         static_cast<unsigned long long>(bad), static_cast<unsigned long long>(report[1]));
  char byte;
  CHECK(read(fd, &byte, 1) >= 0);  // the client has read the report
  return bad == 0 ? 0 : 1;
}

int Client(const char* host, int port, uint32_t mib) {
  const int fd = wire_rc_pair::Dial(host, port);
  Device d;
  Open(d);
  Endpoint local = Local(d, 0xfffff0), remote{};  // PSNs wrap during the run
  Exchange(fd, local, &remote);
  Connect(d, local, remote);
  const uint32_t rounds = std::max<uint32_t>(1, mib / 4);
  uint8_t* chunk = Chunks(d);
  uint64_t bytes = 0;
  uint32_t message = 0;
  for (uint32_t r = 0; r < rounds; ++r) {
    // SEND: 64 KiB messages, each numbered by its immediate.
    for (uint32_t i = 0; i < kChunksPerRound; ++i, ++message) {
      Fill(chunk, kChunk, 1, message);
      ibv_sge sge{reinterpret_cast<uint64_t>(chunk), kChunk, d.mr->lkey};
      ibv_send_wr wr{};
      wr.opcode = IBV_WR_SEND_WITH_IMM;
      wr.imm_data = htonl(message);
      wr.sg_list = &sge;
      wr.num_sge = 1;
      Run(d, wr);
      bytes += kChunk;
    }
    // WRITE the round into the server's area, then tell it.
    Fill(WriteArea(d), kRound, 2, r);
    for (uint32_t i = 0; i < kChunksPerRound; ++i) {
      ibv_sge sge{reinterpret_cast<uint64_t>(WriteArea(d) + i * kChunk), kChunk, d.mr->lkey};
      ibv_send_wr wr{};
      wr.opcode = IBV_WR_RDMA_WRITE;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.wr.rdma.remote_addr = remote.write_addr + i * kChunk;
      wr.wr.rdma.rkey = remote.rkey;
      Run(d, wr);
      bytes += kChunk;
    }
    ibv_send_wr note{};
    note.opcode = IBV_WR_SEND_WITH_IMM;
    note.imm_data = htonl(kWrittenImm | r);
    Run(d, note);
    // READ the server's pattern back.
    memset(ReadArea(d), 0, kRound);
    for (uint32_t i = 0; i < kChunksPerRound; ++i) {
      ibv_sge sge{reinterpret_cast<uint64_t>(ReadArea(d) + i * kChunk), kChunk, d.mr->lkey};
      ibv_send_wr wr{};
      wr.opcode = IBV_WR_RDMA_READ;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.wr.rdma.remote_addr = remote.read_addr + i * kChunk;
      wr.wr.rdma.rkey = remote.rkey;
      Run(d, wr);
      bytes += kChunk;
    }
    if (!Matches(ReadArea(d), kRound, 3, 0)) Die("READ returned wrong bytes");
  }
  // Atomics: each FETCH_ADD returns the count before it, exactly once.
  uint64_t* result = AtomicWord(d);
  for (int i = 0; i < kFetchAdds; ++i) {
    ibv_sge sge{reinterpret_cast<uint64_t>(result), 8, d.mr->lkey};
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.atomic.remote_addr = remote.atomic_addr;
    wr.wr.atomic.rkey = remote.rkey;
    wr.wr.atomic.compare_add = 1;
    Run(d, wr);
    if (*result != static_cast<uint64_t>(i)) Die("FETCH_ADD returned a wrong count");
  }
  // COMPARE_SWAP walks the counter on by 3: each must find what the last set.
  uint64_t expect = kFetchAdds;
  for (int i = 0; i < kCompareSwaps; ++i) {
    ibv_sge sge{reinterpret_cast<uint64_t>(result), 8, d.mr->lkey};
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.atomic.remote_addr = remote.atomic_addr;
    wr.wr.atomic.rkey = remote.rkey;
    wr.wr.atomic.compare_add = expect;
    wr.wr.atomic.swap = expect + 3;
    Run(d, wr);
    if (*result != expect) Die("COMPARE_SWAP found a wrong value");
    expect += 3;
  }
  ibv_send_wr end{};
  end.opcode = IBV_WR_SEND_WITH_IMM;
  end.imm_data = htonl(kEndImm);
  Run(d, end);
  uint64_t report[3];
  size_t got = 0;
  while (got < sizeof(report)) {
    ssize_t n = read(fd, reinterpret_cast<char*>(report) + got, sizeof(report) - got);
    CHECK(n > 0);
    got += static_cast<size_t>(n);
  }
  CHECK(write(fd, "x", 1) == 1);
  printf(
      "client: %llu MiB moved (SEND, WRITE, READ), %d FETCH_ADD, %d COMPARE_SWAP; server: "
      "%llu bad, counter %llu (expected %llu)\n",
      static_cast<unsigned long long>(bytes >> 20), kFetchAdds, kCompareSwaps,
      static_cast<unsigned long long>(report[0]), static_cast<unsigned long long>(report[1]),
      static_cast<unsigned long long>(expect));
  if (report[0] != 0 || report[1] != expect || report[2] != message) Die("the server disagrees");
  printf("OK\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "server") == 0) return Server(atoi(argv[2]));
  if (argc == 5 && strcmp(argv[1], "client") == 0) {
    return Client(argv[2], atoi(argv[3]), static_cast<uint32_t>(atoi(argv[4])));
  }
  fprintf(stderr, "usage: wire_transfer server PORT | client SERVER_IPV4 PORT MIB\n");
  return 2;
}
