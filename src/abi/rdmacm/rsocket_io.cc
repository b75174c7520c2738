// rsockets' data transfer: rsend, rsendto, rsendmsg, rwrite, rwritev and
// rrecv, rrecvfrom, rrecvmsg, rread, rreadv. A send is cut into RDMA WRITE
// WITH IMMEDIATE messages (the first 2 KiB, doubling up to 64 KiB), each
// within the peer's current target SGL entry and our send buffer; a receive
// copies out of the receive buffer message by message.
#include <errno.h>
#include <limits.h>
#include <rdma/rsocket.h>
#include <string.h>

#include <algorithm>

#include "abi/ibverbs/reject.h"
#include "abi/rdmacm/rsocket_internal.h"

using namespace softverbs::rdmacm::rs;
using softverbs::abi::RejectMinusOne;

#define SV_EXPORT extern "C" __attribute__((visibility("default")))

namespace softverbs::rdmacm::rs {

int BrokenPipeErrno(const Rsocket& rs) {
  return rs.shut_wr_here ? EPIPE : ECONNRESET;
}

int PrepareTransfer(const char* verb, Rsocket& rs, RsLock& lock, bool nonblocking) {
  if (IsOpening(rs.phase) && DriveConnect(rs, lock, nonblocking)) {
    if (errno == EINPROGRESS) errno = EAGAIN;
    return -1;
  }
  switch (rs.phase) {
    case Phase::kFresh:
    case Phase::kBound:
    case Phase::kListening:
      return RejectMinusOne(ENOTCONN, "%s: rsocket %d is not connected", verb, rs.fd);
    case Phase::kConnectFailed:
      return RejectMinusOne(ENOTCONN, "%s: rsocket %d did not connect (%s)", verb, rs.fd,
                            strerror(rs.error ? rs.error : ECONNREFUSED));
    default:
      return 0;
  }
}

}  // namespace softverbs::rdmacm::rs

namespace {

// The total length of an iovec array, or -1 (EINVAL, logged).
ssize_t TotalLength(const char* verb, const iovec* iov, int iovcnt) {
  if (iovcnt < 0 || iovcnt > IOV_MAX || (iovcnt && !iov)) {
    return RejectMinusOne(EINVAL, "%s: iovcnt %d (iov %p) is not valid", verb, iovcnt,
                          static_cast<const void*>(iov));
  }
  size_t total = 0;
  for (int i = 0; i < iovcnt; ++i) total += iov[i].iov_len;
  if (total > SSIZE_MAX)
    return RejectMinusOne(EINVAL, "%s: the buffers add up above SSIZE_MAX", verb);
  return static_cast<ssize_t>(total);
}

bool SendReady(const Rsocket& rs) {
  return CanSend(rs) || !Writable(rs);
}
bool RecvReady(const Rsocket& rs) {
  return HaveData(rs) || !Readable(rs);
}

// One DATA message of len bytes from the cursor into the peer's current
// target SGL entry.
int WriteData(Rsocket& rs, IovCursor& from, uint32_t len) {
  uint8_t scratch[kInlineScratch];
  ibv_sge sge[2];
  int flags = 0;
  const int nsge = StageSend(rs, from, len, scratch, sge, &flags);
  volatile RsSge& target = rs.target_sgl[rs.target_sge];
  const uint64_t addr = target.addr;
  const uint32_t rkey = target.key;
  target.addr = addr + len;
  target.length = target.length - len;
  if (target.length == 0 && ++rs.target_sge == kTargetSglEntries) rs.target_sge = 0;
  rs.sseq_no++;
  rs.sqe_avail--;
  rs.sbuf_avail -= len;
  return PostSend(rs, IBV_WR_RDMA_WRITE_WITH_IMM, sge, nsge, MakeImm(ImmOp::kData, len), flags,
                  addr, rkey);
}

ssize_t SendVector(const char* verb, int socket, const iovec* iov, int iovcnt, int flags) {
  Rsocket* rs = LookupSocket(socket, verb);
  if (!rs) return -1;
  const ssize_t total = TotalLength(verb, iov, iovcnt);
  if (total < 0) return -1;
  std::unique_lock lock(rs->mu);
  const bool nonblocking = rs->nonblocking || (flags & MSG_DONTWAIT);
  if (PrepareTransfer(verb, *rs, lock, nonblocking)) return -1;
  if (!Writable(*rs)) {
    errno = BrokenPipeErrno(*rs);
    return -1;
  }
  if (IomapsPending(*rs) && SendIomaps(*rs, lock, nonblocking)) return -1;
  IovCursor from{iov, iovcnt};
  size_t left = static_cast<size_t>(total);
  uint32_t burst = kFirstTransfer;
  int ret = 0;
  while (left) {
    if (!CanSend(*rs)) {
      ret = Progress(*rs, lock, nonblocking, SendReady);
      if (ret) break;
      if (!Writable(*rs)) {
        errno = BrokenPipeErrno(*rs);
        ret = -1;
        break;
      }
    }
    uint32_t len = NextTransfer(&burst, left);
    len = std::min(
        {len, rs->sbuf_avail, static_cast<uint32_t>(rs->target_sgl[rs->target_sge].length)});
    ret = WriteData(*rs, from, len);
    if (ret) {
      rs->phase = Phase::kError;
      rs->error = errno;
      break;
    }
    left -= len;
  }
  const size_t sent = static_cast<size_t>(total) - left;
  return ret && sent == 0 && total ? -1 : static_cast<ssize_t>(sent);
}

// Copies up to len bytes of the received data, from message head on, to the
// cursor; consumes them unless peeking. Answers the bytes copied.
size_t CopyOut(Rsocket& rs, IovCursor& to, size_t len, bool peek) {
  uint32_t head = rs.rmsg_head;
  uint32_t offset = rs.rbuf_offset;
  size_t copied = 0;
  while (copied < len && head != rs.rmsg_tail) {
    uint32_t& msg = rs.rmsg[head];
    const uint32_t n = static_cast<uint32_t>(std::min<size_t>(len - copied, msg));
    const uint32_t first = std::min(n, rs.rbuf_size - offset);
    Scatter(to, rs.rbuf + offset, first);
    if (first < n) Scatter(to, rs.rbuf, n - first);
    offset = (offset + n) % rs.rbuf_size;
    copied += n;
    if (n == msg) {
      if (++head == rs.rmsg.size()) head = 0;
      if (!peek) rs.rseq_no++;
    } else {
      if (!peek) msg -= n;
      break;  // the buffer is full
    }
  }
  if (!peek) {
    rs.rmsg_head = head;
    rs.rbuf_offset = offset;
    rs.rbuf_avail += static_cast<uint32_t>(copied);
  }
  return copied;
}

ssize_t RecvVector(const char* verb, int socket, const iovec* iov, int iovcnt, int flags) {
  Rsocket* rs = LookupSocket(socket, verb);
  if (!rs) return -1;
  const ssize_t total = TotalLength(verb, iov, iovcnt);
  if (total < 0) return -1;
  std::unique_lock lock(rs->mu);
  const bool nonblocking = rs->nonblocking || (flags & MSG_DONTWAIT);
  if (PrepareTransfer(verb, *rs, lock, nonblocking)) return -1;
  if (total == 0) return 0;  // as recv(2): nothing asked, nothing waited for
  IovCursor to{iov, iovcnt};
  size_t got = 0;
  int ret = 0;
  do {
    if (!HaveData(*rs)) {
      ret = Progress(*rs, lock, nonblocking, RecvReady);
      if (ret) break;
    }
    got += CopyOut(*rs, to, static_cast<size_t>(total) - got, flags & MSG_PEEK);
    if (flags & MSG_PEEK) break;
  } while (got < static_cast<size_t>(total) && (flags & MSG_WAITALL) && Readable(*rs));
  ProgressOnce(*rs);  // what was read may be offered to the peer again
  if (got) return static_cast<ssize_t>(got);
  if (ret) return -1;
  if (rs->phase == Phase::kError) {  // the connection broke, no orderly end
    errno = ECONNRESET;
    return -1;
  }
  return 0;  // the peer shut down or disconnected: end of stream
}

}  // namespace

SV_EXPORT ssize_t rsend(int socket, const void* buf, size_t len, int flags) {
  iovec v{const_cast<void*>(buf), len};
  return SendVector("rsend", socket, &v, 1, flags);
}

SV_EXPORT ssize_t rsendto(int socket, const void* buf, size_t len, int flags,
                          const sockaddr* dest_addr, socklen_t addrlen) {
  if (dest_addr || addrlen) {
    if (!FindSocket(socket)) return RejectMinusOne(EBADF, "rsendto: %d is not an rsocket", socket);
    return RejectMinusOne(EISCONN, "rsendto: a stream rsocket takes no destination address");
  }
  return rsend(socket, buf, len, flags);
}

SV_EXPORT ssize_t rsendmsg(int socket, const msghdr* msg, int flags) {
  if (!msg) return RejectMinusOne(EFAULT, "rsendmsg: msg is NULL");
  if (msg->msg_control && msg->msg_controllen) {
    return RejectMinusOne(EOPNOTSUPP, "rsendmsg: ancillary data is not supported on rsockets");
  }
  if (msg->msg_name) {
    return RejectMinusOne(EISCONN, "rsendmsg: a stream rsocket takes no destination address");
  }
  return SendVector("rsendmsg", socket, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags);
}

SV_EXPORT ssize_t rwrite(int socket, const void* buf, size_t count) {
  iovec v{const_cast<void*>(buf), count};
  return SendVector("rwrite", socket, &v, 1, 0);
}

SV_EXPORT ssize_t rwritev(int socket, const iovec* iov, int iovcnt) {
  return SendVector("rwritev", socket, iov, iovcnt, 0);
}

SV_EXPORT ssize_t rrecv(int socket, void* buf, size_t len, int flags) {
  iovec v{buf, len};
  return RecvVector("rrecv", socket, &v, 1, flags);
}

SV_EXPORT ssize_t rrecvfrom(int socket, void* buf, size_t len, int flags, sockaddr* src_addr,
                            socklen_t* addrlen) {
  ssize_t n = rrecv(socket, buf, len, flags);
  if (n >= 0 && src_addr && addrlen) rgetpeername(socket, src_addr, addrlen);
  return n;
}

SV_EXPORT ssize_t rrecvmsg(int socket, msghdr* msg, int flags) {
  if (!msg) return RejectMinusOne(EFAULT, "rrecvmsg: msg is NULL");
  ssize_t n =
      RecvVector("rrecvmsg", socket, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags);
  if (n >= 0) {
    msg->msg_controllen = 0;
    msg->msg_flags = 0;
    if (msg->msg_name && msg->msg_namelen) {
      rgetpeername(socket, static_cast<sockaddr*>(msg->msg_name), &msg->msg_namelen);
    }
  }
  return n;
}

SV_EXPORT ssize_t rread(int socket, void* buf, size_t count) {
  iovec v{buf, count};
  return RecvVector("rread", socket, &v, 1, 0);
}

SV_EXPORT ssize_t rreadv(int socket, const iovec* iov, int iovcnt) {
  return RecvVector("rreadv", socket, iov, iovcnt, 0);
}
