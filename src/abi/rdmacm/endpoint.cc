// Endpoints: rdma_create_ep and rdma_destroy_ep (a synchronous id, its
// address and route resolved or its source bound, and optionally a QP).
#include <errno.h>
#include <rdma/rdma_verbs.h>
#include <string.h>

#include <new>

#include "abi/rdmacm/cm_internal.h"

using namespace softverbs::rdmacm;

#define SV_EXPORT extern "C" __attribute__((visibility("default")))

SV_EXPORT int rdma_create_ep(rdma_cm_id** id, rdma_addrinfo* res, ibv_pd* pd,
                             ibv_qp_init_attr* qp_init_attr) {
  if (!id || !res) return RejectMinusOne(EINVAL, "rdma_create_ep: id or res is NULL");
  rdma_cm_id* cm_id = nullptr;
  rdma_port_space ps = static_cast<rdma_port_space>(res->ai_port_space);
  if (CreateId(nullptr, &cm_id, nullptr, ps, static_cast<ibv_qp_type>(res->ai_qp_type))) {
    return -1;
  }
  Id* priv = IdOf(cm_id);
  int ret = 0;
  if (res->ai_flags & RAI_PASSIVE) {
    ret = rdma_bind_addr(cm_id, res->ai_src_addr);
    if (!ret) {
      if (pd) cm_id->pd = pd;
      if (qp_init_attr) {
        priv->qp_init_attr = new (std::nothrow) ibv_qp_init_attr(*qp_init_attr);
        if (!priv->qp_init_attr) {
          errno = ENOMEM;
          ret = -1;
        } else {
          priv->qp_init_attr->qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
        }
      }
    }
  } else {
    ret = rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr, 2000);
    if (!ret && res->ai_route_len) {
      ret = RejectMinusOne(EOPNOTSUPP,
                           "rdma_create_ep: ai_route (a path record) is not "
                           "supported by softverbs");
    }
    if (!ret) ret = rdma_resolve_route(cm_id, 2000);
    if (!ret && qp_init_attr) {
      qp_init_attr->qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
      ret = rdma_create_qp(cm_id, pd, qp_init_attr);
    }
    if (!ret && res->ai_connect_len) {
      const auto* p = static_cast<const uint8_t*>(res->ai_connect);
      priv->connect_data.assign(p, p + res->ai_connect_len);
    }
  }
  if (ret) {
    int err = errno;
    rdma_destroy_ep(cm_id);
    errno = err;
    return -1;
  }
  *id = cm_id;
  return 0;
}

SV_EXPORT void rdma_destroy_ep(rdma_cm_id* id) {
  if (!id) return;
  if (id->qp) rdma_destroy_qp(id);
  if (id->srq) rdma_destroy_srq(id);
  rdma_destroy_id(id);
}
