// rsockets' progress: completions (the peer's messages and our sends'
// returns), credits (SGL messages), and the one place a caller sleeps: a
// poll(2) on the completion channel and the id's event channel (Progress).
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <time.h>

#include <algorithm>

#include "abi/rdmacm/rsocket_internal.h"

namespace softverbs::rdmacm::rs {
namespace {

constexpr int kPollBatch = 32;
constexpr int64_t kSpinNs = 20'000;  // busy polling before a sleep, as rdma-core's polling_time
constexpr int kSleepCapMs = 1000;    // a sleep re-checks at least this often
constexpr unsigned kAckEventsEvery = 64;  // completion events acknowledged in batches

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
}

uint64_t Swap64(uint64_t v, bool swap) {
  return swap ? __builtin_bswap64(v) : v;
}
uint32_t Swap32(uint32_t v, bool swap) {
  return swap ? __builtin_bswap32(v) : v;
}

// When to renew the peer's credits: half the receive buffer is free again,
// or it has used half its message credits; and a control slot is free.
bool ShouldGiveCredits(const Rsocket& rs) {
  return rs.phase == Phase::kConnected && ControlSlotFree(rs) &&
         (rs.rbuf_avail >= rs.rbuf_size / 2 ||
          static_cast<int16_t>(rs.rseq_no - rs.rseq_comp) >= 0);
}

// An SGL message: the peer may send until its count reaches rseq_no +
// rq_size; with a free half of the receive buffer, it is also written into
// the peer's target SGL.
void GiveCredits(Rsocket& rs) {
  rs.ctrl_seqno++;
  rs.rseq_comp = static_cast<uint16_t>(rs.rseq_no + rs.rq_size / 2);
  const uint32_t imm = MakeImm(ImmOp::kSgl, static_cast<uint32_t>(rs.rseq_no) + rs.rq_size);
  const uint32_t half = rs.rbuf_size / 2;
  if (rs.rbuf_avail < half) {
    PostSend(rs, IBV_WR_RDMA_WRITE_WITH_IMM, nullptr, 0, imm, 0, rs.remote_sgl.addr,
             rs.remote_sgl.key);
    return;
  }
  RsSge entry;
  entry.addr = Swap64(reinterpret_cast<uintptr_t>(rs.rbuf + rs.rbuf_free_offset), rs.swap_sgl);
  entry.key = Swap32(rs.rmr->rkey, rs.swap_sgl);
  entry.length = Swap32(half, rs.swap_sgl);
  ibv_sge sge{};
  int flags = 0;
  if (rs.sq_inline >= sizeof(entry)) {
    sge.addr = reinterpret_cast<uintptr_t>(&entry);
    flags = IBV_SEND_INLINE;
  } else {  // the control slot of this message
    uint8_t* slot = rs.sbuf + rs.sbuf_size + sizeof(RsSge) * (rs.ctrl_seqno & (kControlSlots - 1));
    memcpy(slot, &entry, sizeof(entry));
    sge.addr = reinterpret_cast<uintptr_t>(slot);
    sge.lkey = rs.smr->lkey;
  }
  sge.length = sizeof(entry);
  PostSend(rs, IBV_WR_RDMA_WRITE_WITH_IMM, &sge, 1, imm, flags,
           rs.remote_sgl.addr + rs.remote_sge * sizeof(RsSge), rs.remote_sgl.key);
  rs.rbuf_avail -= half;
  rs.rbuf_free_offset += half;
  if (rs.rbuf_free_offset >= rs.rbuf_size) rs.rbuf_free_offset = 0;
  if (++rs.remote_sge == rs.remote_sgl.length) rs.remote_sge = 0;
}

void UpdateCredits(Rsocket& rs) {
  if (ShouldGiveCredits(rs)) GiveCredits(rs);
}

void OnMessage(Rsocket& rs, uint32_t imm) {
  switch (ImmOpOf(imm)) {
    case ImmOp::kSgl:
      rs.sseq_comp = static_cast<uint16_t>(ImmArgOf(imm));
      break;
    case ImmOp::kIomapSgl:  // the entry is in our target iomap already
      break;
    case ImmOp::kCtrl:
      if (ImmArgOf(imm) == static_cast<uint32_t>(ControlMessage::kDisconnect)) {
        rs.phase = Phase::kDisconnected;
      } else if (ImmArgOf(imm) == static_cast<uint32_t>(ControlMessage::kShutdown)) {
        if (rs.writable) {
          rs.readable = false;
        } else {
          rs.phase = Phase::kDisconnected;
        }
      }
      break;
    case ImmOp::kWrite:  // never sent
      break;
    default:  // DATA (and reserved operations, as data, as rdma-core)
      rs.rmsg[rs.rmsg_tail] = ImmArgOf(imm);
      if (++rs.rmsg_tail == rs.rmsg.size()) rs.rmsg_tail = 0;
      break;
  }
}

void OnSendDone(Rsocket& rs, uint32_t tag, ibv_wc_status status) {
  switch (ImmOpOf(tag)) {
    case ImmOp::kSgl:
      rs.ctrl_max_seqno++;
      break;
    case ImmOp::kCtrl:
      rs.ctrl_max_seqno++;
      if (ImmArgOf(tag) == static_cast<uint32_t>(ControlMessage::kDisconnect)) {
        rs.phase = Phase::kDisconnected;
      }
      break;
    case ImmOp::kIomapSgl:
      rs.sqe_avail++;
      rs.sbuf_avail += sizeof(RsIomap);
      break;
    default:  // DATA, WRITE
      rs.sqe_avail++;
      rs.sbuf_avail += ImmArgOf(tag);
      break;
  }
  if (status != IBV_WC_SUCCESS && rs.phase == Phase::kConnected) {
    rs.phase = Phase::kError;
    rs.error = EIO;
  }
}

// Takes every completion; reposts the receives that were consumed.
void PollCompletions(Rsocket& rs) {
  if (!rs.cq) return;
  ibv_wc wc[kPollBatch];
  int consumed = 0;
  int n;
  while ((n = ibv_poll_cq(rs.cq, kPollBatch, wc)) > 0) {
    for (int i = 0; i < n; ++i) {
      if (wc[i].wr_id & kRecvWrId) {
        if (wc[i].status != IBV_WC_SUCCESS) continue;
        consumed++;
        if (wc[i].wc_flags & IBV_WC_WITH_IMM) OnMessage(rs, be32toh(wc[i].imm_data));
      } else {
        OnSendDone(rs, static_cast<uint32_t>(wc[i].wr_id), wc[i].status);
      }
    }
  }
  if (rs.phase != Phase::kConnected) return;
  for (; consumed > 0; --consumed) {
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    wr.wr_id = kRecvWrId;
    if (int err = ibv_post_recv(rs.id->qp, &wr, &bad)) {
      rs.phase = Phase::kError;
      rs.error = err;
      return;
    }
  }
}

}  // namespace

void TakeCmEvent(Rsocket& rs) {
  rdma_cm_event* e = nullptr;
  if (rdma_get_cm_event(rs.id->channel, &e)) return;
  const rdma_cm_event_type type = e->event;
  rdma_ack_cm_event(e);
  if (type == RDMA_CM_EVENT_DISCONNECTED || type == RDMA_CM_EVENT_DEVICE_REMOVAL) {
    if (rs.phase == Phase::kConnected) rs.phase = Phase::kDisconnected;
  }
}

bool CanSend(const Rsocket& rs) {
  return rs.sqe_avail > 0 && rs.sbuf_avail >= kSendLowWater && rs.sseq_no != rs.sseq_comp &&
         rs.target_sgl[rs.target_sge].length != 0;
}

bool HaveData(const Rsocket& rs) {
  return rs.rmsg_head != rs.rmsg_tail;
}

bool ControlSlotFree(const Rsocket& rs) {
  return rs.ctrl_seqno != rs.ctrl_max_seqno;
}

bool AllSendsDone(const Rsocket& rs) {
  return static_cast<int>(rs.ctrl_max_seqno - rs.ctrl_seqno) + rs.sqe_avail == rs.sq_size;
}

int PostSend(Rsocket& rs, ibv_wr_opcode opcode, ibv_sge* sgl, int nsge, uint32_t imm,
             int send_flags, uint64_t remote_addr, uint32_t rkey) {
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = imm;
  wr.sg_list = sgl;
  wr.num_sge = nsge;
  wr.opcode = opcode;
  wr.send_flags = send_flags;
  if (opcode == IBV_WR_RDMA_WRITE_WITH_IMM) wr.imm_data = htobe32(imm);
  wr.wr.rdma.remote_addr = remote_addr;
  wr.wr.rdma.rkey = rkey;
  if (int err = ibv_post_send(rs.id->qp, &wr, &bad)) {
    errno = err;
    return -1;
  }
  return 0;
}

int PostControl(Rsocket& rs, ControlMessage what) {
  rs.ctrl_seqno++;
  // No data: the address is the peer's target SGL only to be a valid one.
  return PostSend(rs, IBV_WR_RDMA_WRITE_WITH_IMM, nullptr, 0,
                  MakeImm(ImmOp::kCtrl, static_cast<uint32_t>(what)), 0, rs.remote_sgl.addr,
                  rs.remote_sgl.key);
}

void Gather(IovCursor& from, uint8_t* dst, size_t len) {
  while (len) {
    const iovec& v = from.iov[from.index];
    size_t n = std::min(len, v.iov_len - from.offset);
    memcpy(dst, static_cast<const uint8_t*>(v.iov_base) + from.offset, n);
    dst += n;
    len -= n;
    from.offset += n;
    if (from.offset == v.iov_len) {
      from.index++;
      from.offset = 0;
    }
  }
}

void Scatter(IovCursor& to, const uint8_t* src, size_t len) {
  while (len) {
    const iovec& v = to.iov[to.index];
    size_t n = std::min(len, v.iov_len - to.offset);
    memcpy(static_cast<uint8_t*>(v.iov_base) + to.offset, src, n);
    src += n;
    len -= n;
    to.offset += n;
    if (to.offset == v.iov_len) {
      to.index++;
      to.offset = 0;
    }
  }
}

int StageSend(Rsocket& rs, IovCursor& from, uint32_t len, uint8_t* scratch, ibv_sge sge[2],
              int* send_flags) {
  if (len <= rs.sq_inline && len <= kInlineScratch) {
    Gather(from, scratch, len);
    sge[0] = {reinterpret_cast<uintptr_t>(scratch), len, 0};
    *send_flags = IBV_SEND_INLINE;
    return 1;
  }
  *send_flags = 0;
  const uint32_t first = std::min(len, rs.sbuf_size - rs.sbuf_head);
  Gather(from, rs.sbuf + rs.sbuf_head, first);
  sge[0] = {reinterpret_cast<uintptr_t>(rs.sbuf + rs.sbuf_head), first, rs.smr->lkey};
  int nsge = 1;
  if (first < len) {  // wraps to the ring's start
    Gather(from, rs.sbuf, len - first);
    sge[1] = {reinterpret_cast<uintptr_t>(rs.sbuf), len - first, rs.smr->lkey};
    nsge = 2;
  }
  rs.sbuf_head = (rs.sbuf_head + len) % rs.sbuf_size;
  return nsge;
}

void TakeCqEvent(Rsocket& rs) {
  if (!rs.comp) return;
  ibv_cq* cq = nullptr;
  void* ctx = nullptr;
  while (ibv_get_cq_event(rs.comp, &cq, &ctx) == 0) {
    rs.cq_armed = false;
    if (++rs.cq_events_unacked >= kAckEventsEvery) {
      ibv_ack_cq_events(rs.cq, rs.cq_events_unacked);
      rs.cq_events_unacked = 0;
    }
  }
}

void ProgressOnce(Rsocket& rs) {
  UpdateCredits(rs);
  PollCompletions(rs);
  UpdateCredits(rs);
}

void ArmForSleep(Rsocket& rs) {
  if (rs.cq && !rs.cq_armed) {
    ibv_req_notify_cq(rs.cq, 0);
    rs.cq_armed = true;
  }
}

int Progress(Rsocket& rs, RsLock& lock, bool nonblocking, Ready ready) {
  int64_t spin_until = 0;
  for (;;) {
    ProgressOnce(rs);
    if (ready(rs)) return 0;
    if (nonblocking) {
      errno = EWOULDBLOCK;
      return -1;
    }
    if (!rs.cq) {  // nothing will complete: only the CM can change things
      WaitForCm(rs, lock, kSleepCapMs);
      TakeCmEvent(rs);
      continue;
    }
    const int64_t now = NowNs();
    if (!spin_until) spin_until = now + kSpinNs;
    if (now < spin_until) continue;
    if (!rs.cq_armed) {  // arm, then look once more before sleeping
      ArmForSleep(rs);
      continue;
    }
    pollfd p[2] = {{rs.comp->fd, POLLIN, 0}, {rs.id->channel->fd, POLLIN, 0}};
    lock.unlock();
    poll(p, 2, kSleepCapMs);
    lock.lock();
    if (p[0].revents) TakeCqEvent(rs);
    if (p[1].revents) TakeCmEvent(rs);
    spin_until = 0;
  }
}

}  // namespace softverbs::rdmacm::rs
