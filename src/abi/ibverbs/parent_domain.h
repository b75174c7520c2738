// Thread domains and parent domains (ibv_alloc_td, ibv_alloc_parent_domain).
//
// A parent domain stands for its protection domain wherever a PD is taken
// (QPs, SRQs, MRs, AHs) and can be given to ibv_create_cq_ex
// (IBV_CQ_INIT_ATTR_MASK_PD). It holds its PD and thread domain: they cannot
// be freed before it (EBUSY), and it cannot be freed while QPs, CQs or SRQs
// were created on it, as libmlx5's reference counts. Custom allocators are
// accepted and kept, but never called: softverbs' queues are shared memory
// made by the device (docs/datapath.md), not buffers the library allocates.
#pragma once

#include <infiniband/verbs.h>

namespace softverbs::provider {

struct Pd;

ibv_td* AllocTdOp(ibv_context* context, ibv_td_init_attr* attr);
int DeallocTdOp(ibv_td* td);
ibv_pd* AllocParentDomainOp(ibv_context* context, ibv_parent_domain_init_attr* attr);

// ibv_dealloc_pd of a parent domain: EBUSY while objects use it.
int DeallocParentDomain(Pd* parent);

// An object was created on / destroyed from `pd`: counted when pd is a
// parent domain, nothing otherwise (NULL is fine).
void UseParentDomain(ibv_pd* pd);
void UnuseParentDomain(ibv_pd* pd);
bool IsParentDomain(const ibv_pd* pd);

}  // namespace softverbs::provider
