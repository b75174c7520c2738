#include "daemon/wire_service.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "common/gid_table.h"
#include "daemon/device.h"
#include "datapath/mkey_layout.h"
#include "datapath/timers.h"
#include "datapath/wire_post.h"
#include "roce/aeth.h"
#include "roce/cm_mad.h"
#include "roce/flow.h"
#include "roce/segment.h"

namespace softverbs::daemon {

namespace dp = softverbs::datapath;

namespace {

bool ReceivingState(ibv_qp_state s) {
  return s == IBV_QPS_RTR || s == IBV_QPS_RTS || s == IBV_QPS_SQD || s == IBV_QPS_SQE;
}

// Large socket buffers keep a burst of a send window (or of a READ's
// responses) from being dropped in the receiving socket. SO_RCVBUFFORCE
// needs CAP_NET_ADMIN; without it the kernel's rmem_max caps SO_RCVBUF.
void GrowSocketBuffers(int fd) {
  int bytes = 16 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof(bytes)) != 0) {
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
  }
}

nlohmann::json CountersJson(const dp::WireCounters& k) {
  return {{"packets_sent", k.packets_sent},
          {"packets_received", k.packets_received},
          {"retransmitted", k.retransmitted},
          {"timeouts", k.timeouts},
          {"naks_sent", k.naks_sent},
          {"naks_received", k.naks_received},
          {"rnr_naks_sent", k.rnr_naks_sent},
          {"rnr_naks_received", k.rnr_naks_received},
          {"duplicates", k.duplicates},
          {"sequence_errors", k.sequence_errors},
          {"dropped", k.dropped},
          {"read_gaps", k.read_gaps},
          {"owner_waits", k.owner_waits}};
}

}  // namespace

WireService::WireService(Device& device, WatchFd watch)
    : device_(device), watch_(std::move(watch)), memory_(device) {
  if (const char* mode = getenv("SOFTVERBS_ROCE_MCAST"); mode && *mode) {
    if (strcmp(mode, "host") == 0) {
      multicast_on_link_ = false;
    } else if (strcmp(mode, "link") != 0) {
      fprintf(stderr, "softverbsd: SOFTVERBS_ROCE_MCAST=%s: expected link or host; using link\n",
              mode);
    }
  }
}

WireService::~WireService() {
  for (auto& [fd, doorbell] : doorbells_) close(fd);
}

void WireService::SendWrsRetired(uint32_t qpn, uint32_t n) {
  device_.RetireWireSendWrs(qpn, n);
}

uint64_t WireService::Now() {
  return dp::NowNs();
}

bool WireService::Owns(int fd) const {
  if (doorbells_.count(fd)) return true;
  for (const auto& c : carriers_) {
    if (c->udp.fd() == fd) return true;
  }
  for (const auto& [mgid, c] : groups_) {
    if (c->udp.fd() == fd) return true;
  }
  return false;
}

void WireService::OnReadable(int fd) {
  if (auto it = doorbells_.find(fd); it != doorbells_.end()) {
    ReadDoorbell(fd);
    return;
  }
  for (auto& c : carriers_) {
    if (c->udp.fd() == fd) ReadCarrier(*c);
  }
  for (auto& [mgid, c] : groups_) {
    if (c->udp.fd() == fd) ReadCarrier(*c);
  }
}

void WireService::OpenCarriers() {
  if (carriers_opened_) return;
  carriers_opened_ = true;
  const GidTable& gids = device_.gids();
  for (int i = 0; i < gids.count; ++i) {
    if (gids.gids[i].type != GidType::kRoceV2) continue;
    std::array<uint8_t, 16> gid;
    std::copy(gids.gids[i].raw, gids.gids[i].raw + 16, gid.begin());
    if (CarrierFor(gid.data())) continue;
    auto c = std::make_unique<Carrier>();
    c->gid = gid;
    std::string error;
    if (!c->udp.Open(gid.data(), gids.ifindex, &error)) {
      // Another device on this address (a second user's daemon, the
      // kernel's rxe) holds UDP 4791, or the address is not configured.
      const std::string line = FormatGid(gid.data()) + ": " + error;
      fprintf(stderr, "softverbsd: RoCE v2 carrier not opened on %s\n", line.c_str());
      carrier_errors_.push_back(line);
      continue;
    }
    GrowSocketBuffers(c->udp.fd());
    watch_(c->udp.fd(), true);
    carriers_.push_back(std::move(c));
  }
}

WireService::Carrier* WireService::CarrierFor(const uint8_t gid[16]) {
  for (auto& c : carriers_) {
    if (std::equal(c->gid.begin(), c->gid.end(), gid)) return c.get();
  }
  return nullptr;
}

void WireService::ReadCarrier(Carrier& c) {
  // A bounded batch, so that one busy carrier does not starve the rest of
  // the daemon (control requests, `softverbs status`). The ACKs the batch
  // asked for go at its end, one per QP (ACK coalescing).
  std::vector<dp::WireQp*> touched;
  // A GRO run read is finished in this batch (at most 64 packets more).
  // One packet buffer for the batch: its bytes are reused, not allocated
  // anew for each packet.
  roce::ReceivedPacket packet;
  for (int i = 0; i < 256 || c.udp.HasReadPending(); ++i) {
    roce::WireError verdict;
    std::string error;
    if (!c.udp.Receive(&packet, &verdict, &error)) break;
    if (verdict != roce::WireError::kOk) continue;  // counted by the carrier
    if (packet.fields.dest_qp == roce::kGsiQpn) {
      ReceiveGsi(c, packet);
      continue;
    }
    dp::WirePacket p;
    p.fields = packet.fields;
    p.payload = packet.payload;
    p.ends = &packet.ends;
    p.roce_bytes = packet.bytes.size();
    if (packet.fields.dest_qp == roce::kMulticastQpn) {
      DeliverToGroup(p, &touched);
      continue;
    }
    auto it = qps_.find(packet.fields.dest_qp);
    if (it == qps_.end()) {
      unroutable_++;
      continue;
    }
    dp::WireQp* wire = it->second.wire.get();
    wire->Receive(p);
    if (std::find(touched.begin(), touched.end(), wire) == touched.end()) touched.push_back(wire);
  }
  for (dp::WireQp* wire : touched) wire->FlushAck();
}

// A multicast packet goes to each served QP attached to its destination
// group (the IP address it was sent to).
void WireService::DeliverToGroup(const dp::WirePacket& p, std::vector<dp::WireQp*>* touched) {
  uint8_t mgid[16];
  roce::GidOfAddress(*p.ends, /*source=*/false, mgid);
  const std::vector<uint8_t> key(mgid, mgid + 16);
  bool delivered = false;
  multicast_received_++;
  for (auto& [qpn, n] : qps_) {
    const Qp* qp = device_.FindQpObject(qpn);
    if (!qp || qp->type != IBV_QPT_UD || !qp->mcast_groups.count(key)) continue;
    n.wire->Receive(p);
    delivered = true;
    if (std::find(touched->begin(), touched->end(), n.wire.get()) == touched->end())
      touched->push_back(n.wire.get());
  }
  if (!delivered) unroutable_++;
}

uint32_t WireService::MulticastGids() {
  if (!multicast_on_link_) return 0;
  OpenCarriers();
  const GidTable& gids = device_.gids();
  uint32_t mask = 0;
  for (int i = 0; i < gids.count && i < 32; ++i) {
    if (gids.gids[i].type == GidType::kRoceV2 && CarrierFor(gids.gids[i].raw)) mask |= 1u << i;
  }
  return mask;
}

void WireService::SyncGroups() {
  std::set<std::array<uint8_t, 16>> wanted;
  if (multicast_on_link_ && !carriers_.empty()) {
    for (const auto& [qpn, n] : qps_) {
      const Qp* qp = device_.FindQpObject(qpn);
      if (!qp) continue;
      for (const auto& g : qp->mcast_groups) {
        std::array<uint8_t, 16> mgid{};
        std::copy(g.begin(), g.begin() + std::min<size_t>(g.size(), 16), mgid.begin());
        wanted.insert(mgid);
      }
    }
  }
  for (auto it = groups_.begin(); it != groups_.end();) {
    if (wanted.count(it->first)) {
      ++it;
      continue;
    }
    watch_(it->second->udp.fd(), false);
    it = groups_.erase(it);  // closing the socket leaves the group
  }
  for (const auto& mgid : wanted) {
    if (groups_.count(mgid)) continue;
    auto c = std::make_unique<Carrier>();
    c->gid = mgid;
    if (!JoinGroup(mgid, c.get())) {
      group_errors_++;
      continue;
    }
    watch_(c->udp.fd(), true);
    groups_[mgid] = std::move(c);
  }
}

// A receive socket bound to the group's address (UDP 4791), a member of
// the group on the port's interface (the IGMP / MLD report the kernel sends
// is the join a RoCE NIC's driver makes for rdma_cm's multicast joins).
bool WireService::JoinGroup(const std::array<uint8_t, 16>& mgid, Carrier* c) {
  const uint32_t ifindex = device_.gids().ifindex;
  std::string error;
  if (!c->udp.Open(mgid.data(), ifindex, &error)) {
    fprintf(stderr, "softverbsd: multicast group %s: %s\n", FormatGid(mgid.data()).c_str(),
            error.c_str());
    return false;
  }
  int rc;
  if (roce::GidIsIpv4(mgid.data())) {
    ip_mreqn m{};
    memcpy(&m.imr_multiaddr, mgid.data() + 12, 4);
    m.imr_ifindex = static_cast<int>(ifindex);
    rc = setsockopt(c->udp.fd(), IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof(m));
  } else {
    ipv6_mreq m{};
    memcpy(&m.ipv6mr_multiaddr, mgid.data(), 16);
    m.ipv6mr_interface = ifindex;
    rc = setsockopt(c->udp.fd(), IPPROTO_IPV6, IPV6_JOIN_GROUP, &m, sizeof(m));
  }
  if (rc != 0) {
    fprintf(stderr, "softverbsd: multicast group %s: join: %s\n", FormatGid(mgid.data()).c_str(),
            strerror(errno));
    return false;
  }
  GrowSocketBuffers(c->udp.fd());
  return true;
}

void WireService::ReceiveGsi(Carrier& c, const roce::ReceivedPacket& packet) {
  const auto operation = dp::OperationOfOpcode(packet.fields.opcode);
  if (!gsi_sink_ || dp::TransportOfOpcode(packet.fields.opcode) != dp::IbtaTransport::kUd ||
      operation != dp::IbtaOperation::kSendOnly || packet.fields.qkey != roce::kGsiQkey) {
    unroutable_++;
    return;
  }
  uint8_t sgid[16];
  roce::GidOfAddress(packet.ends, true, sgid);
  mads_received_++;
  gsi_sink_(sgid, c.gid.data(), packet.ends.traffic_class, packet.payload);
}

void WireService::SendGsi(const uint8_t sgid[16], const uint8_t dgid[16], uint8_t traffic_class,
                          std::span<const uint8_t> mad) {
  OpenCarriers();
  roce::TransportFields f;
  f.opcode = dp::IbtaOpcode(dp::IbtaTransport::kUd, dp::IbtaOperation::kSendOnly);
  f.dest_qp = roce::kGsiQpn;
  f.src_qp = roce::kGsiQpn;
  f.qkey = roce::kGsiQkey;
  f.psn = gsi_psn_;
  gsi_psn_ = roce::PsnAdd(gsi_psn_, 1);
  mads_sent_++;
  // The CM's MADs go over the connection's path, as ib_cm sends them with
  // the path record's address vector: its traffic class, and the hop limit
  // rdma_cm gives its paths (64).
  SendPacket(sgid, dgid, roce::SourcePortOfQpn(roce::kGsiQpn), roce::PathIpFields{traffic_class}, f,
             mad);
}

bool WireService::ServedHere(const Qp& qp) const {
  if (!ReceivingState(qp.state) || qp.devx) return false;
  if (qp.type == IBV_QPT_UD) return true;
  return (qp.attr_set_mask & IBV_QP_AV) && PathLeavesHost(device_.gids(), qp.attr.ah_attr);
}

dp::WireQpConfig WireService::ConfigOf(const Qp& qp) const {
  dp::WireQpConfig c;
  const ibv_qp_attr& a = qp.attr;
  c.qpn = qp.qpn;
  c.type = qp.type;
  if (const dp::QpEntry* e = device_.table().FindQp(qp.qpn)) {
    c.generation = e->generation.load();
    c.pdn = e->pdn.load();
  }
  c.owner = device_.GroupOf(qp.creator);  // keys of its group serve it
  c.dest_qpn = a.dest_qp_num;
  c.qkey = a.qkey;
  c.sq_psn = a.sq_psn;
  c.rq_psn = a.rq_psn;
  // Packets are cut at the path MTU, but never above the port's active MTU
  // (the link's): a larger packet could not leave (DF is set, as rxe sets it).
  const uint32_t active = roce::MtuBytes(device_.active_mtu());
  c.mtu_bytes = roce::MtuBytes(qp.type == IBV_QPT_UD ? device_.active_mtu() : a.path_mtu);
  if (c.mtu_bytes == 0 || c.mtu_bytes > active) c.mtu_bytes = active ? active : 1024;
  c.timeout = a.timeout;
  c.retry_cnt = a.retry_cnt;
  c.rnr_retry = a.rnr_retry;
  c.min_rnr_timer = a.min_rnr_timer;
  c.max_rd_atomic = a.max_rd_atomic;
  c.sl = a.ah_attr.sl;
  c.sq_sig_all = qp.sq_sig_all != 0;
  const GidTable& gids = device_.gids();
  const uint8_t index = a.ah_attr.grh.sgid_index;
  if (index < gids.count) std::copy(gids.gids[index].raw, gids.gids[index].raw + 16, c.sgid);
  std::copy(a.ah_attr.grh.dgid.raw, a.ah_attr.grh.dgid.raw + 16, c.dgid);
  c.path = {a.ah_attr.grh.traffic_class, roce::HopLimitOnTheWire(a.ah_attr.grh.hop_limit)};
  c.udp_sport = qp.udp_sport;
  return c;
}

void WireService::EraseQp(std::map<uint32_t, NetworkQp>::iterator it) {
  const dp::WireCounters& k = it->second.wire->counters();
  totals_ += k;
  // What is still queued goes with it (a QP reset or destroyed).
  if (const size_t left = it->second.wire->outstanding()) {
    SendWrsRetired(it->first, static_cast<uint32_t>(left));
  }
  qps_.erase(it);
}

void WireService::ApplyChanges() {
  if (changed_.empty()) return CheckDrains();
  while (!changed_.empty()) {
    const uint32_t qpn = *changed_.begin();
    changed_.erase(changed_.begin());
    ApplyChange(qpn);
  }
  SyncGroups();
  CheckDrains();
}

void WireService::CheckDrains() {
  for (auto& [qpn, n] : qps_) {
    if (!n.drain_notify || !n.wire->SendQueueDrained()) continue;
    n.drain_notify = false;
    device_.RaiseQpEvent(0, qpn, IBV_EVENT_SQ_DRAINED);
  }
}

void WireService::ApplyChange(uint32_t qpn) {
  const Qp* qp = device_.FindQpObject(qpn);
  auto it = qps_.find(qpn);
  if (!qp) {
    // Destroyed: what it had outstanding goes with it (its CQs may be gone
    // too), as with a NIC's destroyed QP.
    if (it != qps_.end()) EraseQp(it);
    memory_.ForgetQp(qpn);
    return;
  }
  if (it != qps_.end() && (qp->state == IBV_QPS_ERR || qp->state == IBV_QPS_RESET)) {
    it->second.wire->Flush();
    EraseQp(it);
    return;
  }
  if (!ServedHere(*qp)) {
    if (it != qps_.end()) EraseQp(it);
    return;
  }
  const dp::WireQpConfig config = ConfigOf(*qp);
  if (it == qps_.end()) {
    OpenCarriers();
    NetworkQp& n = qps_[qpn];
    n.wire = std::make_unique<dp::WireQp>(*this, config);
    n.owner = qp->creator;
    n.state = qp->state;
    return;
  }
  NetworkQp& n = it->second;
  const dp::WireQpConfig& old = n.wire->config();
  n.wire->Reconfigure(config, config.rq_psn != old.rq_psn, config.sq_psn != old.sq_psn);
  if (qp->state == IBV_QPS_SQE) n.wire->FlushSendQueue();
  if (qp->state == IBV_QPS_RTS && n.state == IBV_QPS_SQE) n.wire->ResumeSendQueue();
  // SQD (IBA 10.3.1): WRs started before it run to completion, WRs posted in
  // it wait for RTS; with en_sqd_async_notify the device raises
  // IBV_EVENT_SQ_DRAINED once the former are done (CheckDrains).
  if (qp->state == IBV_QPS_SQD && n.state == IBV_QPS_RTS) {
    n.wire->Hold(true);
    n.drain_notify = qp->attr.en_sqd_async_notify != 0;
  }
  if (qp->state == IBV_QPS_RTS && n.state == IBV_QPS_SQD) n.wire->Hold(false);
  if (qp->state != IBV_QPS_SQD) n.drain_notify = false;
  n.state = qp->state;
}

int64_t WireService::UsUntilNextTimer() {
  uint64_t next = UINT64_MAX;
  for (const auto& [qpn, n] : qps_) next = std::min(next, n.wire->NextDeadline());
  const uint64_t now = Now();
  for (auto& c : carriers_) {
    if (!c->udp.faults()) continue;
    const uint64_t due_us = c->udp.PollFaults();
    if (due_us != UINT64_MAX) next = std::min(next, due_us * 1000);
  }
  if (next == UINT64_MAX) return -1;
  if (next <= now) return 0;
  return static_cast<int64_t>(std::min<uint64_t>((next - now + 999) / 1000, 1000000));
}

void WireService::RunTimers() {
  const uint64_t now = Now();
  for (auto& c : carriers_) {
    if (c->udp.faults()) c->udp.PollFaults();
  }
  // A timer may move a QP to ERR (ApplyChanges erases it afterwards).
  for (auto& [qpn, n] : qps_) {
    if (n.wire->NextDeadline() <= now) n.wire->OnTimer(now);
  }
}

void WireService::FlushSends() {
  for (auto& c : carriers_) c->udp.FlushSends();
}

void WireService::SendPacket(const uint8_t sgid[16], const uint8_t dgid[16], uint16_t src_port,
                             const roce::PathIpFields& path, const roce::TransportFields& fields,
                             std::span<const uint8_t> payload) {
  Carrier* c = CarrierFor(sgid);
  std::string error;
  if (!c) {
    // A source GID no interface address backs (the port's default GID, of
    // the MAC, on a link without that link-local address): lost, said once
    // per GID, where a NIC would send from it anyway.
    std::array<uint8_t, 16> gid;
    std::copy(sgid, sgid + 16, gid.begin());
    if (gids_without_carrier_.insert(gid).second) {
      fprintf(stderr,
              "softverbsd: no network carrier for source GID %s: no interface has that address "
              "(the port's default GID of a link without its EUI-64 link-local address?); "
              "packets sent from it are lost: use the GID index of an interface address\n",
              FormatGid(sgid).c_str());
    }
    send_failures_++;
  } else if (!c->udp.Send(dgid, src_port, path, fields, payload, &error)) {
    // No route: lost, as on a NIC whose packet finds none (the requester's
    // ACK timeout ends it with IBV_WC_RETRY_EXC_ERR).
    send_failures_++;
  }
}

void WireService::SetQpError(uint32_t qpn) {
  device_.QpError(0, qpn, IBV_QPS_ERR);
}

void WireService::SetSendQueueError(uint32_t qpn) {
  device_.QpError(0, qpn, IBV_QPS_SQE);
}

void WireService::SrqLimitReached(uint32_t srqn) {
  device_.SrqLimitReached(0, srqn);
}

void WireService::ReportSigError(uint32_t key, const dp::SigError& err) {
  device_.ReportSigError(key, err);
}

void WireService::DrainOnSigError(uint32_t qpn) {
  const Qp* q = device_.FindQpObject(qpn);
  if (!q) return;
  Verdict v = device_.QpError(q->creator, qpn, IBV_QPS_SQD);
  if (!v.ok()) fprintf(stderr, "softverbsd: QP 0x%x: %s\n", qpn, v.why.c_str());
  device_.RaiseQpEvent(0, qpn, IBV_EVENT_SQ_DRAINED);
}

int WireService::CancelSends(uint32_t client, uint32_t qpn, uint64_t wr_id) {
  auto it = qps_.find(qpn);
  if (it == qps_.end() || !device_.SameGroup(it->second.owner, client)) return 0;
  return it->second.wire->Cancel(wr_id);
}

void WireService::RaiseQpEvent(uint32_t qpn, ibv_event_type event) {
  device_.RaiseQpEvent(0, qpn, static_cast<uint32_t>(event));
}

// Windows of network QPs: the device's own call, in the name of the QP's
// creator (the context that posted the bind or the LOCAL_INV).
dp::VendorError WireService::BindWindow(const dp::LocalQp& qp, const dp::SendWr& wr) {
  const Qp* q = device_.FindQpObject(qp.qpn);
  if (!q) return dp::kVendorMwBind;
  protocol::BindMwRequest req{wr.mw_handle,   qp.qpn,         wr.bind_lkey,   wr.rkey,
                              wr.remote_addr, wr.bind_length, wr.bind_access, 0};
  protocol::BindMwReply rep{};
  Verdict v = device_.BindMw(q->creator, req, &rep);
  if (v.ok()) return dp::kVendorNone;
  fprintf(stderr, "softverbsd: QP 0x%x: %s\n", qp.qpn, v.why.c_str());
  return dp::kVendorMwBind;
}

dp::VendorError WireService::ConfigureMkey(const dp::LocalQp& qp, const dp::SendWr& wr) {
  const Qp* q = device_.FindQpObject(qp.qpn);
  if (!q) return dp::kVendorUmr;
  protocol::ConfigureMkeyRequest req{};
  req.qpn = qp.qpn;
  if (!dp::UmrLayoutOf(wr, &req.mkey, &req.new_tag, &req.sets, &req.access, &req.repeat_count,
                       &req.num_entries, req.entry, &req.sig)) {
    return dp::kVendorUmr;
  }
  Verdict v = device_.ConfigureMkey(q->creator, req);
  if (v.ok()) return dp::kVendorNone;
  fprintf(stderr, "softverbsd: QP 0x%x: %s\n", qp.qpn, v.why.c_str());
  return dp::kVendorUmr;
}

bool WireService::InvalidateWindow(uint32_t qpn, uint32_t rkey, bool remote) {
  const Qp* q = device_.FindQpObject(qpn);
  if (!q) return false;
  protocol::InvalidateMwRequest req{qpn, rkey, remote ? 1u : 0u, 0};
  Verdict v = device_.InvalidateMw(q->creator, req);
  if (!v.ok()) fprintf(stderr, "softverbsd: QP 0x%x: %s\n", qpn, v.why.c_str());
  return v.ok();
}

void WireService::McastMembers(const uint8_t gid[16], std::vector<uint32_t>* qpns) {
  (void)gid;
  qpns->clear();  // the device's sends to a group go on the link (DeliverToGroup)
}

std::string WireService::StatusJson() const {
  nlohmann::json j;
  nlohmann::json carriers = nlohmann::json::array();
  for (const auto& c : carriers_) {
    const roce::CarrierCounters& k = c->udp.counters();
    uint64_t refused = 0;
    for (uint64_t r : k.refused) refused += r;
    nlohmann::json cj = {{"gid", FormatGid(c->gid.data())},
                         {"sent", k.sent},
                         {"gso_sends", k.gso_sends},
                         {"received", k.received},
                         {"other_ipv4_ids", k.other_ipv4_ids},
                         {"refused", refused},
                         {"icrc_errors", k.refused[static_cast<int>(roce::WireError::kBadIcrc)]},
                         {"send_errors", k.send_errors},
                         {"send_sockets_closed", k.send_sockets_closed}};
    if (const roce::FaultInjector* f = c->udp.faults()) {
      const roce::FaultCounters& fc = f->counters();
      cj["faults"] = {{"dropped", fc.dropped},
                      {"duplicated", fc.duplicated},
                      {"reordered", fc.reordered},
                      {"delayed", fc.delayed},
                      {"corrupted", fc.corrupted}};
    }
    carriers.push_back(cj);
  }
  j["carriers"] = carriers;
  j["carrier_errors"] = carrier_errors_;
  nlohmann::json qps = nlohmann::json::array();
  dp::WireCounters all = totals_;
  for (const auto& [qpn, n] : qps_) {
    const dp::WireCounters& k = n.wire->counters();
    char hex[16];
    snprintf(hex, sizeof(hex), "0x%x", qpn);
    nlohmann::json q = CountersJson(k);
    q["qpn"] = hex;
    q["requester"] = dp::RequesterStateName(n.wire->requester_state());
    q["responder"] = dp::ResponderStateName(n.wire->responder_state());
    q["outstanding"] = n.wire->outstanding();
    qps.push_back(q);
    all += k;
  }
  j["qps"] = qps;
  j["totals"] = CountersJson(all);
  j["unroutable"] = unroutable_;
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& [mgid, c] : groups_) groups.push_back(FormatGid(mgid.data()));
  j["multicast"] = {{"on_link", multicast_on_link_},
                    {"groups", groups},
                    {"received", multicast_received_},
                    {"join_errors", group_errors_}};
  j["cm_mads_sent"] = mads_sent_;
  j["cm_mads_received"] = mads_received_;
  j["send_failures"] = send_failures_;
  j["bad_posts"] = bad_posts_;
  return j.dump();
}

}  // namespace softverbs::daemon
