// The requester's own MR deregistered while its WRITEs are on the wire
// (roce.wire_local_dereg): the client on host B posts 32 RDMA WRITEs of
// 1 MiB of 0xc1 bytes from one MR, each into its own MiB of the server's MR
// on host A (0x77 before); once the first has completed - the others on the
// wire or waiting for the send window, each longer than the window - it
// deregisters the source MR and fills the buffer (still its memory) with
// 0x99. A NIC reads the SGEs for each packet it builds: the WRITE the
// device was sending fails with IBV_WC_LOC_PROT_ERR, those before it
// succeeded, those after are flushed, the QP is in ERR. On the server the
// successful WRITEs' MiBs hold 0xc1, the failed one's a prefix of 0xc1 and
// 0x77 after it, the flushed ones 0x77: no 0x99 (read after the dereg
// returned), and no WRITE that succeeded without its bytes. Until session
// 26 the packets built after the dereg went out empty, and the WRITE being
// sent succeeded with most of its MiB untouched.
//
//   wire_local_dereg server PORT
//   wire_local_dereg client SERVER_IPV4 PORT
#include "wire_rc_pair.h"

namespace {

using namespace wire_rc_pair;

constexpr size_t kWrite = 1u << 20;
constexpr uint32_t kWrites = 32;

struct Target {
  uint64_t addr;
  uint32_t rkey;
  uint32_t pad;
};

int Server(int port) {
  Side s;
  Open(s, kWrite * kWrites, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
       IBV_ACCESS_REMOTE_WRITE);
  memset(s.mem, 0x77, kWrite * kWrites);
  const int fd = AcceptOne(port);
  ExchangeAndConnect(s, fd, /*server=*/true);
  Target t{reinterpret_cast<uint64_t>(s.mem), s.mr->rkey, 0};
  SendAll(fd, &t, sizeof(t));
  uint32_t succeeded = 0;
  RecvAll(fd, &succeeded, sizeof(succeeded));  // the client's WRITEs have completed
  for (uint32_t w = 0; w < kWrites; ++w) {
    const uint8_t* mib = s.mem + size_t{w} * kWrite;
    size_t landed = 0;
    while (landed < kWrite && mib[landed] == 0xc1) landed++;
    size_t rest = landed;
    while (rest < kWrite && mib[rest] == 0x77) rest++;
    const bool right = w < succeeded   ? landed == kWrite
                       : w > succeeded ? landed == 0 && rest == kWrite
                                       : landed < kWrite && rest == kWrite;
    if (!right) {
      fprintf(stderr,
              "wire_local_dereg: WRITE %u (%s): %zu bytes of 0xc1, %zu of 0x77, %zu other\n", w,
              w < succeeded    ? "succeeded"
              : w == succeeded ? "failed"
                               : "flushed",
              landed, rest - landed, kWrite - rest);
      return 1;
    }
  }
  printf("server: %u WRITEs landed whole, the failed one's first bytes, nothing else\n", succeeded);
  close(fd);
  return 0;
}

int Client(const char* host, int port) {
  Side s;
  OpenOptions o;
  o.bytes = kWrite;
  o.max_send_wr = kWrites;
  Open(s, o);
  memset(s.mem, 0xc1, kWrite);
  const int fd = Dial(host, port);
  ExchangeAndConnect(s, fd, /*server=*/false);
  Target t{};
  RecvAll(fd, &t, sizeof(t));
  for (uint32_t i = 0; i < kWrites; ++i) {
    ibv_sge sge{reinterpret_cast<uint64_t>(s.mem), static_cast<uint32_t>(kWrite), s.mr->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = i;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = t.addr + uint64_t{i} * kWrite;
    wr.wr.rdma.rkey = t.rkey;
    WIRE_CHECK(ibv_post_send(s.qp, &wr, &bad) == 0);
  }
  const ibv_wc first = Poll(s);
  WIRE_CHECK(first.wr_id == 0 && first.status == IBV_WC_SUCCESS);
  WIRE_CHECK(ibv_dereg_mr(s.mr) == 0);
  memset(s.mem, 0x99, kWrite);
  uint32_t ok = 1;
  ibv_wc wc = Poll(s);
  for (; wc.status == IBV_WC_SUCCESS && ok < kWrites; wc = Poll(s)) WIRE_CHECK(wc.wr_id == ok++);
  if (ok == kWrites) Die("every WRITE succeeded: the dereg came too late to test anything");
  if (wc.wr_id != ok || wc.status != IBV_WC_LOC_PROT_ERR) {
    fprintf(stderr, "wire_local_dereg: WRITE %llu (after %u successes) completed with %s, not %s\n",
            static_cast<unsigned long long>(wc.wr_id), ok, ibv_wc_status_str(wc.status),
            ibv_wc_status_str(IBV_WC_LOC_PROT_ERR));
    return 1;
  }
  for (uint32_t i = ok + 1; i < kWrites; ++i) {
    const ibv_wc flushed = Poll(s);
    WIRE_CHECK(flushed.wr_id == i && flushed.status == IBV_WC_WR_FLUSH_ERR);
  }
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  WIRE_CHECK(ibv_query_qp(s.qp, &attr, IBV_QP_STATE, &init) == 0);
  WIRE_CHECK(attr.qp_state == IBV_QPS_ERR);
  SendAll(fd, &ok, sizeof(ok));
  printf("client: %u WRITEs succeeded, WRITE %u failed with %s (vendor_err 0x%x), %u flushed\nOK\n",
         ok, ok, ibv_wc_status_str(wc.status), wc.vendor_err, kWrites - ok - 1);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  wire_rc_pair::program = "wire_local_dereg";
  if (argc == 3 && strcmp(argv[1], "server") == 0) return Server(atoi(argv[2]));
  if (argc == 4 && strcmp(argv[1], "client") == 0) return Client(argv[2], atoi(argv[3]));
  fprintf(stderr, "usage: wire_local_dereg server PORT | client SERVER_IPV4 PORT\n");
  return 2;
}
