// No WRITE lands after ibv_dereg_mr returns, across hosts (roce.wire_dereg):
// the client on host B streams 4 KiB RDMA WRITEs of 0xc1 bytes into the
// server's 64 KiB MR on host A, 16 in flight; 50 ms after the server has
// seen the bytes arrive it deregisters the MR in the middle of the stream,
// zeroes the buffer (still its memory) and watches it for 300 ms: any byte
// that changes is a WRITE the device let through after the dereg. The client's
// stream must end in IBV_WC_REM_ACCESS_ERR (the responder's NAK for the
// dead rkey), every WRITE before it successful.
//
//   wire_dereg server PORT
//   wire_dereg client SERVER_IPV4 PORT
#include <time.h>

#include "wire_rc_pair.h"

namespace {

using namespace wire_rc_pair;

constexpr uint32_t kWrite = 4096;
constexpr uint32_t kBuffer = 16 * kWrite;
constexpr uint32_t kInFlight = 16;
constexpr uint64_t kMaxWrites = 2'000'000;  // bounds the client's stream

struct Target {
  uint64_t addr;
  uint32_t rkey;
  uint32_t pad;
};

int64_t NowMs() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000LL + t.tv_nsec / 1'000'000;
}

int Server(int port) {
  Side s;
  Open(s, kBuffer, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, IBV_ACCESS_REMOTE_WRITE);
  const int fd = AcceptOne(port);
  ExchangeAndConnect(s, fd, /*server=*/true);
  Target t{reinterpret_cast<uint64_t>(s.mem), s.mr->rkey, 0};
  SendAll(fd, &t, sizeof(t));
  // The stream is under way: every 4 KiB slot has been written at least once
  // (not a vacuous test), and more WRITEs keep coming.
  const volatile uint8_t* mem = s.mem;
  for (int64_t start = NowMs();;) {
    bool all = true;
    for (uint32_t off = 0; off < kBuffer && all; off += kWrite) all = mem[off + kWrite - 1] == 0xc1;
    if (all) break;
    if (NowMs() - start > 30'000) Die("the client's WRITEs did not arrive");
  }
  usleep(50'000);  // the stream runs on meanwhile
  WIRE_CHECK(ibv_dereg_mr(s.mr) == 0);
  memset(s.mem, 0, kBuffer);
  const int64_t since = NowMs();
  while (NowMs() - since < 300) {
    for (uint32_t i = 0; i < kBuffer; ++i) {
      if (mem[i] != 0) {
        fprintf(stderr, "wire_dereg: byte %u became 0x%02x %lld ms after ibv_dereg_mr returned\n",
                i, mem[i], static_cast<long long>(NowMs() - since));
        return 1;
      }
    }
  }
  char done = 0;
  RecvAll(fd, &done, 1);  // the client's stream has ended
  printf("server: MR deregistered mid-stream; no byte changed in the 300 ms after\n");
  close(fd);
  return 0;
}

int Client(const char* host, int port) {
  Side s;
  Open(s, kWrite, IBV_ACCESS_LOCAL_WRITE, 0);
  memset(s.mem, 0xc1, kWrite);
  const int fd = Dial(host, port);
  ExchangeAndConnect(s, fd, /*server=*/false);
  Target t{};
  RecvAll(fd, &t, sizeof(t));
  uint64_t posted = 0, ok = 0;
  ibv_wc_status first_error = IBV_WC_SUCCESS;
  while (first_error == IBV_WC_SUCCESS && posted < kMaxWrites) {
    while (posted - ok < kInFlight) {
      ibv_sge sge{reinterpret_cast<uint64_t>(s.mem), kWrite, s.mr->lkey};
      ibv_send_wr wr{}, *bad = nullptr;
      wr.wr_id = posted;
      wr.opcode = IBV_WR_RDMA_WRITE;
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.wr.rdma.remote_addr = t.addr + (posted % (kBuffer / kWrite)) * kWrite;
      wr.wr.rdma.rkey = t.rkey;
      WIRE_CHECK(ibv_post_send(s.qp, &wr, &bad) == 0);
      posted++;
    }
    const ibv_wc wc = Poll(s);
    if (wc.status != IBV_WC_SUCCESS) {
      first_error = wc.status;
      if (wc.wr_id != ok) Die("the first failed WRITE is not the oldest outstanding one");
    } else {
      ok++;
    }
  }
  // The rest of the window is flushed.
  for (uint64_t i = ok + 1; i < posted; ++i) WIRE_CHECK(Poll(s).status == IBV_WC_WR_FLUSH_ERR);
  if (first_error != IBV_WC_REM_ACCESS_ERR) {
    fprintf(stderr, "wire_dereg: the stream of %llu WRITEs ended in %s, not REM_ACCESS_ERR\n",
            static_cast<unsigned long long>(posted), ibv_wc_status_str(first_error));
    return 1;
  }
  char done = 1;
  SendAll(fd, &done, 1);
  printf("client: %llu WRITEs succeeded, then %s\nOK\n", static_cast<unsigned long long>(ok),
         ibv_wc_status_str(first_error));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  wire_rc_pair::program = "wire_dereg";
  if (argc == 3 && strcmp(argv[1], "server") == 0) return Server(atoi(argv[2]));
  if (argc == 4 && strcmp(argv[1], "client") == 0) return Client(argv[2], atoi(argv[3]));
  fprintf(stderr, "usage: wire_dereg server PORT | client SERVER_IPV4 PORT\n");
  return 2;
}
