#include "abi/ibverbs/peers.h"

#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

#include "common/device_limits.h"
#include "common/log.h"
#include "datapath/mkey_layout.h"
#include "datapath/owner_memory.h"
#include "datapath/owner_word_lock.h"

namespace softverbs::provider {

namespace dp = softverbs::datapath;

PeerCache::QpFiles::~QpFiles() {
  if (event_fd >= 0) close(event_fd);
}

namespace {
constexpr size_t kMrIndexBytes = dp::kMrSlots * sizeof(std::atomic<void*>);
}  // namespace

PeerCache::PeerCache(Context* ctx) : ctx_(ctx) {
  // Our own /proc/self/mem: the file peers reach the bytes of our MRs
  // outside their backings through, whose record locks our own atomics on
  // those bytes take too (datapath/owner_word_lock.h). Without it they go
  // unlocked.
  local_.mem_fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
  local_odp_.mem_fd = local_.mem_fd;
  // This process's executors wait out an owner's conversion of a page they
  // reach through its /proc/<pid>/mem (datapath/owner_memory.h).
  dp::WaitForOwnerConversions(true);
  void* p =
      mmap(nullptr, kMrIndexBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  // Without the index every lookup takes the locked path.
  if (p != MAP_FAILED) mr_index_ = static_cast<std::atomic<MrFiles*>*>(p);
}

PeerCache::OwnerMem::~OwnerMem() {
  dp::CloseOwnerMemFd(fd);
}

PeerCache::~PeerCache() {
  if (local_odp_.mem_fd != local_.mem_fd) dp::CloseOwnerMemFd(local_odp_.mem_fd);
  dp::CloseOwnerMemFd(local_.mem_fd);
  if (mr_index_) munmap(mr_index_, kMrIndexBytes);
}

std::shared_ptr<PeerCache::OwnerMem> PeerCache::OwnerMemFd(uint32_t owner, int received_fd) {
  auto it = mem_fds_.find(owner);
  if (it != mem_fds_.end()) {
    if (std::shared_ptr<OwnerMem> held = it->second.lock()) {
      dp::CloseOwnerMemFd(received_fd);  // the same file: keep our record locks on it
      return held;
    }
  }
  auto mem = std::make_shared<OwnerMem>();
  mem->fd = received_fd;
  mem_fds_[owner] = mem;
  return mem;
}

void PeerCache::RetireMr(std::unique_ptr<MrFiles> files) {
  if (mr_index_) {
    MrFiles* expected = files.get();
    mr_index_[dp::MrSlotOf(files->key)].compare_exchange_strong(expected, nullptr,
                                                                std::memory_order_relaxed);
  }
  retired_mrs_.push_back(std::move(files));
}

void PeerCache::RetireGoneEntries() {
  const dp::DeviceTable& table = ctx_->table;
  bool retired = false;
  for (auto it = qps_.begin(); it != qps_.end();) {
    const dp::QpEntry* e = table.QpSlot(it->first);
    const bool gone =
        e->qpn.load(std::memory_order_acquire) != it->first ||
        e->generation.load(std::memory_order_acquire) != it->second->peer.generation ||
        e->state.load(std::memory_order_acquire) == dp::kQpGone;
    if (!gone) {
      ++it;
      continue;
    }
    retired_qps_.push_back(std::move(it->second));
    it = qps_.erase(it);
    retired = true;
  }
  for (auto it = xrc_srqs_.begin(); it != xrc_srqs_.end();) {
    if (it->second->peer.rq.header()->srqn.load(std::memory_order_acquire) == it->first) {
      ++it;
      continue;
    }
    retired_qps_.push_back(std::move(it->second));
    it = xrc_srqs_.erase(it);
    retired = true;
  }
  for (auto it = mrs_.begin(); it != mrs_.end();) {
    const dp::MrEntry* e = table.MrSlot(it->first);
    const bool gone =
        e->generation.load(std::memory_order_acquire) != it->second->mapping.generation ||
        (e->lkey.load(std::memory_order_acquire) != it->first &&
         e->rkey.load(std::memory_order_acquire) != it->first);
    if (!gone) {
      ++it;
      continue;
    }
    RetireMr(std::move(it->second));
    it = mrs_.erase(it);
    retired = true;
  }
  for (auto it = mem_fds_.begin(); it != mem_fds_.end();) {
    it = it->second.expired() ? mem_fds_.erase(it) : std::next(it);
  }
  if (retired) {
    // Before the retired entries can be freed: a cache filled earlier is
    // stale from here on (PeerQpCache).
    epoch_.fetch_add(1, std::memory_order_seq_cst);
    retired_pending_.store(true, std::memory_order_release);
  }
}

void PeerCache::FreeRetired() {
  std::vector<std::unique_ptr<QpFiles>> qps;
  std::vector<std::unique_ptr<MrFiles>> mrs;
  {
    // Whoever gets the lock does it; the others go on (they will look
    // again when they leave their next execution).
    std::unique_lock lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock()) return;
    // An execution that began after an entry was retired cannot reach it
    // (it finds only live entries, and its cache is of a newer epoch), but
    // one that began before could: an entry is freed once every execution
    // in progress at the start of its grace period has left.
    if (grace_qps_.empty() && grace_mrs_.empty()) {
      grace_qps_.swap(retired_qps_);
      grace_mrs_.swap(retired_mrs_);
      grace_ = ExecutionGate::InProgress();
    }
    if (!ExecutionGate::AllLeft(grace_)) return;
    qps.swap(grace_qps_);
    mrs.swap(grace_mrs_);
    // What was retired meanwhile starts its grace period at the next call.
    retired_pending_.store(!retired_qps_.empty() || !retired_mrs_.empty(),
                           std::memory_order_relaxed);
  }
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
  if (it != qps_.end() && it->second->peer.generation == generation) return &it->second->peer;
  // A miss: a new peer, or this number's QP was replaced. Entries of peers
  // that are gone go now (this one too if it is stale).
  RetireGoneEntries();
  if (auto stale = qps_.find(qpn); stale != qps_.end()) {
    retired_qps_.push_back(std::move(stale->second));
    qps_.erase(stale);
    epoch_.fetch_add(1, std::memory_order_seq_cst);
    retired_pending_.store(true, std::memory_order_release);
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

const dp::MrMapping* PeerCache::MapMr(uint32_t key, const dp::MrEntry& e) {
  if (OwnsMemory(e)) {
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
  if (it != mrs_.end() && it->second->mapping.generation == generation) {
    return &it->second->mapping;
  }
  RetireGoneEntries();
  if (auto stale = mrs_.find(key); stale != mrs_.end()) {
    RetireMr(std::move(stale->second));
    mrs_.erase(stale);
    retired_pending_.store(true, std::memory_order_release);
  }
  protocol::MapMrRequest req{key, 0};
  protocol::MapMrReply rep{};
  std::vector<int> fds;
  if (ctx_->channel.Call(protocol::Op::kMapMr, &req, sizeof(req), &rep, sizeof(rep), nullptr, 0,
                         nullptr, &fds) != 0 ||
      fds.empty()) {
    for (int fd : fds) dp::CloseOwnerMemFd(fd);  // an owner's /proc/<pid>/mem among them
    return nullptr;
  }
  auto files = std::make_unique<MrFiles>();
  files->key = key;
  dp::MrMapping& m = files->mapping;
  m.generation = rep.generation;
  // fds: the owner's /proc/self/mem (unless it is not dumpable), then the
  // backing memfd (if any).
  size_t next = 0;
  if (rep.has_mem_fd) files->owner_mem = OwnerMemFd(rep.owner, fds[next++]);
  m.mem_fd = files->owner_mem ? files->owner_mem->fd : -1;
  if (rep.has_backing == protocol::kBackingSysvShm) {
    // The owner's SysV segment: attached here, under its permissions (a
    // peer that may not, or is in another IPC namespace, goes through the
    // owner's /proc/<pid>/mem).
    if (files->backing.Attach(static_cast<int>(rep.shmid), rep.ipc_ns) == 0) {
      dp::UseBacking(files->backing, e, &m);
    }
  } else if (rep.has_backing == protocol::kBackingMemfd && fds.size() > next) {
    if (files->backing.Map(fds[next]) == 0) dp::UseBacking(files->backing, e, &m);
    close(fds[next]);
  }
  const dp::MrMapping* result = &files->mapping;
  if (mr_index_) mr_index_[dp::MrSlotOf(key)].store(files.get(), std::memory_order_release);
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
  }
  RetireGoneEntries();  // this SRQ's stale entry among them
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

void PeerCache::DrainSendQueue(uint32_t qpn) {
  protocol::QpErrorRequest req{qpn, IBV_QPS_SQD};
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

datapath::VendorError PeerCache::BindWindow(const datapath::LocalQp& qp,
                                            const datapath::SendWr& wr) {
  protocol::BindMwRequest req{wr.mw_handle,   qp.qpn,         wr.bind_lkey,   wr.rkey,
                              wr.remote_addr, wr.bind_length, wr.bind_access, 0};
  protocol::BindMwReply rep{};
  return ctx_->channel.Call(protocol::Op::kBindMw, &req, sizeof(req), &rep, sizeof(rep))
             ? datapath::kVendorMwBind
             : datapath::kVendorNone;
}

datapath::VendorError PeerCache::ConfigureMkey(const datapath::LocalQp& qp,
                                               const datapath::SendWr& wr) {
  protocol::ConfigureMkeyRequest req{};
  req.qpn = qp.qpn;
  if (!datapath::UmrLayoutOf(wr, &req.mkey, &req.new_tag, &req.sets, &req.access, &req.repeat_count,
                             &req.num_entries, req.entry, &req.sig)) {
    return datapath::kVendorUmr;
  }
  return ctx_->channel.Call(protocol::Op::kConfigureMkey, &req, sizeof(req), nullptr, 0)
             ? datapath::kVendorUmr
             : datapath::kVendorNone;
}

void PeerCache::ReportSigError(uint32_t key, const datapath::SigError& err) {
  protocol::ReportSigErrorRequest req{key, 0, err};
  ctx_->channel.Call(protocol::Op::kReportSigError, &req, sizeof(req), nullptr, 0);
}

bool PeerCache::InvalidateWindow(uint32_t qpn, uint32_t rkey, bool remote) {
  protocol::InvalidateMwRequest req{qpn, rkey, remote ? 1u : 0u, 0};
  return ctx_->channel.Call(protocol::Op::kInvalidateMw, &req, sizeof(req), nullptr, 0) == 0;
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

bool PeerCache::FetchFlowRules() {
  std::vector<uint8_t> buf(sizeof(protocol::FlowRulesReply) +
                           protocol::kFlowRulesPerReply * sizeof(verbs::SteeredFlow));
  // A change while the pages come (another epoch in a reply) starts again;
  // each round is bounded by the device's limit, the rounds by the changes.
  for (int round = 0; round < 16; ++round) {
    flow_rules_.clear();
    protocol::FlowRulesReply reply{};
    bool same_epoch = true;
    do {
      protocol::FlowRulesRequest req{static_cast<uint32_t>(flow_rules_.size()), 0};
      size_t len = 0;
      const uint32_t epoch = reply.epoch;
      if (ctx_->channel.Call(protocol::Op::kFlowRules, &req, sizeof(req), buf.data(), buf.size(),
                             nullptr, 0, &len) != 0 ||
          len < sizeof(reply)) {
        return false;
      }
      memcpy(&reply, buf.data(), sizeof(reply));
      if (!flow_rules_.empty() && reply.epoch != epoch) {
        same_epoch = false;
        break;
      }
      const size_t count =
          std::min<size_t>(reply.count, (len - sizeof(reply)) / sizeof(verbs::SteeredFlow));
      const size_t at = flow_rules_.size();
      flow_rules_.resize(at + count);
      if (count) {
        memcpy(flow_rules_.data() + at, buf.data() + sizeof(reply),
               count * sizeof(verbs::SteeredFlow));
      }
      if (count == 0) break;
    } while (flow_rules_.size() < reply.total);
    if (same_epoch) {
      flow_epoch_ = reply.epoch;
      return true;
    }
  }
  return false;
}

void PeerCache::FlowTargets(uint32_t sender, const uint8_t* head, uint32_t head_bytes,
                            std::vector<uint32_t>* qpns) {
  qpns->clear();
  std::lock_guard lock(flow_mutex_);
  const uint32_t epoch = ctx_->table.FlowEpoch().load(std::memory_order_acquire);
  if (!have_flow_rules_ || epoch != flow_epoch_) {
    // The rules changed (or were never fetched). A fetch that fails leaves
    // the frame going nowhere, as on a port whose steering failed.
    have_flow_rules_ = FetchFlowRules();
    rss_tables_.clear();
    if (!have_flow_rules_) return;
    for (const verbs::SteeredFlow& f : flow_rules_) {
      if (f.rss) rss_tables_[f.qpn] = nullptr;  // fetched at its first frame
    }
  }
  const verbs::FrameHeaders frame = verbs::ParseFrameHeaders(head, head_bytes);
  *qpns = verbs::SteerFrame(flow_rules_, frame, sender);
  if (rss_tables_.empty()) return;
  // An RSS QP's copy goes to one of its receive work queues.
  for (uint32_t& qpn : *qpns) {
    if (rss_tables_.count(qpn)) qpn = SpreadByRss(qpn, frame);
  }
  std::erase(*qpns, 0u);
  std::sort(qpns->begin(), qpns->end());
  qpns->erase(std::unique(qpns->begin(), qpns->end()), qpns->end());
}

uint32_t PeerCache::SpreadByRss(uint32_t qpn, const verbs::FrameHeaders& frame) {
  std::unique_ptr<protocol::RssTableReply>& table = rss_tables_[qpn];
  if (!table) {
    auto fetched = std::make_unique<protocol::RssTableReply>();
    protocol::RssTableRequest req{qpn, 0};
    if (ctx_->channel.Call(protocol::Op::kRssTable, req, fetched.get()) != 0 ||
        fetched->size == 0 || fetched->size > limits::kMaxRwqIndTableSize) {
      return 0;
    }
    table = std::move(fetched);
  }
  const uint32_t hash = verbs::RssHash(frame, table->fields, table->key);
  return table->wqn[hash & (table->size - 1)];
}

}  // namespace softverbs::provider
