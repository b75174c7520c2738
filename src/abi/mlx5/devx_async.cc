// mlx5dv_devx_create_cmd_comp / destroy_cmd_comp / get_async_cmd_comp and
// mlx5dv_devx_obj_query_async (spec §2.7).
//
// cmd_comp->fd is the reading end of a SOCK_SEQPACKET socket pair the library
// owns: pollable, one event per read, blocking unless the caller sets
// O_NONBLOCK - as the kernel's async command fd. query_async runs the query's
// kernel-layer checks and the query itself in the daemon at call time
// (EINVAL and friends fail the call); the answer, whatever its firmware
// status, becomes an event: the 8-byte wr_id followed by outlen bytes of the
// out box. At most 1 MiB of out boxes may be pending on one cmd_comp (EAGAIN
// beyond). A read buffer too small for the next event gets ENOSPC and leaves
// the event queued.
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <new>
#include <vector>

#include "abi/mlx5/devx_internal.h"

using softverbs::mlx5::Reject;
using softverbs::mlx5::RejectNull;
using softverbs::mlx5::ReturnErrno;

namespace {

constexpr size_t kMaxPendingBytes = 1 << 20;

struct CmdComp {
  mlx5dv_devx_cmd_comp pub;  // first: pub.fd is the reading end
  int write_fd;
  std::atomic<size_t> pending_bytes{0};  // out boxes queued, not yet read
};

CmdComp* FromPublic(mlx5dv_devx_cmd_comp* comp) {
  return reinterpret_cast<CmdComp*>(comp);
}

}  // namespace

SV_MLX5_EXPORT mlx5dv_devx_cmd_comp* mlx5dv_devx_create_cmd_comp(ibv_context* context) {
  if (context == nullptr) return RejectNull(EINVAL, "mlx5dv_devx_create_cmd_comp: context is NULL");
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
    return RejectNull(errno, "mlx5dv_devx_create_cmd_comp: socketpair: %s", strerror(errno));
  }
  // Room for the 1 MiB of pending answers the kernel allows (the kernel caps
  // it at wmem_max; EAGAIN tells the caller to read first).
  int sndbuf = 2 * kMaxPendingBytes;
  setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
  auto* comp = new (std::nothrow) CmdComp{};
  if (comp == nullptr) {
    close(fds[0]);
    close(fds[1]);
    return RejectNull(ENOMEM, "mlx5dv_devx_create_cmd_comp: out of memory");
  }
  comp->pub.fd = fds[0];
  comp->write_fd = fds[1];
  return &comp->pub;
}

SV_MLX5_EXPORT void mlx5dv_devx_destroy_cmd_comp(mlx5dv_devx_cmd_comp* cmd_comp) {
  if (cmd_comp == nullptr) return;
  CmdComp* comp = FromPublic(cmd_comp);
  close(comp->pub.fd);
  close(comp->write_fd);
  delete comp;
}

SV_MLX5_EXPORT int mlx5dv_devx_obj_query_async(mlx5dv_devx_obj* obj, const void* in, size_t inlen,
                                               size_t outlen, uint64_t wr_id,
                                               mlx5dv_devx_cmd_comp* cmd_comp) {
  if (obj == nullptr || cmd_comp == nullptr) {
    return Reject(EINVAL, "mlx5dv_devx_obj_query_async: %s is NULL",
                  obj == nullptr ? "obj" : "cmd_comp");
  }
  // The kernel carries outlen as a 16-bit attribute.
  if (outlen > 0xffff) {
    return Reject(EINVAL, "mlx5dv_devx_obj_query_async: outlen %zu is above 0xffff", outlen);
  }
  CmdComp* comp = FromPublic(cmd_comp);
  if (comp->pending_bytes + outlen > kMaxPendingBytes) {
    return Reject(EAGAIN,
                  "mlx5dv_devx_obj_query_async: more than %zu bytes of answers would be "
                  "pending on the cmd_comp: read some first",
                  kMaxPendingBytes);
  }

  std::vector<uint8_t> event(sizeof(mlx5dv_devx_async_cmd_hdr) + outlen);
  const int result = softverbs::mlx5::RunDevxCommand(
      obj->context, softverbs::protocol::DevxEntryPoint::kObjQuery, obj->handle, in, inlen,
      event.data() + sizeof(mlx5dv_devx_async_cmd_hdr), outlen, nullptr,
      "mlx5dv_devx_obj_query_async");
  // A firmware failure is not the call's failure: it travels in the event.
  if (result != 0 && result != EREMOTEIO) return ReturnErrno(result);
  memcpy(event.data(), &wr_id, sizeof(wr_id));
  if (send(comp->write_fd, event.data(), event.size(), MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
    const int err = errno == EWOULDBLOCK ? EAGAIN : errno;
    return Reject(err, "mlx5dv_devx_obj_query_async: cannot queue the answer: %s", strerror(err));
  }
  comp->pending_bytes += outlen;
  return 0;
}

SV_MLX5_EXPORT int mlx5dv_devx_get_async_cmd_comp(mlx5dv_devx_cmd_comp* cmd_comp,
                                                  mlx5dv_devx_async_cmd_hdr* cmd_resp,
                                                  size_t cmd_resp_len) {
  if (cmd_comp == nullptr || cmd_resp == nullptr) {
    return Reject(EINVAL, "mlx5dv_devx_get_async_cmd_comp: %s is NULL",
                  cmd_comp == nullptr ? "cmd_comp" : "cmd_resp");
  }
  CmdComp* comp = FromPublic(cmd_comp);
  // Peek first: the kernel keeps an event the buffer cannot hold (ENOSPC).
  // Blocks, or fails with EAGAIN, as the fd's O_NONBLOCK says.
  uint8_t probe;
  const ssize_t event_len = recv(comp->pub.fd, &probe, sizeof(probe), MSG_PEEK | MSG_TRUNC);
  if (event_len < 0) return ReturnErrno(errno);
  if (static_cast<size_t>(event_len) > cmd_resp_len) {
    return Reject(ENOSPC,
                  "mlx5dv_devx_get_async_cmd_comp: the next event has %zd bytes, more than "
                  "cmd_resp_len %zu (it stays queued)",
                  event_len, cmd_resp_len);
  }
  const ssize_t got = recv(comp->pub.fd, cmd_resp, cmd_resp_len, MSG_DONTWAIT);
  if (got < 0) return ReturnErrno(errno);
  if (static_cast<size_t>(got) < sizeof(*cmd_resp)) {
    return Reject(EINVAL, "mlx5dv_devx_get_async_cmd_comp: cmd_resp_len %zu is below the header",
                  cmd_resp_len);
  }
  comp->pending_bytes -= static_cast<size_t>(got) - sizeof(*cmd_resp);
  return 0;
}
