// What happens to a client's objects when it goes away, as when the kernel
// closes a dead process's verbs file: QPs first (their multicast attachments
// with them), then AHs, SRQs, CQs, memory windows, MRs, PDs and XRC domain
// references.
#include <unistd.h>

#include "daemon/device.h"

namespace softverbs::daemon {

namespace {
template <typename Table>
std::vector<Handle> HandlesOwnedBy(const Table& table, ClientId c) {
  std::vector<Handle> out;
  for (const auto& [h, obj] : table) {
    if (obj.owner == c) out.push_back(h);
  }
  return out;
}
}  // namespace

void Device::RemoveClient(ClientId c) {
  ReleaseAccessRecord(c);  // what it held inside accesses of any MR
  ReleaseDevxObjects(c);   // DEVX objects hold verbs objects: they go first
  for (Handle h : HandlesOwnedBy(qp_handles_, c)) {
    qps_.at(qp_handles_.at(h).qpn).mcast_groups.clear();
    DropQpHandle(h);
  }
  for (Handle h : HandlesOwnedBy(ahs_, c)) DestroyAh(c, h);
  for (Handle h : HandlesOwnedBy(srqs_, c)) DestroySrq(c, h);
  for (Handle h : HandlesOwnedBy(cqs_, c)) {
    cqs_.at(h).users = 0;
    DestroyCq(c, h);
  }
  for (Handle h : HandlesOwnedBy(mws_, c)) DeallocMw(c, h);  // before the MRs they lie in
  for (Handle h : HandlesOwnedBy(mrs_, c)) DeregMr(c, h);
  for (Handle h : HandlesOwnedBy(dms_, c)) FreeDm(c, h);
  for (Handle h : HandlesOwnedBy(pds_, c)) {
    pds_.at(h).users = 0;
    DeallocPd(c, h);
  }
  for (Handle h : HandlesOwnedBy(xrcd_handles_, c)) {
    Handle id = xrcd_handles_.at(h).xrcd;
    xrcd_handles_.erase(h);
    xrcds_.at(id).opens--;
    FreeXrcdIfUnused(id);
  }
  if (auto it = mem_fds_.find(c); it != mem_fds_.end()) {
    close(it->second);
    mem_fds_.erase(it);
  }
  clients_.erase(c);
}

}  // namespace softverbs::daemon
