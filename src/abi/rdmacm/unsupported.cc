// Weak "not supported" definitions of every function librdmacm.so.1 exports.
//
// Debian's clients (perftest, rdmacm-utils, pyverbs, UCX) are linked with
// BIND_NOW, so every symbol in rdmacm.map must resolve when they load. Each
// definition here is WEAK: a real implementation in another .cc file of this
// library is a strong definition of the same name and replaces it at link
// time. What stays unimplemented fails honestly with EOPNOTSUPP in
// librdmacm's convention (see docs/abi.md):
//   - int / ssize_t / off_t functions set errno and return -1;
//   - pointer-returning functions set errno and return NULL;
//   - void functions do nothing.
//
// Every output parameter is left as the real library leaves it on failure
// (audited against rdma-core v44 for issue 9: only rdma_get_devices' count is
// set on failure there). Parameter names are omitted where a stub ignores
// its arguments.

#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "abi/not_supported.h"

using softverbs::abi::ErrnoValueNotSupported;
using softverbs::abi::MinusOneNotSupported;
using softverbs::abi::NullNotSupported;

extern "C" {

// ---------------------------------------------------------------------------
// Event channels and events.
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT rdma_event_channel* rdma_create_event_channel() {
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT void rdma_destroy_event_channel(rdma_event_channel*) {}
SOFTVERBS_WEAK_EXPORT int rdma_get_cm_event(rdma_event_channel*, rdma_cm_event**) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rdma_ack_cm_event(rdma_cm_event*) {
  return MinusOneNotSupported();
}
// What the real library answers for an event it does not know.
SOFTVERBS_WEAK_EXPORT const char* rdma_event_str(rdma_cm_event_type) {
  return "UNKNOWN EVENT";
}
SOFTVERBS_WEAK_EXPORT int rdma_notify(rdma_cm_id*, ibv_event_type) {
  return MinusOneNotSupported();
}

// ---------------------------------------------------------------------------
// Communication identifiers and address/route resolution.
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT int rdma_create_id(rdma_event_channel*, rdma_cm_id**, void*,
                                         rdma_port_space) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rdma_destroy_id(rdma_cm_id*) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rdma_migrate_id(rdma_cm_id*, rdma_event_channel*) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rdma_set_option(rdma_cm_id*, int, int, void*, size_t) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rdma_bind_addr(rdma_cm_id*, sockaddr*) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rdma_resolve_addr(rdma_cm_id*, sockaddr*, sockaddr*, int) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rdma_resolve_route(rdma_cm_id*, int) {
  return MinusOneNotSupported();
}
// 0 is what the real library returns for an unknown address family.
SOFTVERBS_WEAK_EXPORT __be16 rdma_get_src_port(rdma_cm_id*) {
  return 0;
}
// 0 is what the real library returns for an unknown address family.
SOFTVERBS_WEAK_EXPORT __be16 rdma_get_dst_port(rdma_cm_id*) {
  return 0;
}
SOFTVERBS_WEAK_EXPORT int rdma_getaddrinfo(const char*, const char*, const rdma_addrinfo*,
                                           rdma_addrinfo**) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT void rdma_freeaddrinfo(rdma_addrinfo*) {}
// librdmacm sets *num_devices on every path, 0 when it returns no list
// (libfabric's verbs provider loops over that count even after a NULL).
SOFTVERBS_WEAK_EXPORT ibv_context** rdma_get_devices(int* num_devices) {
  if (num_devices != nullptr) *num_devices = 0;
  return NullNotSupported();
}
SOFTVERBS_WEAK_EXPORT void rdma_free_devices(ibv_context**) {}

// ---------------------------------------------------------------------------
// Connection establishment and teardown.
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT int rdma_listen(rdma_cm_id*, int) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rdma_get_request(rdma_cm_id*, rdma_cm_id**) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rdma_connect(rdma_cm_id*, rdma_conn_param*) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rdma_accept(rdma_cm_id*, rdma_conn_param*) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rdma_establish(rdma_cm_id*) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rdma_reject(rdma_cm_id*, const void*, uint8_t) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rdma_reject_ece(rdma_cm_id*, const void*, uint8_t) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rdma_disconnect(rdma_cm_id*) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rdma_init_qp_attr(rdma_cm_id*, ibv_qp_attr*, int*) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rdma_set_local_ece(rdma_cm_id*, ibv_ece*) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rdma_get_remote_ece(rdma_cm_id*, ibv_ece*) {
  return MinusOneNotSupported();
}

// ---------------------------------------------------------------------------
// QPs, SRQs and endpoints owned by an rdma_cm_id.
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT int rdma_create_qp(rdma_cm_id*, ibv_pd*, ibv_qp_init_attr*) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rdma_create_qp_ex(rdma_cm_id*, ibv_qp_init_attr_ex*) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT void rdma_destroy_qp(rdma_cm_id*) {}
SOFTVERBS_WEAK_EXPORT int rdma_create_srq(rdma_cm_id*, ibv_pd*, ibv_srq_init_attr*) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rdma_create_srq_ex(rdma_cm_id*, ibv_srq_init_attr_ex*) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT void rdma_destroy_srq(rdma_cm_id*) {}
SOFTVERBS_WEAK_EXPORT int rdma_create_ep(rdma_cm_id**, rdma_addrinfo*, ibv_pd*, ibv_qp_init_attr*) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT void rdma_destroy_ep(rdma_cm_id*) {}

// ---------------------------------------------------------------------------
// Multicast.
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT int rdma_join_multicast(rdma_cm_id*, sockaddr*, void*) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rdma_join_multicast_ex(rdma_cm_id*, rdma_cm_join_mc_attr_ex*, void*) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rdma_leave_multicast(rdma_cm_id*, sockaddr*) {
  return MinusOneNotSupported();
}

// ---------------------------------------------------------------------------
// rsockets: socket-like API (-1 + errno on failure, like the BSD calls);
// every one of them is implemented in rsocket_*.cc (SOCK_STREAM).
// ---------------------------------------------------------------------------
SOFTVERBS_WEAK_EXPORT int rsocket(int, int, int) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rbind(int, const sockaddr*, socklen_t) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rlisten(int, int) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int raccept(int, sockaddr*, socklen_t*) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rconnect(int, const sockaddr*, socklen_t) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rshutdown(int, int) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rclose(int) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT ssize_t rrecv(int, void*, size_t, int) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT ssize_t rrecvfrom(int, void*, size_t, int, sockaddr*, socklen_t*) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT ssize_t rrecvmsg(int, msghdr*, int) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT ssize_t rsend(int, const void*, size_t, int) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT ssize_t rsendto(int, const void*, size_t, int, const sockaddr*, socklen_t) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT ssize_t rsendmsg(int, const msghdr*, int) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT ssize_t rread(int, void*, size_t) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT ssize_t rreadv(int, const iovec*, int) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT ssize_t rwrite(int, const void*, size_t) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT ssize_t rwritev(int, const iovec*, int) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rpoll(pollfd*, nfds_t, int) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rselect(int, fd_set*, fd_set*, fd_set*, timeval*) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rgetpeername(int, sockaddr*, socklen_t*) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rgetsockname(int, sockaddr*, socklen_t*) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rsetsockopt(int, int, int, const void*, socklen_t) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rgetsockopt(int, int, int, void*, socklen_t*) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int rfcntl(int, int, ...) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT off_t riomap(int, void*, size_t, int, int, off_t) {
  return MinusOneNotSupported();
}
SOFTVERBS_WEAK_EXPORT int riounmap(int, void*, size_t) {
  return MinusOneNotSupported();
}
// Declared size_t, yet reports failure as (size_t)-1 with errno.
SOFTVERBS_WEAK_EXPORT size_t riowrite(int, const void*, size_t, off_t, int) {
  return static_cast<size_t>(MinusOneNotSupported());
}

}  // extern "C"
