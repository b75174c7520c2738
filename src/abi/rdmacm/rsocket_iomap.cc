// rsockets' direct data placement: riomap registers a buffer and names it
// to the peer (an IOMAP_SGL message writes an RsIomap into the peer's
// target iomap, before the next data we send), riounmap forgets it, and
// riowrite RDMA WRITEs (no immediate: the peer is not told) into the peer's
// mapped buffer that covers an offset.
#include <errno.h>
#include <rdma/rsocket.h>
#include <sys/mman.h>

#include <algorithm>

#include "abi/ibverbs/reject.h"
#include "abi/rdmacm/rsocket_internal.h"

using namespace softverbs::rdmacm::rs;
using softverbs::abi::RejectMinusOne;

#define SV_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

uint64_t Swap64(uint64_t v, bool swap) {
  return swap ? __builtin_bswap64(v) : v;
}
uint32_t Swap32(uint32_t v, bool swap) {
  return swap ? __builtin_bswap32(v) : v;
}

// riowrite may post: a send WR and some send buffer are free.
bool CanWriteDirect(const Rsocket& rs) {
  return (rs.sqe_avail > 0 && rs.sbuf_avail >= kSendLowWater) || !Writable(rs);
}

// The peer's mapped buffer covering offset (host order), or false.
bool FindPeerIomap(const Rsocket& rs, uint64_t offset, RsIomap* out) {
  for (uint32_t i = 0; i < rs.target_iomap_size; ++i) {
    volatile RsIomap& e = rs.target_iomap[i];
    RsIomap m;
    m.offset = Swap64(e.offset, rs.swap_sgl);
    m.sge.addr = Swap64(e.sge.addr, rs.swap_sgl);
    m.sge.key = Swap32(e.sge.key, rs.swap_sgl);
    m.sge.length = Swap32(e.sge.length, rs.swap_sgl);
    if (m.sge.length && offset >= m.offset && offset < m.offset + m.sge.length) {
      *out = m;
      return true;
    }
  }
  return false;
}

// One IOMAP_SGL message: buffer b into entry b.index of the peer's target iomap.
int AnnounceIomap(Rsocket& rs, IomapBuffer& b) {
  RsIomap entry;
  entry.offset = Swap64(b.offset, rs.swap_sgl);
  entry.sge.addr = Swap64(reinterpret_cast<uintptr_t>(b.mr->addr), rs.swap_sgl);
  entry.sge.key = Swap32(b.mr->rkey, rs.swap_sgl);
  entry.sge.length = Swap32(static_cast<uint32_t>(b.mr->length), rs.swap_sgl);
  iovec v{&entry, sizeof(entry)};
  IovCursor from{&v, 1};
  uint8_t scratch[kInlineScratch];
  ibv_sge sge[2];
  int flags = 0;
  const int nsge = StageSend(rs, from, sizeof(entry), scratch, sge, &flags);
  rs.sseq_no++;
  rs.sqe_avail--;
  rs.sbuf_avail -= sizeof(entry);
  b.sent = true;
  return PostSend(rs, IBV_WR_RDMA_WRITE_WITH_IMM, sge, nsge,
                  MakeImm(ImmOp::kIomapSgl, static_cast<uint32_t>(b.index)), flags,
                  rs.remote_iomap.addr + sizeof(RsIomap) * b.index, rs.remote_iomap.key);
}

bool SendReady(const Rsocket& rs) {
  return CanSend(rs) || !Writable(rs);
}

}  // namespace

namespace softverbs::rdmacm::rs {

bool IomapsPending(const Rsocket& rs) {
  for (const IomapBuffer& b : rs.iomaps) {
    if (b.index >= 0 && !b.sent) return true;
  }
  return false;
}

int SendIomaps(Rsocket& rs, RsLock& lock, bool nonblocking) {
  for (IomapBuffer& b : rs.iomaps) {
    if (b.index < 0 || b.sent) continue;
    if (!CanSend(rs)) {
      if (Progress(rs, lock, nonblocking, SendReady)) return -1;
      if (!Writable(rs)) {
        errno = BrokenPipeErrno(rs);
        return -1;
      }
    }
    if (AnnounceIomap(rs, b)) return -1;
  }
  return 0;
}

}  // namespace softverbs::rdmacm::rs

SV_EXPORT off_t riomap(int socket, void* buf, size_t len, int prot, int flags, off_t offset) {
  (void)flags;
  Rsocket* rs = LookupSocket(socket, "riomap");
  if (!rs) return -1;
  if (prot & ~(PROT_WRITE | PROT_NONE)) {
    return RejectMinusOne(EINVAL, "riomap: prot 0x%x is neither PROT_WRITE nor PROT_NONE", prot);
  }
  std::lock_guard lock(rs->mu);
  if (!rs->id->pd || !rs->cq) {
    return RejectMinusOne(EINVAL, "riomap: rsocket %d is not connected", socket);
  }
  IomapBuffer b;
  int access = IBV_ACCESS_LOCAL_WRITE;
  if (prot & PROT_WRITE) {
    auto free_entry = std::find(rs->iomap_used.begin(), rs->iomap_used.end(), false);
    if (free_entry == rs->iomap_used.end()) {
      return RejectMinusOne(ENOMEM,
                            "riomap: the peer's iomap has %zu entries, all in use (the peer "
                            "sets their number with RDMA_IOMAPSIZE)",
                            rs->iomap_used.size());
    }
    b.index = static_cast<int>(free_entry - rs->iomap_used.begin());
    access |= IBV_ACCESS_REMOTE_WRITE;
  }
  b.mr = ibv_reg_mr(rs->id->pd, buf, len, access);
  if (!b.mr) return -1;
  b.offset = offset == -1 ? reinterpret_cast<uintptr_t>(buf) : static_cast<uint64_t>(offset);
  if (b.index >= 0) rs->iomap_used[b.index] = true;
  rs->iomaps.push_back(b);
  return static_cast<off_t>(b.offset);
}

SV_EXPORT int riounmap(int socket, void* buf, size_t len) {
  Rsocket* rs = LookupSocket(socket, "riounmap");
  if (!rs) return -1;
  std::lock_guard lock(rs->mu);
  for (auto it = rs->iomaps.begin(); it != rs->iomaps.end(); ++it) {
    if (it->mr->addr == buf && it->mr->length == len) {
      ibv_dereg_mr(it->mr);
      if (it->index >= 0) rs->iomap_used[it->index] = false;
      rs->iomaps.erase(it);
      return 0;
    }
  }
  return RejectMinusOne(EINVAL, "riounmap: rsocket %d has no mapping of %p (%zu bytes)", socket,
                        buf, len);
}

SV_EXPORT size_t riowrite(int socket, const void* buf, size_t count, off_t offset, int flags) {
  Rsocket* rs = LookupSocket(socket, "riowrite");
  if (!rs) return static_cast<size_t>(-1);
  std::unique_lock lock(rs->mu);
  const bool nonblocking = rs->nonblocking || (flags & MSG_DONTWAIT);
  if (PrepareTransfer("riowrite", *rs, lock, nonblocking)) return static_cast<size_t>(-1);
  if (!Writable(*rs)) {
    errno = BrokenPipeErrno(*rs);
    return static_cast<size_t>(-1);
  }
  if (IomapsPending(*rs) && SendIomaps(*rs, lock, nonblocking)) return static_cast<size_t>(-1);
  iovec v{const_cast<void*>(buf), count};
  IovCursor from{&v, 1};
  size_t left = count;
  uint64_t at = static_cast<uint64_t>(offset);
  uint32_t burst = kFirstTransfer;
  RsIomap map{};
  bool have_map = false;
  int ret = 0;
  while (left) {
    if (!have_map || at >= map.offset + map.sge.length) {
      have_map = FindPeerIomap(*rs, at, &map);
      if (!have_map) {
        if (left == count) {
          RejectMinusOne(EINVAL, "riowrite: no buffer the peer mapped covers offset %llu",
                         static_cast<unsigned long long>(at));
          ret = -1;
        }
        break;
      }
    }
    if (!(rs->sqe_avail > 0 && rs->sbuf_avail >= kSendLowWater)) {
      ret = Progress(*rs, lock, nonblocking, CanWriteDirect);
      if (ret) break;
      if (!Writable(*rs)) {
        errno = BrokenPipeErrno(*rs);
        ret = -1;
        break;
      }
    }
    uint32_t len = NextTransfer(&burst, left);
    len = std::min({len, rs->sbuf_avail, static_cast<uint32_t>(map.offset + map.sge.length - at)});
    uint8_t scratch[kInlineScratch];
    ibv_sge sge[2];
    int send_flags = 0;
    const int nsge = StageSend(*rs, from, len, scratch, sge, &send_flags);
    rs->sqe_avail--;
    rs->sbuf_avail -= len;
    ret = PostSend(*rs, IBV_WR_RDMA_WRITE, sge, nsge, MakeImm(ImmOp::kWrite, len), send_flags,
                   map.sge.addr + (at - map.offset), map.sge.key);
    if (ret) {
      rs->phase = Phase::kError;
      rs->error = errno;
      break;
    }
    left -= len;
    at += len;
  }
  const size_t written = count - left;
  return ret && written == 0 ? static_cast<size_t>(-1) : written;
}
