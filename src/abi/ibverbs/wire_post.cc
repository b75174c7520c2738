#include "abi/ibverbs/wire_post.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "abi/ibverbs/reject.h"
#include "datapath/wire_post.h"

namespace softverbs::provider {

namespace {

// The doorbell, opened at the first network post. Called with wire_mutex held.
int OpenDoorbell(Context* ctx) {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    return Reject(errno, "ibv_post_send: cannot make the network doorbell: %s", strerror(errno));
  }
  // Room for many posts in flight: the device drains the socket as it runs.
  int bytes = 4 << 20;
  setsockopt(pair[0], SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
  protocol::WireDoorbellRequest req{};
  const int err =
      ctx->channel.Call(protocol::Op::kWireDoorbell, &req, sizeof(req), nullptr, 0, &pair[1], 1);
  close(pair[1]);
  if (err != 0) {
    close(pair[0]);
    return err;
  }
  ctx->wire_fd = pair[0];
  return 0;
}

}  // namespace

int PostToWire(Context* ctx, Qp* qp, const datapath::SendWr& wr) {
  std::lock_guard lock(ctx->wire_mutex);
  if (ctx->wire_fd < 0) {
    if (int err = OpenDoorbell(ctx)) return err;
  }
  datapath::WirePostRecord rec{};
  rec.qpn = qp->ibv.qp_base.qp_num;
  rec.wr = wr;
  const ssize_t n = send(ctx->wire_fd, &rec, sizeof(rec), MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n == static_cast<ssize_t>(sizeof(rec))) return 0;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    return Reject(ENOMEM,
                  "ibv_post_send: WR 0x%llx: QP 0x%x's network send queue is full (the device "
                  "has not taken the earlier posts yet)",
                  static_cast<unsigned long long>(wr.wr_id), rec.qpn);
  }
  return Reject(ENODEV, "ibv_post_send: WR 0x%llx: the device's network doorbell is closed: %s",
                static_cast<unsigned long long>(wr.wr_id), strerror(errno));
}

void CloseWire(Context* ctx) {
  std::lock_guard lock(ctx->wire_mutex);
  if (ctx->wire_fd >= 0) close(ctx->wire_fd);
  ctx->wire_fd = -1;
}

}  // namespace softverbs::provider
