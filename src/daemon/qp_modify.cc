// ibv_modify_qp: check (the state table and every attribute value) -> apply
// -> report. A rejected modify changes nothing, not even the state.
#include <errno.h>

#include "daemon/device.h"

namespace softverbs::daemon {

Verdict Device::ModifyQp(ClientId c, const protocol::ModifyQpRequest& req) {
  QpHandle* qh = FindOwned(qp_handles_, c, req.handle);
  if (!qh) return Verdict::Fail(EINVAL, "modify_qp: no such QP in this context");
  return Verdict::Fail(EOPNOTSUPP, "modify_qp: not wired yet");
}

}  // namespace softverbs::daemon
