// ibv_open_device / ibv_close_device, and the ops tables of a context. The
// tables are first filled with honest "not supported" answers
// (unsupported_ops.cc), then overlaid with what softverbs implements: an
// application never calls through a NULL pointer.
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <new>

#include "abi/ibverbs/device_fatal.h"
#include "abi/ibverbs/devx_queues.h"
#include "abi/ibverbs/exports.h"
#include "abi/ibverbs/ops.h"
#include "abi/ibverbs/parent_domain.h"
#include "abi/ibverbs/peers.h"
#include "abi/ibverbs/provider.h"
#include "abi/ibverbs/reject.h"
#include "abi/ibverbs/send_queue.h"
#include "abi/ibverbs/unsupported_ops.h"
#include "abi/ibverbs/wire_post.h"
#include "common/device_limits.h"
#include "common/log.h"
#include "common/unix_socket.h"

namespace softverbs::provider {

void InstallContextOps(ibv_context* ctx) {
  verbs_context* v = verbs_get_ctx(ctx);
  InstallUnsupportedOps(v);
  ctx->ops.poll_cq = PollCqOp;
  ctx->ops.req_notify_cq = ReqNotifyCqOp;
  ctx->ops.post_send = PostSendOp;
  ctx->ops.post_recv = PostRecvOp;
  ctx->ops.post_srq_recv = PostSrqRecvOp;
  v->query_port = QueryPortOp;
  v->query_device_ex = QueryDeviceExOp;
  v->create_cq_ex = CreateCqExOp;
  v->create_qp_ex = CreateQpExOp;
  v->open_qp = OpenQpOp;
  v->create_srq_ex = CreateSrqExOp;
  v->get_srq_num = GetSrqNumOp;
  v->open_xrcd = OpenXrcdOp;
  v->close_xrcd = CloseXrcdOp;
  ctx->ops.alloc_mw = AllocMwOp;
  ctx->ops.dealloc_mw = DeallocMwOp;
  ctx->ops.bind_mw = BindMwOp;
  v->alloc_dm = AllocDmOp;
  v->free_dm = FreeDmOp;
  v->reg_dm_mr = RegDmMrOp;
  v->query_rt_values = QueryRtValuesOp;
  v->advise_mr = AdviseMrOp;
  v->alloc_td = AllocTdOp;
  v->dealloc_td = DeallocTdOp;
  v->alloc_parent_domain = AllocParentDomainOp;
}

namespace {

// Opens the context's event connection: the daemon pushes asynchronous events
// there, and its fd is the context's async_fd.
int OpenEventConnection(Context* ctx, uint64_t token) {
  DaemonChannel events;
  if (int err = events.Connect(protocol::Role::kEvents)) return err;
  protocol::HelloRequest hello{static_cast<uint32_t>(protocol::Role::kEvents),
                               static_cast<uint32_t>(getpid()), token};
  protocol::HelloReply reply{};
  if (int err = events.Call(protocol::Op::kHello, hello, &reply)) return err;
  ctx->event_fd = events.Release();
  return 0;
}

// Maps the device table the daemon sent with its hello reply.
int MapDeviceTable(Context* ctx, const std::vector<int>& fds) {
  if (fds.empty()) return EPROTO;
  if (int err = ctx->table_mapping.Map(fds[0])) return err;
  if (!datapath::DeviceTable::Compatible(ctx->table_mapping.base(), ctx->table_mapping.size())) {
    Log("ibv_open_device: the daemon's shared tables are of another layout version");
    return EPROTO;
  }
  ctx->table = datapath::DeviceTable(ctx->table_mapping.base());
  ctx->peers = std::make_unique<PeerCache>(ctx);
  return 0;
}

}  // namespace

}  // namespace softverbs::provider

using namespace softverbs::provider;
using softverbs::Log;

SV_EXPORT ibv_context* ibv_open_device(ibv_device* device) {
  if (device != SoftverbsDevice()) {
    return RejectNull(ENODEV, "ibv_open_device: %p is not softverbs' device",
                      static_cast<void*>(device));
  }
  auto* ctx = new (std::nothrow) Context();
  if (!ctx) return RejectNull(ENOMEM, "ibv_open_device: out of memory for the context");
  memset(&ctx->vctx, 0, sizeof(ctx->vctx));
  softverbs::protocol::HelloRequest hello{
      static_cast<uint32_t>(softverbs::protocol::Role::kContext), static_cast<uint32_t>(getpid()),
      0};
  softverbs::protocol::HelloReply reply{};
  std::vector<int> fds;
  int err = 0;
  const int record_fd = softverbs::datapath::CreateSharedFile(
      "softverbs-access-record", softverbs::datapath::kAccessRecordSize);
  if (record_fd >= 0) ctx->access_record.Map(record_fd);
  // A daemon that reached its idle timeout just as we connected closes the
  // connection unanswered (ENODEV): connect again, which starts a new one.
  for (int attempt = 0; attempt < 3; ++attempt) {
    if ((err = ctx->channel.Connect(softverbs::protocol::Role::kContext))) break;
    // The data path: our /proc/self/mem goes to the daemon (peers reach the
    // partial pages of our MRs through it), the device table comes back.
    // Our access record goes along (the daemon takes back the in-flight
    // counts it holds if we die inside an access).
    int hello_fds[2];
    int nfds = 0;
    hello.files = 0;
    int mem_fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
    ctx->has_mem_fd = mem_fd >= 0;
    if (mem_fd >= 0) {
      hello_fds[nfds++] = mem_fd;
      hello.files |= softverbs::protocol::kHelloMemFd;
    }
    if (record_fd >= 0 && ctx->access_record.base()) {
      hello_fds[nfds++] = record_fd;
      hello.files |= softverbs::protocol::kHelloAccessRecord;
    }
    err = ctx->channel.Call(softverbs::protocol::Op::kHello, &hello, sizeof(hello), &reply,
                            sizeof(reply), nfds ? hello_fds : nullptr, nfds, nullptr, &fds);
    if (mem_fd >= 0) close(mem_fd);
    if (err != ENODEV) break;
    ctx->channel.Disconnect();
  }
  if (record_fd >= 0) close(record_fd);
  if (!err) err = MapDeviceTable(ctx, fds);
  for (int fd : fds) close(fd);
  if (!err) err = OpenEventConnection(ctx, reply.context_token);
  if (!err) err = StartDeviceWatch(ctx);
  if (err) {
    Log("ibv_open_device: cannot open %s: %s", device->name, strerror(err));
    delete ctx;
    return FailNull<ibv_context>(err);
  }
  ctx->client_id = reply.client_id;
  ctx->active_mtu = static_cast<ibv_mtu>(reply.active_mtu);
  ctx->gids = reply.gids;

  ibv_context* ibv = ctx->ibv();
  ctx->vctx.sz = sizeof(verbs_context);
  ibv->device = device;
  ibv->cmd_fd = ctx->channel.fd();
  ibv->async_fd = ctx->event_fd;
  ibv->num_comp_vectors = softverbs::limits::kNumCompVectors;
  ibv->abi_compat = __VERBS_ABI_IS_EXTENDED;
  pthread_mutex_init(&ibv->mutex, nullptr);
  InstallContextOps(ibv);
  return ibv;
}

SV_EXPORT int ibv_close_device(ibv_context* context) {
  if (!context) return RejectMinusOne(EINVAL, "ibv_close_device: context is NULL");
  Context* ctx = Context::From(context);
  StopDevxQueues(ctx);  // first: it executes work through the peers and the progress thread
  StopProgressThread(ctx);
  StopDeviceWatch(ctx);
  CloseWire(ctx);
  // Closing the connections is what tells the daemon to release everything
  // the context still owned, exactly as when the process dies.
  if (ctx->event_fd >= 0) close(ctx->event_fd);
  pthread_mutex_destroy(&context->mutex);
  delete ctx;
  return 0;
}
