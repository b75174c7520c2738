// A client that makes the daemon write to it and never reads (flood.sh).
//
//   flood_client events N   opens the device and moves an RC QP on an SRQ
//                           N times RESET->INIT->ERR->RESET: each ERR raises
//                           IBV_EVENT_QP_LAST_WQE_REACHED, and the async fd is
//                           never read. Prints {"cycles": N, "ms": ...}.
//   flood_client replies N  speaks the daemon's protocol as the CLI and sends
//                           up to N status requests without reading a reply
//                           (until its own socket is full). Prints
//                           {"sent": n}.
// Then each holds its connections, still not reading, until stdin closes.
#include <errno.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <string>

#include "protocol/messages.h"

namespace protocol = softverbs::protocol;

namespace {

int Fail(const char* what) {
  fprintf(stderr, "flood_client: %s failed: %s\n", what, strerror(errno));
  return 1;
}

double NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void HoldUntilStdinCloses() {
  char c;
  while (read(0, &c, 1) > 0) {
  }
}

int FloodEvents(long cycles) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n < 1) return Fail("ibv_get_device_list");
  ibv_context* ctx = ibv_open_device(list[0]);
  if (!ctx) return Fail("ibv_open_device");
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  ibv_srq_init_attr sinit{};
  sinit.attr.max_wr = 16;
  sinit.attr.max_sge = 1;
  ibv_srq* srq = pd ? ibv_create_srq(pd, &sinit) : nullptr;
  if (!pd || !cq || !srq) return Fail("pd/cq/srq");
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = cq;
  init.srq = srq;
  init.cap.max_send_wr = 4;
  init.cap.max_send_sge = 1;
  init.qp_type = IBV_QPT_RC;
  ibv_qp* qp = ibv_create_qp(pd, &init);
  if (!qp) return Fail("ibv_create_qp");
  const double start = NowMs();
  for (long i = 0; i < cycles; ++i) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.port_num = 1;
    if ((errno = ibv_modify_qp(
             qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))) {
      return Fail("modify to INIT");
    }
    attr.qp_state = IBV_QPS_ERR;
    if ((errno = ibv_modify_qp(qp, &attr, IBV_QP_STATE))) return Fail("modify to ERR");
    attr.qp_state = IBV_QPS_RESET;
    if ((errno = ibv_modify_qp(qp, &attr, IBV_QP_STATE))) return Fail("modify to RESET");
  }
  printf("{\"cycles\": %ld, \"ms\": %.0f}\n", cycles, NowMs() - start);
  fflush(stdout);
  HoldUntilStdinCloses();
  return 0;
}

int FloodReplies(long requests) {
  const char* dir = getenv("SOFTVERBS_RUNTIME_DIR");
  if (!dir) {
    fprintf(stderr, "flood_client: SOFTVERBS_RUNTIME_DIR is not set\n");
    return 1;
  }
  std::string path = std::string(dir) + "/softverbsd.sock";
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    fprintf(stderr, "flood_client: %s is too long\n", path.c_str());
    return 1;
  }
  memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Fail("connect");
  }
  struct {
    protocol::RequestHeader hdr;
    protocol::HelloRequest hello;
  } hello{{protocol::kProtocolVersion, static_cast<uint16_t>(protocol::Op::kHello), 0,
           sizeof(protocol::HelloRequest), 1},
          {static_cast<uint32_t>(protocol::Role::kCli), static_cast<uint32_t>(getpid()), 0}};
  if (send(fd, &hello, sizeof(hello), 0) != sizeof(hello)) return Fail("send hello");
  long sent = 0;
  for (; sent < requests; ++sent) {
    protocol::RequestHeader hdr{protocol::kProtocolVersion,
                                static_cast<uint16_t>(protocol::Op::kStatus), 0, 0,
                                static_cast<uint32_t>(sent + 2)};
    if (send(fd, &hdr, sizeof(hdr), MSG_DONTWAIT) == sizeof(hdr)) continue;
    if (errno != EAGAIN) return Fail("send status request");
    // Our socket is full: the daemon stopped reading us. Wait a little in
    // case it was only slow, then stop.
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, 500) <= 0) break;
  }
  printf("{\"sent\": %ld}\n", sent);
  fflush(stdout);
  HoldUntilStdinCloses();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: flood_client events|replies COUNT\n");
    return 2;
  }
  std::string mode = argv[1];
  long count = atol(argv[2]);
  if (mode == "events") return FloodEvents(count);
  if (mode == "replies") return FloodReplies(count);
  fprintf(stderr, "flood_client: unknown mode %s\n", mode.c_str());
  return 2;
}
