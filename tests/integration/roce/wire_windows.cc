// Memory windows across two hosts (roce.wire_windows): the server binds a
// type 1 window (ibv_bind_mw) over the first 4 KiB of its buffer and a type
// 2 window (IBV_WR_BIND_MW) over the next 4 KiB - both binds run in its
// network QP's send queue at the device - and gives the client their keys.
// The client RDMA WRITEs through each window, then SENDs with invalidate of
// the type 2 key; the server's receive completion must carry
// IBV_WC_WITH_INV and that key, and the written bytes must be in place.
// A last WRITE through the invalidated key must end in
// IBV_WC_REM_ACCESS_ERR (the responder's NAK).
//
//   wire_windows server PORT
//   wire_windows client SERVER_IPV4 PORT
#include "wire_rc_pair.h"

namespace {

using namespace wire_rc_pair;

constexpr uint32_t kWindow = 4096;
constexpr uint32_t kBuffer = 4 * kWindow;
#define CHECK WIRE_CHECK

struct Windows {
  uint64_t addr1, addr2;  // the windows' first bytes
  uint32_t rkey1, rkey2;
};

void Open(Side& s, unsigned mr_access) {
  wire_rc_pair::Open(s, kBuffer, mr_access, IBV_ACCESS_REMOTE_WRITE);
}

int Server(int port) {
  Side s;
  Open(s, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
  const int fd = AcceptOne(port);
  ExchangeAndConnect(s, fd, /*server=*/true);
  ibv_sge rsge{reinterpret_cast<uint64_t>(s.mem + 3 * kWindow), 64, s.mr->lkey};
  ibv_recv_wr rwr{}, *rbad = nullptr;
  rwr.wr_id = 100;
  rwr.sg_list = &rsge;
  rwr.num_sge = 1;
  CHECK(ibv_post_recv(s.qp, &rwr, &rbad) == 0);

  ibv_mw* mw1 = ibv_alloc_mw(s.pd, IBV_MW_TYPE_1);
  ibv_mw* mw2 = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
  CHECK(mw1 && mw2);
  ibv_mw_bind bind{};
  bind.wr_id = 1;
  bind.send_flags = IBV_SEND_SIGNALED;
  bind.bind_info = {s.mr, reinterpret_cast<uint64_t>(s.mem), kWindow, IBV_ACCESS_REMOTE_WRITE};
  CHECK(ibv_bind_mw(s.qp, mw1, &bind) == 0);
  ibv_wc wc = PollOk(s, "type 1 bind");
  CHECK(wc.opcode == IBV_WC_BIND_MW && wc.wr_id == 1);
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = 2;
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.bind_mw.mw = mw2;
  wr.bind_mw.rkey = ibv_inc_rkey(mw2->rkey);
  wr.bind_mw.bind_info = {s.mr, reinterpret_cast<uint64_t>(s.mem + kWindow), kWindow,
                          IBV_ACCESS_REMOTE_WRITE};
  CHECK(ibv_post_send(s.qp, &wr, &bad) == 0);
  wc = PollOk(s, "type 2 bind");
  CHECK(wc.opcode == IBV_WC_BIND_MW && wc.wr_id == 2);
  Windows w{reinterpret_cast<uint64_t>(s.mem), reinterpret_cast<uint64_t>(s.mem + kWindow),
            mw1->rkey, wr.bind_mw.rkey};
  SendAll(fd, &w, sizeof(w));

  wc = PollOk(s, "the SEND with invalidate");
  CHECK(wc.wr_id == 100 && wc.opcode == IBV_WC_RECV);
  if (!(wc.wc_flags & IBV_WC_WITH_INV) || wc.invalidated_rkey != w.rkey2) {
    fprintf(stderr, "wire_windows: receive flags 0x%x invalidated_rkey 0x%x, want 0x%x\n",
            wc.wc_flags, wc.invalidated_rkey, w.rkey2);
    return 1;
  }
  for (uint32_t i = 0; i < 2 * kWindow; ++i) {
    if (s.mem[i] != static_cast<uint8_t>(i * 7 + 1)) Die("written bytes are not in place");
  }
  char done = 0;
  RecvAll(fd, &done, 1);  // the client's last WRITE has been refused
  printf("server: both windows written, type 2 invalidated remotely (rkey 0x%x)\n", w.rkey2);
  close(fd);
  return 0;
}

int Client(const char* host, int port) {
  Side s;
  Open(s, IBV_ACCESS_LOCAL_WRITE);
  for (uint32_t i = 0; i < 2 * kWindow; ++i) s.mem[i] = static_cast<uint8_t>(i * 7 + 1);
  const int fd = Dial(host, port);
  ExchangeAndConnect(s, fd, /*server=*/false);
  Windows w{};
  RecvAll(fd, &w, sizeof(w));
  auto write = [&](uint64_t offset, uint64_t addr, uint32_t rkey) {
    ibv_sge sge{reinterpret_cast<uint64_t>(s.mem + offset), kWindow, s.mr->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = offset;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = addr;
    wr.wr.rdma.rkey = rkey;
    CHECK(ibv_post_send(s.qp, &wr, &bad) == 0);
    return Poll(s);
  };
  ibv_wc wc = write(0, w.addr1, w.rkey1);
  CHECK(wc.status == IBV_WC_SUCCESS);
  wc = write(kWindow, w.addr2, w.rkey2);
  CHECK(wc.status == IBV_WC_SUCCESS);
  ibv_send_wr inv{}, *bad = nullptr;
  inv.wr_id = 3;
  inv.opcode = IBV_WR_SEND_WITH_INV;
  inv.send_flags = IBV_SEND_SIGNALED;
  inv.invalidate_rkey = w.rkey2;
  CHECK(ibv_post_send(s.qp, &inv, &bad) == 0);
  PollOk(s, "SEND with invalidate");
  wc = write(kWindow, w.addr2, w.rkey2);
  if (wc.status != IBV_WC_REM_ACCESS_ERR) {
    fprintf(stderr, "wire_windows: a WRITE through the invalidated key ended in %s\n",
            ibv_wc_status_str(wc.status));
    return 1;
  }
  char done = 1;
  SendAll(fd, &done, 1);
  printf("client: WRITE through the invalidated window: %s\nOK\n", ibv_wc_status_str(wc.status));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  wire_rc_pair::program = "wire_windows";
  if (argc == 3 && strcmp(argv[1], "server") == 0) return Server(atoi(argv[2]));
  if (argc == 4 && strcmp(argv[1], "client") == 0) return Client(argv[2], atoi(argv[3]));
  fprintf(stderr, "usage: wire_windows server PORT | client SERVER_IPV4 PORT\n");
  return 2;
}
