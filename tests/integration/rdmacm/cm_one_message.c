// One message over an rdma_cm connection, for the CM's lost-message tests
// (docs/rdmacm.md, "Lost messages"): the server gets the connection
// request and accepts after DELAY seconds (longer than the client's REQ
// retries last, 4.3 s, and the client's CM must be told to wait - an MRA -
// or it gives up with UNREACHABLE); the client sends one message, which the
// server checks. The client disconnects (a synchronous rdma_disconnect
// waits for the DREP's DISCONNECTED) and the server waits for the DREQ's
// DISCONNECTED before it destroys its id (which answers the DREP), so a lost
// DREQ has to be sent again.
//
// usage: cm_one_message -s ADDR [-p PORT] [-d DELAY]   (server)
//        cm_one_message -c ADDR [-p PORT]              (client)
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char kMessage[] = "accepted late, still connected";

static double Now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int Fail(const char* what) {
  perror(what);
  return 1;
}

// Waits for the connection's DISCONNECTED (a synchronous id has a channel
// of its own; rdma_disconnect would send a DREQ of this side's).
static int AwaitDisconnected(struct rdma_cm_id* id) {
  struct rdma_cm_event* ev;
  while (rdma_get_cm_event(id->channel, &ev) == 0) {
    const enum rdma_cm_event_type type = ev->event;
    rdma_ack_cm_event(ev);
    if (type == RDMA_CM_EVENT_DISCONNECTED) return 0;
  }
  return Fail("rdma_get_cm_event");
}

static struct rdma_cm_id* MakeEndpoint(const char* addr, const char* port, int passive) {
  struct rdma_addrinfo hints = {0}, *res;
  hints.ai_port_space = RDMA_PS_TCP;
  if (passive) hints.ai_flags = RAI_PASSIVE;
  if (rdma_getaddrinfo(addr, port, &hints, &res)) return NULL;
  struct ibv_qp_init_attr attr = {0};
  attr.qp_type = IBV_QPT_RC;
  attr.cap.max_send_wr = attr.cap.max_recv_wr = 1;
  attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
  attr.cap.max_inline_data = sizeof(kMessage);
  attr.sq_sig_all = 1;
  struct rdma_cm_id* id = NULL;
  int rc = rdma_create_ep(&id, res, NULL, passive ? NULL : &attr);
  rdma_freeaddrinfo(res);
  return rc ? NULL : id;
}

static int Server(const char* addr, const char* port, int delay) {
  struct rdma_cm_id* listen_id = MakeEndpoint(addr, port, 1);
  if (!listen_id) return Fail("server rdma_create_ep");
  if (rdma_listen(listen_id, 1)) return Fail("rdma_listen");
  struct rdma_cm_id* id;
  if (rdma_get_request(listen_id, &id)) return Fail("rdma_get_request");
  printf("connection request; accepting in %d s\n", delay);
  fflush(stdout);
  sleep(delay);
  struct ibv_qp_init_attr attr = {0};
  attr.qp_type = IBV_QPT_RC;
  attr.cap.max_send_wr = attr.cap.max_recv_wr = 1;
  attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
  if (rdma_create_qp(id, NULL, &attr)) return Fail("rdma_create_qp");
  char buf[sizeof(kMessage)] = {0};
  struct ibv_mr* mr = rdma_reg_msgs(id, buf, sizeof(buf));
  if (!mr) return Fail("rdma_reg_msgs");
  if (rdma_post_recv(id, NULL, buf, sizeof(buf), mr)) return Fail("rdma_post_recv");
  if (rdma_accept(id, NULL)) return Fail("rdma_accept");
  struct ibv_wc wc;
  if (rdma_get_recv_comp(id, &wc) != 1 || wc.status != IBV_WC_SUCCESS) {
    fprintf(stderr, "receive failed: %s\n", ibv_wc_status_str(wc.status));
    return 1;
  }
  if (memcmp(buf, kMessage, sizeof(kMessage)) != 0) {
    fprintf(stderr, "received '%.*s'\n", (int)sizeof(buf), buf);
    return 1;
  }
  printf("server: received '%s'\n", buf);
  if (AwaitDisconnected(id)) return 1;
  printf("server: disconnected\n");
  rdma_dereg_mr(mr);
  rdma_destroy_ep(id);
  rdma_destroy_ep(listen_id);
  return 0;
}

static int Client(const char* addr, const char* port) {
  struct rdma_cm_id* id = MakeEndpoint(addr, port, 0);
  if (!id) return Fail("client rdma_create_ep");
  const double start = Now();
  if (rdma_connect(id, NULL)) return Fail("rdma_connect");
  printf("client: connected after %.1f s\n", Now() - start);
  if (rdma_post_send(id, NULL, (void*)kMessage, sizeof(kMessage), NULL, IBV_SEND_INLINE))
    return Fail("rdma_post_send");
  struct ibv_wc wc;
  if (rdma_get_send_comp(id, &wc) != 1 || wc.status != IBV_WC_SUCCESS) {
    fprintf(stderr, "send failed: %s\n", ibv_wc_status_str(wc.status));
    return 1;
  }
  printf("client: sent\n");
  if (rdma_disconnect(id)) return Fail("rdma_disconnect");
  printf("client: disconnected\n");
  rdma_destroy_ep(id);
  return 0;
}

int main(int argc, char** argv) {
  const char *server = NULL, *client = NULL, *port = "7473";
  int delay = 6, opt;
  while ((opt = getopt(argc, argv, "s:c:p:d:")) != -1) {
    switch (opt) {
      case 's':
        server = optarg;
        break;
      case 'c':
        client = optarg;
        break;
      case 'p':
        port = optarg;
        break;
      case 'd':
        delay = atoi(optarg);
        break;
      default:
        fprintf(stderr, "usage: %s -s ADDR [-p PORT] [-d DELAY] | -c ADDR [-p PORT]\n", argv[0]);
        return 2;
    }
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (server) return Server(server, port, delay);
  if (client) return Client(client, port);
  fprintf(stderr, "usage: %s -s ADDR [-p PORT] [-d DELAY] | -c ADDR [-p PORT]\n", argv[0]);
  return 2;
}
