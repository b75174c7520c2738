// ibv_import_pd / ibv_unimport_pd and ibv_import_mr / ibv_unimport_mr: a
// context that shares another's connection (ibv_import_device, context.cc)
// names that context's PD or MR by its handle and gets an object of its own
// for it, as rdma-core's QUERY methods give. The device object stays one:
// ibv_dealloc_pd / ibv_dereg_mr through either destroys it; unimport frees
// only the importer's struct. An imported MR's addr is NULL (rdma-core's
// ibv_cmd_query_mr: the importer does not know the registering address).
// Device memory's import is in dm.cc.
#include <errno.h>

#include <new>

#include "abi/ibverbs/exports.h"
#include "abi/ibverbs/provider.h"
#include "abi/ibverbs/reject.h"

using namespace softverbs::provider;
namespace protocol = softverbs::protocol;

SV_EXPORT ibv_pd* ibv_import_pd(ibv_context* context, uint32_t pd_handle) {
  if (!context) return RejectNull(EINVAL, "ibv_import_pd: context is NULL");
  protocol::HandleRequest req{pd_handle, 0};
  protocol::QueryPdReply rep{};
  if (int err = Context::From(context)->channel.Call(protocol::Op::kQueryPd, req, &rep)) {
    return FailNull<ibv_pd>(err);
  }
  auto* pd = new (std::nothrow) Pd{};
  if (!pd) return RejectNull(ENOMEM, "ibv_import_pd: out of memory for the PD");
  pd->ibv.context = context;
  pd->ibv.handle = pd_handle;
  pd->handle = pd_handle;
  pd->pdn = rep.pdn;
  return &pd->ibv;
}

SV_EXPORT void ibv_unimport_pd(ibv_pd* pd) {
  if (!pd) return;
  delete FromPublic<Pd>(pd);
}

SV_EXPORT ibv_mr* ibv_import_mr(ibv_pd* pd, uint32_t mr_handle) {
  if (!pd) return RejectNull(EINVAL, "ibv_import_mr: pd is NULL");
  protocol::HandleRequest req{mr_handle, 0};
  protocol::QueryMrReply rep{};
  if (int err = Context::From(pd->context)->channel.Call(protocol::Op::kQueryMr, req, &rep)) {
    return FailNull<ibv_mr>(err);
  }
  auto* mr = new (std::nothrow) Mr{};
  if (!mr) return RejectNull(ENOMEM, "ibv_import_mr: out of memory for the MR");
  mr->handle = mr_handle;
  mr->imported = true;
  mr->ibv.context = pd->context;
  mr->ibv.pd = pd;
  mr->ibv.addr = nullptr;
  mr->ibv.length = rep.length;
  mr->ibv.handle = mr_handle;
  mr->ibv.lkey = rep.lkey;
  mr->ibv.rkey = rep.rkey;
  return &mr->ibv;
}

SV_EXPORT void ibv_unimport_mr(ibv_mr* mr) {
  if (!mr) return;
  delete FromPublic<Mr>(mr);
}
