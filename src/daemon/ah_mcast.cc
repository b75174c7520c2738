// Address handles and multicast attachment.
#include <errno.h>
#include <string.h>

#include "common/device_limits.h"
#include "daemon/device.h"

namespace softverbs::daemon {

namespace lim = softverbs::limits;

Verdict Device::CheckAhAttr(const ibv_ah_attr& attr, const char* what) const {
  if (attr.port_num != 1) {
    return Verdict::Fail(EINVAL, std::string(what) + ": port_num " + std::to_string(attr.port_num) +
                                     " does not exist (ports: 1)");
  }
  // RoCE addresses by GID: the GRH is mandatory.
  if (!attr.is_global) {
    return Verdict::Fail(EINVAL,
                         std::string(what) + ": is_global must be 1 on a RoCE port (GRH required)");
  }
  if (attr.grh.sgid_index >= gids_.count) {
    return Verdict::Fail(
        EINVAL, std::string(what) + ": sgid_index " + std::to_string(attr.grh.sgid_index) +
                    " is beyond the GID table (" + std::to_string(gids_.count) + " entries)");
  }
  return Verdict::Ok();
}

Verdict Device::CreateAh(ClientId c, const protocol::CreateAhRequest& req,
                         protocol::CreateAhReply* out) {
  Pd* pd = FindOwned(pds_, c, req.pd);
  if (!pd) return Verdict::Fail(EINVAL, "create_ah: no such PD in this context");
  if (Verdict v = CheckAhAttr(req.attr, "create_ah"); !v.ok()) return v;
  if (ahs_.size() >= static_cast<size_t>(lim::kMaxAh)) {
    return Verdict::Fail(ENOMEM, "device limit max_ah reached");
  }
  Ah ah{NextHandle(), c, pd->handle, req.attr};
  pd->users++;
  ahs_[ah.handle] = ah;
  *out = {ah.handle, 0};
  return Verdict::Ok();
}

Verdict Device::DestroyAh(ClientId c, Handle h) {
  Ah* ah = FindOwned(ahs_, c, h);
  if (!ah) return Verdict::Fail(EINVAL, "destroy_ah: no such AH in this context");
  pds_[ah->pd].users--;
  ahs_.erase(h);
  return Verdict::Ok();
}

Verdict Device::AttachMcast(ClientId c, const protocol::McastRequest& req) {
  QpHandle* qh = FindOwned(qp_handles_, c, req.qp);
  if (!qh) return Verdict::Fail(EINVAL, "attach_mcast: no such QP in this context");
  Qp& qp = qps_.at(qh->qpn);
  const bool raw = qp.type == IBV_QPT_RAW_PACKET;
  if (qp.type != IBV_QPT_UD && !raw) {
    return Verdict::Fail(EINVAL, "attach_mcast: only UD and raw packet QPs join groups");
  }
  // A raw packet QP joins an Ethernet multicast group: the MAC in the gid's
  // last 6 bytes, as mlx5 attaches one (perftest's --raw_mcast builds it so).
  if (raw ? !(req.gid[10] & 1) : !IsMulticastGid(req.gid)) {
    return Verdict::Fail(EINVAL, raw ? "attach_mcast: the MAC in the gid's last 6 bytes is not "
                                       "multicast"
                                     : "attach_mcast: gid is not multicast");
  }
  std::vector<uint8_t> gid(req.gid, req.gid + 16);
  if (qp.mcast_groups.count(gid)) return Verdict::Ok();  // attaching twice is a no-op
  if (qp.mcast_groups.size() >= static_cast<size_t>(lim::kMaxMcastGrp)) {
    return Verdict::Fail(ENOMEM, "device limit max_mcast_grp reached for this QP");
  }
  size_t members = 0;
  for (const auto& [n, other] : qps_) members += other.mcast_groups.count(gid);
  if (members >= static_cast<size_t>(lim::kMaxMcastQpAttach)) {
    return Verdict::Fail(ENOMEM, "device limit max_mcast_qp_attach reached for this group");
  }
  qp.mcast_groups.insert(gid);
  if (raw) FlowRulesChanged();           // steered as a rule on the MAC (flow.cc)
  if (qp_changed_) qp_changed_(qp.qpn);  // the network transport joins the group
  return Verdict::Ok();
}

Verdict Device::DetachMcast(ClientId c, const protocol::McastRequest& req) {
  QpHandle* qh = FindOwned(qp_handles_, c, req.qp);
  if (!qh) return Verdict::Fail(EINVAL, "detach_mcast: no such QP in this context");
  Qp& qp = qps_.at(qh->qpn);
  std::vector<uint8_t> gid(req.gid, req.gid + 16);
  if (!qp.mcast_groups.erase(gid)) {
    return Verdict::Fail(EINVAL, "detach_mcast: QP is not attached to that group");
  }
  if (qp.type == IBV_QPT_RAW_PACKET) FlowRulesChanged();
  if (qp_changed_) qp_changed_(qp.qpn);
  return Verdict::Ok();
}

}  // namespace softverbs::daemon
