// ibv_open_device / ibv_close_device, and the ops tables of a context. The
// tables are first filled with honest "not supported" answers
// (unsupported_ops.cc), then overlaid with what softverbs implements: an
// application never calls through a NULL pointer.
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <new>
#include <vector>

#include "abi/ibverbs/cq_moderation.h"
#include "abi/ibverbs/device_fatal.h"
#include "abi/ibverbs/devx_queues.h"
#include "abi/ibverbs/exports.h"
#include "abi/ibverbs/mr_backing.h"
#include "abi/ibverbs/ops.h"
#include "abi/ibverbs/parent_domain.h"
#include "abi/ibverbs/peers.h"
#include "abi/ibverbs/provider.h"
#include "abi/ibverbs/reject.h"
#include "abi/ibverbs/send_queue.h"
#include "abi/ibverbs/unsupported_ops.h"
#include "abi/ibverbs/wire_post.h"
#include "abi/ibverbs/wq.h"
#include "common/device_limits.h"
#include "common/log.h"
#include "common/no_destructor.h"
#include "common/unix_socket.h"
#include "datapath/owner_word_lock.h"

namespace softverbs::provider {

Context::~Context() {
  if (imported_fd >= 0) close(imported_fd);
  if (table_fd >= 0) close(table_fd);
  if (record_fd >= 0) close(record_fd);
}

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
  v->post_srq_ops = PostSrqOpsOp;
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
  v->modify_cq = ModifyCqOp;
  v->ibv_create_flow = CreateFlowOp;
  v->ibv_destroy_flow = DestroyFlowOp;
  v->create_wq = CreateWqOp;
  v->modify_wq = ModifyWqOp;
  v->destroy_wq = DestroyWqOp;
  v->create_rwq_ind_table = CreateRwqIndTableOp;
  v->destroy_rwq_ind_table = DestroyRwqIndTableOp;
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

// Maps the device table (the memfd the daemon sent with its hello reply),
// keeping the fd for contexts imported from this one.
int MapDeviceTable(Context* ctx, int table_fd) {
  if (table_fd < 0) return EPROTO;
  ctx->table_fd = fcntl(table_fd, F_DUPFD_CLOEXEC, 0);
  if (ctx->table_fd < 0) return errno;
  if (int err = ctx->table_mapping.Map(ctx->table_fd)) return err;
  if (!datapath::DeviceTable::Compatible(ctx->table_mapping.base(), ctx->table_mapping.size())) {
    Log("ibv_open_device: the daemon's shared tables are of another layout version");
    return EPROTO;
  }
  ctx->table = datapath::DeviceTable(ctx->table_mapping.base());
  ctx->peers = std::make_unique<PeerCache>(ctx);
  return 0;
}

// The contexts open in this process: ibv_import_device finds the one whose
// connection it is given.
std::mutex registry_mutex;
NoDestructor<std::vector<Context*>> registry;

void Register(Context* ctx) {
  static std::atomic<uint64_t> next_keeper{1};
  ctx->keeper = next_keeper.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard lock(registry_mutex);
  registry->push_back(ctx);
}

void Unregister(Context* ctx) {
  std::lock_guard lock(registry_mutex);
  std::erase(*registry, ctx);
}

// A context open in this process whose connection is the socket `st`
// describes, or nullptr. Called with registry_mutex held.
Context* ContextOfSocket(const struct stat& st) {
  for (Context* ctx : *registry) {
    struct stat own;
    if (fstat(ctx->channel.fd(), &own) == 0 && own.st_dev == st.st_dev && own.st_ino == st.st_ino) {
      return ctx;
    }
  }
  return nullptr;
}

// Fills the public ibv_context of a context whose channel is connected.
ibv_context* PublishContext(Context* ctx, ibv_device* device) {
  ibv_context* ibv = ctx->ibv();
  ctx->vctx.sz = sizeof(verbs_context);
  ibv->device = device;
  ibv->cmd_fd = ctx->channel.fd();
  ibv->async_fd = ctx->event_fd;
  ibv->num_comp_vectors = softverbs::limits::kNumCompVectors;
  ibv->abi_compat = __VERBS_ABI_IS_EXTENDED;
  pthread_mutex_init(&ibv->mutex, nullptr);
  InstallContextOps(ibv);
  Register(ctx);
  return ibv;
}

}  // namespace

}  // namespace softverbs::provider

using namespace softverbs::provider;
using softverbs::Log;

namespace softverbs::provider {
namespace {

// A new connection to the daemon and the context on it. join_fd >= 0: a
// descriptor of another process's context connection, whose group (the
// kernel's ufile) the new client joins. nullptr with errno on failure,
// explained on the log channel.
Context* OpenContext(const char* verb, const char* device_name, int join_fd) {
  namespace protocol = softverbs::protocol;
  auto* ctx = new (std::nothrow) Context();
  if (!ctx) {
    Log("%s: out of memory for the context", verb);
    errno = ENOMEM;
    return nullptr;
  }
  memset(&ctx->vctx, 0, sizeof(ctx->vctx));
  protocol::HelloRequest hello{static_cast<uint32_t>(protocol::Role::kContext),
                               static_cast<uint32_t>(getpid()), 0};
  protocol::HelloReply reply{};
  std::vector<int> fds;
  int err = 0;
  // The access record: where this context counts its accesses to other
  // processes' MRs (datapath/layout.h), the only count of them an owner's
  // dereg waits on; no context works without one.
  const int record_fd = softverbs::datapath::CreateSharedFile(
      "softverbs-access-record", softverbs::datapath::kAccessRecordSize);
  if (record_fd < 0) {
    err = -record_fd;
  } else {
    ctx->record_fd = record_fd;
    err = ctx->access_record.Map(record_fd);
  }
  // A daemon that reached its idle timeout just as we connected closes the
  // connection unanswered (ENODEV): connect again, which starts a new one.
  for (int attempt = 0; attempt < 3 && !err; ++attempt) {
    if ((err = ctx->channel.Connect(protocol::Role::kContext))) break;
    // The data path: our /proc/self/mem goes to the daemon (peers reach the
    // partial pages of our MRs through it), the device table comes back.
    // Our access record goes along (the daemon takes back the in-flight
    // counts it holds if we die inside an access), and the connection's own
    // socket (by which an ibv_import_device of another process names it).
    int hello_fds[4];
    int nfds = 0;
    hello.files = 0;
    int mem_fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
    ctx->has_mem_fd = mem_fd >= 0;
    if (mem_fd >= 0) {
      hello_fds[nfds++] = mem_fd;
      hello.files |= protocol::kHelloMemFd;
    }
    hello_fds[nfds++] = record_fd;
    hello.files |= protocol::kHelloAccessRecord;
    hello_fds[nfds++] = ctx->channel.fd();
    hello.files |= protocol::kHelloSelf;
    if (join_fd >= 0) {
      hello_fds[nfds++] = join_fd;
      hello.files |= protocol::kHelloJoin;
    }
    err = ctx->channel.Call(protocol::Op::kHello, &hello, sizeof(hello), &reply, sizeof(reply),
                            hello_fds, nfds, nullptr, &fds);
    // Our copy of the file whose record locks our own atomics take: closing
    // it must not drop one (datapath/owner_word_lock.h).
    datapath::CloseOwnerMemFd(mem_fd);
    if (err != ENODEV) break;
    ctx->channel.Disconnect();
  }
  if (!err) err = MapDeviceTable(ctx, fds.empty() ? -1 : fds[0]);
  // The call page, after the table (protocol/call_page.h); without it every
  // call goes over the socket.
  if (!err && fds.size() > 1 && getenv("SOFTVERBS_TEST_NO_CALL_PAGE") == nullptr) {
    if (int page_err = ctx->channel.AttachCallPage(fds[1])) {
      Log("%s: calls go over the socket only: the call page cannot be mapped: %s", verb,
          strerror(page_err));
    }
  }
  for (int fd : fds) close(fd);
  if (!err) {
    ctx->client_id = reply.client_id;
    ctx->group_id = reply.group_id;
    ctx->token = reply.context_token;
    ctx->active_mtu = static_cast<ibv_mtu>(reply.active_mtu);
    ctx->gids = reply.gids;
    ctx->multicast_gids = reply.multicast_gids;
    err = OpenEventConnection(ctx, reply.context_token);
  }
  if (!err) err = StartDeviceWatch(ctx);
  if (err) {
    Log("%s: cannot open %s: %s", verb, device_name, strerror(err));
    delete ctx;
    errno = err;
    return nullptr;
  }
  return ctx;
}

}  // namespace
}  // namespace softverbs::provider

SV_EXPORT ibv_context* ibv_open_device(ibv_device* device) {
  if (device != SoftverbsDevice()) {
    return RejectNull(ENODEV, "ibv_open_device: %p is not softverbs' device",
                      static_cast<void*>(device));
  }
  Context* ctx = OpenContext("ibv_open_device", device->name, -1);
  if (!ctx) return FailNull<ibv_context>(errno);
  return PublishContext(ctx, device);
}

// ibv_import_device(3): a context on the connection (the kernel's ufile)
// cmd_fd is a descriptor of, sharing its objects, handles and keys; its own
// async fd (the device's events go to the first context's while it is open,
// as the kernel's to the ufile's default async file). The connection, and
// its objects, live while any descriptor of it is open. cmd_fd becomes the
// new context's (closed by ibv_close_device).
// - A context open in this process: the new one shares its connection.
// - Another process's (cmd_fd came over a socket, SCM_RIGHTS): a connection
//   of our own whose client joins that context's group; our memory stays
//   ours (its MRs are reached as a peer's), and the group's objects go when
//   the last of its processes leaves.
SV_EXPORT ibv_context* ibv_import_device(int cmd_fd) {
  struct stat st;
  if (fstat(cmd_fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
    return RejectNull(EINVAL, "ibv_import_device: fd %d is not a softverbs context's cmd_fd",
                      cmd_fd);
  }
  ibv_device* device = const_cast<ibv_device*>(SoftverbsDevice());
  Context* ctx = nullptr;
  {
    std::lock_guard lock(registry_mutex);
    if (Context* from = ContextOfSocket(st)) {
      ctx = new (std::nothrow) Context();
      if (!ctx) return RejectNull(ENOMEM, "ibv_import_device: out of memory for the context");
      memset(&ctx->vctx, 0, sizeof(ctx->vctx));
      ctx->channel.Adopt(from->channel, fcntl(from->channel.fd(), F_DUPFD_CLOEXEC, 0));
      ctx->client_id = from->client_id;
      ctx->group_id = from->group_id;
      ctx->token = from->token;
      ctx->active_mtu = from->active_mtu;
      ctx->gids = from->gids;
      ctx->multicast_gids = from->multicast_gids;
      ctx->has_mem_fd = from->has_mem_fd;
      ctx->record_fd = fcntl(from->record_fd, F_DUPFD_CLOEXEC, 0);
      ctx->table_fd = fcntl(from->table_fd, F_DUPFD_CLOEXEC, 0);
      int err = ctx->channel.fd() < 0 || ctx->record_fd < 0 || ctx->table_fd < 0 ? errno : 0;
      if (!err) err = ctx->access_record.Map(ctx->record_fd);
      if (!err && (err = ctx->table_mapping.Map(ctx->table_fd)) == 0) {
        ctx->table = softverbs::datapath::DeviceTable(ctx->table_mapping.base());
        ctx->peers = std::make_unique<PeerCache>(ctx);
      }
      if (!err) err = OpenEventConnection(ctx, ctx->token);
      if (!err) err = StartDeviceWatch(ctx);
      if (err) {
        Log("ibv_import_device: cannot import fd %d: %s", cmd_fd, strerror(err));
        delete ctx;
        return FailNull<ibv_context>(err);
      }
    }
  }
  if (!ctx) {
    ctx = OpenContext("ibv_import_device", device->name, cmd_fd);
    if (!ctx) return FailNull<ibv_context>(errno);
  }
  ctx->imported_fd = cmd_fd;
  ibv_context* ibv = PublishContext(ctx, device);
  ibv->cmd_fd = cmd_fd;
  return ibv;
}

SV_EXPORT int ibv_close_device(ibv_context* context) {
  if (!context) return RejectMinusOne(EINVAL, "ibv_close_device: context is NULL");
  Context* ctx = Context::From(context);
  Unregister(ctx);
  StopDevxQueues(ctx);  // first: it executes work through the peers and the progress thread
  StopProgressThread(ctx);
  StopDeviceWatch(ctx);
  CloseWire(ctx);
  // Closing the connections is what tells the daemon to release everything
  // the context still owned, exactly as when the process dies.
  if (ctx->event_fd >= 0) close(ctx->event_fd);
  pthread_mutex_destroy(&context->mutex);
  const uint64_t keeper = ctx->keeper;
  delete ctx;
  // The device forgot what it kept for the context when the connection
  // closed (above); the library's descriptors of such memfds go after it.
  ForgetKeeper(keeper);
  return 0;
}
