// The softverbs provider's objects inside an application's process. Each
// wraps the public libibverbs struct first (so the header-inline verbs, which
// only know the public layout, work on it) and adds what the provider needs:
// the daemon handle of the object and its shared-memory rings.
#pragma once

#include <infiniband/verbs.h>
#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "abi/ibverbs/biased_lock.h"
#include "abi/ibverbs/daemon_channel.h"
#include "abi/ibverbs/dv_qp_ex.h"
#include "common/gid_table.h"
#include "common/spin_lock.h"
#include "datapath/cq_ring.h"
#include "datapath/device_table.h"
#include "datapath/engine.h"
#include "datapath/plain_route.h"
#include "datapath/recv_queue.h"
#include "datapath/shm.h"
#include "datapath/shm_send_queue.h"
#include "datapath/wire_post.h"
#include "protocol/messages.h"

namespace softverbs::provider {

using protocol::Handle;

// Every provider object starts with its public struct, so a pointer to the
// public struct converts to the provider object.
template <typename Outer, typename Public>
Outer* FromPublic(Public* p) {
  return reinterpret_cast<Outer*>(p);
}

class PeerCache;    // peers.h
struct DevxEngine;  // devx_queues.cc
struct Qp;
struct Cq;

struct Context {
  // First, as in every rdma-core provider: the header-inline verbs find the
  // verbs_context right before the ibv_context they are given.
  verbs_context vctx;
  DaemonChannel channel;  // requests to softverbsd
  int event_fd = -1;      // the event connection; also ibv_context.async_fd
  uint32_t client_id = 0;
  // Names the context to the registry of converted ranges (mr_backing.h),
  // which notes the memfds its device keeps for it; never reused.
  uint64_t keeper = 0;
  // The group whose objects and keys this context uses: client_id, unless
  // it imported another process's context (ibv_import_device).
  uint32_t group_id = 0;
  int imported_fd = -1;  // that other context's connection (our cmd_fd), owned
  uint64_t token = 0;    // names the client to its event connections (HelloReply)
  // The daemon holds this process's /proc/self/mem (peers reach the partial
  // pages of its MRs through it). False for a non-dumpable process
  // (PR_SET_DUMPABLE 0), which cannot open it: only whole pages register.
  bool has_mem_fd = false;
  // This context's access record (datapath/layout.h kAccessRecordSize): its
  // accesses in progress to other processes' MRs, which the daemon sums when
  // an MR is deregistered.
  datapath::SharedMapping access_record;
  int record_fd = -1;  // the record's memfd (a context imported from this one maps it too)
  ibv_mtu active_mtu = IBV_MTU_1024;
  GidTable gids{};
  uint32_t multicast_gids = 0;                // HelloReply::multicast_gids (MulticastGoesOnLink)
  std::mutex objects_mutex;                   // guards objects (async events look objects up)
  std::unordered_map<Handle, void*> objects;  // daemon handle -> ibv_cq/qp/srq
  // Held by whoever reads the event connection (event_lifetime.h), so that
  // dropping the records of destroyed objects never races with a reader.
  std::mutex event_read_mutex;

  // The data path (docs/datapath.md).
  int table_fd = -1;  // the device table's memfd (kept for contexts imported from this one)
  datapath::SharedMapping table_mapping;
  datapath::DeviceTable table;
  std::unique_ptr<PeerCache> peers;   // how this context reaches other QPs and MRs
  DevxEngine* devx_engine = nullptr;  // the DEVX queue engine (devx_queues.h), once needed
  // Send queues with work requests waiting for a retry, and the helper
  // thread that retries them while the application sleeps.
  std::mutex waiting_mutex;
  std::condition_variable waiting_cv;
  std::vector<Qp*> waiting_qps;
  // CQs with completion-event moderation (cq_moderation.cc): the helper
  // thread fires the events whose cq_period ran out.
  std::vector<Cq*> moderated_cqs;
  std::atomic<uint32_t> waiting_count{0};
  std::thread progress_thread;
  bool stopping = false;
  // The doorbell of the device's network transport (wire_post.h), once a
  // QP posted over the network: the socket that wakes the device (-1
  // before) and the ring the posts go into (datapath/wire_post.h).
  std::mutex wire_mutex;
  std::atomic<int> wire_fd{-1};
  datapath::WirePostRing* wire_ring = nullptr;
  uint32_t wire_produced = 0;  // records published into wire_ring

  // The device's death (device_fatal.h): the watcher thread that notices it,
  // the QPs it puts in error (under objects_mutex), and whether
  // IBV_EVENT_DEVICE_FATAL was handed out.
  std::thread watch_thread;
  int watch_stop_fd = -1;
  // Readable: the watch thread makes memfds ahead for this context's
  // registrations (ready_backings.h).
  int ready_backings_fd = -1;
  pid_t watch_pid = 0;  // the process the watcher runs in (not a fork child)
  std::atomic<bool> fatal{false};
  std::atomic<bool> fatal_reported{false};
  std::unordered_set<Qp*> qps;

  Context() = default;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context();  // context.cc

  static Context* From(ibv_context* ctx) { return reinterpret_cast<Context*>(verbs_get_ctx(ctx)); }
  ibv_context* ibv() { return &vctx.context; }
  void Track(Handle h, void* obj) {
    std::lock_guard lock(objects_mutex);
    objects[h] = obj;
  }
  void Untrack(Handle h) {
    std::lock_guard lock(objects_mutex);
    objects.erase(h);
  }
};

struct Td;  // parent_domain.h

struct Pd {
  ibv_pd ibv;  // first
  Handle handle;
  uint32_t pdn = 0;  // for mlx5dv_init_obj
  // A parent domain (ibv_alloc_parent_domain) is a Pd too: handle and pdn
  // are its protection domain's, so every verb that takes a PD takes it.
  Pd* protection_domain = nullptr;  // set: this is a parent domain over it
  Td* td = nullptr;                 // a parent domain's thread domain, if any
  void* pd_context = nullptr;       // a parent domain's pd_context
  std::atomic<int> users{0};  // PD: parent domains over it; parent domain: QPs, CQs, SRQs on it
};

struct Mr {
  ibv_mr ibv;  // first
  Handle handle;
  uint64_t backing_id = 0;   // mr_backing.h: the memfd backing its whole pages (0: none)
  unsigned access = 0;       // ibv_access_flags as last registered (rereg checks the new range)
  bool imported = false;     // ibv_import_mr's (rdma-core's IBV_MR_TYPE_IMPORTED_MR)
  bool range_noted = false;  // its range is among the live ones (live_mr_ranges.h)
};

// A memory window (mw.cc): the device's object; its key lives in the
// device table like an MR's.
struct Mw {
  ibv_mw ibv;  // first
  Handle handle;
};

struct Cq;

struct CompChannel {
  ibv_comp_channel ibv;  // first
  std::mutex mutex;
  std::vector<Cq*> cqs;  // CQs reporting here; each counts the events raised for it
};

struct Cq {
  ibv_cq_ex ibv;  // first; its leading members are struct ibv_cq
  Handle handle;
  ibv_pd* parent_domain = nullptr;  // IBV_CQ_INIT_ATTR_MASK_PD
  uint32_t cqn;
  uint64_t wc_flags;
  datapath::SharedMapping ring_mapping;
  datapath::CqRing ring;
  int event_fd = -1;                   // the channel's eventfd (not owned), or -1
  uint32_t events_delivered = 0;       // ring.header()->events_raised already handed out
                                       // (under the channel's mutex): comp events reported
  uint32_t async_events_reported = 0;  // async events handed out (under ibv.mutex)
  BiasedLock poll_lock;                // one consumer at a time
  datapath::Completion current{};      // the entry the ibv_cq_ex read_* calls read
  // The QPs whose own receive queue completes here, by QP number, sorted
  // (under receive_queues_lock, not poll_lock: a QP may be created between
  // ibv_start_poll and ibv_end_poll): the poll tells a queue which of its
  // WQEs a receive completion consumed (CqEntry::recv_wqe,
  // RecvQueue::NoteConsumed).
  SpinLock receive_queues_lock;
  std::vector<std::pair<uint32_t, datapath::RecvQueue*>> receive_queues;
  // The QP whose receive WQE the last receive completion polled here
  // consumed (0: none since the last empty poll), under poll_lock: the
  // empty poll that follows has its queue take the line of its next slot
  // (RecvQueue::OwnNextSlot).
  uint32_t refilling_qpn = 0;
  // The size of a CQE in the CQ's mlx5 view (mlx5dv_init_obj): 64, or 128
  // when mlx5dv_create_cq asked for it.
  uint32_t mlx5_cqe_size = 64;
  // IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN: its mlx5 view is written whatever
  // the consumer index says (the consumer promises to keep up).
  bool ignore_overrun = false;
};

// A QP's own receive queue completes on cq from its creation until its
// destruction: the poll of cq passes it what its completions say.
void AttachReceiveQueue(Cq* cq, uint32_t qpn, datapath::RecvQueue* rq);
void DetachReceiveQueue(Cq* cq, uint32_t qpn);

struct Srq {
  ibv_srq ibv;  // first
  Handle handle;
  uint32_t events_reported = 0;  // async events handed out (under ibv.mutex)
  uint32_t srqn;
  ibv_srq_type type;
  ibv_cq* tm_cq = nullptr;  // IBV_SRQT_TM: where its tag list operations complete
  uint32_t max_sge = 0;
  datapath::SharedMapping ring_mapping;
  datapath::RecvQueue rq;
  SpinLock post_lock;  // the ring has one producer
};

struct Qp {
  ibv_qp_ex ibv;  // first; its leading member is struct ibv_qp
  Handle handle;
  // The type the device and the data path know it by: ibv.qp_base.qp_type
  // but for the legacy IBV_QPT_XRC (XRC_SEND) and mlx5's DC QPs (DRIVER to
  // the application; verbs::kQptDcIni or kQptDcTgt here).
  ibv_qp_type type = IBV_QPT_RC;
  uint32_t events_reported = 0;  // async events handed out (under ibv.qp_base.mutex)
  ibv_qp_cap cap;
  bool sq_sig_all = false;
  bool has_qp_ex = false;  // created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS
  uint64_t send_ops_flags = 0;

  // The data path.
  uint32_t pdn = 0;
  datapath::QpEntry* entry = nullptr;  // this QP in the device table
  datapath::SharedMapping rq_mapping;
  datapath::RecvQueue rq;  // own receive queue (invalid with an SRQ)
  BiasedLock rq_lock;      // one producer
  // The attributes the requester needs are the device's (entry: dest_qpn,
  // qkey, sl, requester - RequesterOf below), as ibv_modify_qp left them.
  // The send queue on the shared-memory engine (datapath/shm_send_queue.h):
  // WRs that could not complete yet and WRs posted in SQD, in order.
  // Biased to the thread that posts (biased_lock.h): no locked instruction
  // on the post path.
  BiasedLock sq_lock;
  datapath::ShmSendQueue sq;  // under sq_lock
  // The target last reached (datapath::LocalQp::peer_cache; under sq_lock).
  datapath::PeerQpCache peer_cache;
  // The way the last plain WRITE or READ went (datapath/plain_route.h;
  // under sq_lock).
  datapath::PlainRoute route;
  // Work requests posted over the network (wire_post.cc; under the
  // context's wire_mutex): with the device's QpEntry::wire_retired, what
  // occupies the send queue against cap.max_send_wr.
  uint32_t wire_posted = 0;
  // ibv_wr_* batch being built between ibv_wr_start and ibv_wr_complete.
  std::vector<datapath::SendWr> batch;
  int batch_error = 0;
  // Its mlx5 work request builders (mlx5dv_qp_ex_from_ibv_qp_ex).
  DvQpEx dv_ex;
};

// The requester attributes the device published for qp (the defaults when
// the QP has no device-table entry).
inline datapath::RequesterAttributes RequesterOf(const Qp* qp) {
  return qp->entry ? datapath::UnpackRequester(qp->entry->requester.load(std::memory_order_acquire))
                   : datapath::RequesterAttributes{};
}

struct Ah {
  ibv_ah ibv;  // first
  Handle handle;
  ibv_ah_attr attr;
  // Its sends go to the device's network transport: its GID is another
  // host's, or a multicast group's on the link (common/gid_table.h
  // PathLeavesHost, MulticastGoesOnLink).
  bool leaves_host = false;
  // Its mlx5 address vector (mlx5dv_init_obj's view, which software copies
  // into UD and DC WQEs' datagram segments), made from attr at creation.
  mlx5_wqe_av mlx5_av{};
};

struct Xrcd {
  ibv_xrcd ibv;  // first
  Handle handle;
};

}  // namespace softverbs::provider
