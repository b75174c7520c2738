// The process-wide device of librdmacm, the id table, the daemon calls, and
// rdma_get_devices / rdma_free_devices.
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include <map>

#include "abi/ibverbs/softverbs_private.h"
#include "abi/rdmacm/cm_internal.h"
#include "common/no_destructor.h"

namespace softverbs::rdmacm {

namespace {

std::mutex g_mutex;
Device g_device;
NoDestructor<std::map<uint32_t, Id*>> g_ids;

// RDMA_MAX_RESP_RES / RDMA_MAX_INIT_DEPTH are 0xff: what the device reports
// must stay below.
uint8_t Clamp8(int v) {
  return static_cast<uint8_t>(v > 0xfe ? 0xfe : (v < 0 ? 0 : v));
}

}  // namespace

Device& TheDevice() {
  return g_device;
}

int InitDevice() {
  std::lock_guard lock(g_mutex);
  if (g_device.verbs) return 0;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n == 0) {
    if (list) ibv_free_device_list(list);
    return RejectMinusOne(ENODEV, "librdmacm: no RDMA device (softverbs0) is available");
  }
  ibv_context* verbs = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  if (!verbs) return RejectMinusOne(ENODEV, "librdmacm: softverbs0 cannot be opened");
  ibv_device_attr attr{};
  if (ibv_query_device(verbs, &attr) == 0) {
    g_device.max_responder_resources = Clamp8(attr.max_qp_rd_atom);
    g_device.max_initiator_depth = Clamp8(attr.max_qp_init_rd_atom);
  }
  g_device.pd = ibv_alloc_pd(verbs);
  if (!g_device.pd) {
    ibv_close_device(verbs);
    return RejectMinusOne(ENOMEM, "librdmacm: cannot allocate the default PD");
  }
  g_device.verbs = verbs;
  return 0;
}

ibv_xrcd* XrcdOfDevice() {
  std::lock_guard lock(g_mutex);
  if (!g_device.xrcd) {
    ibv_xrcd_init_attr attr{};
    attr.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
    attr.fd = -1;
    attr.oflags = O_CREAT;
    g_device.xrcd = ibv_open_xrcd(g_device.verbs, &attr);
  }
  return g_device.xrcd;
}

void InsertId(Id* id) {
  std::lock_guard lock(g_mutex);
  (*g_ids)[id->handle] = id;
}

void RemoveId(Id* id) {
  std::lock_guard lock(g_mutex);
  auto it = g_ids->find(id->handle);
  if (it != g_ids->end() && it->second == id) g_ids->erase(it);
}

Id* LookupId(uint32_t handle) {
  std::lock_guard lock(g_mutex);
  auto it = g_ids->find(handle);
  return it == g_ids->end() ? nullptr : it->second;
}

int Call(protocol::Op op, const protocol::CmRequest& req, protocol::CmReply* rep) {
  protocol::CmReply scratch{};
  if (!rep) rep = &scratch;
  int err = softverbs_call(g_device.verbs, static_cast<uint16_t>(op), &req, sizeof(req), rep,
                           sizeof(*rep), nullptr, nullptr, 0);
  if (err) {
    errno = err;
    return -1;
  }
  return 0;
}

protocol::CmRequest RequestFor(const Id* id) {
  protocol::CmRequest req{};
  req.id = id->handle;
  req.flags = id->option_flags;
  req.tos = id->tos;
  req.tos_set = id->tos_set ? 1 : 0;
  return req;
}

socklen_t AddrLen(const sockaddr* addr) {
  if (!addr) return 0;
  if (addr->sa_family == AF_INET) return sizeof(sockaddr_in);
  if (addr->sa_family == AF_INET6) return sizeof(sockaddr_in6);
  return 0;
}

bool ToCmAddr(const sockaddr* addr, sockaddr_in6* out) {
  memset(out, 0, sizeof(*out));
  socklen_t len = AddrLen(addr);
  if (!len) return false;
  memcpy(out, addr, len);
  return true;
}

void ApplyRoute(Id* id, const protocol::CmRoute& route) {
  rdma_addr& a = id->id.route.addr;
  if (route.src.sin6_family) {
    memset(&a.src_storage, 0, sizeof(a.src_storage));
    memcpy(&a.src_storage, &route.src, AddrLen(reinterpret_cast<const sockaddr*>(&route.src)));
  }
  if (route.dst.sin6_family) {
    memset(&a.dst_storage, 0, sizeof(a.dst_storage));
    memcpy(&a.dst_storage, &route.dst, AddrLen(reinterpret_cast<const sockaddr*>(&route.dst)));
  }
  memcpy(a.addr.ibaddr.sgid.raw, route.sgid, 16);
  memcpy(a.addr.ibaddr.dgid.raw, route.dgid, 16);
  a.addr.ibaddr.pkey = htobe16(route.pkey);
  if (route.on_device && !id->id.verbs) {
    id->id.verbs = g_device.verbs;
    if (!id->id.pd) id->id.pd = g_device.pd;
    id->id.port_num = 1;
  }
}

}  // namespace softverbs::rdmacm

using softverbs::rdmacm::InitDevice;
using softverbs::rdmacm::TheDevice;

extern "C" {

__attribute__((visibility("default"))) ibv_context** rdma_get_devices(int* num_devices) {
  if (num_devices) *num_devices = 0;
  if (InitDevice()) return nullptr;
  auto** list = static_cast<ibv_context**>(calloc(2, sizeof(ibv_context*)));
  if (!list) {
    errno = ENOMEM;
    return nullptr;
  }
  list[0] = TheDevice().verbs;
  if (num_devices) *num_devices = 1;
  return list;
}

__attribute__((visibility("default"))) void rdma_free_devices(ibv_context** list) {
  free(list);
}

}  // extern "C"
