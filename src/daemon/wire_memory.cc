#include "daemon/wire_memory.h"

#include <fcntl.h>
#include <unistd.h>

#include <vector>

#include "daemon/device.h"

namespace softverbs::daemon {

namespace dp = softverbs::datapath;

WireMemory::RingFiles::~RingFiles() {
  if (event_fd >= 0) close(event_fd);
}

WireMemory::MrFiles::~MrFiles() {
  if (mem_fd >= 0) close(mem_fd);
}

const dp::DeviceTable& WireMemory::table() const {
  return device_.table();
}

std::unique_ptr<WireMemory::RingFiles> WireMemory::MapReceiveSide(const std::vector<int>& fds,
                                                                  bool event_fd) {
  auto files = std::make_unique<RingFiles>();
  if (fds.size() < 2 || files->rq_mapping.Map(fds[0]) != 0 || files->cq_mapping.Map(fds[1]) != 0) {
    return nullptr;
  }
  if (event_fd && fds.size() >= 3) files->event_fd = fcntl(fds[2], F_DUPFD_CLOEXEC, 0);
  files->peer.rq.Attach(files->rq_mapping.base());
  files->peer.recv_cq.Attach(files->cq_mapping.base());
  files->peer.cq_event_fd = files->event_fd;
  return files;
}

dp::PeerQp* WireMemory::FindPeerQp(uint32_t qpn, uint32_t generation) {
  if (auto it = qps_.find(qpn); it != qps_.end()) {
    if (it->second->peer.generation == generation) return &it->second->peer;
    qps_.erase(it);
  }
  protocol::MapQpReply rep{};
  std::vector<int> fds;
  if (!device_.MapQp(0, qpn, &rep, &fds).ok() || rep.generation != generation) return nullptr;
  std::unique_ptr<RingFiles> files = MapReceiveSide(fds, rep.has_event_fd);
  if (!files) return nullptr;
  dp::PeerQp& p = files->peer;
  p.qpn = qpn;
  p.generation = rep.generation;
  p.owner = rep.owner;
  p.srqn = rep.srqn;
  dp::PeerQp* result = &files->peer;
  qps_[qpn] = std::move(files);
  return result;
}

dp::PeerQp* WireMemory::FindXrcSrq(uint32_t srqn) {
  if (srqn == 0) return nullptr;
  if (auto it = xrc_srqs_.find(srqn); it != xrc_srqs_.end()) {
    // SRQ numbers are never reused: the number in the ring proves the SRQ
    // is still there (the device clears it on destroy).
    if (it->second->peer.rq.header()->srqn.load(std::memory_order_acquire) == srqn) {
      return &it->second->peer;
    }
    xrc_srqs_.erase(it);
  }
  protocol::MapSrqReply rep{};
  std::vector<int> fds;
  if (!device_.MapSrq(0, srqn, &rep, &fds).ok()) return nullptr;
  std::unique_ptr<RingFiles> files = MapReceiveSide(fds, rep.has_event_fd);
  if (!files) return nullptr;
  dp::PeerQp& p = files->peer;
  p.owner = rep.owner;
  p.srqn = srqn;
  p.pdn = rep.pdn;
  p.xrcd = rep.xrcd;
  dp::PeerQp* result = &files->peer;
  xrc_srqs_[srqn] = std::move(files);
  return result;
}

const dp::MrMapping* WireMemory::FindMrMapping(uint32_t key, const dp::MrEntry& e) {
  const uint32_t generation = e.generation.load(std::memory_order_acquire);
  if (auto it = mrs_.find(key); it != mrs_.end()) {
    if (it->second->mapping.generation == generation) return &it->second->mapping;
    mrs_.erase(it);
  }
  protocol::MapMrReply rep{};
  std::vector<int> fds;
  if (!device_.MapMr(0, key, &rep, &fds).ok() || fds.empty()) return nullptr;
  auto files = std::make_unique<MrFiles>();
  dp::MrMapping& m = files->mapping;
  m.generation = rep.generation;
  // fds: the owner's /proc/<pid>/mem (unless it is not dumpable), then the
  // backing memfd (if any); both stay the device's.
  size_t next = 0;
  if (rep.has_mem_fd) files->mem_fd = fcntl(fds[next++], F_DUPFD_CLOEXEC, 0);
  m.mem_fd = files->mem_fd;
  const bool mapped = rep.has_backing == protocol::kBackingSysvShm
                          ? files->backing.Attach(static_cast<int>(rep.shmid), rep.ipc_ns) == 0
                          : rep.has_backing == protocol::kBackingMemfd && fds.size() > next &&
                                files->backing.Map(fds[next]) == 0;
  if (mapped) dp::UseBacking(files->backing, e, &m);
  const dp::MrMapping* result = &files->mapping;
  mrs_[key] = std::move(files);
  return result;
}

bool WireMemory::SendCq(uint32_t qpn, dp::CqRing** ring, int* event_fd) {
  const dp::QpEntry* e = table().FindQp(qpn);
  if (!e) return false;
  const uint32_t generation = e->generation.load();
  auto it = send_cqs_.find(qpn);
  if (it == send_cqs_.end() || send_cq_generation_[qpn] != generation) {
    int ring_fd = -1;
    int cq_event_fd = -1;
    if (!device_.SendCqFiles(qpn, &ring_fd, &cq_event_fd)) return false;
    auto files = std::make_unique<RingFiles>();
    if (files->cq_mapping.Map(ring_fd) != 0) return false;
    if (cq_event_fd >= 0) files->event_fd = fcntl(cq_event_fd, F_DUPFD_CLOEXEC, 0);
    files->peer.recv_cq.Attach(files->cq_mapping.base());
    files->peer.cq_event_fd = files->event_fd;
    send_cqs_[qpn] = std::move(files);
    send_cq_generation_[qpn] = generation;
    it = send_cqs_.find(qpn);
  }
  *ring = &it->second->peer.recv_cq;
  *event_fd = it->second->peer.cq_event_fd;
  return true;
}

void WireMemory::ForgetMr(uint32_t key) {
  mrs_.erase(key);
}

void WireMemory::ForgetQp(uint32_t qpn) {
  qps_.erase(qpn);
  send_cqs_.erase(qpn);
  send_cq_generation_.erase(qpn);
}

}  // namespace softverbs::daemon
