// rsockets' options and names: rsetsockopt, rgetsockopt, rfcntl,
// rgetpeername, rgetsockname. Sizes (SO_SNDBUF, SO_RCVBUF, SOL_RDMA) count
// only before the connection's endpoint exists, as in rdma-core; the
// SOL_SOCKET / IPPROTO_TCP flags that have no effect on an RDMA connection
// (SO_LINGER, SO_KEEPALIVE, SO_OOBINLINE, TCP_NODELAY) are remembered and
// answered back.
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <rdma/rsocket.h>
#include <stdarg.h>
#include <string.h>

#include <algorithm>

#include "abi/ibverbs/reject.h"
#include "abi/rdmacm/rsocket_internal.h"

using namespace softverbs::rdmacm::rs;
using softverbs::abi::RejectMinusOne;

#define SV_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

void SetBit(uint64_t* bits, int optname, bool on) {
  if (on) {
    *bits |= 1ull << optname;
  } else {
    *bits &= ~(1ull << optname);
  }
}
bool BitOf(uint64_t bits, int optname) {
  return (bits >> optname) & 1;
}

int IntArg(const char* verb, const void* optval, socklen_t optlen, int* out) {
  if (!optval || optlen < sizeof(int)) {
    return RejectMinusOne(EINVAL, "%s: the option takes an int (optval %p, optlen %u)", verb,
                          optval, optlen);
  }
  memcpy(out, optval, sizeof(int));
  return 0;
}

int PutInt(void* optval, socklen_t* optlen, int value) {
  if (!optval || !optlen || *optlen < sizeof(int)) {
    return RejectMinusOne(EINVAL, "rgetsockopt: the option is an int: optval/optlen too small");
  }
  memcpy(optval, &value, sizeof(int));
  *optlen = sizeof(int);
  return 0;
}

// ENOTSUP, as librdmacm's rsetsockopt / rgetsockopt (not ENOPROTOOPT).
int NotSupported(const char* verb, int level, int optname) {
  return RejectMinusOne(ENOTSUP, "%s: option level %d name %d is not supported on rsockets", verb,
                        level, optname);
}

bool HasEndpoint(const Rsocket& rs) {
  return rs.cq != nullptr;
}

int SetSocketLevel(Rsocket& rs, int optname, const void* optval, socklen_t optlen) {
  int v = 0;
  switch (optname) {
    case SO_REUSEADDR:
      if (IntArg("rsetsockopt SO_REUSEADDR", optval, optlen, &v)) return -1;
      if (rdma_set_option(rs.id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &v, sizeof(v))) {
        return -1;
      }
      SetBit(&rs.so_options, optname, v);
      return 0;
    case SO_RCVBUF:
    case SO_SNDBUF:
      if (IntArg("rsetsockopt SO_RCVBUF/SO_SNDBUF", optval, optlen, &v)) return -1;
      if (!HasEndpoint(rs)) {  // as setsockopt(2): the kernel doubles the value
        uint32_t size =
            std::max<uint32_t>(static_cast<uint32_t>(std::max(v, 0)) << 1, kSendLowWater << 1);
        (optname == SO_RCVBUF ? rs.rbuf_size : rs.sbuf_size) = size;
      }
      return 0;
    case SO_LINGER: {
      if (!optval || optlen < sizeof(linger)) {
        return RejectMinusOne(EINVAL, "rsetsockopt SO_LINGER: optval is not a struct linger");
      }
      linger l;
      memcpy(&l, optval, sizeof(l));
      SetBit(&rs.so_options, optname, l.l_onoff);
      return 0;
    }
    case SO_KEEPALIVE:
    case SO_OOBINLINE:
      if (IntArg("rsetsockopt", optval, optlen, &v)) return -1;
      SetBit(&rs.so_options, optname, v);
      return 0;
    default:
      return NotSupported("rsetsockopt", SOL_SOCKET, optname);
  }
}

int SetTcpLevel(Rsocket& rs, int optname, const void* optval, socklen_t optlen) {
  int v = 0;
  switch (optname) {
    case TCP_NODELAY:
      if (IntArg("rsetsockopt TCP_NODELAY", optval, optlen, &v)) return -1;
      SetBit(&rs.tcp_options, optname, v);
      return 0;
    case TCP_MAXSEG:
    case TCP_KEEPCNT:
    case TCP_KEEPINTVL:
      return IntArg("rsetsockopt", optval, optlen, &v);  // nothing to do on a reliable connection
    case TCP_KEEPIDLE:
      if (IntArg("rsetsockopt TCP_KEEPIDLE", optval, optlen, &v)) return -1;
      if (v <= 0) return RejectMinusOne(EINVAL, "rsetsockopt TCP_KEEPIDLE: %d is not positive", v);
      rs.keepalive_idle = v;
      return 0;
    default:
      return NotSupported("rsetsockopt", IPPROTO_TCP, optname);
  }
}

int SetRdmaLevel(Rsocket& rs, int optname, const void* optval, socklen_t optlen) {
  if (HasEndpoint(rs) || IsOpening(rs.phase)) {
    return RejectMinusOne(EINVAL,
                          "rsetsockopt SOL_RDMA: rsocket %d is connecting or connected; set "
                          "queue, inline and iomap sizes before",
                          rs.fd);
  }
  int v = 0;
  if (optname != RDMA_ROUTE && IntArg("rsetsockopt SOL_RDMA", optval, optlen, &v)) return -1;
  const auto clamp16 = [](int x) {
    return static_cast<uint16_t>(std::clamp<int>(x, 0, kMaxQueueSize));
  };
  switch (optname) {
    case RDMA_SQSIZE:
      rs.sq_size = clamp16(v);
      return 0;
    case RDMA_RQSIZE:
      rs.rq_size = clamp16(v);
      return 0;
    case RDMA_INLINE:
      rs.sq_inline = clamp16(v);
      return 0;
    case RDMA_IOMAPSIZE:  // what travels in 8 bits (rsocket_wire.h)
      rs.target_iomap_size = static_cast<uint16_t>(
          DecodeIomapSize(EncodeIomapSize(static_cast<uint32_t>(std::clamp(v, 0, 0x7F00)))));
      return 0;
    case RDMA_ROUTE:
      return RejectMinusOne(EOPNOTSUPP,
                            "rsetsockopt RDMA_ROUTE: not supported by softverbs (routes come "
                            "from rdma_resolve_route)");
    default:
      return NotSupported("rsetsockopt", SOL_RDMA, optname);
  }
}

}  // namespace

SV_EXPORT int rsetsockopt(int socket, int level, int optname, const void* optval,
                          socklen_t optlen) {
  Rsocket* rs = LookupSocket(socket, "rsetsockopt");
  if (!rs) return -1;
  std::lock_guard lock(rs->mu);
  switch (level) {
    case SOL_SOCKET:
      return SetSocketLevel(*rs, optname, optval, optlen);
    case IPPROTO_TCP:
      return SetTcpLevel(*rs, optname, optval, optlen);
    case IPPROTO_IPV6: {
      int v = 0;
      if (optname != IPV6_V6ONLY) return NotSupported("rsetsockopt", level, optname);
      if (IntArg("rsetsockopt IPV6_V6ONLY", optval, optlen, &v)) return -1;
      if (rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &v, sizeof(v))) return -1;
      SetBit(&rs->ipv6_options, optname, v);
      return 0;
    }
    case SOL_RDMA:
      return SetRdmaLevel(*rs, optname, optval, optlen);
    default:
      return NotSupported("rsetsockopt", level, optname);
  }
}

SV_EXPORT int rgetsockopt(int socket, int level, int optname, void* optval, socklen_t* optlen) {
  Rsocket* rs = LookupSocket(socket, "rgetsockopt");
  if (!rs) return -1;
  // Called from a signal handler that interrupted this thread inside an
  // rsocket call, it reads without the lock (as rdma-core's always does)
  // rather than wait for itself.
  RsLock lock(rs->mu, std::defer_lock);
  if (!RsMutex::HeldByThisThread()) lock.lock();
  switch (level) {
    case SOL_SOCKET:
      switch (optname) {
        case SO_REUSEADDR:
        case SO_KEEPALIVE:
        case SO_OOBINLINE:
          return PutInt(optval, optlen, BitOf(rs->so_options, optname));
        case SO_RCVBUF:
          return PutInt(optval, optlen, static_cast<int>(rs->rbuf_size));
        case SO_SNDBUF:
          return PutInt(optval, optlen, static_cast<int>(rs->sbuf_size));
        case SO_LINGER: {
          if (!optval || !optlen || *optlen < sizeof(linger)) {
            return RejectMinusOne(EINVAL, "rgetsockopt SO_LINGER: optval is not a struct linger");
          }
          linger l{BitOf(rs->so_options, optname) ? 1 : 0, 0};
          memcpy(optval, &l, sizeof(l));
          *optlen = sizeof(l);
          return 0;
        }
        case SO_ERROR: {
          int err = rs->error;
          if (PutInt(optval, optlen, err)) return -1;
          rs->error = 0;
          return 0;
        }
        case SO_TYPE:
          return PutInt(optval, optlen, SOCK_STREAM);
        default:
          return NotSupported("rgetsockopt", level, optname);
      }
    case IPPROTO_TCP:
      switch (optname) {
        case TCP_NODELAY:
          return PutInt(optval, optlen, BitOf(rs->tcp_options, optname));
        case TCP_MAXSEG:  // the path MTU
          return PutInt(optval, optlen,
                        rs->id->route.num_paths && rs->id->route.path_rec
                            ? 1 << (7 + rs->id->route.path_rec->mtu)
                            : 2048);
        case TCP_KEEPIDLE:
          return PutInt(optval, optlen, rs->keepalive_idle);
        case TCP_KEEPCNT:
        case TCP_KEEPINTVL:
          return PutInt(optval, optlen, 1);
        default:
          return NotSupported("rgetsockopt", level, optname);
      }
    case IPPROTO_IPV6:
      if (optname != IPV6_V6ONLY) return NotSupported("rgetsockopt", level, optname);
      return PutInt(optval, optlen, BitOf(rs->ipv6_options, optname));
    case SOL_RDMA:
      switch (optname) {
        case RDMA_SQSIZE:
          return PutInt(optval, optlen, rs->sq_size);
        case RDMA_RQSIZE:
          return PutInt(optval, optlen, rs->rq_size);
        case RDMA_INLINE:
          return PutInt(optval, optlen, rs->sq_inline);
        case RDMA_IOMAPSIZE:
          return PutInt(optval, optlen, rs->target_iomap_size);
        case RDMA_ROUTE:
          return RejectMinusOne(EOPNOTSUPP, "rgetsockopt RDMA_ROUTE: not supported by softverbs");
        default:
          return NotSupported("rgetsockopt", level, optname);
      }
    default:
      return NotSupported("rgetsockopt", level, optname);
  }
}

SV_EXPORT int rfcntl(int socket, int cmd, ...) {
  Rsocket* rs = LookupSocket(socket, "rfcntl");
  if (!rs) return -1;
  std::lock_guard lock(rs->mu);
  switch (cmd) {
    case F_GETFL:  // librdmacm's: the flags F_SETFL was given, 0 on a new socket
      return rs->fd_flags;
    case F_SETFL: {
      va_list ap;
      va_start(ap, cmd);
      int flags = va_arg(ap, int);
      va_end(ap);
      rs->nonblocking = (flags & O_NONBLOCK) != 0;
      rs->fd_flags = flags;
      return 0;
    }
    default:
      return RejectMinusOne(ENOTSUP, "rfcntl: command %d is not supported (F_GETFL, F_SETFL)", cmd);
  }
}

namespace {

int CopyName(const char* verb, const sockaddr* src, sockaddr* addr, socklen_t* addrlen) {
  if (!addr || !addrlen) return RejectMinusOne(EFAULT, "%s: addr or addrlen is NULL", verb);
  const socklen_t len = src->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  memcpy(addr, src, std::min(len, *addrlen));
  *addrlen = len;
  return 0;
}

}  // namespace

SV_EXPORT int rgetpeername(int socket, sockaddr* addr, socklen_t* addrlen) {
  Rsocket* rs = LookupSocket(socket, "rgetpeername");
  if (!rs) return -1;
  std::lock_guard lock(rs->mu);
  if (rs->phase != Phase::kConnected && rs->phase != Phase::kDisconnected &&
      rs->phase != Phase::kError && rs->phase != Phase::kAccepting) {
    return RejectMinusOne(ENOTCONN, "rgetpeername: rsocket %d is not connected", socket);
  }
  return CopyName("rgetpeername", rdma_get_peer_addr(rs->id), addr, addrlen);
}

SV_EXPORT int rgetsockname(int socket, sockaddr* addr, socklen_t* addrlen) {
  Rsocket* rs = LookupSocket(socket, "rgetsockname");
  if (!rs) return -1;
  std::lock_guard lock(rs->mu);
  const sockaddr* local = rdma_get_local_addr(rs->id);
  if (local->sa_family != AF_INET && local->sa_family != AF_INET6) {  // not bound yet
    sockaddr_storage any{};
    any.ss_family = static_cast<sa_family_t>(rs->domain);
    return CopyName("rgetsockname", reinterpret_cast<sockaddr*>(&any), addr, addrlen);
  }
  return CopyName("rgetsockname", local, addr, addrlen);
}
