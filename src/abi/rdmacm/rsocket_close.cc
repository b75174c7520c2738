// rsockets' end: rshutdown sends the peer a CTRL message (SHUTDOWN: we send
// no more; DISCONNECT: we neither send nor receive) and waits until every
// send is done; rclose shuts both ways down and frees the socket (its QP,
// buffers and id: destroying the id disconnects at the CM).
#include <errno.h>
#include <rdma/rsocket.h>

#include "abi/ibverbs/reject.h"
#include "abi/rdmacm/rsocket_internal.h"

using namespace softverbs::rdmacm::rs;
using softverbs::abi::RejectMinusOne;

#define SV_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

bool ControlReady(const Rsocket& rs) {
  return ControlSlotFree(rs) || rs.phase != Phase::kConnected;
}
bool SendsDone(const Rsocket& rs) {
  return AllSendsDone(rs) || rs.phase != Phase::kConnected;
}

// Shuts a connected socket down (how: SHUT_RD, SHUT_WR, SHUT_RDWR); waits
// for its sends whatever O_NONBLOCK says, as rdma-core.
int Shutdown(Rsocket& rs, RsLock& lock, int how) {
  const bool was_readable = rs.readable, was_writable = rs.writable;
  if (how == SHUT_RD || how == SHUT_RDWR) rs.readable = false;
  if (how == SHUT_WR || how == SHUT_RDWR) {
    rs.writable = false;
    rs.shut_wr_here = true;
  }
  if (rs.readable == was_readable && rs.writable == was_writable) return 0;  // nothing new
  if (rs.writable) return 0;  // SHUT_RD alone: the peer is not told (as TCP)
  const ControlMessage what = rs.readable ? ControlMessage::kShutdown : ControlMessage::kDisconnect;
  if (!ControlSlotFree(rs) && Progress(rs, lock, false, ControlReady)) return -1;
  if (rs.phase == Phase::kConnected && PostControl(rs, what)) {
    rs.phase = Phase::kError;
    rs.error = errno;
    return -1;
  }
  if (rs.phase == Phase::kConnected) return Progress(rs, lock, false, SendsDone);
  return 0;
}

}  // namespace

SV_EXPORT int rshutdown(int socket, int how) {
  Rsocket* rs = LookupSocket(socket, "rshutdown");
  if (!rs) return -1;
  if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) {
    return RejectMinusOne(EINVAL, "rshutdown: how %d is not SHUT_RD, SHUT_WR or SHUT_RDWR", how);
  }
  std::unique_lock lock(rs->mu);
  if (IsOpening(rs->phase)) DriveConnect(*rs, lock, true);
  switch (rs->phase) {
    case Phase::kConnected:
      return Shutdown(*rs, lock, how);
    case Phase::kDisconnected:
    case Phase::kError:
      return 0;  // was connected: nothing is left to tell the peer
    default:
      return RejectMinusOne(ENOTCONN, "rshutdown: rsocket %d is not connected", socket);
  }
}

SV_EXPORT int rclose(int socket) {
  Rsocket* rs = LookupSocket(socket, "rclose");
  if (!rs) return -1;
  {
    std::unique_lock lock(rs->mu);
    if (rs->phase == Phase::kConnected) Shutdown(*rs, lock, SHUT_RDWR);
  }
  FreeSocket(rs);
  return 0;
}
