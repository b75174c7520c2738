#include "abi/ibverbs/peers.h"

#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

#include "common/log.h"

namespace softverbs::provider {

namespace dp = softverbs::datapath;

PeerCache::QpFiles::~QpFiles() {
  if (event_fd >= 0) close(event_fd);
}

PeerCache::PeerCache(Context* ctx) : ctx_(ctx) {
  void* p = mmap(nullptr, dp::kMrSlots * sizeof(std::atomic<uint32_t>), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p != MAP_FAILED) own_inflight_ = static_cast<std::atomic<uint32_t>*>(p);
}

PeerCache::~PeerCache() {
  for (auto& [owner, fd] : mem_fds_) close(fd);
  if (local_odp_.mem_fd >= 0) close(local_odp_.mem_fd);
  if (own_inflight_) munmap(own_inflight_, dp::kMrSlots * sizeof(std::atomic<uint32_t>));
}

std::atomic<uint32_t>* PeerCache::OwnInflight(uint32_t key) {
  return own_inflight_ ? own_inflight_ + dp::MrSlotOf(key) : nullptr;
}

std::atomic<uint32_t>* PeerCache::AccessRecord(uint32_t key) {
  void* base = ctx_->access_record.base();
  return base ? static_cast<std::atomic<uint32_t>*>(base) + dp::MrSlotOf(key) : nullptr;
}

int PeerCache::OwnerMemFd(uint32_t owner, int received_fd) {
  auto it = mem_fds_.find(owner);
  if (it != mem_fds_.end()) {
    close(received_fd);
    return it->second;
  }
  mem_fds_[owner] = received_fd;
  return received_fd;
}

// The receive side a peer's map_qp / map_srq reply hands over: fds[0] its
// receive queue, fds[1] the CQ its receives complete on, fds[2] (optional)
// that CQ's completion-channel eventfd. Consumes every fd; nullptr if the
// rings cannot be mapped.
std::unique_ptr<PeerCache::QpFiles> PeerCache::MapReceiveSide(std::vector<int>* fds,
                                                              bool has_event_fd) {
  auto files = std::make_unique<QpFiles>();
  bool ok = fds->size() >= 2 && files->rq_mapping.Map((*fds)[0]) == 0 &&
            files->cq_mapping.Map((*fds)[1]) == 0;
  if (ok && has_event_fd && fds->size() >= 3) {
    files->event_fd = (*fds)[2];
    fds->pop_back();
  }
  for (int fd : *fds) close(fd);
  fds->clear();
  if (!ok) return nullptr;
  dp::PeerQp& p = files->peer;
  p.rq.Attach(files->rq_mapping.base());
  p.recv_cq.Attach(files->cq_mapping.base());
  p.cq_event_fd = files->event_fd;
  return files;
}

dp::PeerQp* PeerCache::FindPeerQp(uint32_t qpn, uint32_t generation) {
  std::lock_guard lock(mutex_);
  auto it = qps_.find(qpn);
  if (it != qps_.end()) {
    if (it->second->peer.generation == generation) return &it->second->peer;
    retired_qps_.push_back(std::move(it->second));
    qps_.erase(it);
  }
  protocol::MapQpRequest req{qpn, 0};
  protocol::MapQpReply rep{};
  std::vector<int> fds;
  if (ctx_->channel.Call(protocol::Op::kMapQp, &req, sizeof(req), &rep, sizeof(rep), nullptr, 0,
                         nullptr, &fds) != 0) {
    for (int fd : fds) close(fd);
    return nullptr;
  }
  std::unique_ptr<QpFiles> files = MapReceiveSide(&fds, rep.has_event_fd);
  if (!files || rep.generation != generation) return nullptr;
  dp::PeerQp& p = files->peer;
  p.qpn = qpn;
  p.generation = rep.generation;
  p.owner = rep.owner;
  p.srqn = rep.srqn;
  dp::PeerQp* result = &files->peer;
  qps_[qpn] = std::move(files);
  return result;
}

const dp::MrMapping* PeerCache::FindMrMapping(uint32_t key, const dp::MrEntry& e) {
  if (e.owner.load(std::memory_order_relaxed) == ctx_->client_id) {
    // An on-demand MR of this process: its pages may not be mapped yet, so
    // even its owner reaches them through /proc/self/mem (an unmapped page
    // fails the access instead of faulting the process).
    if (e.access.load(std::memory_order_relaxed) & IBV_ACCESS_ON_DEMAND) {
      std::lock_guard lock(mutex_);
      if (local_odp_.mem_fd < 0) local_odp_.mem_fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
      if (local_odp_.mem_fd >= 0) return &local_odp_;
    }
    return &local_;
  }
  const uint32_t generation = e.generation.load(std::memory_order_acquire);
  std::lock_guard lock(mutex_);
  auto it = mrs_.find(key);
  if (it != mrs_.end()) {
    if (it->second->mapping.generation == generation) return &it->second->mapping;
    retired_mrs_.push_back(std::move(it->second));
    mrs_.erase(it);
  }
  protocol::MapMrRequest req{key, 0};
  protocol::MapMrReply rep{};
  std::vector<int> fds;
  if (ctx_->channel.Call(protocol::Op::kMapMr, &req, sizeof(req), &rep, sizeof(rep), nullptr, 0,
                         nullptr, &fds) != 0 ||
      fds.empty()) {
    for (int fd : fds) close(fd);
    return nullptr;
  }
  auto files = std::make_unique<MrFiles>();
  dp::MrMapping& m = files->mapping;
  m.generation = rep.generation;
  // fds: the owner's /proc/self/mem (unless it is not dumpable), then the
  // backing memfd (if any).
  size_t next = 0;
  m.mem_fd = rep.has_mem_fd ? OwnerMemFd(rep.owner, fds[next++]) : -1;
  if (rep.has_backing && fds.size() > next) {
    if (files->backing.Map(fds[next]) == 0) {
      m.backed_begin = e.backed_begin.load();
      m.backed_end = e.backed_end.load();
      m.backed = static_cast<uint8_t*>(files->backing.base()) + e.backed_offset.load();
    }
    close(fds[next]);
  }
  const dp::MrMapping* result = &files->mapping;
  mrs_[key] = std::move(files);
  return result;
}

dp::PeerQp* PeerCache::FindXrcSrq(uint32_t srqn) {
  if (srqn == 0) return nullptr;
  std::lock_guard lock(mutex_);
  auto it = xrc_srqs_.find(srqn);
  if (it != xrc_srqs_.end()) {
    // SRQ numbers are never reused: the number in the ring proves the SRQ
    // is still there (the daemon clears it on destroy).
    if (it->second->peer.rq.header()->srqn.load(std::memory_order_acquire) == srqn) {
      return &it->second->peer;
    }
    retired_qps_.push_back(std::move(it->second));
    xrc_srqs_.erase(it);
  }
  protocol::MapSrqRequest req{srqn, 0};
  protocol::MapSrqReply rep{};
  std::vector<int> fds;
  if (ctx_->channel.Call(protocol::Op::kMapSrq, &req, sizeof(req), &rep, sizeof(rep), nullptr, 0,
                         nullptr, &fds) != 0) {
    for (int fd : fds) close(fd);
    return nullptr;
  }
  std::unique_ptr<QpFiles> files = MapReceiveSide(&fds, rep.has_event_fd);
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

void PeerCache::RaiseQpEvent(uint32_t qpn, ibv_event_type event) {
  protocol::QpEventRequest req{qpn, static_cast<uint32_t>(event)};
  ctx_->channel.Call(protocol::Op::kQpEvent, &req, sizeof(req), nullptr, 0);
}

void PeerCache::SetQpError(uint32_t qpn) {
  protocol::QpErrorRequest req{qpn, IBV_QPS_ERR};
  ctx_->channel.Call(protocol::Op::kQpError, &req, sizeof(req), nullptr, 0);
}

void PeerCache::SetSendQueueError(uint32_t qpn) {
  protocol::QpErrorRequest req{qpn, IBV_QPS_SQE};
  ctx_->channel.Call(protocol::Op::kQpError, &req, sizeof(req), nullptr, 0);
}

void PeerCache::SrqLimitReached(uint32_t srqn) {
  protocol::SrqLimitRequest req{srqn, 0};
  ctx_->channel.Call(protocol::Op::kSrqLimitReached, &req, sizeof(req), nullptr, 0);
}

void PeerCache::McastMembers(const uint8_t gid[16], std::vector<uint32_t>* qpns) {
  protocol::McastMembersRequest req{};
  memcpy(req.gid, gid, 16);
  std::vector<uint32_t> buf(1024);
  size_t len = 0;
  if (ctx_->channel.Call(protocol::Op::kMcastMembers, &req, sizeof(req), buf.data(),
                         buf.size() * sizeof(uint32_t), nullptr, 0, &len) != 0) {
    return;
  }
  buf.resize(std::min<size_t>(len / sizeof(uint32_t), buf.size()));
  *qpns = std::move(buf);
}

}  // namespace softverbs::provider
