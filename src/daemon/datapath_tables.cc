// The daemon's half of the shared-memory data path: it creates the device
// table and the ring files, publishes every state change initiators must see
// (MR keys, QP states and attributes), and hands the files to owners and to
// peers. The data itself never passes through here (docs/datapath.md).
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "common/device_limits.h"
#include "common/log.h"
#include "daemon/device.h"
#include "datapath/cq_ring.h"
#include "datapath/recv_queue.h"
#include "datapath/shm.h"
#include "datapath/tag_matching.h"
#include "verbs/qp_names.h"

namespace softverbs::daemon {

namespace dp = softverbs::datapath;

namespace {

// Runs fn on a temporary mapping of a ring file.
template <typename Fn>
void WithMapping(int fd, Fn fn) {
  size_t size = 0;
  void* base = dp::MapSharedFile(fd, &size);
  if (!base) return;
  fn(base);
  dp::UnmapSharedFile(base, size);
}

}  // namespace

void Device::CreateDeviceTable() {
  table_fd_ = dp::CreateSharedFile("softverbs-device-table", dp::kDeviceTableSize);
  if (table_fd_ < 0) return;
  size_t size = 0;
  void* base = dp::MapSharedFile(table_fd_, &size);
  if (!base) {
    close(table_fd_);
    table_fd_ = -1;
    return;
  }
  dp::DeviceTable::Init(base);
  table_ = dp::DeviceTable(base);
}

void Device::SetClientMemFd(ClientId c, int fd) {
  if (auto it = mem_fds_.find(c); it != mem_fds_.end()) close(it->second);
  mem_fds_[c] = fd;
}

Verdict Device::SetClientAccessRecord(ClientId c, int fd) {
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) != dp::kAccessRecordSize) {
    return Verdict::Fail(EINVAL, "hello: no access record of " +
                                     std::to_string(dp::kAccessRecordSize) + " bytes came along");
  }
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
    return Verdict::Fail(EINVAL, "hello: the access record is not sealed against shrinking");
  }
  void* p = mmap(nullptr, dp::kAccessRecordSize, PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    return Verdict::Fail(errno,
                         std::string("hello: cannot map the access record: ") + strerror(errno));
  }
  ReleaseAccessRecord(c);
  access_records_[c] = static_cast<const std::atomic<uint32_t>*>(p);
  return Verdict::Ok();
}

void Device::ReleaseAccessRecord(ClientId c) {
  auto it = access_records_.find(c);
  if (it == access_records_.end()) return;
  munmap(const_cast<std::atomic<uint32_t>*>(it->second), dp::kAccessRecordSize);
  access_records_.erase(it);
}

uint32_t Device::MrPeersInside(uint32_t key) const {
  // The other half of the peers' Dekker protocol (MrGuards): they count,
  // then check the key; we cleared the key, then read the counts.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  uint64_t inside = 0;
  const uint32_t slot = dp::MrSlotOf(key);
  for (const auto& [client, counts] : access_records_) {
    inside += counts[slot].load(std::memory_order_acquire);
  }
  return static_cast<uint32_t>(std::min<uint64_t>(inside, UINT32_MAX));
}

void Device::AttachCqEventFd(Handle h, int fd) {
  auto it = cqs_.find(h);
  if (it == cqs_.end()) {
    close(fd);
    return;
  }
  if (it->second.event_fd >= 0) close(it->second.event_fd);
  it->second.event_fd = fd;
}

int Device::CqRingFd(Handle h) const {
  auto it = cqs_.find(h);
  return it == cqs_.end() ? -1 : it->second.ring_fd;
}

int Device::QpRecvQueueFd(Handle h) const {
  auto it = qp_handles_.find(h);
  if (it == qp_handles_.end()) return -1;
  return qps_.at(it->second.qpn).rq_fd;
}

int Device::SrqRingFd(Handle h) const {
  auto it = srqs_.find(h);
  return it == srqs_.end() ? -1 : it->second.ring_fd;
}

bool Device::QpSlotFree(uint32_t qpn) const {
  return !table_.valid() || table_.QpSlot(qpn)->qpn.load() == 0;
}

bool Device::MrSlotFree(uint32_t index) const {
  // A window's slot has no lkey: the windows are asked separately.
  return (!table_.valid() || table_.MrSlot(index << 8)->lkey.load() == 0) &&
         !mw_by_index_.count(index) && !mr_by_index_.count(index) && !mkey_by_index_.count(index);
}

uint32_t Device::AllocateQpn() {
  return qpns_.Allocate([&](uint32_t qpn) {
    return qps_.count(qpn) || reserved_qpns_.count(qpn) || !QpSlotFree(qpn);
  });
}

uint32_t Device::AllocateMrIndex() {
  return mr_indexes_.Allocate([&](uint32_t index) { return !MrSlotFree(index); });
}

int Device::MakeRecvQueueFile(uint32_t max_wr, uint32_t max_sge, uint32_t room_wr,
                              uint32_t tm_tags) {
  const uint32_t room = room_wr > max_wr ? room_wr : max_wr;
  const size_t queue_bytes = (dp::RecvQueueFileSize(room, max_sge) + 63) / 64 * 64;
  const size_t file_bytes = queue_bytes + (tm_tags ? dp::TmListBytes(tm_tags) : 0);
  int fd = dp::CreateSharedFile("softverbs-rq", file_bytes);
  if (fd < 0) return fd;
  WithMapping(fd, [&](void* base) {
    dp::InitRecvQueueFile(base, max_wr, max_sge);
    if (!tm_tags) return;
    auto* h = static_cast<dp::RecvQueueHeader*>(base);
    h->tm_tags = tm_tags;
    h->tm_offset = static_cast<uint32_t>(queue_bytes);
    dp::InitTagList(reinterpret_cast<dp::TmListHeader*>(static_cast<uint8_t*>(base) + queue_bytes),
                    tm_tags);
  });
  return fd;
}

int Device::MakeCqFile(uint32_t cqe, uint32_t cqn) {
  // Room for the largest CQ: ibv_resize_cq grows the ring in place, and
  // only the pages of the slots in use are ever touched.
  int fd = dp::CreateSharedFile("softverbs-cq", dp::CqFileSize(limits::kMaxCqe));
  if (fd < 0) return fd;
  WithMapping(fd, [&](void* base) { dp::InitCqFile(base, cqe, cqn); });
  return fd;
}

// ---- publishing ---------------------------------------------------------------

void Device::PublishQp(const Qp& qp) {
  if (!table_.valid()) return;
  dp::QpEntry* e = table_.QpSlot(qp.qpn);
  e->generation.fetch_add(1);
  e->type.store(qp.type);
  e->owner.store(GroupOf(qp.creator));  // keys of its group serve it
  e->pdn.store(qp.devx ? qp.devx_pdn : qp.pd && pds_.count(qp.pd) ? pds_.at(qp.pd).pdn : 0);
  e->srqn.store(qp.srq && srqs_.count(qp.srq) ? srqs_.at(qp.srq).srqn : 0);
  e->xrcd.store(qp.type == IBV_QPT_XRC_RECV ? qp.xrcd : 0);
  e->wire_retired.store(0);
  PublishQpAttributes(qp);
  e->qpn.store(qp.qpn, std::memory_order_release);  // last: the entry is complete
}

void Device::PublishQpAttributes(const Qp& qp) {
  if (!table_.valid()) return;
  dp::QpEntry* e = table_.QpSlot(qp.qpn);
  if (qp.type == verbs::kQptDcTgt) {
    dp::SetDcAccessKey(e, qp.dc_access_key);
  } else {
    e->qkey.store(qp.attr.qkey);
    e->dest_qpn.store(qp.attr.dest_qp_num);
  }
  e->access.store(qp.attr.qp_access_flags);
  e->min_rnr_timer.store(qp.attr.min_rnr_timer);
  e->sl.store(qp.attr.ah_attr.sl);
  dp::RequesterAttributes r;
  r.timeout = qp.attr.timeout;
  r.retry_cnt = qp.attr.retry_cnt;
  r.rnr_retry = qp.attr.rnr_retry;
  r.path_mtu = static_cast<uint8_t>(qp.attr.path_mtu);
  // A DC QP's path is each WR's: its own address vector (a DCI's default,
  // a DCT's own address) takes nothing over the network.
  const bool dc = qp.type == verbs::kQptDcIni || qp.type == verbs::kQptDcTgt;
  r.path_leaves_host =
      !dc && (qp.attr_set_mask & IBV_QP_AV) && PathLeavesHost(gids_, qp.attr.ah_attr);
  e->requester.store(dp::PackRequester(r));
  // COMM_EST is raised once per arrival in RTR; a QP back before RTR may
  // raise it again.
  if (qp.state == IBV_QPS_RESET || qp.state == IBV_QPS_INIT) e->comm_est.store(0);
  e->state.store(qp.state, std::memory_order_seq_cst);
  if (qp_changed_) qp_changed_(qp.qpn);
}

void Device::RetireWireSendWrs(uint32_t qpn, uint32_t n) {
  if (!table_.valid()) return;
  dp::QpEntry* e = table_.QpSlot(qpn);
  if (e->qpn.load(std::memory_order_relaxed) == qpn) e->wire_retired.fetch_add(n);
}

bool Device::SendCqFiles(uint32_t qpn, int* ring_fd, int* event_fd) const {
  auto qp = qps_.find(qpn);
  if (qp == qps_.end()) return false;
  auto cq = cqs_.find(qp->second.send_cq);
  if (cq == cqs_.end() || cq->second.ring_fd < 0) return false;
  *ring_fd = cq->second.ring_fd;
  *event_fd = cq->second.event_fd;
  return true;
}

void Device::UnpublishQp(Qp& qp) {
  if (table_.valid()) {
    dp::QpEntry* e = table_.QpSlot(qp.qpn);
    e->state.store(dp::kQpGone, std::memory_order_seq_cst);
    e->qpn.store(0, std::memory_order_seq_cst);
  }
  if (qp_changed_) qp_changed_(qp.qpn);
  if (qp.rq_fd >= 0) close(qp.rq_fd);
  qp.rq_fd = -1;
}

void Device::PublishMr(const Mr& mr) {
  if (!table_.valid()) return;
  dp::MrEntry* e = table_.MrSlot(mr.lkey);
  e->lkey.store(0);
  e->rkey.store(0);
  e->generation.fetch_add(1);
  e->access.store(mr.access);
  e->owner.store(GroupOf(mr.owner));  // the group whose QPs may use its lkey
  e->registrant.store(mr.owner);      // the process whose memory it is
  e->pdn.store(pds_.count(mr.pd) ? pds_.at(mr.pd).pdn : 0);
  e->iova.store(mr.iova);
  e->length.store(mr.length);
  e->addr.store(mr.addr);
  e->backed_begin.store(mr.backed() ? mr.backed_begin : 0);
  e->backed_end.store(mr.backed() ? mr.backed_end : 0);
  e->backed_offset.store(mr.backed_offset);
  e->window_of.store(0);
  e->bound_qpn.store(0);
  // Keys last: a reader that sees them sees the rest.
  e->rkey.store(mr.rkey, std::memory_order_release);
  e->lkey.store(mr.lkey, std::memory_order_release);
}

void Device::UnpublishMr(Mr& mr) {
  if (table_.valid()) {
    dp::MrEntry* e = table_.MrSlot(mr.lkey);
    if (e->lkey.load() == mr.lkey) {
      e->rkey.store(0, std::memory_order_seq_cst);
      e->lkey.store(0, std::memory_order_seq_cst);
    }
  }
  if (mr_gone_) {
    mr_gone_(mr.lkey);
    mr_gone_(mr.rkey);
  }
}

Device::HeldBacking* Device::HeldOrAdopted(BackingId id, int borrowed_fd, uint64_t size) {
  auto it = backings_.find(id);
  if (it != backings_.end()) return &it->second;
  if (borrowed_fd < 0) return nullptr;
  const int fd = fcntl(borrowed_fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return nullptr;
  return &backings_.emplace(id, HeldBacking{fd, 0, size, {}}).first->second;
}

Verdict Device::CheckSealed(int memfd, const char* op) {
  // Peers (and the network transport, here) map a backing: one that its
  // owner could shrink would fault them (SIGBUS) - as any memfd not sealed
  // against it. The library seals every backing it makes; seals are never
  // removed, so one held already was checked when it came.
  const int seals = fcntl(memfd, F_GET_SEALS);
  if (seals >= 0 && (seals & F_SEAL_SHRINK)) return Verdict::Ok();
  return Verdict::Fail(EINVAL, std::string(op) +
                                   ": the memfd is not sealed against shrinking "
                                   "(F_SEAL_SHRINK): the peers that map it could fault");
}

bool Device::HoldBacking(Mr& mr, BackingId id, int borrowed_fd, uint64_t size, ClientId keeper) {
  HeldBacking* held = HeldOrAdopted(id, borrowed_fd, size);
  if (!held) return false;
  held->mrs++;
  held->used = true;
  if (keeper != 0 &&
      std::find(held->keepers.begin(), held->keepers.end(), keeper) == held->keepers.end()) {
    held->keepers.push_back(keeper);
  }
  mr.backing_fd = held->fd;
  mr.backing_id = id;
  return true;
}

std::optional<Device::HeldBacking> Device::TakeIfUnused(BackingId id) {
  auto it = backings_.find(id);
  if (it == backings_.end() || it->second.mrs != 0 || !it->second.keepers.empty()) {
    return std::nullopt;
  }
  HeldBacking held = std::move(it->second);
  backings_.erase(it);
  return held;
}

void Device::CloseBackingIfUnused(BackingId id) {
  if (auto held = TakeIfUnused(id)) release_.Close(held->fd, held->size);
}

void Device::TrimKeptBackings() {
  // The kept ones are among backings_: nothing to count (on every dereg
  // of a range's last MR) while there are no more of them than the limit.
  if (backings_.size() <= max_kept_backings_) return;
  for (;;) {
    size_t kept = 0;
    auto oldest = backings_.end();
    for (auto it = backings_.begin(); it != backings_.end(); ++it) {
      if (it->second.mrs != 0) continue;
      ++kept;
      if (oldest == backings_.end() || it->second.released_at < oldest->second.released_at) {
        oldest = it;
      }
    }
    if (kept <= max_kept_backings_) return;
    oldest->second.keepers.clear();
    CloseBackingIfUnused(oldest->first);
  }
}

Verdict Device::KeepOfferedBacking(ClientId c, int offered_fd) {
  struct stat st {};
  if (fstat(offered_fd, &st) != 0) {
    return Verdict::Fail(EBADF,
                         std::string("offer_backing: cannot stat the memfd: ") + strerror(errno));
  }
  const BackingId id{st.st_dev, st.st_ino};
  if (!backings_.contains(id)) {
    if (Verdict v = CheckSealed(offered_fd, "offer_backing"); !v.ok()) return v;
  }
  HeldBacking* held = HeldOrAdopted(id, offered_fd, static_cast<uint64_t>(st.st_size));
  if (!held) {
    return Verdict::Fail(
        errno, std::string("offer_backing: no descriptor to keep it: ") + strerror(errno));
  }
  if (std::find(held->keepers.begin(), held->keepers.end(), c) == held->keepers.end()) {
    held->keepers.push_back(c);
  }
  if (held->mrs == 0) held->released_at = ++kept_clock_;  // the newest kept: trimmed last
  TrimKeptBackings();
  return Verdict::Ok();
}

bool Device::KeepsBackingFor(ClientId c, const protocol::BackingName& name) const {
  auto it = backings_.find({name.dev, name.ino});
  return it != backings_.end() && std::find(it->second.keepers.begin(), it->second.keepers.end(),
                                            c) != it->second.keepers.end();
}

void Device::ForgetBackings(ClientId c, std::span<const protocol::BackingName> names) {
  std::vector<BackingId> ids;
  for (const protocol::BackingName& name : names) {
    auto it = backings_.find({name.dev, name.ino});
    if (it != backings_.end() && std::erase(it->second.keepers, c) > 0) ids.push_back(it->first);
  }
  CloseUnused(ids);
}

void Device::CloseUnused(std::span<const BackingId> ids) {
  // The library closed its own descriptors of forgotten memfds before it
  // told the device: the device's is the last, and closing it frees the
  // memfd's pages - a few microseconds per memfd even for one page. One
  // batch to the release thread, so that this answer (and the next
  // client's) does not wait.
  std::vector<int> closing;
  uint64_t bytes = 0;
  for (const BackingId& id : ids) {
    if (auto held = TakeIfUnused(id)) {
      closing.push_back(held->fd);
      bytes += held->size;
    }
  }
  release_.CloseAll(closing, bytes);
}

bool Device::HoldSegment(Mr& mr, int shmid, uint64_t ipc_ns, uint64_t bytes) {
  if (ipc_ns == 0 || ipc_ns != datapath::IpcNamespaceId()) {
    errno = EXDEV;
    return false;
  }
  auto it = segments_.find(shmid);
  if (it == segments_.end()) {
    shmid_ds ds{};
    if (shmctl(shmid, IPC_STAT, &ds) != 0) return false;
    if (ds.shm_segsz < bytes) {
      errno = ERANGE;
      return false;
    }
    void* base = shmat(shmid, nullptr, SHM_RDONLY);  // held, never touched
    if (base == reinterpret_cast<void*>(-1)) return false;
    it = segments_.emplace(shmid, HeldSegment{base, 0, ds.shm_segsz}).first;
  } else {
    shmid_ds ds{};
    if (shmctl(shmid, IPC_STAT, &ds) != 0 || ds.shm_segsz < bytes) {
      errno = ERANGE;
      return false;
    }
  }
  it->second.mrs++;
  mr.backing_shmid = shmid;
  mr.backing_ipc_ns = ipc_ns;
  return true;
}

void Device::ForgetKeptBackings(ClientId c) {
  std::vector<BackingId> ids;
  for (auto& [id, held] : backings_) {
    if (std::erase(held.keepers, c) > 0) ids.push_back(id);
  }
  CloseUnused(ids);
}

void Device::ReleaseBacking(Mr& mr) {
  if (mr.backing_shmid >= 0) {
    auto it = segments_.find(mr.backing_shmid);
    if (it != segments_.end() && --it->second.mrs == 0) {
      release_.Detach(it->second.base, it->second.bytes);
      segments_.erase(it);
    }
    mr.backing_shmid = -1;
  }
  if (mr.backing_fd < 0) return;
  mr.backing_fd = -1;
  auto it = backings_.find(mr.backing_id);
  if (it == backings_.end() || --it->second.mrs != 0) return;
  if (it->second.keepers.empty()) {
    CloseBackingIfUnused(mr.backing_id);
    return;
  }
  it->second.released_at = ++kept_clock_;
  TrimKeptBackings();
}

void Device::ArmSrqLimit(const Srq& srq) {
  if (srq.ring_fd < 0) return;
  WithMapping(srq.ring_fd, [&](void* base) {
    static_cast<dp::RecvQueueHeader*>(base)->srq_limit.store(srq.srq_limit);
  });
}

// ---- requests -------------------------------------------------------------------

Verdict Device::RegMrBacked(ClientId c, const protocol::RegMrBackedRequest& req, int backing_fd,
                            protocol::RegMrReply* out, bool device_memory) {
  const bool segment = req.backing_kind == protocol::kBackingSysvShm;
  const bool kept = req.backing_kind == protocol::kBackingMemfdKept;
  if (req.backing_kind != protocol::kBackingNone && !segment && !(kept && !device_memory)) {
    return Verdict::Fail(EINVAL,
                         "reg_mr: unknown backing kind " + std::to_string(req.backing_kind));
  }
  if ((segment || kept) && backing_fd >= 0) {
    return Verdict::Fail(EINVAL, "reg_mr: a memfd came along with a backing named otherwise");
  }
  const bool memfd = backing_fd >= 0 || kept;
  if ((memfd || segment) &&
      (req.backed_begin >= req.backed_end || req.backed_begin < req.reg.addr ||
       req.backed_end > req.reg.addr + req.reg.length)) {
    return Verdict::Fail(EINVAL, "reg_mr: the backed range is not inside the MR");
  }
  // Which memfd, and how large: the one passed, or the one this connection
  // passed before and the device kept for it (a connection can only name
  // a memfd it had a descriptor of).
  BackingId id{};
  uint64_t memfd_size = 0;
  if (backing_fd >= 0) {
    struct stat st {};
    if (fstat(backing_fd, &st) != 0) {
      return Verdict::Fail(
          EBADF, std::string("reg_mr: cannot stat the backing memfd: ") + strerror(errno));
    }
    id = {st.st_dev, st.st_ino};
    memfd_size = static_cast<uint64_t>(st.st_size);
    if (!backings_.contains(id)) {
      if (Verdict v = CheckSealed(backing_fd, "reg_mr"); !v.ok()) return v;
    }
  } else if (kept) {
    id = {req.kept.dev, req.kept.ino};
    if (!KeepsBackingFor(c, req.kept)) {
      return Verdict::Fail(ESTALE,
                           "reg_mr: the device keeps no such memfd for this context (let go of "
                           "as the least recently used, or its offer refused): pass it again");
    }
    memfd_size = backings_.at(id).size;
  }
  if (memfd && (req.backed_offset > memfd_size ||
                req.backed_end - req.backed_begin > memfd_size - req.backed_offset)) {
    return Verdict::Fail(EINVAL, "reg_mr: the backed range lies past the end of its memfd");
  }
  Verdict v = RegMr(c, req.reg, out, device_memory);
  if (!v.ok()) return v;
  Mr& mr = mrs_.at(out->handle);
  if (memfd && !HoldBacking(mr, id, backing_fd, memfd_size, device_memory ? 0 : c)) {
    // Registered all the same: peers reach it through the owner's
    // /proc/self/mem, as a range without whole pages.
    fprintf(stderr,
            "softverbsd: reg_mr: cannot hold the backing of MR 0x%x (%s): peers reach it "
            "through the owner's memory descriptor\n",
            mr.lkey, strerror(errno));
  }
  if (mr.backing_fd >= 0 && !device_memory) out->flags |= protocol::kRegMrBackingKept;
  // A SysV segment: peers attach it with their own credentials; the device
  // holds it while the MR lives. It cannot shrink, so no peer can fault on it.
  const uint64_t segment_bytes = req.backed_offset + (req.backed_end - req.backed_begin);
  if (segment &&
      (segment_bytes < req.backed_offset || req.shmid > static_cast<uint32_t>(INT32_MAX) ||
       !HoldSegment(mr, static_cast<int>(req.shmid), req.ipc_ns, segment_bytes))) {
    fprintf(stderr,
            "softverbsd: reg_mr: cannot hold SysV segment %u for MR 0x%x (%s): peers reach it "
            "through the owner's memory descriptor\n",
            req.shmid, mr.lkey, strerror(errno));
  }
  mr.backed_begin = req.backed_begin;
  mr.backed_end = req.backed_end;
  mr.backed_offset = req.backed_offset;
  PublishMr(mr);
  return Verdict::Ok();
}

Verdict Device::MapQp(ClientId c, uint32_t qpn, protocol::MapQpReply* out, std::vector<int>* fds) {
  (void)c;  // every context of the user may reach every QP, as on a fabric
  auto it = qps_.find(qpn);
  if (it == qps_.end()) return Verdict::Fail(ENOENT, "map_qp: no QP 0x" + ToHex(qpn));
  const Qp& qp = it->second;
  int rq_fd = qp.rq_fd;
  uint32_t srqn = 0;
  if (qp.srq) {
    const Srq& srq = srqs_.at(qp.srq);
    rq_fd = srq.ring_fd;
    srqn = srq.srqn;
  }
  auto cq = cqs_.find(qp.recv_cq);
  if (rq_fd < 0 || cq == cqs_.end() || cq->second.ring_fd < 0) {
    return Verdict::Fail(EINVAL, "map_qp: QP 0x" + ToHex(qpn) + " has no receive side");
  }
  fds->push_back(rq_fd);
  fds->push_back(cq->second.ring_fd);
  if (cq->second.event_fd >= 0) fds->push_back(cq->second.event_fd);
  *out = {qpn,
          table_.valid() ? table_.QpSlot(qpn)->generation.load() : 0,
          GroupOf(qp.creator),
          srqn,
          cq->second.event_fd >= 0 ? 1u : 0u,
          0};
  return Verdict::Ok();
}

Verdict Device::MapMr(ClientId c, uint32_t key, protocol::MapMrReply* out, std::vector<int>* fds) {
  (void)c;
  if (const Mr* found = FindMrByKey(key)) {
    const Mr& mr = *found;
    // A non-dumpable owner gave no /proc/self/mem: its MRs are whole pages
    // (ibv_reg_mr refuses the rest), reached through the backing alone.
    auto mem = mem_fds_.find(mr.owner);
    if (mem == mem_fds_.end() && !mr.backed()) {
      return Verdict::Fail(ENODEV, "map_mr: the owner of key 0x" + ToHex(key) +
                                       " gave no memory descriptor and the MR has no backing");
    }
    if (mem != mem_fds_.end()) fds->push_back(mem->second);
    if (mr.backing_fd >= 0) fds->push_back(mr.backing_fd);
    const uint32_t backing = mr.backing_fd >= 0      ? protocol::kBackingMemfd
                             : mr.backing_shmid >= 0 ? protocol::kBackingSysvShm
                                                     : protocol::kBackingNone;
    *out = {mr.owner,
            table_.valid() ? table_.MrSlot(key)->generation.load() : 0,
            backing,
            mem != mem_fds_.end() ? 1u : 0u,
            mr.backing_shmid >= 0 ? static_cast<uint32_t>(mr.backing_shmid) : 0u,
            0,
            mr.backing_ipc_ns};
    return Verdict::Ok();
  }
  return Verdict::Fail(ENOENT, "map_mr: no MR with key 0x" + ToHex(key));
}

Verdict Device::QpError(ClientId c, uint32_t qpn, uint32_t state) {
  auto it = qps_.find(qpn);
  if (it == qps_.end()) return Verdict::Fail(ENOENT, "qp_error: no QP 0x" + ToHex(qpn));
  Qp& qp = it->second;
  if (state == IBV_QPS_SQE) {
    // IBA 10.3.1: only unreliable QPs have a send queue error state (a
    // reliable requester retries, then goes to ERR), and only a QP that is
    // sending (RTS, SQD) enters it. A QP the application moved on meanwhile
    // (to ERR, RESET...) keeps that state. Hardware raises no async event
    // here: the error completion is the report (IPoIB polls the QP state
    // after one for that reason).
    if (qp.type != IBV_QPT_UD && qp.type != IBV_QPT_UC) {
      return Verdict::Fail(EINVAL, "qp_error: QP 0x" + ToHex(qpn) +
                                       " is reliable: a send error moves it to ERR, not SQE");
    }
    if (qp.state == IBV_QPS_RTS || qp.state == IBV_QPS_SQD) {
      qp.state = IBV_QPS_SQE;
      PublishQpAttributes(qp);
    }
    return Verdict::Ok();
  }
  if (state == IBV_QPS_SQD) {
    // mlx5's signature pipelining (MLX5DV_QP_CREATE_SIG_PIPELINING): the
    // owner's send queue stopped before a fenced WR after a bad signature,
    // and the QP drains to SQD as mlx5 moves it (SQD->RTS resumes it).
    if (!SameGroup(qp.creator, c)) {
      return Verdict::Fail(EINVAL, "qp_error: QP 0x" + ToHex(qpn) + " is not this context's");
    }
    if (qp.state == IBV_QPS_RTS) {
      qp.state = IBV_QPS_SQD;
      PublishQpAttributes(qp);
    }
    return Verdict::Ok();
  }
  if (state != 0 && state != IBV_QPS_ERR) {
    return Verdict::Fail(EINVAL,
                         "qp_error: state " + std::to_string(state) + " is not SQE, SQD or ERR");
  }
  if (qp.state != IBV_QPS_RESET) {
    const ibv_qp_state previous = qp.state;
    qp.state = IBV_QPS_ERR;
    PublishQpAttributes(qp);
    RaiseLastWqeReached(qp, previous);
    if (qp.devx) DevxQpEnteredError(qpn);
  }
  return Verdict::Ok();
}

void Device::RaiseLastWqeReached(const Qp& qp, ibv_qp_state previous) {
  // IBA 11.6.3.1 / ibv_get_async_event(3): a QP associated with an SRQ that
  // moves to the error state reports that no further WQE will be consumed
  // from the SRQ on its behalf (nothing is in flight here: at once).
  // A DCI holds the SRQ it was created with but takes nothing from it.
  if (!qp.srq || qp.type == verbs::kQptDcIni || qp.state != IBV_QPS_ERR || previous == IBV_QPS_ERR)
    return;
  for (Handle h : qp.handles) {
    PostEvent(qp_handles_.at(h).owner, IBV_EVENT_QP_LAST_WQE_REACHED, protocol::EventElement::kQp,
              h, qp.qpn);
  }
}

Verdict Device::SrqLimitReached(ClientId c, uint32_t srqn) {
  (void)c;
  for (auto& [h, srq] : srqs_) {
    if (srq.srqn != srqn) continue;
    // As hardware: the limit disarms when the event fires (query reads 0).
    if (srq.srq_limit == 0) return Verdict::Ok();
    srq.srq_limit = 0;
    PostEvent(srq.owner, IBV_EVENT_SRQ_LIMIT_REACHED, protocol::EventElement::kSrq, h, 0);
    return Verdict::Ok();
  }
  return Verdict::Fail(ENOENT, "srq_limit_reached: no SRQ " + std::to_string(srqn));
}

Verdict Device::McastMembers(ClientId c, const uint8_t gid[16], std::vector<uint32_t>* qpns) {
  (void)c;
  std::vector<uint8_t> key(gid, gid + 16);
  for (const auto& [qpn, qp] : qps_) {
    if (qp.type == IBV_QPT_UD && qp.mcast_groups.count(key)) qpns->push_back(qpn);
  }
  return Verdict::Ok();
}

}  // namespace softverbs::daemon
