// What happens to a client's objects when it goes away, as when the kernel
// closes a dead process's verbs file: QPs first (their multicast attachments
// with them), then AHs, SRQs, CQs, memory windows, MRs, PDs, XRC domain
// references and reserved QP numbers.
#include <unistd.h>

#include <algorithm>

#include "daemon/device.h"

namespace softverbs::daemon {

namespace {
template <typename Table>
std::vector<Handle> HandlesOwnedBy(const Table& table, const std::vector<ClientId>& members) {
  std::vector<Handle> out;
  for (const auto& [h, obj] : table) {
    if (std::find(members.begin(), members.end(), obj.owner) != members.end()) out.push_back(h);
  }
  return out;
}
}  // namespace

void Device::JoinGroup(ClientId client, ClientId member) {
  auto it = clients_.find(client);
  if (it != clients_.end()) it->second.group = GroupOf(member);
}

void Device::ClientLeft(ClientId c) {
  auto it = clients_.find(c);
  if (it == clients_.end()) return;
  ReleaseAccessRecord(c);  // a dead process is inside no access: its counts go with it
  ForgetKeptBackings(c);   // the memfds kept for the connection's next registrations
  it->second.live = false;
  const ClientId group = GroupOf(c);
  std::vector<ClientId> members;
  for (const auto& [id, info] : clients_) {
    if (GroupOf(id) != group) continue;
    if (info.live) return;  // another process still holds the group
    members.push_back(id);
  }
  ReleaseClients(members);
}

void Device::ReleaseClients(const std::vector<ClientId>& members) {
  // Each kind of object across the whole group before the next kind: a QP
  // of one member may use another member's PD or CQ.
  for (ClientId c : members) ReleaseDevxObjects(c);  // DEVX objects hold verbs objects: first
  const ClientId c = members.front();                // any member may name the group's objects
  for (Handle h : HandlesOwnedBy(flows_, members)) DestroyFlow(c, h);  // they hold QPs
  for (Handle h : HandlesOwnedBy(qp_handles_, members)) {
    qps_.at(qp_handles_.at(h).qpn).mcast_groups.clear();
    DropQpHandle(h);
  }
  for (Handle h : HandlesOwnedBy(ind_tables_, members)) {  // after the RSS QPs over them
    ind_tables_.at(h).users = 0;
    DestroyRwqIndTable(c, h);
  }
  for (Handle h : HandlesOwnedBy(ahs_, members)) DestroyAh(c, h);
  for (Handle h : HandlesOwnedBy(srqs_, members)) DestroySrq(c, h);
  for (Handle h : HandlesOwnedBy(cqs_, members)) {
    cqs_.at(h).users = 0;
    DestroyCq(c, h);
  }
  for (Handle h : HandlesOwnedBy(mws_, members)) DeallocMw(c, h);  // before the MRs they lie in
  for (Handle h : HandlesOwnedBy(mkeys_, members)) DestroyMkey(c, h);
  for (Handle h : HandlesOwnedBy(mrs_, members)) DeregMr(c, h);
  for (Handle h : HandlesOwnedBy(dms_, members)) FreeDm(c, h);
  for (Handle h : HandlesOwnedBy(pds_, members)) {
    pds_.at(h).users = 0;
    DeallocPd(c, h);
  }
  for (Handle h : HandlesOwnedBy(xrcd_handles_, members)) {
    Handle id = xrcd_handles_.at(h).xrcd;
    xrcd_handles_.erase(h);
    xrcds_.at(id).opens--;
    FreeXrcdIfUnused(id);
  }
  std::erase_if(reserved_qpns_, [&](const auto& entry) {
    return std::find(members.begin(), members.end(), entry.second) != members.end();
  });
  FlowRulesChanged();  // their rules and raw multicast groups went with their QPs
  for (ClientId m : members) {
    if (auto it = mem_fds_.find(m); it != mem_fds_.end()) {
      close(it->second);
      mem_fds_.erase(it);
    }
    clients_.erase(m);
  }
}

}  // namespace softverbs::daemon
