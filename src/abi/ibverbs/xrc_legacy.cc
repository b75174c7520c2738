// The legacy (OFED 1.x) XRC receive-QP API of include/softverbs/xrc_legacy.h,
// mapped onto rdma-core's model the way the kernel maps it: a domain is an
// XRCD; creating a receive QP makes an XRC_RECV QP whose handle is the
// creator's registration; ibv_reg_xrc_rcv_qp opens one more handle
// (ibv_open_qp); ibv_unreg_xrc_rcv_qp closes it. The daemon destroys the QP
// with its last handle, and drops a dead process's handles, which is exactly
// the registration counting the legacy API describes.
#include "softverbs/xrc_legacy.h"

#include <errno.h>
#include <fcntl.h>

#include <map>
#include <mutex>
#include <new>

#include "abi/ibverbs/exports.h"
#include "abi/ibverbs/ops.h"
#include "abi/ibverbs/provider.h"
#include "abi/ibverbs/reject.h"
#include "abi/ibverbs/xrc_legacy_registry.h"
#include "common/log.h"
#include "common/no_destructor.h"

namespace softverbs::provider {
namespace {

struct LegacyDomain {
  ibv_xrc_domain pub;  // first: handed to the application
  ibv_xrcd* xrcd;
  std::mutex mutex;
  std::map<uint32_t, ibv_qp*> registrations;  // this process's handles, by QP number
};

LegacyDomain* AsLegacy(ibv_xrc_domain* d) {
  return reinterpret_cast<LegacyDomain*>(d);
}

// Handles of legacy receive QPs, so that their async events get the flag.
std::mutex g_registry_mutex;
NoDestructor<std::map<ibv_qp*, uint32_t>> g_legacy_qps;

void Remember(ibv_qp* qp) {
  std::lock_guard lock(g_registry_mutex);
  (*g_legacy_qps)[qp] = qp->qp_num;
}

void Forget(ibv_qp* qp) {
  std::lock_guard lock(g_registry_mutex);
  g_legacy_qps->erase(qp);
}

ibv_qp* OpenHandle(LegacyDomain* d, uint32_t qpn) {
  ibv_qp_open_attr attr{};
  attr.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
  attr.qp_num = qpn;
  attr.xrcd = d->xrcd;
  attr.qp_type = IBV_QPT_XRC_RECV;
  return OpenQpOp(d->pub.context, &attr);
}

// Runs fn on a handle of (d, qpn): this process's registration if it has one,
// else a temporary handle (the legacy API addresses the QP by number; the
// domain proves the right to it).
template <typename Fn>
int WithHandle(LegacyDomain* d, uint32_t qpn, Fn fn) {
  ibv_qp* qp = nullptr;
  {
    std::lock_guard lock(d->mutex);
    auto it = d->registrations.find(qpn);
    if (it != d->registrations.end()) qp = it->second;
  }
  if (qp) return fn(qp);
  ibv_qp* temp = OpenHandle(d, qpn);
  if (!temp) return errno;
  int err = fn(temp);
  ibv_destroy_qp(temp);
  return err;
}

}  // namespace

bool LegacyXrcQpNumber(ibv_qp* qp, uint32_t* qpn) {
  std::lock_guard lock(g_registry_mutex);
  auto it = g_legacy_qps->find(qp);
  if (it == g_legacy_qps->end()) return false;
  *qpn = it->second;
  return true;
}

}  // namespace softverbs::provider

using namespace softverbs::provider;
using softverbs::Log;

SV_EXPORT ibv_xrc_domain* ibv_open_xrc_domain(ibv_context* context, int fd, int oflag) {
  if (!context) return RejectNull(EINVAL, "ibv_open_xrc_domain: context is NULL");
  if (fd == -1 && oflag != O_CREAT) {
    Log("ibv_open_xrc_domain: without a file (fd -1) the only valid oflag is O_CREAT");
    return FailNull<ibv_xrc_domain>(EINVAL);
  }
  ibv_xrcd_init_attr attr{};
  attr.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  attr.fd = fd;
  attr.oflags = oflag;
  ibv_xrcd* xrcd = OpenXrcdOp(context, &attr);
  if (!xrcd) return nullptr;
  auto* d = new (std::nothrow) LegacyDomain{};
  if (!d) {
    CloseXrcdOp(xrcd);
    return RejectNull(ENOMEM, "ibv_open_xrc_domain: out of memory for the domain");
  }
  d->pub.context = context;
  d->pub.handle = FromPublic<Xrcd>(xrcd)->handle;
  d->xrcd = xrcd;
  return &d->pub;
}

SV_EXPORT int ibv_close_xrc_domain(ibv_xrc_domain* domain) {
  if (!domain) return Reject(EINVAL, "ibv_close_xrc_domain: domain is NULL");
  LegacyDomain* d = AsLegacy(domain);
  {
    std::lock_guard lock(d->mutex);
    if (!d->registrations.empty()) {
      return Reject(EBUSY,
                    "ibv_close_xrc_domain: this process is still registered with %zu receive "
                    "QP(s)",
                    d->registrations.size());
    }
  }
  if (int err = CloseXrcdOp(d->xrcd)) return err;
  delete d;
  return 0;
}

SV_EXPORT ibv_srq* ibv_create_xrc_srq(ibv_pd* pd, ibv_xrc_domain* domain, ibv_cq* xrc_cq,
                                      ibv_srq_init_attr* srq_init_attr) {
  if (!pd || !domain || !xrc_cq || !srq_init_attr) {
    return RejectNull(EINVAL, "ibv_create_xrc_srq: %s is NULL",
                      !pd       ? "pd"
                      : !domain ? "xrc_domain"
                      : !xrc_cq ? "xrc_cq"
                                : "srq_init_attr");
  }
  ibv_srq_init_attr_ex attr{};
  attr.srq_context = srq_init_attr->srq_context;
  attr.attr = srq_init_attr->attr;
  attr.comp_mask =
      IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  attr.srq_type = IBV_SRQT_XRC;
  attr.pd = pd;
  attr.xrcd = AsLegacy(domain)->xrcd;
  attr.cq = xrc_cq;
  ibv_srq* srq = CreateSrqExOp(pd->context, &attr);
  if (srq) srq_init_attr->attr = attr.attr;
  return srq;
}

SV_EXPORT int ibv_create_xrc_rcv_qp(ibv_xrc_qp_init_attr* init_attr, uint32_t* xrc_rcv_qpn) {
  if (!init_attr || !init_attr->xrc_domain || !xrc_rcv_qpn) {
    return Reject(EINVAL, "ibv_create_xrc_rcv_qp: %s is NULL",
                  !init_attr               ? "init_attr"
                  : !init_attr->xrc_domain ? "init_attr->xrc_domain"
                                           : "xrc_rcv_qpn");
  }
  LegacyDomain* d = AsLegacy(init_attr->xrc_domain);
  ibv_qp_init_attr_ex attr{};
  attr.qp_type = IBV_QPT_XRC_RECV;
  attr.comp_mask = IBV_QP_INIT_ATTR_XRCD;
  attr.xrcd = d->xrcd;
  ibv_qp* qp = CreateQpExOp(d->pub.context, &attr);
  if (!qp) return errno;
  {
    std::lock_guard lock(d->mutex);
    d->registrations[qp->qp_num] = qp;  // the creator is registered implicitly
  }
  Remember(qp);
  *xrc_rcv_qpn = qp->qp_num;
  return 0;
}

SV_EXPORT int ibv_modify_xrc_rcv_qp(ibv_xrc_domain* domain, uint32_t xrc_qp_num, ibv_qp_attr* attr,
                                    int attr_mask) {
  if (!domain || !attr) {
    return Reject(EINVAL, "ibv_modify_xrc_rcv_qp: %s is NULL", !domain ? "xrc_domain" : "attr");
  }
  return WithHandle(AsLegacy(domain), xrc_qp_num,
                    [&](ibv_qp* qp) { return ibv_modify_qp(qp, attr, attr_mask); });
}

SV_EXPORT int ibv_query_xrc_rcv_qp(ibv_xrc_domain* domain, uint32_t xrc_qp_num, ibv_qp_attr* attr,
                                   int attr_mask, ibv_xrc_qp_init_attr* init_attr) {
  if (!domain || !attr || !init_attr) {
    return Reject(EINVAL, "ibv_query_xrc_rcv_qp: %s is NULL",
                  !domain ? "xrc_domain"
                  : !attr ? "attr"
                          : "init_attr");
  }
  return WithHandle(AsLegacy(domain), xrc_qp_num, [&](ibv_qp* qp) {
    ibv_qp_init_attr modern{};
    int err = ibv_query_qp(qp, attr, attr_mask, &modern);
    if (err) return err;
    init_attr->qp_context = nullptr;
    init_attr->send_cq = init_attr->recv_cq = nullptr;
    init_attr->srq = nullptr;
    init_attr->cap = modern.cap;
    init_attr->qp_type = modern.qp_type;
    init_attr->sq_sig_all = modern.sq_sig_all;
    init_attr->xrc_domain = domain;
    return 0;
  });
}

SV_EXPORT int ibv_reg_xrc_rcv_qp(ibv_xrc_domain* domain, uint32_t xrc_qp_num) {
  if (!domain) return Reject(EINVAL, "ibv_reg_xrc_rcv_qp: xrc_domain is NULL");
  LegacyDomain* d = AsLegacy(domain);
  std::lock_guard lock(d->mutex);
  if (d->registrations.count(xrc_qp_num)) return 0;  // already registered
  ibv_qp* qp = OpenHandle(d, xrc_qp_num);
  if (!qp) return errno;
  d->registrations[xrc_qp_num] = qp;
  Remember(qp);
  return 0;
}

SV_EXPORT int ibv_unreg_xrc_rcv_qp(ibv_xrc_domain* domain, uint32_t xrc_qp_num) {
  if (!domain) return Reject(EINVAL, "ibv_unreg_xrc_rcv_qp: xrc_domain is NULL");
  LegacyDomain* d = AsLegacy(domain);
  std::lock_guard lock(d->mutex);
  auto it = d->registrations.find(xrc_qp_num);
  if (it == d->registrations.end()) {
    return Reject(EINVAL, "ibv_unreg_xrc_rcv_qp: this process is not registered with QP 0x%x",
                  xrc_qp_num);
  }
  ibv_qp* qp = it->second;
  Forget(qp);
  if (int err = ibv_destroy_qp(qp)) {
    Remember(qp);
    return err;
  }
  d->registrations.erase(it);
  return 0;
}
