// What an imported object is (ibv_import_pd / ibv_import_mr / ibv_import_dm):
// a context that shares another's connection (ibv_import_device) names an
// object by handle and learns what the kernel's QUERY methods return. The
// object stays one object: destroying it through either context destroys it.
#include <errno.h>

#include "daemon/device.h"

namespace softverbs::daemon {

Verdict Device::QueryPd(ClientId c, Handle h, protocol::QueryPdReply* out) {
  const Pd* pd = FindOwned(pds_, c, h);
  if (!pd)
    return Verdict::Fail(EINVAL,
                         "import_pd: no PD of handle " + std::to_string(h) + " in this context");
  *out = {pd->pdn, 0};
  return Verdict::Ok();
}

Verdict Device::QueryMr(ClientId c, Handle h, protocol::QueryMrReply* out) {
  const Mr* mr = FindOwned(mrs_, c, h);
  if (!mr)
    return Verdict::Fail(EINVAL,
                         "import_mr: no MR of handle " + std::to_string(h) + " in this context");
  *out = {mr->lkey, mr->rkey, mr->length};
  return Verdict::Ok();
}

Verdict Device::QueryDm(ClientId c, Handle h, protocol::QueryDmReply* out) {
  const Dm* dm = FindOwned(dms_, c, h);
  if (!dm)
    return Verdict::Fail(
        EINVAL, "import_dm: no device memory of handle " + std::to_string(h) + " in this context");
  *out = {dm->length};
  return Verdict::Ok();
}

}  // namespace softverbs::daemon
