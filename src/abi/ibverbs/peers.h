// How a context reaches other QPs and MRs on the device (datapath::Host):
// the first use of a QP number or a key asks the daemon for the files behind
// it (map_qp / map_mr) and maps them; later uses are a lookup. Entries are
// checked against the generation in the device table, so a QP number or key
// that was reused is mapped afresh.
//
// Peers come and go (a server meets thousands of short-lived clients): at
// every new mapping the cache retires the entries the device table says are
// gone (QP destroyed or its number reused, MR deregistered, SRQ destroyed),
// and frees what was retired - mappings, the owners' /proc/<pid>/mem
// descriptors - once every execution that was in progress at the
// retirement has left (a grace period of the execution gate,
// execution_gate.h), so a long-lived process stays flat.
//
// A mapped MR is found without a lock: an index by MR slot holds the
// entry, written under the cache's mutex and read by executions, which the
// grace period protects from a free under them.
#pragma once

#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "abi/ibverbs/execution_gate.h"
#include "abi/ibverbs/provider.h"
#include "datapath/engine.h"
#include "verbs/flow_rule.h"

namespace softverbs::provider {

class PeerCache final : public datapath::Host {
 public:
  explicit PeerCache(Context* ctx);
  ~PeerCache() override;

  uint32_t client_id() const override { return ctx_->group_id; }
  bool OwnsMemory(const datapath::MrEntry& e) const override {
    return ctx_->group_id == ctx_->client_id
               ? e.owner.load(std::memory_order_relaxed) == ctx_->client_id
               : e.registrant.load(std::memory_order_relaxed) == ctx_->client_id;
  }
  const datapath::DeviceTable& table() const override { return ctx_->table; }
  datapath::PeerQp* FindPeerQp(uint32_t qpn, uint32_t generation) override;
  // Inline for the common cases (every work request asks twice): this
  // process's memory, or a peer's MR already mapped, found in the
  // lock-free index (an execution is in progress: what it finds is not
  // freed under it). The rest - on-demand MRs, a first use - MapMr.
  const datapath::MrMapping* FindMrMapping(uint32_t key, const datapath::MrEntry& e) override {
    if (OwnsMemory(e)) {
      if (!(e.access.load(std::memory_order_relaxed) & IBV_ACCESS_ON_DEMAND)) return &local_;
    } else if (mr_index_) {
      const uint32_t generation = e.generation.load(std::memory_order_acquire);
      const MrFiles* f = mr_index_[datapath::MrSlotOf(key)].load(std::memory_order_acquire);
      if (f && f->key == key && f->mapping.generation == generation) return &f->mapping;
    }
    return MapMr(key, e);
  }
  void EnterExecution() override { ExecutionGate::Enter(); }
  void LeaveExecution() override {
    ExecutionGate::Leave();
    if (retired_pending_.load(std::memory_order_relaxed) && !ExecutionGate::Inside()) [[unlikely]] {
      FreeRetired();
    }
  }
  uint64_t PeerEpoch() const override { return epoch_.load(std::memory_order_seq_cst); }
  bool OwnAccessesFenced() const override { return true; }
  // Every context has its record (ibv_open_device fails without one).
  std::atomic<uint32_t>* AccessRecord(uint32_t key) override {
    return static_cast<std::atomic<uint32_t>*>(ctx_->access_record.base()) +
           datapath::MrSlotOf(key);
  }
  void SetQpError(uint32_t qpn) override;
  // Moves this process's unreliable QP qpn to SQE (a requester error).
  void SetSendQueueError(uint32_t qpn);
  // mlx5's signature pipelining stopped the QP's send queue: RTS -> SQD.
  void DrainSendQueue(uint32_t qpn);
  void SrqLimitReached(uint32_t srqn) override;
  void McastMembers(const uint8_t gid[16], std::vector<uint32_t>* qpns) override;
  void FlowTargets(uint32_t sender, const uint8_t* head, uint32_t head_bytes,
                   std::vector<uint32_t>* qpns) override;
  datapath::VendorError BindWindow(const datapath::LocalQp& qp,
                                   const datapath::SendWr& wr) override;
  void ReportSigError(uint32_t key, const datapath::SigError& err) override;
  datapath::VendorError ConfigureMkey(const datapath::LocalQp& qp,
                                      const datapath::SendWr& wr) override;
  bool InvalidateWindow(uint32_t qpn, uint32_t rkey, bool remote) override;
  datapath::PeerQp* FindXrcSrq(uint32_t srqn) override;
  void RaiseQpEvent(uint32_t qpn, ibv_event_type event) override;

 private:
  struct QpFiles {
    datapath::PeerQp peer;
    datapath::SharedMapping rq_mapping;
    datapath::SharedMapping cq_mapping;
    int event_fd = -1;
    ~QpFiles();
  };
  // An owner's /proc/<pid>/mem, shared by the MRs of that owner we map;
  // closed with the last of them.
  struct OwnerMem {
    int fd = -1;
    ~OwnerMem();
  };
  struct MrFiles {
    uint32_t key = 0;
    datapath::MrMapping mapping;
    datapath::SharedMapping backing;
    std::shared_ptr<OwnerMem> owner_mem;
  };
  // FindMrMapping's slow part: an on-demand MR of this process (through
  // /proc/self/mem), or a peer's MR looked up under the mutex and mapped
  // at its first use (map_mr).
  const datapath::MrMapping* MapMr(uint32_t key, const datapath::MrEntry& e);
  std::shared_ptr<OwnerMem> OwnerMemFd(uint32_t owner, int received_fd);
  // Moves the entries the device table says are gone to the retired lists
  // and bumps the epoch if any was. Called with mutex_ held.
  void RetireGoneEntries();
  void RetireMr(std::unique_ptr<MrFiles> files);
  // Frees the retired entries whose grace period is over and starts the
  // grace period of the rest (called outside any execution).
  void FreeRetired();
  std::unique_ptr<QpFiles> MapReceiveSide(std::vector<int>* fds, bool has_event_fd);
  // Fetches the device's flow rules into flow_rules_ and flow_epoch_, page
  // by page (called with flow_mutex_ held). False if the device did not
  // answer.
  bool FetchFlowRules();
  // The receive work queue of RSS QP qpn that a frame with these headers
  // goes to, or 0 (called with flow_mutex_ held).
  uint32_t SpreadByRss(uint32_t qpn, const verbs::FrameHeaders& frame);

  Context* ctx_;
  std::mutex mutex_;
  std::unordered_map<uint32_t, std::unique_ptr<QpFiles>> qps_;
  std::unordered_map<uint32_t, std::unique_ptr<QpFiles>> xrc_srqs_;  // by SRQ number
  std::unordered_map<uint32_t, std::unique_ptr<MrFiles>> mrs_;
  std::unordered_map<uint32_t, std::weak_ptr<OwnerMem>> mem_fds_;  // by owner client id
  // Stale entries stay mapped until every execution that was in progress
  // when they were retired has left: another thread may still be executing
  // a work request through them. Retired ones wait in retired_*, those
  // whose grace period has begun (grace_ holds the executions it waits
  // for) in grace_*.
  std::vector<std::unique_ptr<QpFiles>> retired_qps_;
  std::vector<std::unique_ptr<MrFiles>> retired_mrs_;
  std::vector<std::unique_ptr<QpFiles>> grace_qps_;
  std::vector<std::unique_ptr<MrFiles>> grace_mrs_;
  ExecutionGate::Snapshot grace_;
  std::atomic<bool> retired_pending_{false};
  std::atomic<uint64_t> epoch_{0};  // Host::PeerEpoch
  // MR slot -> its mapped entry (kMrSlots pointers in anonymous memory:
  // pages appear as slots are used), for the lock-free lookup.
  std::atomic<MrFiles*>* mr_index_ = nullptr;
  datapath::MrMapping local_{0, true, nullptr, 0, 0, -1};
  // This process's on-demand MRs: through its own /proc/self/mem (opened at
  // first use, closed with the context).
  datapath::MrMapping local_odp_{0, false, nullptr, 0, 0, -1};
  // The device's flow steering rules as of flow_epoch_ (FlowTargets fetches
  // them again when the device table's epoch differs), under flow_mutex_.
  std::mutex flow_mutex_;
  bool have_flow_rules_ = false;
  uint32_t flow_epoch_ = 0;
  std::vector<verbs::SteeredFlow> flow_rules_;
  // The RSS QPs the rules steer to, and how each spreads frames (fetched at
  // its first frame; a QP with rules keeps its table while they live, so
  // the copies go with the rules).
  std::unordered_map<uint32_t, std::unique_ptr<protocol::RssTableReply>> rss_tables_;
};

}  // namespace softverbs::provider
