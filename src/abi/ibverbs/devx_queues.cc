#include "abi/ibverbs/devx_queues.h"

#include <endian.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "abi/ibverbs/exports.h"
#include "abi/ibverbs/peers.h"
#include "abi/ibverbs/softverbs_private.h"
#include "common/log.h"
#include "datapath/mlx5_wqe.h"
#include "datapath/shm.h"
#include "datapath/shm_completer.h"
#include "datapath/timers.h"
#include "protocol/devx_messages.h"
#include "verbs/qp_names.h"

namespace softverbs::provider {

namespace dp = softverbs::datapath;
namespace mlx5 = softverbs::datapath::mlx5;

namespace {

// Backing off when no queue has work: keep looking (yielding the CPU) for
// kSpinNs after the last work - a ping-pong's next message comes within
// that - then sleep, from kFirstNapUs doubling up to kMaxNapUs, so an idle
// queue costs a wake-up per millisecond at most.
constexpr uint64_t kSpinNs = 2'000'000;
constexpr useconds_t kFirstNapUs = 20;
constexpr useconds_t kMaxNapUs = 1000;

uint32_t LoadBe32(volatile uint32_t* word) {
  return be32toh(__atomic_load_n(word, __ATOMIC_ACQUIRE));
}

// Memory the engine made (mlx5dv_init_obj on verbs queues), unmapped with
// the queue.
struct OwnedBuffer {
  void* base = nullptr;
  size_t len = 0;
  OwnedBuffer() = default;
  OwnedBuffer(const OwnedBuffer&) = delete;
  OwnedBuffer& operator=(const OwnedBuffer&) = delete;
  ~OwnedBuffer() {
    if (base) munmap(base, len);
  }
  bool Allocate(size_t bytes) {
    len = (bytes + 4095) & ~size_t{4095};
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    base = p == MAP_FAILED ? nullptr : p;
    return base != nullptr;
  }
  uint8_t* at(size_t offset) const { return static_cast<uint8_t*>(base) + offset; }
};

struct DevxCq {
  uint32_t cqn = 0;
  uint8_t* buf = nullptr;
  uint32_t ncqe = 0;  // a power of two
  uint32_t log_ncqe = 0;
  uint32_t stride = 64;
  volatile uint32_t* dbr = nullptr;
  dp::SharedMapping ring_mapping;
  dp::CqRing ring;              // the shadow ring producers push completions into
  uint64_t producer = 0;        // CQEs written (the owner bit is bit log_ncqe of it)
  bool ignore_overrun = false;  // a verbs CQ made with IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN
  // A verbs CQ with a completion channel: its event fd, and the doorbell
  // register of its mlx5 view (a page of its own, cq_uar) where software
  // arms it (libmlx5's mlx5_arm_cq: sn, cmd, ci and the CQ number in one
  // 64-bit write at MLX5_CQ_DOORBELL).
  int event_fd = -1;
  uint64_t* arm_doorbell = nullptr;
  OwnedBuffer owned;  // mlx5dv_init_obj on a verbs CQ: its CQE buffer
};

struct DevxQp {
  uint32_t qpn = 0;
  uint8_t* rq = nullptr;
  uint32_t rq_wqes = 0;
  uint32_t rq_stride = 0;
  uint8_t* sq = nullptr;
  uint32_t sq_bbs = 0;
  volatile uint32_t* dbr = nullptr;
  dp::QpEntry* entry = nullptr;
  dp::SharedMapping rq_mapping, send_cq_mapping, recv_cq_mapping;
  dp::RecvQueue shadow_rq;
  dp::CqRing send_ring, recv_ring;
  // Retry attributes (RTR2RTS) and the path MTU the requester segments by.
  uint8_t timeout = 14;
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  uint32_t last_state = IBV_QPS_RESET;
  uint16_t rq_head = 0;      // receive WQEs copied into the shadow queue
  uint16_t sq_head = 0;      // send basic blocks consumed
  bool has_pending = false;  // the WQE at sq_head is parsed and waits for a retry
  mlx5::ParsedSendWqe pending;
  dp::PeerQpCache peer_cache;
  Qp* verbs_qp = nullptr;  // mlx5dv_init_obj on a verbs QP: its retry attributes
  OwnedBuffer owned;       // and the mlx5 buffers made for it
};

// mlx5dv_init_obj on a verbs SRQ: libmlx5's linked list of receive WQEs
// (a 16-byte next segment, then data segments) whose posted count is in
// its doorbell record; each WQE is posted into the verbs SRQ with its
// index as wr_id, which the receive CQE reports as wqe_counter.
struct DevxSrq {
  uint32_t srqn = 0;
  Srq* verbs_srq = nullptr;
  uint8_t* buf = nullptr;
  uint32_t wqe_cnt = 0;  // a power of two
  uint32_t stride = 0;
  volatile uint32_t* dbr = nullptr;
  uint16_t consumed = 0;  // WQEs taken from the list (the doorbell counter wraps at 16 bits)
  uint16_t next = 0;      // the index of the next WQE to take: the list's head
  OwnedBuffer owned;
};

}  // namespace

struct DevxEngine {
  Context* ctx = nullptr;
  pid_t pid = 0;  // the process the thread runs in (a fork child has none)
  std::mutex mutex;
  std::map<uint32_t, std::unique_ptr<DevxCq>> cqs;
  std::map<uint32_t, std::unique_ptr<DevxQp>> qps;
  std::map<uint32_t, std::unique_ptr<DevxSrq>> srqs;
  std::atomic<bool> stop{false};
  std::thread thread;
};

namespace {

std::mutex g_engines_mutex;  // creating a context's engine

// The requester's completion of `wqe` (or its error), on the send CQ.
void CompleteSend(DevxQp& qp, const mlx5::ParsedSendWqe& wqe, uint32_t status, uint32_t opcode,
                  uint32_t byte_len, uint32_t vendor_err) {
  dp::Completion c{};
  c.wr_id = mlx5::RequesterWrId(wqe.opcode, wqe.wqe_index);
  c.status = status;
  c.opcode = opcode;
  c.byte_len = byte_len;
  c.vendor_err = vendor_err;
  c.qp_num = qp.qpn;
  dp::Complete(qp.send_ring, -1, c);
}

// A WQE failed: the QP enters the error state (published by the daemon)
// before its error completion is written, as hardware does - a program that
// polls the error CQE and then queries the QP finds ERR.
void EnterError(Context* ctx, DevxQp& qp) {
  ctx->peers->SetQpError(qp.qpn);
}

// After the error completion: posted receives complete with WR_FLUSH_ERR;
// send WQEs are flushed as they come.
void FlushAfterError(DevxQp& qp) {
  qp.has_pending = false;
  if (qp.shadow_rq.valid()) dp::FlushRecvQueue(qp.shadow_rq, qp.recv_ring, -1, qp.qpn);
}

// Copies new receive WQEs into the shadow receive queue.
bool ServiceReceiveQueue(DevxQp& qp) {
  if (qp.rq_wqes == 0 || !qp.shadow_rq.valid()) return false;
  const auto producer = static_cast<uint16_t>(LoadBe32(qp.dbr + mlx5::kRecvDbrWord));
  bool busy = false;
  while (static_cast<uint16_t>(producer - qp.rq_head) != 0) {
    const uint8_t* wqe = qp.rq + (qp.rq_head & (qp.rq_wqes - 1)) * qp.rq_stride;
    dp::RecvSge sge[dp::kMaxSendSge];
    uint32_t num = 0;
    // More segments than the shadow queue holds: the rest are not scattered
    // to (a message that needs them ends in a length error).
    (void)mlx5::ParseRecvWqe(wqe, qp.rq_stride, sge, qp.shadow_rq.max_sge(), &num);
    if (!qp.shadow_rq.Post(qp.rq_head, sge, num)) break;  // full: the peers have not caught up
    ++qp.rq_head;
    busy = true;
  }
  return busy;
}

// Takes the WQEs posted on an SRQ's mlx5 list, in list order, into the
// verbs SRQ (under its producer lock: ibv_post_srq_recv may not be mixed
// with the mlx5 view, but the lock keeps the ring sound if it is).
bool ServiceSrq(DevxSrq& srq) {
  const auto producer = static_cast<uint16_t>(LoadBe32(srq.dbr));
  bool busy = false;
  std::lock_guard lock(srq.verbs_srq->post_lock);
  while (static_cast<uint16_t>(producer - srq.consumed) != 0) {
    const uint8_t* wqe = srq.buf + size_t{srq.next & (srq.wqe_cnt - 1u)} * srq.stride;
    dp::RecvSge sge[dp::kMaxSendSge];
    uint32_t num = 0;
    (void)mlx5::ParseRecvWqe(wqe + mlx5::kSegBytes, srq.stride - mlx5::kSegBytes, sge,
                             srq.verbs_srq->rq.max_sge(), &num);
    if (!srq.verbs_srq->rq.Post(srq.next, sge, num)) break;  // full: the peers have not caught up
    uint16_t next_index;
    memcpy(&next_index, wqe + offsetof(mlx5_wqe_srq_next_seg, next_wqe_index), sizeof(next_index));
    srq.next = be16toh(next_index);
    ++srq.consumed;
    busy = true;
  }
  return busy;
}

// How a QP of `type` names the destination of its WQEs.
mlx5::WqeAddress AddressOf(uint32_t type) {
  if (type == IBV_QPT_UD) return mlx5::WqeAddress::kDatagram;
  if (type == verbs::kQptDcIni) return mlx5::WqeAddress::kDc;
  return mlx5::WqeAddress::kConnected;
}

// A UD or DCI WQE's source GID (the index its address vector names) and
// where its path goes: the DEVX data path runs on one host, so a WQE for
// another host is one the device cannot execute.
mlx5::WqeError AddressDatagram(Context* ctx, mlx5::ParsedSendWqe* wqe) {
  dp::SendWr& wr = wqe->wr;
  if (wqe->sgid_index >= ctx->gids.count) return mlx5::WqeError::kBadAddress;
  memcpy(wr.sgid, ctx->gids.gids[wqe->sgid_index].raw, sizeof(wr.sgid));
  ibv_ah_attr path{};
  path.is_global = 1;
  memcpy(path.grh.dgid.raw, wr.dgid, sizeof(wr.dgid));
  if (PathLeavesHost(ctx->gids, path)) return mlx5::WqeError::kOffHost;
  return mlx5::WqeError::kNone;
}

// A verbs DCI created with streams, driven through its mlx5 view: its send
// queue keeps the streams' errors (docs/devx.md, "DCI streams") for its
// mlx5 WQEs as for its verbs WRs. nullptr for any other QP.
Qp* StreamedDci(const DevxQp& qp) {
  Qp* q = qp.verbs_qp;
  if (q == nullptr || q->type != verbs::kQptDcIni) return nullptr;
  std::lock_guard lock(q->sq_lock);
  return q->sq.HasStreams() ? q : nullptr;
}

// Executes the pending WQE once. Returns false when it must wait (RNR, no
// response yet), true when it finished (with or without an error).
bool RunPending(Context* ctx, DevxQp& qp) {
  mlx5::ParsedSendWqe& wqe = qp.pending;
  if (wqe.info->nop) {
    if (wqe.wr.send_flags & IBV_SEND_SIGNALED)
      CompleteSend(qp, wqe, IBV_WC_SUCCESS, IBV_WC_SEND, 0, 0);
    return true;
  }
  dp::SendWr& wr = wqe.wr;
  Qp* const streamed = StreamedDci(qp);
  if (streamed != nullptr) {
    std::lock_guard lock(streamed->sq_lock);
    if (streamed->sq.StreamInError(wr.dci_stream)) {
      CompleteSend(qp, wqe, IBV_WC_WR_FLUSH_ERR, dp::WrOpcode(wr.opcode).send_wc, 0,
                   dp::kVendorFlushed);
      return true;
    }
  }
  // The QP's type as the device published it (RC, UC or UD); a UD
  // message is at most the port's MTU.
  const uint32_t type = qp.entry->type.load(std::memory_order_relaxed);
  const dp::LocalQp local{qp.qpn,
                          type,
                          qp.entry->pdn.load(std::memory_order_relaxed),
                          qp.entry->dest_qpn.load(std::memory_order_relaxed),
                          qp.entry->qkey.load(std::memory_order_relaxed),
                          type == IBV_QPT_UD ? 128u << ctx->active_mtu : 4096u,
                          static_cast<uint8_t>(qp.entry->sl.load(std::memory_order_relaxed)),
                          &qp.peer_cache};
  dp::Outcome out = dp::Execute(*ctx->peers, local, wr);
  const auto attributes = [&qp] {
    // A verbs QP driven through DEVX: its own attributes, as the device
    // published them.
    if (qp.verbs_qp != nullptr) return RequesterOf(qp.verbs_qp);
    dp::RequesterAttributes r;
    r.timeout = qp.timeout;
    r.retry_cnt = qp.retry_cnt;
    r.rnr_retry = qp.rnr_retry;
    return r;
  };
  if (dp::Judge(*ctx->peers, attributes, &out, &wr) != dp::CompleterVerdict::kComplete) {
    return false;
  }
  dp::Completion& c = out.completion;
  const bool failed = c.status != IBV_WC_SUCCESS;
  if (failed && streamed != nullptr) {
    std::lock_guard lock(streamed->sq_lock);
    if (streamed->sq.ContainInStream(wr.dci_stream)) {
      // The DCI stays in RTS: only the WQE's stream is in error.
      CompleteSend(qp, wqe, c.status, dp::WrOpcode(wr.opcode).send_wc, c.byte_len, c.vendor_err);
      return true;
    }
  }
  if (failed) {
    Log("devx: QP 0x%x: WQE %u (%s) completed with %s: the QP moves to ERR", qp.qpn, wqe.wqe_index,
        wqe.info->name, ibv_wc_status_str(static_cast<ibv_wc_status>(c.status)));
    EnterError(ctx, qp);
  }
  if (failed || (wr.send_flags & IBV_SEND_SIGNALED)) {
    CompleteSend(qp, wqe, c.status,
                 failed ? static_cast<uint32_t>(dp::WrOpcode(wr.opcode).send_wc) : c.opcode,
                 c.byte_len, c.vendor_err);
  }
  if (out.rendezvous.pending) dp::FinishRendezvous(*ctx->peers, local, out.rendezvous);
  if (failed) FlushAfterError(qp);
  return true;
}

// Executes (RTS) or flushes (ERR) new send WQEs.
bool ServiceSendQueue(Context* ctx, DevxQp& qp, uint32_t state) {
  if (qp.sq_bbs == 0) return false;
  const bool flushing = state == IBV_QPS_ERR;
  if (!flushing && state != IBV_QPS_RTS) return false;
  const auto producer = static_cast<uint16_t>(LoadBe32(qp.dbr + mlx5::kSendDbrWord));
  bool busy = false;
  while (static_cast<uint16_t>(producer - qp.sq_head) != 0) {
    if (!qp.has_pending) {
      const uint32_t type = qp.entry->type.load(std::memory_order_relaxed);
      const mlx5::WqeAddress address = AddressOf(type);
      mlx5::WqeError error =
          mlx5::ParseSendWqe(qp.sq, qp.sq_bbs, qp.sq_head, qp.qpn, &qp.pending, address);
      if (error == mlx5::WqeError::kNone &&
          !dp::WrOpcodeAllowed(dp::WrOpcode(qp.pending.wr.opcode), type)) {
        // An operation the QP's type does not have (a READ on UC, a DMA
        // MMO on anything but RC and a DCI): as an opcode the device lacks.
        error = mlx5::WqeError::kUnknownOpcode;
      }
      if (error == mlx5::WqeError::kNone && address != mlx5::WqeAddress::kConnected &&
          !qp.pending.info->dma_mmo) {
        error = AddressDatagram(ctx, &qp.pending);
      }
      if (flushing) {
        CompleteSend(qp, qp.pending, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND, 0, dp::kVendorFlushed);
        qp.sq_head += qp.pending.basic_blocks;
        busy = true;
        continue;
      }
      if (error != mlx5::WqeError::kNone) {
        Log("devx: QP 0x%x: send WQE at basic block %u: %s: LOCAL_QP_OP_ERR, the QP moves to ERR",
            qp.qpn, qp.sq_head, mlx5::WqeErrorName(error));
        EnterError(ctx, qp);
        CompleteSend(qp, qp.pending, IBV_WC_LOC_QP_OP_ERR, IBV_WC_SEND, 0, 0);
        qp.sq_head += qp.pending.basic_blocks;
        FlushAfterError(qp);
        return true;  // flushed from the next pass on
      }
      qp.has_pending = true;
    } else if (flushing) {
      CompleteSend(qp, qp.pending, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND, 0, dp::kVendorFlushed);
      qp.has_pending = false;
      qp.sq_head += qp.pending.basic_blocks;
      busy = true;
      continue;
    }
    if (qp.pending.wr.next_attempt_ns > dp::NowNs()) return busy;
    const uint32_t blocks = qp.pending.basic_blocks;
    if (!RunPending(ctx, qp)) return busy;
    busy = true;
    if (!qp.has_pending) {  // FlushAfterError: the rest is flushed from the next pass on
      qp.sq_head += blocks;
      return busy;
    }
    qp.has_pending = false;
    qp.sq_head += blocks;
  }
  return busy;
}

bool ServiceQp(Context* ctx, DevxQp& qp) {
  const uint32_t state = qp.entry->state.load(std::memory_order_acquire);
  if (state == dp::kQpGone) return false;
  if (state == IBV_QPS_RESET) {
    if (qp.last_state != IBV_QPS_RESET) {
      // 2RST: the counters start again at 0 and posted WQEs are forgotten.
      qp.rq_head = qp.sq_head = 0;
      qp.has_pending = false;
      dp::ClaimedRecv dropped;
      while (qp.shadow_rq.valid() && qp.shadow_rq.Claim(&dropped)) {
      }
    }
    qp.last_state = state;
    return false;
  }
  qp.last_state = state;
  bool busy = ServiceReceiveQueue(qp);
  if (state == IBV_QPS_ERR && qp.shadow_rq.valid() && qp.shadow_rq.Count() != 0) {
    dp::FlushRecvQueue(qp.shadow_rq, qp.recv_ring, -1, qp.qpn);
    busy = true;
  }
  return ServiceSendQueue(ctx, qp, state) || busy;
}

// An arm rung at the CQ's doorbell register: taken (the register cleared,
// so that the same arm rung again is seen again), then, as a ConnectX
// does, an event at once when a CQE at or past the arm's consumer index is
// there or on its way (completions not yet written as CQEs), else at the
// next completion of the kind asked for (the verbs CQ's arm, which its
// producers take). A solicited-only arm with CQEs already there waits for
// the next solicited or error completion.
bool ServiceCqArm(DevxCq& cq) {
  if (cq.arm_doorbell == nullptr) return false;
  const uint64_t rung = __atomic_exchange_n(cq.arm_doorbell, 0, __ATOMIC_ACQ_REL);
  if (rung == 0) return false;
  if (cq.event_fd < 0) return true;  // no completion channel: no event to raise
  const uint32_t word = static_cast<uint32_t>(be64toh(rung) >> 32);
  const bool solicited_only = (word & MLX5_CQ_DB_REQ_NOT_SOL) != 0;
  const uint32_t ci = word & mlx5::kCqConsumerMask;
  const bool pending = ((cq.producer - ci) & mlx5::kCqConsumerMask) != 0 || cq.ring.Depth() != 0;
  cq.ring.Arm(solicited_only);
  if (pending && !solicited_only && cq.ring.Disarm()) {
    uint64_t one = 1;
    ssize_t ignored = write(cq.event_fd, &one, sizeof(one));
    (void)ignored;
  }
  return true;
}

// Turns shadow completions into CQEs, as far as the consumer index allows.
bool ServiceCq(DevxCq& cq) {
  bool busy = ServiceCqArm(cq);
  dp::Completion c;
  while (cq.ring.Peek(&c)) {
    // Full: up to the consumer index, unless the CQ ignores overruns (its
    // consumer keeps up without writing the index, as UCX's release builds
    // do; a ConnectX then writes on).
    const uint32_t consumer = LoadBe32(cq.dbr) & mlx5::kCqConsumerMask;
    if (!cq.ignore_overrun && ((cq.producer - consumer) & mlx5::kCqConsumerMask) >= cq.ncqe) break;
    uint8_t* slot = cq.buf + (cq.producer & (cq.ncqe - 1)) * cq.stride;
    uint8_t* cqe =
        slot + (cq.stride - mlx5::kCqeBytes);  // a 128-byte CQE ends with the 64-byte one
    // A ConnectX writes a CQE in one 64-byte write; here it takes several
    // stores, and a poller reads it while they land. So: first the
    // ownership byte says "not yet" both ways a poller may ask -
    // MLX5_CQE_INVALID and the previous pass's owner bit (a zeroed
    // buffer's op_own of 0 carries the new owner bit and would read as a
    // valid REQ CQE as soon as any other byte is written) - then the CQE
    // built aside, then the ownership byte with its opcode and owner bit.
    const auto owner = static_cast<uint8_t>((cq.producer >> cq.log_ncqe) & 1);
    __atomic_store_n(cqe + mlx5::kCqeBytes - 1,
                     static_cast<uint8_t>((MLX5_CQE_INVALID << 4) | (owner ^ 1)), __ATOMIC_RELAXED);
    std::atomic_thread_fence(std::memory_order_release);
    alignas(64) uint8_t built[mlx5::kCqeBytes];
    const uint8_t op_own = mlx5::BuildCqe(c, c.qp_num, built);
    memcpy(cqe, built, mlx5::kCqeBytes - 1);
    std::atomic_thread_fence(std::memory_order_release);
    __atomic_store_n(cqe + mlx5::kCqeBytes - 1, static_cast<uint8_t>(op_own | owner),
                     __ATOMIC_RELEASE);
    ++cq.producer;
    cq.ring.Pop();
    busy = true;
  }
  return busy;
}

void EngineLoop(DevxEngine* engine) {
  uint64_t idle_since = 0;
  useconds_t nap = kFirstNapUs;
  while (!engine->stop.load(std::memory_order_acquire)) {
    bool busy = false;
    {
      std::lock_guard lock(engine->mutex);
      for (auto& [srqn, srq] : engine->srqs) busy = ServiceSrq(*srq) || busy;
      for (auto& [qpn, qp] : engine->qps) busy = ServiceQp(engine->ctx, *qp) || busy;
      for (auto& [cqn, cq] : engine->cqs) busy = ServiceCq(*cq) || busy;
    }
    if (busy) {
      idle_since = 0;
      nap = kFirstNapUs;
      continue;
    }
    const uint64_t now = dp::NowNs();
    if (idle_since == 0) idle_since = now;
    if (now - idle_since < kSpinNs) {
      sched_yield();
      continue;
    }
    usleep(nap);
    nap = std::min<useconds_t>(nap * 2, kMaxNapUs);
  }
}

DevxEngine* EngineOf(Context* ctx) {
  std::lock_guard lock(g_engines_mutex);
  if (ctx->devx_engine == nullptr) {
    auto* engine = new DevxEngine;
    engine->ctx = ctx;
    engine->pid = getpid();
    engine->thread = std::thread(EngineLoop, engine);
    ctx->devx_engine = engine;
  }
  return ctx->devx_engine;
}

int QueueFiles(Context* ctx, protocol::DevxQueueKind kind, uint32_t number,
               protocol::DevxQueueFilesReply* rep, std::vector<int>* fds) {
  const protocol::DevxQueueFilesRequest req{static_cast<uint32_t>(kind), number};
  const int err = ctx->channel.Call(protocol::Op::kDevxQueueFiles, &req, sizeof(req), rep,
                                    sizeof(*rep), nullptr, 0, nullptr, fds);
  if (err != 0) {
    for (int fd : *fds) close(fd);
    fds->clear();
  }
  return err;
}

bool IsPowerOfTwo(uint32_t v) {
  return v != 0 && (v & (v - 1)) == 0;
}

}  // namespace

void StopDevxQueues(Context* ctx) {
  DevxEngine* engine = ctx->devx_engine;
  if (engine == nullptr) return;
  ctx->devx_engine = nullptr;
  if (engine->pid != getpid()) return;  // a fork child: the thread is the parent's; leave it
  engine->stop.store(true, std::memory_order_release);
  if (engine->thread.joinable()) engine->thread.join();
  delete engine;
}

void ForgetDvQueue(Context* ctx, DvQueueKind kind, uint32_t number) {
  DevxEngine* engine = ctx->devx_engine;
  if (engine == nullptr) return;
  std::lock_guard lock(engine->mutex);
  switch (kind) {
    case DvQueueKind::kQp:
      engine->qps.erase(number);
      break;
    case DvQueueKind::kCq:
      engine->cqs.erase(number);
      break;
    case DvQueueKind::kSrq:
      engine->srqs.erase(number);
      break;
  }
}

}  // namespace softverbs::provider

using namespace softverbs::provider;
using softverbs::Log;

SV_EXPORT int softverbs_devx_attach_cq(ibv_context* context, uint32_t cqn,
                                       const softverbs_devx_cq* desc) {
  if (context == nullptr || desc == nullptr || desc->buf == nullptr || desc->dbr == nullptr ||
      !IsPowerOfTwo(desc->ncqe) || (desc->cqe_size != 64 && desc->cqe_size != 128)) {
    return EINVAL;
  }
  Context* ctx = Context::From(context);
  auto cq = std::make_unique<DevxCq>();
  softverbs::protocol::DevxQueueFilesReply rep{};
  std::vector<int> fds;
  if (int err = QueueFiles(ctx, softverbs::protocol::DevxQueueKind::kCq, cqn, &rep, &fds)) {
    return err;
  }
  const int map_err = fds.size() == 1 ? cq->ring_mapping.Map(fds[0]) : EPROTO;
  for (int fd : fds) close(fd);
  if (map_err) return map_err;
  cq->ring.Attach(cq->ring_mapping.base());
  cq->cqn = cqn;
  cq->buf = static_cast<uint8_t*>(desc->buf);
  cq->ncqe = desc->ncqe;
  cq->log_ncqe = static_cast<uint32_t>(__builtin_ctz(desc->ncqe));
  cq->stride = desc->cqe_size;
  cq->dbr = desc->dbr;
  DevxEngine* engine = EngineOf(ctx);
  std::lock_guard lock(engine->mutex);
  engine->cqs[cqn] = std::move(cq);
  return 0;
}

SV_EXPORT int softverbs_devx_attach_qp(ibv_context* context, uint32_t qpn,
                                       const softverbs_devx_qp* desc) {
  if (context == nullptr || desc == nullptr || desc->dbr == nullptr ||
      (desc->rq_wqe_cnt != 0 && (!IsPowerOfTwo(desc->rq_wqe_cnt) || desc->rq_wqe_size < 16)) ||
      (desc->sq_wqebb_cnt != 0 && !IsPowerOfTwo(desc->sq_wqebb_cnt))) {
    return EINVAL;
  }
  Context* ctx = Context::From(context);
  auto qp = std::make_unique<DevxQp>();
  softverbs::protocol::DevxQueueFilesReply rep{};
  std::vector<int> fds;
  if (int err = QueueFiles(ctx, softverbs::protocol::DevxQueueKind::kQp, qpn, &rep, &fds)) {
    return err;
  }
  int err = fds.size() == 3 ? 0 : EPROTO;
  if (!err) err = qp->rq_mapping.Map(fds[0]);
  if (!err) err = qp->send_cq_mapping.Map(fds[1]);
  if (!err) err = qp->recv_cq_mapping.Map(fds[2]);
  for (int fd : fds) close(fd);
  if (err) return err;
  qp->shadow_rq.Attach(qp->rq_mapping.base());
  qp->send_ring.Attach(qp->send_cq_mapping.base());
  qp->recv_ring.Attach(qp->recv_cq_mapping.base());
  qp->qpn = qpn;
  qp->rq = static_cast<uint8_t*>(desc->rq_buf);
  qp->rq_wqes = desc->rq_wqe_cnt;
  qp->rq_stride = desc->rq_wqe_size;
  qp->sq = static_cast<uint8_t*>(desc->sq_buf);
  qp->sq_bbs = desc->sq_wqebb_cnt;
  qp->dbr = desc->dbr;
  qp->entry = ctx->table.QpSlot(qpn);
  DevxEngine* engine = EngineOf(ctx);
  std::lock_guard lock(engine->mutex);
  engine->qps[qpn] = std::move(qp);
  return 0;
}

SV_EXPORT void softverbs_devx_set_qp_timers(ibv_context* context, uint32_t qpn, uint8_t timeout,
                                            uint8_t retry_cnt, uint8_t rnr_retry) {
  if (context == nullptr) return;
  Context* ctx = Context::From(context);
  if (ctx->devx_engine == nullptr) return;
  std::lock_guard lock(ctx->devx_engine->mutex);
  auto it = ctx->devx_engine->qps.find(qpn);
  if (it == ctx->devx_engine->qps.end()) return;
  it->second->timeout = timeout;
  it->second->retry_cnt = retry_cnt;
  it->second->rnr_retry = rnr_retry;
}

SV_EXPORT void softverbs_devx_detach(ibv_context* context, uint32_t kind, uint32_t number) {
  if (context == nullptr) return;
  Context* ctx = Context::From(context);
  if (ctx->devx_engine == nullptr) return;
  std::lock_guard lock(ctx->devx_engine->mutex);
  if (kind == static_cast<uint32_t>(softverbs::protocol::DevxQueueKind::kCq)) {
    ctx->devx_engine->cqs.erase(number);
  } else {
    ctx->devx_engine->qps.erase(number);
  }
}

namespace {

// A page that stands for the UAR of verbs queues given mlx5 buffers:
// doorbell writes land there and are not needed (the engine reads the
// doorbell records).
void* DummyUarPage() {
  static void* page = [] {
    void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }();
  return page;
}

Cq* ProviderCq(ibv_cq* cq) {
  return cq ? FromPublic<Cq>(reinterpret_cast<ibv_cq_ex*>(cq)) : nullptr;
}

}  // namespace

SV_EXPORT int softverbs_dv_init_qp(ibv_qp* ibqp, softverbs_dv_queue* out) {
  if (ibqp == nullptr || out == nullptr) return EINVAL;
  Qp* q = FromPublic<Qp>(reinterpret_cast<ibv_qp_ex*>(ibqp));
  if (q->type != IBV_QPT_RC && q->type != IBV_QPT_UC && q->type != IBV_QPT_UD &&
      q->type != softverbs::verbs::kQptDcIni) {
    return EOPNOTSUPP;
  }
  Context* ctx = Context::From(ibqp->context);
  Cq* send_cq = ProviderCq(ibqp->send_cq);
  Cq* recv_cq = ProviderCq(ibqp->recv_cq);
  if (send_cq == nullptr || recv_cq == nullptr || q->entry == nullptr) return EINVAL;
  DevxEngine* engine = EngineOf(ctx);
  std::lock_guard lock(engine->mutex);
  auto it = engine->qps.find(ibqp->qp_num);
  if (it == engine->qps.end()) {
    auto qp = std::make_unique<DevxQp>();
    qp->qpn = ibqp->qp_num;
    qp->verbs_qp = q;
    qp->entry = q->entry;
    const bool own_rq = q->rq.valid();
    qp->rq_wqes = own_rq ? q->rq.max_wr() : 0;
    qp->rq_stride = 16 * dp::RoundUpPow2(std::max<uint32_t>(1, own_rq ? q->rq.max_sge() : 1));
    // Up to four basic blocks per send WQE (a WQE with several segments).
    qp->sq_bbs = dp::RoundUpPow2(std::max<uint32_t>(1, q->cap.max_send_wr) * 4);
    const size_t rq_bytes = size_t{qp->rq_wqes} * qp->rq_stride;
    const size_t sq_bytes = size_t{qp->sq_bbs} * mlx5::kSendWqeBb;
    if (!qp->owned.Allocate(rq_bytes + sq_bytes + 64)) return ENOMEM;
    qp->rq = qp->owned.at(0);
    qp->sq = qp->owned.at(rq_bytes);
    qp->dbr = reinterpret_cast<volatile uint32_t*>(qp->owned.at(rq_bytes + sq_bytes));
    if (own_rq) qp->shadow_rq.Attach(q->rq_mapping.base());
    qp->send_ring.Attach(send_cq->ring_mapping.base());
    qp->recv_ring.Attach(recv_cq->ring_mapping.base());
    it = engine->qps.emplace(ibqp->qp_num, std::move(qp)).first;
  }
  const DevxQp& qp = *it->second;
  *out = {};
  out->sq_buf = qp.sq;
  out->sq_wqebb_cnt = qp.sq_bbs;
  out->rq_buf = qp.rq;
  out->rq_wqe_cnt = qp.rq_wqes;
  out->rq_stride = qp.rq_stride;
  out->dbr = qp.dbr;
  out->uar = DummyUarPage();
  return 0;
}

SV_EXPORT int softverbs_dv_init_cq(ibv_cq* ibcq, softverbs_dv_queue* out) {
  if (ibcq == nullptr || out == nullptr) return EINVAL;
  Cq* c = ProviderCq(ibcq);
  Context* ctx = Context::From(ibcq->context);
  DevxEngine* engine = EngineOf(ctx);
  std::lock_guard lock(engine->mutex);
  auto it = engine->cqs.find(c->cqn);
  if (it == engine->cqs.end()) {
    auto cq = std::make_unique<DevxCq>();
    cq->cqn = c->cqn;
    cq->ncqe = dp::RoundUpPow2(static_cast<uint32_t>(ibcq->cqe) + 1);
    cq->log_ncqe = static_cast<uint32_t>(__builtin_ctz(cq->ncqe));
    cq->stride = c->mlx5_cqe_size;
    const size_t cqe_bytes = size_t{cq->ncqe} * cq->stride;
    // The CQEs, the doorbell record, and a page of its own for the
    // doorbell register (cq_uar) where it is armed.
    const size_t uar_offset = (cqe_bytes + 64 + 4095) & ~size_t{4095};
    if (!cq->owned.Allocate(uar_offset + 4096)) return ENOMEM;
    cq->buf = cq->owned.at(0);
    // As libmlx5 does: every CQE starts invalid, owned by software (op_own
    // is the last byte of the 64-byte CQE, which ends a 128-byte one).
    for (uint32_t i = 0; i < cq->ncqe; ++i) {
      cq->buf[size_t{i} * cq->stride + cq->stride - 1] = MLX5_CQE_INVALID << 4;
    }
    cq->dbr = reinterpret_cast<volatile uint32_t*>(cq->owned.at(cqe_bytes));
    cq->ignore_overrun = c->ignore_overrun;
    cq->event_fd = c->event_fd;
    cq->arm_doorbell = reinterpret_cast<uint64_t*>(cq->owned.at(uar_offset + MLX5_CQ_DOORBELL));
    cq->ring.Attach(c->ring_mapping.base());
    it = engine->cqs.emplace(c->cqn, std::move(cq)).first;
  }
  const DevxCq& cq = *it->second;
  *out = {};
  out->cq_buf = cq.buf;
  out->cqe_cnt = cq.ncqe;
  out->cqe_size = cq.stride;
  out->dbr = cq.dbr;
  out->uar = cq.arm_doorbell ? reinterpret_cast<uint8_t*>(cq.arm_doorbell) - MLX5_CQ_DOORBELL
                             : DummyUarPage();
  return 0;
}

SV_EXPORT int softverbs_dv_init_srq(ibv_srq* ibsrq, softverbs_dv_queue* out) {
  if (ibsrq == nullptr || out == nullptr) return EINVAL;
  Srq* s = FromPublic<Srq>(ibsrq);
  if (s->type != IBV_SRQT_BASIC || !s->rq.valid()) return EOPNOTSUPP;
  Context* ctx = Context::From(ibsrq->context);
  DevxEngine* engine = EngineOf(ctx);
  std::lock_guard lock(engine->mutex);
  auto it = engine->srqs.find(s->srqn);
  if (it == engine->srqs.end()) {
    auto srq = std::make_unique<DevxSrq>();
    srq->srqn = s->srqn;
    srq->verbs_srq = s;
    // libmlx5's layout: a next segment and the data segments, 32 bytes at
    // least, a power of two; as many WQEs as the SRQ holds, and the list
    // linked in index order, its head 0 and its tail the last WQE.
    srq->stride = std::max<uint32_t>(
        32, dp::RoundUpPow2(mlx5::kSegBytes * (1 + std::max<uint32_t>(1, s->rq.max_sge()))));
    srq->wqe_cnt = dp::RoundUpPow2(std::max<uint32_t>(2, s->rq.max_wr()));
    const size_t bytes = size_t{srq->wqe_cnt} * srq->stride;
    if (!srq->owned.Allocate(bytes + 64)) return ENOMEM;
    srq->buf = srq->owned.at(0);
    for (uint32_t i = 0; i < srq->wqe_cnt; ++i) {
      const uint16_t next = htobe16(static_cast<uint16_t>((i + 1) & (srq->wqe_cnt - 1)));
      memcpy(srq->buf + size_t{i} * srq->stride + offsetof(mlx5_wqe_srq_next_seg, next_wqe_index),
             &next, sizeof(next));
    }
    srq->dbr = reinterpret_cast<volatile uint32_t*>(srq->owned.at(bytes));
    it = engine->srqs.emplace(s->srqn, std::move(srq)).first;
  }
  const DevxSrq& srq = *it->second;
  *out = {};
  out->rq_buf = srq.buf;
  out->rq_wqe_cnt = srq.wqe_cnt;
  out->rq_stride = srq.stride;
  out->dbr = srq.dbr;
  return 0;
}

SV_EXPORT mlx5_wqe_av* softverbs_dv_ah_av(ibv_ah* ah) {
  return ah ? &FromPublic<Ah>(ah)->mlx5_av : nullptr;
}
