// Thread domains and parent domains: see parent_domain.h.
#include "abi/ibverbs/parent_domain.h"

#include <errno.h>

#include <atomic>
#include <new>

#include "abi/ibverbs/provider.h"
#include "abi/ibverbs/reject.h"

namespace softverbs::provider {

struct Td {
  ibv_td ibv;  // first
  std::atomic<int> parent_domains{0};
};

namespace {
constexpr uint32_t kKnownParentDomainComp =
    IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
}  // namespace

ibv_td* AllocTdOp(ibv_context* context, ibv_td_init_attr* attr) {
  if (!context || !attr) {
    return RejectNull(EINVAL, "ibv_alloc_td: %s is NULL", !context ? "context" : "init_attr");
  }
  if (attr->comp_mask != 0) {
    return RejectNull(EINVAL, "ibv_alloc_td: comp_mask 0x%x has unknown bits", attr->comp_mask);
  }
  auto* td = new (std::nothrow) Td{};
  if (!td) return RejectNull(ENOMEM, "ibv_alloc_td: out of memory");
  td->ibv.context = context;
  return &td->ibv;
}

int DeallocTdOp(ibv_td* ibtd) {
  if (!ibtd) return Reject(EINVAL, "ibv_dealloc_td: td is NULL");
  auto* td = reinterpret_cast<Td*>(ibtd);
  if (int n = td->parent_domains.load()) {
    return Reject(EBUSY, "ibv_dealloc_td: %d parent domain(s) still use the thread domain", n);
  }
  delete td;
  return 0;
}

ibv_pd* AllocParentDomainOp(ibv_context* context, ibv_parent_domain_init_attr* attr) {
  if (!context || !attr) {
    return RejectNull(EINVAL, "ibv_alloc_parent_domain: %s is NULL", !context ? "context" : "attr");
  }
  if (!attr->pd) return RejectNull(EINVAL, "ibv_alloc_parent_domain: attr->pd is NULL");
  if (attr->comp_mask & ~kKnownParentDomainComp) {
    return RejectNull(EINVAL, "ibv_alloc_parent_domain: comp_mask 0x%x has unknown bits",
                      attr->comp_mask);
  }
  if (attr->pd->context != context || (attr->td && attr->td->context != context)) {
    return RejectNull(EINVAL, "ibv_alloc_parent_domain: the %s belongs to another context",
                      attr->pd->context != context ? "PD" : "thread domain");
  }
  if (IsParentDomain(attr->pd)) {
    return RejectNull(EINVAL, "ibv_alloc_parent_domain: attr->pd is itself a parent domain");
  }
  if ((attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) && (!attr->alloc != !attr->free)) {
    return RejectNull(EINVAL, "ibv_alloc_parent_domain: alloc and free go together");
  }
  Pd* pd = FromPublic<Pd>(attr->pd);
  auto* parent = new (std::nothrow) Pd{};
  if (!parent) return RejectNull(ENOMEM, "ibv_alloc_parent_domain: out of memory");
  parent->ibv.context = context;
  parent->ibv.handle = pd->ibv.handle;
  parent->handle = pd->handle;
  parent->pdn = pd->pdn;
  parent->protection_domain = pd;
  parent->td = reinterpret_cast<Td*>(attr->td);
  if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT) {
    parent->pd_context = attr->pd_context;
  }
  pd->users.fetch_add(1);
  if (parent->td) parent->td->parent_domains.fetch_add(1);
  return &parent->ibv;
}

int DeallocParentDomain(Pd* parent) {
  if (int n = parent->users.load()) {
    return Reject(EBUSY, "ibv_dealloc_pd: %d QP/CQ/SRQ object(s) still use the parent domain", n);
  }
  parent->protection_domain->users.fetch_sub(1);
  if (parent->td) parent->td->parent_domains.fetch_sub(1);
  delete parent;
  return 0;
}

bool IsParentDomain(const ibv_pd* pd) {
  return pd && reinterpret_cast<const Pd*>(pd)->protection_domain != nullptr;
}

void UseParentDomain(ibv_pd* pd) {
  if (IsParentDomain(pd)) FromPublic<Pd>(pd)->users.fetch_add(1);
}

void UnuseParentDomain(ibv_pd* pd) {
  if (IsParentDomain(pd)) FromPublic<Pd>(pd)->users.fetch_sub(1);
}

}  // namespace softverbs::provider
