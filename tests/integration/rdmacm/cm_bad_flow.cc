// The connection manager's bad flows on one host, as real processes: bad
// arguments (the man page's errno and a line on the log channel), ports in
// use, a connect nobody listens to, an address nobody answers, a rejection
// with private data, a listener that exits, a peer killed while connected,
// and a non-blocking channel. Each case runs in its own process (it forks
// its peers before it touches librdmacm); a failed check is printed and
// counted. Run under `softverbs run` with a private runtime directory.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <string>

namespace {

int g_failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                            \
    }                                                                          \
  } while (0)
#define CHECK_ERR(call, err)                                                                   \
  do {                                                                                         \
    errno = 0;                                                                                 \
    int r_ = (call);                                                                           \
    if (r_ != -1 || errno != (err)) {                                                          \
      fprintf(stderr, "%s:%d: %s returned %d errno %d (%s), expected -1 errno %d\n", __FILE__, \
              __LINE__, #call, r_, errno, strerror(errno), err);                               \
      ++g_failures;                                                                            \
    }                                                                                          \
  } while (0)

[[noreturn]] void Die(const char* what) {
  fprintf(stderr, "setup failed: %s (%s)\n", what, strerror(errno));
  exit(2);
}

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

sockaddr_in Ipv4(const char* ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}
sockaddr* Sa(sockaddr_in* a) {
  return reinterpret_cast<sockaddr*>(a);
}

// The next event of the channel within `seconds` (nullptr on timeout).
rdma_cm_event* NextEvent(rdma_event_channel* ch, double seconds) {
  pollfd p{ch->fd, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(seconds * 1000)) <= 0) return nullptr;
  rdma_cm_event* e = nullptr;
  if (rdma_get_cm_event(ch, &e)) return nullptr;
  return e;
}

// Waits for an event of this type, acking it; false on timeout or another.
bool Expect(rdma_event_channel* ch, rdma_cm_event_type type, int* status = nullptr,
            std::string* data = nullptr) {
  rdma_cm_event* e = NextEvent(ch, 10);
  if (!e) {
    fprintf(stderr, "no event, expected %s\n", rdma_event_str(type));
    return false;
  }
  bool ok = e->event == type;
  if (!ok) {
    fprintf(stderr, "event %s (status %d), expected %s\n", rdma_event_str(e->event), e->status,
            rdma_event_str(type));
  }
  if (status) *status = e->status;
  if (data && e->param.conn.private_data) {
    *data = std::string(static_cast<const char*>(e->param.conn.private_data),
                        strnlen(static_cast<const char*>(e->param.conn.private_data),
                                e->param.conn.private_data_len));
  }
  rdma_ack_cm_event(e);
  return ok;
}

// An id on ch resolved to 127.0.0.1:port with a small RC QP.
rdma_cm_id* ActiveId(rdma_event_channel* ch, uint16_t port, bool with_qp) {
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP)) Die("rdma_create_id");
  sockaddr_in dst = Ipv4("127.0.0.1", port);
  if (rdma_resolve_addr(id, nullptr, Sa(&dst), 2000)) Die("rdma_resolve_addr");
  if (!Expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED)) Die("ADDR_RESOLVED");
  if (rdma_resolve_route(id, 2000)) Die("rdma_resolve_route");
  if (!Expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED)) Die("ROUTE_RESOLVED");
  if (with_qp) {
    ibv_qp_init_attr attr{};
    attr.qp_type = IBV_QPT_RC;
    attr.cap.max_send_wr = attr.cap.max_recv_wr = 4;
    attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
    if (rdma_create_qp(id, nullptr, &attr)) Die("rdma_create_qp");
  }
  return id;
}

// A listener on 127.0.0.1:port; writes a byte to ready_fd once it listens.
rdma_cm_id* Listen(rdma_event_channel* ch, uint16_t port, int ready_fd) {
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP)) Die("rdma_create_id");
  sockaddr_in a = Ipv4("127.0.0.1", port);
  if (rdma_bind_addr(id, Sa(&a))) Die("rdma_bind_addr");
  if (rdma_listen(id, 4)) Die("rdma_listen");
  if (ready_fd >= 0 && write(ready_fd, "r", 1) != 1) Die("ready pipe");
  return id;
}

void WaitReady(int fd) {
  char c;
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 20000) != 1 || read(fd, &c, 1) != 1) Die("peer not ready");
}

// ---- the cases ---------------------------------------------------------

void BadArguments() {
  CHECK_ERR(rdma_create_id(nullptr, nullptr, nullptr, RDMA_PS_TCP), EINVAL);
  rdma_event_channel* ch = rdma_create_event_channel();
  if (!ch) Die("rdma_create_event_channel");
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP)) Die("rdma_create_id");
  sockaddr_in unix_family{};
  unix_family.sin_family = AF_UNIX;
  CHECK_ERR(rdma_bind_addr(id, Sa(&unix_family)), EINVAL);
  CHECK_ERR(rdma_bind_addr(id, nullptr), EINVAL);
  sockaddr_in foreign = Ipv4("198.51.100.7", 0);
  CHECK_ERR(rdma_bind_addr(id, Sa(&foreign)), EADDRNOTAVAIL);
  CHECK_ERR(rdma_resolve_route(id, 1000), EINVAL);
  CHECK_ERR(rdma_resolve_addr(id, nullptr, nullptr, 1000), EINVAL);
  CHECK_ERR(rdma_accept(id, nullptr), EINVAL);
  char big[200] = {};
  CHECK_ERR(rdma_reject(id, big, sizeof(big)), EINVAL);
  CHECK_ERR(rdma_reject(id, big, 10), EINVAL);  // no request to reject
  CHECK_ERR(rdma_disconnect(id), EINVAL);       // not bound to the device
  int one = 1;
  CHECK_ERR(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, 1), EINVAL);
  CHECK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, sizeof(one)) == 0);
  sockaddr_in group = Ipv4("239.0.0.9", 0);
  CHECK_ERR(rdma_leave_multicast(id, Sa(&group)), EADDRNOTAVAIL);
  CHECK_ERR(rdma_join_multicast(id, Sa(&group), nullptr), EINVAL);  // not bound yet
  rdma_cm_event* e = nullptr;
  CHECK_ERR(rdma_get_cm_event(ch, nullptr), EINVAL);
  CHECK_ERR(rdma_ack_cm_event(nullptr), EINVAL);
  (void)e;
  CHECK(rdma_destroy_id(id) == 0);
  rdma_destroy_event_channel(ch);
  // What the log channel said (SOFTVERBS_LOG is this process's file).
  const char* log = getenv("SOFTVERBS_LOG");
  FILE* f = log ? fopen(log, "r") : nullptr;
  CHECK(f != nullptr);
  if (f) {
    std::string text;
    char line[512];
    while (fgets(line, sizeof(line), f)) text += line;
    fclose(f);
    for (const char* want :
         {"rdma_bind_addr: addr is not AF_INET or AF_INET6", "is not an address of this host",
          "has no resolved address", "rdma_accept: the id has no QP and conn_param is NULL",
          "above the 148 a REJ carries", "has not joined it"}) {
      if (text.find(want) == std::string::npos) {
        fprintf(stderr, "log channel lacks \"%s\"\n", want);
        ++g_failures;
      }
    }
  }
}

// Answers in librdmacm's own conventions: rdma_getaddrinfo returns
// getaddrinfo's EAI_* code as it is (for gai_strerror), and rdma_create_qp
// makes the QP type the caller asked for (a UC QP on an RDMA_PS_TCP id).
void LibrdmacmConventions() {
  rdma_addrinfo hints{};
  hints.ai_flags = RAI_NUMERICHOST;
  hints.ai_port_space = RDMA_PS_TCP;
  rdma_addrinfo* res = reinterpret_cast<rdma_addrinfo*>(&hints);  // must stay as it is
  errno = 0;
  const int ret = rdma_getaddrinfo("not-a-number", "7471", &hints, &res);
  CHECK(ret == EAI_NONAME);
  CHECK(res == reinterpret_cast<rdma_addrinfo*>(&hints));
  if (ret != EAI_NONAME) fprintf(stderr, "rdma_getaddrinfo returned %d\n", ret);

  hints.ai_flags = 0;
  res = nullptr;
  if (rdma_getaddrinfo("127.0.0.1", "7471", &hints, &res)) Die("rdma_getaddrinfo");
  rdma_cm_id* id = nullptr;
  if (rdma_create_ep(&id, res, nullptr, nullptr)) Die("rdma_create_ep");
  rdma_freeaddrinfo(res);
  ibv_qp_init_attr attr{};
  attr.qp_type = IBV_QPT_UC;
  attr.cap.max_send_wr = attr.cap.max_recv_wr = 1;
  attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
  CHECK(rdma_create_qp(id, nullptr, &attr) == 0);
  CHECK(id->qp && id->qp->qp_type == IBV_QPT_UC);
  CHECK(attr.qp_type == IBV_QPT_UC);
  rdma_destroy_ep(id);
}

void Ports() {
  rdma_event_channel* ch = rdma_create_event_channel();
  if (!ch) Die("rdma_create_event_channel");
  rdma_cm_id *a = nullptr, *b = nullptr, *c = nullptr;
  rdma_create_id(ch, &a, nullptr, RDMA_PS_TCP);
  rdma_create_id(ch, &b, nullptr, RDMA_PS_TCP);
  rdma_create_id(ch, &c, nullptr, RDMA_PS_UDP);
  sockaddr_in any_port = Ipv4("127.0.0.1", 0);
  CHECK(rdma_bind_addr(a, Sa(&any_port)) == 0);
  uint16_t port = ntohs(rdma_get_src_port(a));
  CHECK(port >= 32768);
  // Loopback, like the wildcard, takes no device (the kernel's cma_any_addr):
  // a program that looks for the device of its address skips it.
  CHECK(a->verbs == nullptr);
  sockaddr_in same = Ipv4("127.0.0.1", port);
  CHECK_ERR(rdma_bind_addr(b, Sa(&same)), EADDRINUSE);
  sockaddr_in wildcard = Ipv4("0.0.0.0", port);
  CHECK_ERR(rdma_bind_addr(b, Sa(&wildcard)), EADDRINUSE);
  CHECK(rdma_bind_addr(c, Sa(&same)) == 0);  // another port space
  CHECK(rdma_destroy_id(a) == 0);
  CHECK(rdma_bind_addr(b, Sa(&same)) == 0);  // free again
  CHECK(rdma_listen(b, 0) == 0);
  CHECK_ERR(rdma_listen(b, 8), EINVAL);  // the kernel's: LISTEN only from ADDR_BOUND
  // rdma_notify wants a connection (the kernel's ib_cm_notify) and one of
  // its two events.
  CHECK_ERR(rdma_notify(b, IBV_EVENT_COMM_EST), EINVAL);
  CHECK_ERR(rdma_notify(c, IBV_EVENT_PATH_MIG), EINVAL);
  CHECK_ERR(rdma_notify(c, IBV_EVENT_QP_FATAL), EINVAL);
  rdma_destroy_id(b);
  rdma_destroy_id(c);
  rdma_destroy_event_channel(ch);
}

void NobodyListens() {
  rdma_event_channel* ch = rdma_create_event_channel();
  if (!ch) Die("rdma_create_event_channel");
  rdma_cm_id* id = ActiveId(ch, 4791, true);
  double t0 = Now();
  CHECK(rdma_connect(id, nullptr) == 0);
  int status = 0;
  CHECK(Expect(ch, RDMA_CM_EVENT_REJECTED, &status));
  CHECK(status == 8);  // IB_CM_REJ_INVALID_SERVICE_ID
  CHECK(Now() - t0 < 5);
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  CHECK(ibv_query_qp(id->qp, &attr, IBV_QP_STATE, &init) == 0);
  CHECK(attr.qp_state == IBV_QPS_ERR);  // librdmacm moves it on REJECTED
  rdma_destroy_qp(id);
  rdma_destroy_id(id);
  // A synchronous id answers the same as -1 / ECONNREFUSED.
  rdma_addrinfo hints{}, *res = nullptr;
  hints.ai_port_space = RDMA_PS_TCP;
  CHECK(rdma_getaddrinfo("127.0.0.1", "4791", &hints, &res) == 0);
  rdma_cm_id* ep = nullptr;
  ibv_qp_init_attr qp{};
  qp.cap.max_send_wr = qp.cap.max_recv_wr = 1;
  qp.cap.max_send_sge = qp.cap.max_recv_sge = 1;
  CHECK(rdma_create_ep(&ep, res, nullptr, &qp) == 0);
  if (ep) {
    CHECK_ERR(rdma_connect(ep, nullptr), ECONNREFUSED);
    rdma_destroy_ep(ep);
  }
  rdma_freeaddrinfo(res);
  rdma_destroy_event_channel(ch);
}

void AddressNobodyAnswers() {
  rdma_event_channel* ch = rdma_create_event_channel();
  if (!ch) Die("rdma_create_event_channel");
  rdma_cm_id* id = nullptr;
  rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP);
  sockaddr_in dst = Ipv4("198.51.100.1", 7000);
  double t0 = Now();
  CHECK(rdma_resolve_addr(id, nullptr, Sa(&dst), 300) == 0);
  int status = 0;
  CHECK(Expect(ch, RDMA_CM_EVENT_ADDR_ERROR, &status));
  CHECK(status == -ETIMEDOUT);
  double took = Now() - t0;
  CHECK(took >= 0.25 && took < 5);
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
}

void NonBlockingChannel() {
  rdma_event_channel* ch = rdma_create_event_channel();
  if (!ch) Die("rdma_create_event_channel");
  fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
  rdma_cm_event* e = nullptr;
  CHECK_ERR(rdma_get_cm_event(ch, &e), EAGAIN);
  pollfd p{ch->fd, POLLIN, 0};
  CHECK(poll(&p, 1, 0) == 0);
  rdma_cm_id* id = nullptr;
  rdma_create_id(ch, &id, nullptr, RDMA_PS_UDP);
  sockaddr_in dst = Ipv4("127.0.0.1", 5000);
  CHECK(rdma_resolve_addr(id, nullptr, Sa(&dst), 1000) == 0);
  CHECK(poll(&p, 1, 5000) == 1);
  CHECK(rdma_get_cm_event(ch, &e) == 0);
  if (e) {
    CHECK(e->event == RDMA_CM_EVENT_ADDR_RESOLVED);
    CHECK(e->id == id);
    rdma_ack_cm_event(e);
  }
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
}

// rdma_reject's REJ says 28 (consumer defined), rdma_reject_ece's 35
// (vendor option not supported), each with the private data.
void Reject(bool ece, uint16_t port) {
  int ready[2];
  if (pipe(ready)) Die("pipe");
  pid_t server = fork();
  if (server == 0) {
    rdma_event_channel* ch = rdma_create_event_channel();
    rdma_cm_id* l = Listen(ch, port, ready[1]);
    rdma_cm_event* e = NextEvent(ch, 20);
    if (!e || e->event != RDMA_CM_EVENT_CONNECT_REQUEST) _exit(3);
    const char* offer = static_cast<const char*>(e->param.conn.private_data);
    int ok = offer && strcmp(offer, "hello") == 0;
    rdma_cm_id* req = e->id;
    rdma_ack_cm_event(e);
    const char no[] = "no thanks";
    if ((ece ? rdma_reject_ece : rdma_reject)(req, no, sizeof(no))) _exit(4);
    rdma_destroy_id(req);
    rdma_destroy_id(l);
    _exit(ok ? 0 : 5);
  }
  WaitReady(ready[0]);
  rdma_event_channel* ch = rdma_create_event_channel();
  rdma_cm_id* id = ActiveId(ch, port, true);
  rdma_conn_param param{};
  const char hello[] = "hello";
  param.private_data = hello;
  param.private_data_len = sizeof(hello);
  CHECK(rdma_connect(id, &param) == 0);
  int status = 0;
  std::string data;
  CHECK(Expect(ch, RDMA_CM_EVENT_REJECTED, &status, &data));
  CHECK(status == (ece ? 35 : 28));
  CHECK(data == "no thanks");
  int ws = 0;
  waitpid(server, &ws, 0);
  CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
  rdma_destroy_qp(id);
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
}

void RejectWithPrivateData() {
  Reject(false, 7301);
}
void RejectEce() {
  Reject(true, 7304);
}

// A synchronous UD id's rdma_accept answers the SIDR request and keeps the
// request's event in id->event (librdmacm acknowledges it at the id's next
// call that waits, or rdma_destroy_id): its param.ud is still there to read.
void UdAcceptKeepsTheRequestEvent() {
  int ready[2];
  if (pipe(ready)) Die("pipe");
  rdma_addrinfo hints{};
  hints.ai_port_space = RDMA_PS_UDP;
  hints.ai_qp_type = IBV_QPT_UD;
  ibv_qp_init_attr attr{};
  attr.cap.max_send_wr = attr.cap.max_recv_wr = 4;
  attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
  pid_t server = fork();
  if (server == 0) {
    hints.ai_flags = RAI_PASSIVE;
    rdma_addrinfo* res = nullptr;
    rdma_cm_id *l = nullptr, *id = nullptr;
    if (rdma_getaddrinfo("127.0.0.1", "7305", &hints, &res)) _exit(2);
    if (rdma_create_ep(&l, res, nullptr, &attr) || rdma_listen(l, 1)) _exit(3);
    if (write(ready[1], "r", 1) != 1) _exit(4);
    if (rdma_get_request(l, &id)) _exit(5);
    if (rdma_accept(id, nullptr)) _exit(6);
    const bool kept = id->event && id->event->event == RDMA_CM_EVENT_CONNECT_REQUEST &&
                      id->event->param.ud.qp_num != 0;
    rdma_destroy_ep(id);
    rdma_destroy_ep(l);
    _exit(kept ? 0 : 7);
  }
  WaitReady(ready[0]);
  rdma_addrinfo* res = nullptr;
  rdma_cm_id* id = nullptr;
  if (rdma_getaddrinfo("127.0.0.1", "7305", &hints, &res)) Die("rdma_getaddrinfo");
  CHECK(rdma_create_ep(&id, res, nullptr, &attr) == 0);
  rdma_freeaddrinfo(res);
  if (id) {
    CHECK(rdma_connect(id, nullptr) == 0);
    rdma_destroy_ep(id);
  }
  int ws = 0;
  waitpid(server, &ws, 0);
  CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
  if (WIFEXITED(ws) && WEXITSTATUS(ws)) fprintf(stderr, "server exit %d\n", WEXITSTATUS(ws));
}

void ListenerExits() {
  int ready[2];
  if (pipe(ready)) Die("pipe");
  pid_t server = fork();
  if (server == 0) {
    rdma_event_channel* ch = rdma_create_event_channel();
    Listen(ch, 7302, ready[1]);
    _exit(0);  // without destroying anything
  }
  WaitReady(ready[0]);
  waitpid(server, nullptr, 0);
  rdma_event_channel* ch = rdma_create_event_channel();
  rdma_cm_id* id = nullptr;
  rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP);
  sockaddr_in a = Ipv4("127.0.0.1", 7302);
  // The daemon sees the exit as its connection closing: bounded wait.
  bool bound = false;
  for (int i = 0; i < 100 && !bound; ++i) {
    bound = rdma_bind_addr(id, Sa(&a)) == 0;
    if (!bound) usleep(20000);
  }
  CHECK(bound);
  CHECK(rdma_listen(id, 1) == 0);
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
}

void PeerKilled() {
  int ready[2];
  if (pipe(ready)) Die("pipe");
  pid_t server = fork();
  if (server == 0) {
    rdma_event_channel* ch = rdma_create_event_channel();
    Listen(ch, 7303, -1);
    if (write(ready[1], "l", 1) != 1) _exit(3);
    rdma_cm_event* e = NextEvent(ch, 20);
    if (!e || e->event != RDMA_CM_EVENT_CONNECT_REQUEST) _exit(3);
    rdma_cm_id* req = e->id;
    rdma_ack_cm_event(e);
    ibv_qp_init_attr attr{};
    attr.qp_type = IBV_QPT_RC;
    attr.cap.max_send_wr = attr.cap.max_recv_wr = 4;
    attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
    if (rdma_create_qp(req, nullptr, &attr) || rdma_accept(req, nullptr)) _exit(4);
    if (!Expect(ch, RDMA_CM_EVENT_ESTABLISHED)) _exit(5);
    if (write(ready[1], "e", 1) != 1) _exit(3);
    pause();
    _exit(0);
  }
  WaitReady(ready[0]);
  rdma_event_channel* ch = rdma_create_event_channel();
  rdma_cm_id* id = ActiveId(ch, 7303, true);
  CHECK(rdma_connect(id, nullptr) == 0);
  CHECK(Expect(ch, RDMA_CM_EVENT_ESTABLISHED));
  CHECK_ERR(rdma_notify(id, IBV_EVENT_COMM_EST), EISCONN);  // established already
  CHECK(rdma_notify(id, IBV_EVENT_PATH_MIG) == 0);
  WaitReady(ready[0]);
  kill(server, SIGKILL);
  waitpid(server, nullptr, 0);
  double t0 = Now();
  CHECK(Expect(ch, RDMA_CM_EVENT_DISCONNECTED));
  CHECK(Now() - t0 < 10);
  // The partner's work fails: a send to the dead QP completes in error.
  static char buf[64];
  ibv_mr* mr = ibv_reg_mr(id->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
  if (!mr) Die("ibv_reg_mr");
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf), sizeof(buf), mr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = 7;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  CHECK(ibv_post_send(id->qp, &wr, &bad) == 0);
  ibv_wc wc{};
  int n = 0;
  for (double t1 = Now(); n == 0 && Now() - t1 < 30;) {
    n = ibv_poll_cq(id->send_cq, 1, &wc);
    if (n == 0) usleep(1000);
  }
  CHECK(n == 1);
  CHECK(wc.wr_id == 7 && wc.status != IBV_WC_SUCCESS);
  fprintf(stderr, "send to the killed peer: %s after %.2f s\n", ibv_wc_status_str(wc.status),
          Now() - t0);
  CHECK(rdma_disconnect(id) == 0);  // answers the DREQ; QP to ERR
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  CHECK(ibv_query_qp(id->qp, &attr, IBV_QP_STATE, &init) == 0);
  CHECK(attr.qp_state == IBV_QPS_ERR);
  ibv_dereg_mr(mr);
  rdma_destroy_qp(id);
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
}

struct Case {
  const char* name;
  void (*run)();
};

}  // namespace

int main(int argc, char** argv) {
  const Case cases[] = {{"bad_arguments", BadArguments},
                        {"librdmacm_conventions", LibrdmacmConventions},
                        {"ports", Ports},
                        {"nobody_listens", NobodyListens},
                        {"address_nobody_answers", AddressNobodyAnswers},
                        {"non_blocking_channel", NonBlockingChannel},
                        {"reject_with_private_data", RejectWithPrivateData},
                        {"reject_ece", RejectEce},
                        {"ud_accept_keeps_the_request_event", UdAcceptKeepsTheRequestEvent},
                        {"listener_exits", ListenerExits},
                        {"peer_killed", PeerKilled}};
  int failed = 0;
  for (const Case& c : cases) {
    if (argc > 1 && strcmp(argv[1], c.name) != 0) continue;
    // Each case in its own process, with its own log file.
    std::string log = "/tmp/cm_bad_flow." + std::to_string(getpid()) + "." + c.name + ".log";
    pid_t pid = fork();
    if (pid == 0) {
      setenv("SOFTVERBS_LOG", log.c_str(), 1);
      c.run();
      _exit(g_failures ? 1 : 0);
    }
    int ws = 0;
    waitpid(pid, &ws, 0);
    bool ok = WIFEXITED(ws) && WEXITSTATUS(ws) == 0;
    printf("%s %s\n", ok ? "PASS" : "FAIL", c.name);
    fflush(stdout);
    if (!ok) {
      ++failed;
      if (FILE* f = fopen(log.c_str(), "r")) {
        char line[512];
        while (fgets(line, sizeof(line), f)) fprintf(stderr, "  log: %s", line);
        fclose(f);
      }
    }
    unlink(log.c_str());
  }
  return failed ? 1 : 0;
}
