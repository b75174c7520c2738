// The softverbs device as its daemon sees it: object tables, number spaces,
// the rules each control verb checks, and cleanup when a client goes away.
// Every mutating operation is check -> apply -> report: all checks run before
// the first change, so a rejected request changes nothing.
#pragma once

#include <stdio.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/device_limits.h"
#include "common/gid_table.h"
#include "daemon/background_release.h"
#include "daemon/number_space.h"
#include "daemon/objects.h"
#include "daemon/verdict.h"
#include "datapath/device_table.h"
#include "protocol/devx_messages.h"
#include "protocol/messages.h"

namespace softverbs::daemon {

class DevxService;  // devx_service.h
struct DevxServiceDeleter {
  void operator()(DevxService* devx) const;  // devx_service.cc
};

inline std::string ToHex(uint32_t v) {
  char buf[16];
  snprintf(buf, sizeof(buf), "%x", v);
  return buf;
}

struct ClientInfo {
  ClientId id;
  pid_t pid;
  uid_t uid;
  std::string command;                // /proc/<pid>/comm at connect time
  uint64_t async_events_dropped = 0;  // not read in time (src/daemon/outbox.h)
  // The connection group (the kernel's ufile) the client's objects belong
  // to: its own id, or - for a context another process imported
  // (ibv_import_device) - the group of the context it imported. Objects of
  // a group are every member's; they go when the last member leaves.
  ClientId group = 0;
  bool live = true;  // false: the process left, its objects stay with its group
};

// The index an MR's or window's keys share (bits 8..30; the low byte is a
// generation, bit 31 tells the rkey): one live object per index.
inline uint32_t MrKeyIndex(uint32_t key) {
  return (key >> 8) & limits::kMaxMrIndex;
}

class Device {
 public:
  using EventSink = std::function<void(ClientId, const protocol::AsyncEventRecord&)>;

  Device();

  void set_event_sink(EventSink sink) { event_sink_ = std::move(sink); }
  // Told of every QP whose attributes or state the device published or
  // which it destroyed (by number), and of every MR key that went away: the
  // network transport (wire_service.h) follows the device through these.
  using NumberSink = std::function<void(uint32_t)>;
  void set_qp_change_sink(NumberSink sink) { qp_changed_ = std::move(sink); }
  void set_mr_gone_sink(NumberSink sink) { mr_gone_ = std::move(sink); }
  // The device's QP object of number qpn, or nullptr.
  const Qp* FindQpObject(uint32_t qpn) const {
    auto it = qps_.find(qpn);
    return it == qps_.end() ? nullptr : &it->second;
  }
  const datapath::DeviceTable& table() const { return table_; }
  // n network work requests of QP qpn left its send queue
  // (datapath::QpEntry::wire_retired).
  void RetireWireSendWrs(uint32_t qpn, uint32_t n);
  // QP qpn's send CQ: its ring file and completion-channel eventfd (-1:
  // none), both still the device's. False if there is no such QP or CQ.
  bool SendCqFiles(uint32_t qpn, int* ring_fd, int* event_fd) const;
  const GidTable& gids() const { return gids_; }
  ibv_mtu active_mtu() const { return active_mtu_; }

  void AddClient(const ClientInfo& info);
  // The client joins `member`'s group (ibv_import_device of its context).
  void JoinGroup(ClientId client, ClientId member);
  ClientId GroupOf(ClientId c) const {
    auto it = clients_.find(c);
    return it == clients_.end() || it->second.group == 0 ? c : it->second.group;
  }
  bool SameGroup(ClientId a, ClientId b) const { return a == b || GroupOf(a) == GroupOf(b); }
  // The client's process left (its connection closed): what it held inside
  // accesses is taken back at once; its objects go with its group's last
  // member, as the kernel releases a ufile when its last descriptor closes.
  void ClientLeft(ClientId client);
  size_t client_count() const { return clients_.size(); }
  // An async event of the client was dropped: its event queue was full.
  void CountDroppedEvent(ClientId client);

  // Protection domains and memory regions.
  Verdict AllocPd(ClientId c, protocol::AllocPdReply* out);
  Verdict DeallocPd(ClientId c, Handle pd);
  // zero_length_ok: a DM MR may be empty (the kernel checks only that it fits).
  Verdict RegMr(ClientId c, const protocol::RegMrRequest& req, protocol::RegMrReply* out,
                bool zero_length_ok = false);
  Verdict ReregMr(ClientId c, const protocol::ReregMrRequest& req, protocol::RegMrReply* out);
  // *peers_inside (if given): the accesses other clients were still inside
  // once the keys were cleared (MrPeersInside).
  Verdict DeregMr(ClientId c, Handle mr, uint32_t* peers_inside = nullptr);

  // Memory windows (mw.cc). Bind and invalidate run when a QP's send queue
  // reaches the work request (or, remote, when a SEND_WITH_INV arrives).
  Verdict AllocMw(ClientId c, const protocol::AllocMwRequest& req, protocol::AllocMwReply* out);
  Verdict DeallocMw(ClientId c, Handle mw);
  Verdict BindMw(ClientId c, const protocol::BindMwRequest& req, protocol::BindMwReply* out);
  Verdict InvalidateMw(ClientId c, const protocol::InvalidateMwRequest& req);

  // mlx5's indirect memory keys (mkey.cc). Configure runs when a QP's send
  // queue reaches the UMR; InvalidateMw invalidates keys too.
  Verdict CreateMkey(ClientId c, const protocol::CreateMkeyRequest& req,
                     protocol::CreateMkeyReply* out);
  Verdict DestroyMkey(ClientId c, Handle mkey);
  Verdict ConfigureMkey(ClientId c, const protocol::ConfigureMkeyRequest& req);
  // A bad signature an access met through key (any executor may report it:
  // a key that is not a live signature key's is ignored).
  void ReportSigError(uint32_t key, const datapath::SigError& err);
  Verdict CheckMkey(ClientId c, Handle mkey, protocol::CheckMkeyReply* out);

  // Completion queues.
  Verdict CreateCq(ClientId c, const protocol::CreateCqRequest& req, protocol::CreateCqReply* out);
  Verdict ResizeCq(ClientId c, const protocol::ResizeCqRequest& req, protocol::ResizeCqReply* out);
  Verdict DestroyCq(ClientId c, Handle cq);

  // Shared receive queues.
  Verdict CreateSrq(ClientId c, const protocol::CreateSrqRequest& req,
                    protocol::CreateSrqReply* out);
  Verdict ModifySrq(ClientId c, const protocol::ModifySrqRequest& req);
  Verdict QuerySrq(ClientId c, Handle srq, protocol::QuerySrqReply* out);
  Verdict DestroySrq(ClientId c, Handle srq);

  // Queue pairs.
  Verdict CreateQp(ClientId c, const protocol::CreateQpRequest& req, protocol::CreateQpReply* out);
  Verdict ModifyQp(ClientId c, const protocol::ModifyQpRequest& req);
  Verdict SetQpUdpSport(ClientId c, const protocol::SetQpUdpSportRequest& req);
  // mlx5dv_reserved_qpn_alloc/_dealloc: a QP number of the device's space
  // that no QP gets while the context holds it (rdma_cm's external QPs).
  Verdict AllocReservedQpn(ClientId c, protocol::ReservedQpn* out);
  Verdict FreeReservedQpn(ClientId c, const protocol::ReservedQpn& req);
  Verdict QueryQp(ClientId c, Handle qp, protocol::QueryQpReply* out);
  Verdict DestroyQp(ClientId c, Handle qp);
  Verdict OpenQp(ClientId c, const protocol::OpenQpRequest& req, protocol::OpenQpReply* out);

  // Address handles and multicast.
  Verdict CreateAh(ClientId c, const protocol::CreateAhRequest& req, protocol::CreateAhReply* out);
  Verdict DestroyAh(ClientId c, Handle ah);
  Verdict AttachMcast(ClientId c, const protocol::McastRequest& req);
  Verdict DetachMcast(ClientId c, const protocol::McastRequest& req);
  Verdict CreateFlow(ClientId c, const protocol::CreateFlowRequest& req,
                     protocol::CreateFlowReply* out);
  Verdict DestroyFlow(ClientId c, Handle h);
  Verdict CreateRwqIndTable(ClientId c, const protocol::CreateRwqIndTableRequest& req,
                            protocol::CreateRwqIndTableReply* out);
  Verdict DestroyRwqIndTable(ClientId c, Handle h);
  // How RSS QP qpn spreads frames (flow.cc).
  Verdict RssTable(ClientId c, uint32_t qpn, protocol::RssTableReply* out);

  // XRC domains (the fd's inode names a shared domain; fd < 0: private).
  Verdict OpenXrcd(ClientId c, int fd, uint32_t oflags, protocol::OpenXrcdReply* out);
  Verdict CloseXrcd(ClientId c, Handle xrcd);

  // Device memory (dm.cc).
  Verdict AllocDm(ClientId c, const protocol::AllocDmRequest& req, protocol::AllocDmReply* out);
  Verdict FreeDm(ClientId c, Handle dm);
  // Object import (import.cc): what ibv_import_pd/mr/dm learn of a handle.
  Verdict QueryPd(ClientId c, Handle pd, protocol::QueryPdReply* out);
  Verdict QueryMr(ClientId c, Handle mr, protocol::QueryMrReply* out);
  Verdict QueryDm(ClientId c, Handle dm, protocol::QueryDmReply* out);
  Verdict RegDmMr(ClientId c, const protocol::RegDmMrRequest& req, int backing_fd,
                  protocol::RegMrReply* out);  // backing_fd borrowed, as RegMrBacked

  // `softverbs status --json`.
  std::string StatusJson() const;

  // The shared-memory data path (datapath_tables.cc, docs/datapath.md). The
  // device table is published here; rings are made at create time and handed
  // to owners (…RingFd) and to peers (MapQp / MapMr). fds returned through
  // the out vectors stay owned by the device.
  int table_fd() const { return table_fd_; }
  void SetClientMemFd(ClientId c, int fd);  // takes ownership
  // The client's access record (datapath/layout.h), mapped read-only:
  // checks that fd is one (its size, sealed against shrinking, so that
  // reading it can never fault the daemon) and maps it. fd stays the
  // caller's. Refused (the hello fails): a context cannot work without one.
  Verdict SetClientAccessRecord(ClientId c, int fd);
  void AttachCqEventFd(Handle cq, int fd);  // takes ownership
  int CqRingFd(Handle cq) const;
  int QpRecvQueueFd(Handle qp_handle) const;
  int SrqRingFd(Handle srq) const;
  // backing_fd (-1: none) is borrowed: the device holds the backing with a
  // descriptor of its own, one per distinct memfd however many MRs use it.
  // A registration (not a DM MR: device_memory) also keeps a memfd it was
  // passed for the connection after its MRs are gone, so that registering
  // the range again names it (kBackingMemfdKept) instead of passing it
  // again; ForgetBackings and the connection's end let it go.
  Verdict RegMrBacked(ClientId c, const protocol::RegMrBackedRequest& req, int backing_fd,
                      protocol::RegMrReply* out, bool device_memory = false);
  // A memfd offered ahead of the registration that will name it
  // (Op::kOfferBacking): kept for c as one it passed with a registration
  // is after its MRs are gone - sealed against shrinking, within
  // max_kept_backings_. offered_fd is borrowed.
  Verdict KeepOfferedBacking(ClientId c, int offered_fd);
  // The library dropped these memfds from its cache: those kept for c alone
  // (and used by no MR) are closed.
  void ForgetBackings(ClientId c, std::span<const protocol::BackingName> names);
  // Whether the device keeps the memfd `name` for c (offered, or passed
  // with a registration, and not forgotten or let go of since).
  bool KeepsBackingFor(ClientId c, const protocol::BackingName& name) const;
  // ... and every one kept for c (its connection went).
  void ForgetKeptBackings(ClientId c);
  Verdict MapQp(ClientId c, uint32_t qpn, protocol::MapQpReply* out, std::vector<int>* fds);
  Verdict MapMr(ClientId c, uint32_t key, protocol::MapMrReply* out, std::vector<int>* fds);
  Verdict QpError(ClientId c, uint32_t qpn, uint32_t state);
  Verdict SrqLimitReached(ClientId c, uint32_t srqn);
  Verdict McastMembers(ClientId c, const uint8_t gid[16], std::vector<uint32_t>* qpns);
  // The device's flow rules from req.first on, and the epoch they are of
  // (flow.cc).
  Verdict FlowRules(ClientId c, const protocol::FlowRulesRequest& req,
                    protocol::FlowRulesReply* out, std::vector<verbs::SteeredFlow>* rules);
  // XRC (xrc_datapath.cc): an XRC SRQ by number; events of a shared QP.
  Verdict MapSrq(ClientId c, uint32_t srqn, protocol::MapSrqReply* out, std::vector<int>* fds);
  Verdict RaiseQpEvent(ClientId c, uint32_t qpn, uint32_t event_type);

  // DEVX (mlx5dv_devx_*): the emulated firmware over these tables.
  DevxService& devx();
  void ReleaseDevxObjects(ClientId c);  // first step of RemoveClient
  // Forgets a gone client's access record: whatever it was inside, it is
  // no longer (a dead process makes no access).
  void ReleaseAccessRecord(ClientId c);
  // The accesses of key's MR slot that live clients are inside (the sum of
  // their records' counts), read after a full fence: called after the keys
  // were cleared, so a peer not counted here sees them cleared.
  uint32_t MrPeersInside(uint32_t key) const;

  // DEVX queues (devx_queues.cc): shadows of the CQs and QPs created through
  // DEVX in the verbs tables, so that the owner's DEVX queue engine and verbs
  // peers reach them as any CQ or QP. Called by DevxService after the
  // firmware created, modified or destroyed the object.
  void DevxCqCreated(ClientId c, uint32_t cqn, std::span<const uint8_t> cqc);
  void DevxQpCreated(ClientId c, uint32_t qpn, std::span<const uint8_t> qpc);
  void DevxQpModified(uint32_t qpn, std::span<const uint8_t> qpc);
  void DevxQueueDestroyed(ClientId c, bool qp, uint32_t number);
  void RemoveDevxQueues(ClientId c);
  Verdict DevxQueueFiles(ClientId c, const protocol::DevxQueueFilesRequest& req,
                         protocol::DevxQueueFilesReply* out, std::vector<int>* fds);

 private:
  Handle NextHandle() { return next_handle_++; }
  // Keys in use: MRs, memory windows and indirect memory keys share the key
  // space and the device limit max_mr.
  size_t KeysInUse() const { return mrs_.size() + mws_.size() + mkeys_.size(); }
  Verdict CheckAhAttr(const ibv_ah_attr& attr, const char* what) const;
  void PostEvent(ClientId c, ibv_event_type type, protocol::EventElement element, Handle h,
                 uint32_t number);
  void DestroyQpObject(uint32_t qpn);
  void DevxQpEnteredError(uint32_t qpn);  // the firmware's QP state follows
  // A QP on an SRQ entering ERR: IBV_EVENT_QP_LAST_WQE_REACHED at its handles.
  void RaiseLastWqeReached(const Qp& qp, ibv_qp_state previous);
  void DropQpHandle(Handle h);
  void ReleaseXrcdUse(Handle xrcd_id);
  void ReleaseXrcdHandleUse(Handle xrcd_handle);  // an object made through the handle is gone
  void FreeXrcdIfUnused(Handle xrcd_id);
  // Data path publishing (datapath_tables.cc).
  void CreateDeviceTable();
  bool QpSlotFree(uint32_t qpn) const;
  bool MrSlotFree(uint32_t index) const;
  // The number spaces verbs and DEVX objects share: the next QP number
  // (never 0/1, never the multicast QPN) and the next MR key index (never
  // 0), skipping numbers in use and numbers whose device-table slot is
  // still held. 0 when none is left.
  uint32_t AllocateQpn();
  uint32_t AllocateMrIndex();
  // room_wr: the most WQEs the queue may ever hold (an SRQ grows in place).
  // A receive queue's file; tm_tags > 0: a tag-matching SRQ's, with its tag
  // list after the WQE slots (datapath/tag_matching.h).
  int MakeRecvQueueFile(uint32_t max_wr, uint32_t max_sge, uint32_t room_wr = 0,
                        uint32_t tm_tags = 0);
  int MakeCqFile(uint32_t cqe, uint32_t cqn);
  void PublishQp(const Qp& qp);
  void PublishQpAttributes(const Qp& qp);
  void UnpublishQp(Qp& qp);
  void PublishMr(const Mr& mr);
  void UnpublishMr(Mr& mr);
  // MRs' backings (datapath_tables.cc): HoldBacking makes mr use the memfd
  // borrowed_fd names, held once by the device for every MR on it (an
  // application registers one buffer many times: one descriptor each ran
  // the daemon out of them, locking every process of its user out);
  // ReleaseBacking lets mr's go. False: no descriptor to hold it with.
  struct HeldBacking;
  using BackingId = std::pair<uint64_t, uint64_t>;  // (st_dev, st_ino)
  // mr uses backing `id`: the one held already, else borrowed_fd's (dup'ed),
  // st_size `size`. A connection that passed it (keeper != 0) keeps it.
  bool HoldBacking(Mr& mr, BackingId id, int borrowed_fd, uint64_t size, ClientId keeper);
  // The backing held as id, else one adopted from borrowed_fd (dup'ed;
  // st_size `size`); nullptr if there is none or no descriptor for it.
  HeldBacking* HeldOrAdopted(BackingId id, int borrowed_fd, uint64_t size);
  // Ok if memfd is sealed against shrinking (what peers that map it need);
  // else EINVAL, the reason prefixed with op.
  static Verdict CheckSealed(int memfd, const char* op);
  // Backing id out of backings_ if no MR uses it and no connection keeps
  // it (its descriptor for the caller to release), else nothing.
  std::optional<HeldBacking> TakeIfUnused(BackingId id);
  // Closes backing id if no MR uses it and no connection keeps it.
  void CloseBackingIfUnused(BackingId id);
  // The same for each of ids, the closes handed to the release thread as
  // one batch.
  void CloseUnused(std::span<const BackingId> ids);
  // Keeps the backings that only connections keep within max_kept_backings_,
  // the least recently released out first (their keepers pass them again:
  // a registration naming one the device let go is told ESTALE).
  void TrimKeptBackings();
  // Each process's library keeps at most 256 converted ranges idle
  // (mr_backing.cc); this bounds the descriptors all of them cost here.
  static constexpr size_t kMaxKeptBackings = 4096;
  size_t max_kept_backings_ = kMaxKeptBackings;  // SOFTVERBS_TEST_MAX_KEPT_BACKINGS
  // The SysV segment shmid backs mr: the device keeps it attached while any
  // MR is on it, as a NIC keeps the pages of an MR pinned - removed and
  // detached by its owner, it lives on, and its id cannot name another
  // segment meanwhile. False: not attachable (EXDEV: of another IPC
  // namespace than the device's), or smaller than `bytes`.
  bool HoldSegment(Mr& mr, int shmid, uint64_t ipc_ns, uint64_t bytes);
  void ReleaseBacking(Mr& mr);
  void PublishMw(const Mw& mw);
  void UnbindMw(Mw& mw);
  Mw* FindMwByKey(uint32_t rkey);
  // The indirect key whose lkey or rkey is key, or nullptr.
  Mkey* FindMkeyByKey(uint32_t key);
  void UnpublishMkey(Mkey& mkey);
  Verdict InvalidateMkey(ClientId c, const protocol::InvalidateMwRequest& req, Mkey& mkey);
  Verdict BindMwByUmr(ClientId c, const protocol::ConfigureMkeyRequest& req, Mw& mw);
  // The MR whose lkey or rkey is key, or nullptr.
  Mr* FindMrByKey(uint32_t key);
  void ArmSrqLimit(const Srq& srq);
  void FlowRulesChanged();                  // bumps the device table's flow epoch
  void PublishSrqNumber(const Srq& srq);    // xrc_datapath.cc
  void UnpublishSrqNumber(const Srq& srq);  // before the SRQ is destroyed

  // A CQ a verbs call may name: the client's, and not a DEVX CQ's shadow.
  Cq* FindVerbsCq(ClientId c, Handle h) {
    auto it = cqs_.find(h);
    return it != cqs_.end() && SameGroup(it->second.owner, c) && !it->second.devx ? &it->second
                                                                                  : nullptr;
  }

  // An object a verbs call of client c may name: one of c's group.
  template <typename Table>
  auto* FindOwned(Table& table, ClientId c, Handle h) {
    auto it = table.find(h);
    return (it != table.end() && SameGroup(it->second.owner, c)) ? &it->second : nullptr;
  }
  // Releases the objects of these clients (one group), as the kernel does
  // for a verbs file whose last descriptor closed (release.cc).
  void ReleaseClients(const std::vector<ClientId>& members);

  EventSink event_sink_;
  GidTable gids_;
  ibv_mtu active_mtu_;
  Handle next_handle_ = 1;
  uint32_t next_pdn_ = 1;
  NumberSpace mr_indexes_{1, limits::kMaxMrIndex};
  uint32_t next_cqn_;
  uint32_t next_srqn_;
  NumberSpace qpns_{limits::kFirstQpn, limits::kMaxQpn - 1};

  std::map<ClientId, ClientInfo> clients_;
  std::map<Handle, Pd> pds_;
  std::map<Handle, Mr> mrs_;
  std::map<Handle, Mw> mws_;
  std::map<uint32_t, Handle> mw_by_index_;  // a window's key index -> its handle
  std::map<Handle, Mkey> mkeys_;
  std::map<uint32_t, Handle> mkey_by_index_;  // an indirect key's index -> its handle
  std::map<uint32_t, Handle> mr_by_index_;    // an MR's key index -> its handle
  std::map<Handle, Cq> cqs_;
  std::map<Handle, Srq> srqs_;
  std::map<uint32_t, Qp> qps_;                  // by QP number
  std::map<uint32_t, ClientId> reserved_qpns_;  // reserved QP number -> the context holding it
  std::map<Handle, QpHandle> qp_handles_;
  std::map<Handle, Ah> ahs_;
  std::map<Handle, Flow> flows_;
  std::map<Handle, RwqIndTable> ind_tables_;
  uint32_t next_ind_table_number_ = 1;
  std::map<Handle, Xrcd> xrcds_;
  std::map<Handle, XrcdHandle> xrcd_handles_;
  std::map<Handle, Dm> dms_;
  uint64_t dm_bytes_used_ = 0;  // sum of dms_' sizes, <= limits::kMaxDmSize
  datapath::DeviceTable table_;
  NumberSink qp_changed_;
  NumberSink mr_gone_;
  int table_fd_ = -1;
  struct HeldBacking {
    int fd;
    uint32_t mrs;   // MRs using it
    uint64_t size;  // the memfd's st_size when first held (sealed: it never shrinks)
    // The connections that passed it and may name it again
    // (kBackingMemfdKept): kept for them while no MR uses it, until they
    // forget it or go.
    std::vector<ClientId> keepers;
    uint64_t released_at = 0;  // kept_clock_ when its last MR went
    // An MR used it once: kept for a range converted before. Else it was
    // offered ahead and waits for its first registration (a memfd the
    // library made ahead, or one offered as its range converts).
    bool used = false;
  };
  // Closes and detaches what would free many pages (declared before what
  // it releases: it outlives them, and finishes at the device's end).
  BackgroundRelease release_;
  std::map<BackingId, HeldBacking> backings_;
  uint64_t kept_clock_ = 0;
  struct HeldSegment {
    void* base;
    uint32_t mrs;    // MRs on it
    uint64_t bytes;  // its size (shm_segsz)
  };
  std::map<int, HeldSegment> segments_;  // by SysV id
  std::map<ClientId, int> mem_fds_;      // each client's /proc/self/mem
  // Each client's access record, mapped read-only (kAccessRecordSize).
  std::map<ClientId, const std::atomic<uint32_t>*> access_records_;
  std::unique_ptr<DevxService, DevxServiceDeleter> devx_;  // made on first DEVX request
  friend class DevxDeviceObjects;                          // DEVX objects share these tables
};

}  // namespace softverbs::daemon
