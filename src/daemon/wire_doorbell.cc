// The doorbells of the device's network transport (wire_service.h): each
// context that posts over the network shares a ring of work requests with
// the device (datapath/wire_post.h) and holds the other end of a socket
// that wakes the device. While the device runs it takes each ring's posts
// once a round and nobody makes a system call; before it sleeps it tells
// the rings, and the next post sends one byte.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "daemon/device.h"
#include "daemon/wire_service.h"
#include "datapath/wire_post.h"

namespace softverbs::daemon {

namespace dp = softverbs::datapath;

namespace {

// Posts one ring gives in one round: a context posting without pause must
// not starve the packets that arrive, or other contexts.
constexpr uint32_t kPostsPerRound = 256;

}  // namespace

Verdict WireService::AddDoorbell(ClientId c, int socket_fd, int ring_fd) {
  auto refuse = [&](int err, const char* why) {
    close(socket_fd);
    close(ring_fd);
    return Verdict::Fail(err, std::string("wire_doorbell: ") + why);
  };
  for (const auto& [fd, doorbell] : doorbells_) {
    if (doorbell->client == c) return refuse(EEXIST, "this context has a doorbell already");
  }
  int type = 0;
  socklen_t len = sizeof(type);
  if (getsockopt(socket_fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_SEQPACKET) {
    return refuse(EINVAL, "the first descriptor is not a SOCK_SEQPACKET socket");
  }
  // The device maps the ring for as long as the context lives: a file the
  // context could shrink would fault the device (SIGBUS).
  const int seals = fcntl(ring_fd, F_GET_SEALS);
  if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
    return refuse(EINVAL, "the ring is not a memfd sealed against shrinking (F_SEAL_SHRINK)");
  }
  struct stat st {};
  if (fstat(ring_fd, &st) != 0 || static_cast<size_t>(st.st_size) != sizeof(dp::WirePostRing)) {
    return refuse(EINVAL, "the ring's size is not the doorbell ring's");
  }
  auto doorbell = std::make_unique<Doorbell>();
  if (int err = doorbell->ring_map.Map(ring_fd)) return refuse(err, "cannot map the ring");
  close(ring_fd);
  doorbell->client = c;
  doorbell->ring = static_cast<dp::WirePostRing*>(doorbell->ring_map.base());
  doorbell->consumed = 0;
  doorbells_[socket_fd] = std::move(doorbell);
  watch_(socket_fd, true);
  return Verdict::Ok();
}

void WireService::RemoveClient(ClientId c) {
  for (auto it = doorbells_.begin(); it != doorbells_.end();) {
    if (it->second->client != c) {
      ++it;
      continue;
    }
    watch_(it->first, false);
    close(it->first);
    it = doorbells_.erase(it);
  }
}

void WireService::ReadDoorbell(int fd) {
  // Wake-up bytes: nothing in them. The ring is taken at the end of the
  // round (TakeRingPosts).
  for (int i = 0; i < 64; ++i) {
    char bytes[16];
    const ssize_t n = recv(fd, bytes, sizeof(bytes), MSG_DONTWAIT);
    if (n > 0) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    // 0: the context closed its end (it is going away); or an error.
    CloseDoorbell(fd);
    return;
  }
}

bool WireService::ArmDoorbells() {
  bool pending = false;
  for (auto& [fd, d] : doorbells_) {
    d->ring->device_asleep.store(1, std::memory_order_relaxed);
  }
  // Pairs with the poster's fence between publishing and reading
  // device_asleep (abi/ibverbs/wire_post.cc): either this look sees the
  // post, or the poster sees the flag and wakes the device.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (auto& [fd, d] : doorbells_) {
    if (d->ring->produced.load(std::memory_order_relaxed) != d->consumed) pending = true;
  }
  return pending;
}

uint32_t WireService::TakeRingPosts() {
  uint32_t taken = 0;
  for (auto it = doorbells_.begin(); it != doorbells_.end();) {
    Doorbell& d = *it->second;
    d.ring->device_asleep.store(0, std::memory_order_relaxed);
    if (TakeRing(d, &taken)) {
      ++it;
      continue;
    }
    const int fd = it->first;
    ++it;
    CloseDoorbell(fd);
  }
  return taken;
}

void WireService::TakeEveryRingPost() {
  // Bounded: a ring holds at most kWirePostRingSlots posts, and a poster
  // that keeps posting meanwhile races the request either way.
  for (uint32_t i = 0; i <= dp::kWirePostRingSlots / kPostsPerRound; ++i) {
    if (TakeRingPosts() == 0) return;
  }
}

bool WireService::TakeRing(Doorbell& d, uint32_t* taken) {
  const uint32_t produced = d.ring->produced.load(std::memory_order_acquire);
  const uint32_t waiting = produced - d.consumed;
  if (waiting == 0) return true;
  if (waiting > dp::kWirePostRingSlots) {
    bad_posts_++;
    fprintf(stderr,
            "softverbsd: wire_doorbell: client %u's ring claims %u posts, more than its %u "
            "slots; its doorbell is closed\n",
            d.client, waiting, dp::kWirePostRingSlots);
    return false;
  }
  const uint32_t take = waiting < kPostsPerRound ? waiting : kPostsPerRound;
  for (uint32_t i = 0; i < take; ++i) {
    // A copy first: the context can write the slot while it is checked.
    dp::CopyPostRecord(&taken_, &d.ring->slots[(d.consumed + i) % dp::kWirePostRingSlots]);
    TakePost(d.client, taken_);
  }
  d.consumed += take;
  *taken += take;
  d.ring->consumed.store(d.consumed, std::memory_order_release);
  return true;
}

void WireService::CloseDoorbell(int fd) {
  watch_(fd, false);
  close(fd);
  doorbells_.erase(fd);
}

void WireService::TakePost(ClientId c, const dp::WirePostRecord& rec) {
  const Qp* qp = device_.FindQpObject(rec.qpn);
  auto it = qps_.find(rec.qpn);
  const dp::WrOpcodeInfo& info = dp::WrOpcode(rec.wr.opcode);
  if (rec.reserved != 0 || !qp || qp->creator != c || rec.wr.num_sge > dp::kMaxSendSge ||
      rec.wr.inline_len > dp::kMaxInline ||
      !dp::WrOpcodeAllowed(info, qp->type == IBV_QPT_XRC_SEND ? IBV_QPT_XRC_SEND : qp->type)) {
    bad_posts_++;
    fprintf(stderr,
            "softverbsd: wire_doorbell: client %u posted a malformed record or to a "
            "QP it does not own (QP 0x%x); dropped\n",
            c, rec.qpn);
    // The poster counted it against its own QP's send queue.
    if (qp && qp->creator == c) SendWrsRetired(rec.qpn, 1);
    return;
  }
  if (it == qps_.end() || (it->second.state != IBV_QPS_RTS && it->second.state != IBV_QPS_SQD)) {
    // The QP left RTS since the library checked: flushed, as a NIC
    // flushes what reaches a send queue in error.
    dp::Completion flush{};
    flush.wr_id = rec.wr.wr_id;
    flush.status = IBV_WC_WR_FLUSH_ERR;
    flush.opcode = dp::RequesterWcOpcode(rec.wr);
    flush.vendor_err = dp::kVendorFlushed;
    flush.qp_num = rec.qpn;
    SendWrsRetired(rec.qpn, 1);
    dp::CqRing* ring = nullptr;
    int event_fd = -1;
    if (memory_.SendCq(rec.qpn, &ring, &event_fd)) dp::Complete(*ring, event_fd, flush);
    return;
  }
  it->second.wire->Post(rec.wr);
}

}  // namespace softverbs::daemon
