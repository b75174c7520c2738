/* A small program of ours on librpma (Debian's librpma0): a remote write and
 * a flush over rdma_cm.
 *   rpma_write_flush server ADDR PORT: registers 4 KiB for remote writes and
 *     flushes, accepts one connection (its MR descriptor in the private
 *     data), waits for the client to disconnect and checks the bytes.
 *   rpma_write_flush client ADDR PORT: connects, writes a pattern into the
 *     server's MR, flushes it (RPMA_FLUSH_TYPE_VISIBILITY: librpma's read
 *     after write), waits for the flush's completion, disconnects.
 * Prints "rpma: flush complete" (client) / "rpma: server verified" (server). */
#include <librpma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIZE 4096

static int fail(const char* what, int ret) {
  fprintf(stderr, "rpma: %s failed: %s\n", what, rpma_err_2str(ret));
  return 1;
}

static unsigned char pattern(size_t i) {
  return (unsigned char)(i * 31 + 7);
}

static int server(const char* addr, const char* port) {
  struct ibv_context* dev = NULL;
  struct rpma_peer* peer = NULL;
  struct rpma_ep* ep = NULL;
  struct rpma_conn_req* req = NULL;
  struct rpma_conn* conn = NULL;
  struct rpma_mr_local* mr = NULL;
  enum rpma_conn_event event;
  int ret;
  unsigned char* buf = aligned_alloc(4096, SIZE);
  if (!buf) return 1;
  memset(buf, 0, SIZE);
  if ((ret = rpma_utils_get_ibv_context(addr, RPMA_UTIL_IBV_CONTEXT_LOCAL, &dev)))
    return fail("rpma_utils_get_ibv_context", ret);
  if ((ret = rpma_peer_new(dev, &peer))) return fail("rpma_peer_new", ret);
  if ((ret = rpma_mr_reg(peer, buf, SIZE,
                         RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY, &mr)))
    return fail("rpma_mr_reg", ret);
  size_t desc_size;
  if ((ret = rpma_mr_get_descriptor_size(mr, &desc_size))) return fail("descriptor size", ret);
  char desc[64];
  if (desc_size > sizeof(desc)) return fail("descriptor size", RPMA_E_UNKNOWN);
  if ((ret = rpma_mr_get_descriptor(mr, desc))) return fail("rpma_mr_get_descriptor", ret);
  if ((ret = rpma_ep_listen(peer, addr, port, &ep))) return fail("rpma_ep_listen", ret);
  if ((ret = rpma_ep_next_conn_req(ep, NULL, &req))) return fail("rpma_ep_next_conn_req", ret);
  struct rpma_conn_private_data pdata = {desc, (uint8_t)desc_size};
  if ((ret = rpma_conn_req_connect(&req, &pdata, &conn))) return fail("rpma_conn_req_connect", ret);
  if ((ret = rpma_conn_next_event(conn, &event)) || event != RPMA_CONN_ESTABLISHED)
    return fail("waiting for ESTABLISHED", ret ? ret : RPMA_E_UNKNOWN);
  if ((ret = rpma_conn_next_event(conn, &event)) || event != RPMA_CONN_CLOSED)
    return fail("waiting for CLOSED", ret ? ret : RPMA_E_UNKNOWN);
  for (size_t i = 0; i < SIZE; ++i) {
    if (buf[i] != pattern(i)) {
      fprintf(stderr, "rpma: byte %zu is 0x%02x, not 0x%02x\n", i, buf[i], pattern(i));
      return 1;
    }
  }
  rpma_conn_disconnect(conn);
  rpma_conn_delete(&conn);
  rpma_ep_shutdown(&ep);
  rpma_mr_dereg(&mr);
  rpma_peer_delete(&peer);
  free(buf);
  printf("rpma: server verified %d bytes\n", SIZE);
  return 0;
}

static int client(const char* addr, const char* port) {
  struct ibv_context* dev = NULL;
  struct rpma_peer* peer = NULL;
  struct rpma_conn_req* req = NULL;
  struct rpma_conn* conn = NULL;
  struct rpma_mr_local* mr = NULL;
  struct rpma_mr_remote* remote = NULL;
  struct rpma_cq* cq = NULL;
  enum rpma_conn_event event;
  int ret;
  unsigned char* buf = aligned_alloc(4096, SIZE);
  if (!buf) return 1;
  for (size_t i = 0; i < SIZE; ++i) buf[i] = pattern(i);
  if ((ret = rpma_utils_get_ibv_context(addr, RPMA_UTIL_IBV_CONTEXT_REMOTE, &dev)))
    return fail("rpma_utils_get_ibv_context", ret);
  if ((ret = rpma_peer_new(dev, &peer))) return fail("rpma_peer_new", ret);
  if ((ret = rpma_mr_reg(peer, buf, SIZE, RPMA_MR_USAGE_WRITE_SRC, &mr)))
    return fail("rpma_mr_reg", ret);
  if ((ret = rpma_conn_req_new(peer, addr, port, NULL, &req)))
    return fail("rpma_conn_req_new", ret);
  if ((ret = rpma_conn_req_connect(&req, NULL, &conn))) return fail("rpma_conn_req_connect", ret);
  if ((ret = rpma_conn_next_event(conn, &event)) || event != RPMA_CONN_ESTABLISHED)
    return fail("waiting for ESTABLISHED", ret ? ret : RPMA_E_UNKNOWN);
  struct rpma_conn_private_data pdata;
  if ((ret = rpma_conn_get_private_data(conn, &pdata))) return fail("private data", ret);
  if ((ret = rpma_mr_remote_from_descriptor(pdata.ptr, pdata.len, &remote)))
    return fail("rpma_mr_remote_from_descriptor", ret);
  if ((ret = rpma_write(conn, remote, 0, mr, 0, SIZE, RPMA_F_COMPLETION_ON_ERROR, NULL)))
    return fail("rpma_write", ret);
  static int flush_ctx;
  if ((ret = rpma_flush(conn, remote, 0, SIZE, RPMA_FLUSH_TYPE_VISIBILITY, RPMA_F_COMPLETION_ALWAYS,
                        &flush_ctx)))
    return fail("rpma_flush", ret);
  if ((ret = rpma_conn_get_cq(conn, &cq))) return fail("rpma_conn_get_cq", ret);
  struct ibv_wc wc;
  int got = 0;
  for (int spins = 0; got == 0 && spins < 1000; ++spins) {
    if ((ret = rpma_cq_wait(cq))) return fail("rpma_cq_wait", ret);
    ret = rpma_cq_get_wc(cq, 1, &wc, &got);
    if (ret && ret != RPMA_E_NO_COMPLETION) return fail("rpma_cq_get_wc", ret);
  }
  if (got != 1 || wc.wr_id != (uintptr_t)&flush_ctx || wc.status != IBV_WC_SUCCESS) {
    fprintf(stderr, "rpma: flush completion: got %d, status %s\n", got,
            got ? ibv_wc_status_str(wc.status) : "-");
    return 1;
  }
  printf("rpma: flush complete (%d bytes written)\n", SIZE);
  rpma_conn_disconnect(conn);
  if ((ret = rpma_conn_next_event(conn, &event)) || event != RPMA_CONN_CLOSED)
    return fail("waiting for CLOSED", ret ? ret : RPMA_E_UNKNOWN);
  rpma_conn_delete(&conn);
  rpma_mr_remote_delete(&remote);
  rpma_mr_dereg(&mr);
  rpma_peer_delete(&peer);
  free(buf);
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s server|client ADDR PORT\n", argv[0]);
    return 2;
  }
  return strcmp(argv[1], "server") == 0 ? server(argv[2], argv[3]) : client(argv[2], argv[3]);
}
