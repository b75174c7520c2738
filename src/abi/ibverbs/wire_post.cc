#include "abi/ibverbs/wire_post.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "abi/ibverbs/reject.h"
#include "datapath/shm.h"
#include "datapath/wire_post.h"

namespace softverbs::provider {

namespace {

// The doorbell, opened at the first network post: the ring (a sealed memfd,
// mapped here and by the device) and the socket pair whose other end wakes
// the device. Called with wire_mutex held.
int OpenDoorbell(Context* ctx) {
  const int ring_fd =
      datapath::CreateSharedFile("softverbs-wire-posts", sizeof(datapath::WirePostRing));
  if (ring_fd < 0) {
    return Reject(-ring_fd, "ibv_post_send: cannot make the network doorbell ring: %s",
                  strerror(-ring_fd));
  }
  size_t size = 0;
  void* ring = datapath::MapSharedFile(ring_fd, &size);
  if (!ring) {
    const int err = errno;
    close(ring_fd);
    return Reject(err, "ibv_post_send: cannot map the network doorbell ring: %s", strerror(err));
  }
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    const int err = errno;
    datapath::UnmapSharedFile(ring, size);
    close(ring_fd);
    return Reject(err, "ibv_post_send: cannot make the network doorbell: %s", strerror(err));
  }
  protocol::WireDoorbellRequest req{};
  const int fds[2] = {pair[1], ring_fd};
  const int err =
      ctx->channel.Call(protocol::Op::kWireDoorbell, &req, sizeof(req), nullptr, 0, fds, 2);
  close(pair[1]);
  close(ring_fd);
  if (err != 0) {
    close(pair[0]);
    datapath::UnmapSharedFile(ring, size);
    return err;
  }
  ctx->wire_ring = static_cast<datapath::WirePostRing*>(ring);
  ctx->wire_produced = 0;
  ctx->wire_fd = pair[0];
  return 0;
}

}  // namespace

int PostToWire(Context* ctx, Qp* qp, const datapath::SendWr& wr) {
  std::lock_guard lock(ctx->wire_mutex);
  if (ctx->wire_fd < 0) {
    if (int err = OpenDoorbell(ctx)) return err;
  }
  // The send queue holds max_send_wr WRs until the device finishes them,
  // as a NIC's does (the device counts them retired before it writes their
  // completions).
  const uint32_t retired =
      qp->entry ? qp->entry->wire_retired.load(std::memory_order_acquire) : qp->wire_posted;
  const int32_t queued = static_cast<int32_t>(qp->wire_posted - retired);
  if (queued >= static_cast<int32_t>(qp->cap.max_send_wr)) {
    return Reject(ENOMEM,
                  "ibv_post_send: WR 0x%llx: QP 0x%x's send queue is full (%u WRs not "
                  "completed, max_send_wr %u)",
                  static_cast<unsigned long long>(wr.wr_id), qp->ibv.qp_base.qp_num,
                  static_cast<unsigned>(queued), qp->cap.max_send_wr);
  }
  datapath::WirePostRing& ring = *ctx->wire_ring;
  const uint32_t produced = ctx->wire_produced;
  if (produced - ring.consumed.load(std::memory_order_acquire) >= datapath::kWirePostRingSlots) {
    return Reject(ENOMEM,
                  "ibv_post_send: WR 0x%llx: QP 0x%x's network send queue is full (the device "
                  "has not taken the earlier posts yet)",
                  static_cast<unsigned long long>(wr.wr_id), qp->ibv.qp_base.qp_num);
  }
  datapath::WirePostRecord& slot = ring.slots[produced % datapath::kWirePostRingSlots];
  slot.qpn = qp->ibv.qp_base.qp_num;
  slot.reserved = 0;
  datapath::CopyUsedSendWr(&slot.wr, &wr);
  ctx->wire_produced = produced + 1;
  qp->wire_posted++;
  ring.produced.store(produced + 1, std::memory_order_release);
  // Pairs with the device's fence between setting device_asleep and its
  // last look at `produced` (WireService::ArmDoorbells).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (ring.device_asleep.load(std::memory_order_relaxed) != 0 &&
      ring.device_asleep.exchange(0, std::memory_order_relaxed) != 0) {
    const char kick = 1;
    const ssize_t n = send(ctx->wire_fd, &kick, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    // EAGAIN: kicks the device has not read yet fill the socket; it wakes.
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      return Reject(ENODEV, "ibv_post_send: WR 0x%llx: the device's network doorbell is closed: %s",
                    static_cast<unsigned long long>(wr.wr_id), strerror(errno));
    }
  }
  return 0;
}

void CloseWire(Context* ctx) {
  std::lock_guard lock(ctx->wire_mutex);
  if (ctx->wire_fd >= 0) close(ctx->wire_fd);
  ctx->wire_fd = -1;
  datapath::UnmapSharedFile(ctx->wire_ring, sizeof(datapath::WirePostRing));
  ctx->wire_ring = nullptr;
}

}  // namespace softverbs::provider
