// Completion queues and completion channels.
//
// A completion channel is an eventfd in semaphore mode: each completion event
// adds one, ibv_get_cq_event takes one and pops the CQ that fired, so the fd
// works with poll/epoll and honours O_NONBLOCK set by the application.
#include <errno.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <new>

#include "abi/ibverbs/exports.h"
#include "abi/ibverbs/ops.h"
#include "abi/ibverbs/provider.h"
#include "common/log.h"

namespace softverbs::provider {
namespace {

// Work-completion fields softverbs fills (ibv_create_cq_wc_flags).
constexpr uint64_t kSupportedWcFlags =
    IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP |
    IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | IBV_WC_EX_WITH_DLID_PATH_BITS;

constexpr uint32_t kKnownCqComp = IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD;
constexpr uint32_t kKnownCqFlags =
    IBV_CREATE_CQ_ATTR_SINGLE_THREADED | IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;

// The extended poll API on a CQ with nothing to poll yet.
int StartPollEmpty(ibv_cq_ex*, ibv_poll_cq_attr* attr) {
  return attr && attr->comp_mask ? EINVAL : ENOENT;
}
int NextPollEmpty(ibv_cq_ex*) {
  return ENOENT;
}
void EndPoll(ibv_cq_ex*) {}
ibv_wc_opcode ReadOpcode(ibv_cq_ex*) {
  return IBV_WC_SEND;
}
uint32_t ReadZero32(ibv_cq_ex*) {
  return 0;
}
uint8_t ReadZero8(ibv_cq_ex*) {
  return 0;
}
__be32 ReadImm(ibv_cq_ex*) {
  return 0;
}
unsigned int ReadWcFlags(ibv_cq_ex*) {
  return 0;
}

ibv_cq_ex* CreateCq(ibv_context* context, uint32_t cqe, void* cq_context, ibv_comp_channel* channel,
                    uint32_t comp_vector, uint64_t wc_flags) {
  Context* ctx = Context::From(context);
  protocol::CreateCqRequest req{cqe, comp_vector, wc_flags};
  protocol::CreateCqReply rep{};
  if (int err = ctx->channel.Call(protocol::Op::kCreateCq, req, &rep)) {
    return FailNull<ibv_cq_ex>(err);
  }
  auto* cq = new Cq{};
  cq->handle = rep.handle;
  cq->cqn = rep.cqn;
  cq->wc_flags = wc_flags;
  ibv_cq_ex& ex = cq->ibv;
  ex.context = context;
  ex.channel = channel;
  ex.cq_context = cq_context;
  ex.handle = rep.handle;
  ex.cqe = static_cast<int>(rep.cqe);
  pthread_mutex_init(&ex.mutex, nullptr);
  pthread_cond_init(&ex.cond, nullptr);
  ex.comp_mask = 0;
  ex.start_poll = StartPollEmpty;
  ex.next_poll = NextPollEmpty;
  ex.end_poll = EndPoll;
  ex.read_opcode = ReadOpcode;
  ex.read_vendor_err = ReadZero32;
  ex.read_byte_len = ReadZero32;
  ex.read_imm_data = ReadImm;
  ex.read_qp_num = ReadZero32;
  ex.read_src_qp = ReadZero32;
  ex.read_wc_flags = ReadWcFlags;
  ex.read_slid = ReadZero32;
  ex.read_sl = ReadZero8;
  ex.read_dlid_path_bits = ReadZero8;
  if (channel) __atomic_add_fetch(&channel->refcnt, 1, __ATOMIC_SEQ_CST);
  ctx->Track(rep.handle, &cq->ibv);
  return &cq->ibv;
}

}  // namespace

int PollCqOp(ibv_cq* /*cq*/, int num_entries, ibv_wc* /*wc*/) {
  // Nothing can complete until the data path posts work (see docs/status.md).
  return num_entries < 0 ? -EINVAL : 0;
}

int ReqNotifyCqOp(ibv_cq* /*cq*/, int /*solicited_only*/) {
  return 0;
}

ibv_cq_ex* CreateCqExOp(ibv_context* context, ibv_cq_init_attr_ex* attr) {
  if (!context || !attr) return FailNull<ibv_cq_ex>(EINVAL);
  if (attr->comp_mask & ~kKnownCqComp) {
    Log("ibv_create_cq_ex: comp_mask 0x%x has unknown bits", attr->comp_mask);
    return FailNull<ibv_cq_ex>(EINVAL);
  }
  if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) && (attr->flags & ~kKnownCqFlags)) {
    Log("ibv_create_cq_ex: flags 0x%x are not supported", attr->flags);
    return FailNull<ibv_cq_ex>(EOPNOTSUPP);
  }
  if (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) {
    Log("ibv_create_cq_ex: parent domains are not supported");
    return FailNull<ibv_cq_ex>(EOPNOTSUPP);
  }
  if (attr->wc_flags & ~kSupportedWcFlags) {
    Log("ibv_create_cq_ex: wc_flags 0x%llx ask for fields softverbs does not report",
        static_cast<unsigned long long>(attr->wc_flags & ~kSupportedWcFlags));
    return FailNull<ibv_cq_ex>(EOPNOTSUPP);
  }
  return CreateCq(context, attr->cqe, attr->cq_context, attr->channel, attr->comp_vector,
                  attr->wc_flags);
}

}  // namespace softverbs::provider

using namespace softverbs::provider;
using softverbs::Log;
namespace protocol = softverbs::protocol;

SV_EXPORT ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cq_context,
                                ibv_comp_channel* channel, int comp_vector) {
  if (!context) return FailNull<ibv_cq>(EINVAL);
  if (cqe < 1 || comp_vector < 0) {
    Log("ibv_create_cq: cqe %d / comp_vector %d out of range", cqe, comp_vector);
    return FailNull<ibv_cq>(EINVAL);
  }
  ibv_cq_ex* ex = CreateCq(context, static_cast<uint32_t>(cqe), cq_context, channel,
                           static_cast<uint32_t>(comp_vector), IBV_WC_STANDARD_FLAGS);
  return ex ? ibv_cq_ex_to_cq(ex) : nullptr;
}

SV_EXPORT int ibv_resize_cq(ibv_cq* cq, int cqe) {
  if (!cq || cqe < 1) return EINVAL;
  Cq* c = FromPublic<Cq>(cq);
  protocol::ResizeCqRequest req{c->handle, static_cast<uint32_t>(cqe)};
  protocol::ResizeCqReply rep{};
  if (int err = Context::From(cq->context)->channel.Call(protocol::Op::kResizeCq, req, &rep)) {
    return err;
  }
  cq->cqe = static_cast<int>(rep.cqe);
  return 0;
}

SV_EXPORT int ibv_destroy_cq(ibv_cq* cq) {
  if (!cq) return EINVAL;
  Cq* c = FromPublic<Cq>(cq);
  Context* ctx = Context::From(cq->context);
  protocol::HandleRequest req{c->handle, 0};
  if (int err = ctx->channel.Call(protocol::Op::kDestroyCq, &req, sizeof(req), nullptr, 0)) {
    return err;
  }
  ctx->Untrack(c->handle);
  if (cq->channel) {
    auto* ch = FromPublic<CompChannel>(cq->channel);
    std::lock_guard lock(ch->mutex);
    std::erase(ch->pending, cq);
    __atomic_sub_fetch(&cq->channel->refcnt, 1, __ATOMIC_SEQ_CST);
  }
  pthread_cond_destroy(&cq->cond);
  pthread_mutex_destroy(&cq->mutex);
  delete c;
  return 0;
}

SV_EXPORT ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
  if (!context) return FailNull<ibv_comp_channel>(EINVAL);
  int fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (fd < 0) return nullptr;
  auto* ch = new CompChannel{};
  ch->ibv.context = context;
  ch->ibv.fd = fd;
  ch->ibv.refcnt = 0;
  return &ch->ibv;
}

SV_EXPORT int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  if (!channel) return EINVAL;
  if (__atomic_load_n(&channel->refcnt, __ATOMIC_SEQ_CST) > 0) {
    Log("ibv_destroy_comp_channel: %d CQ(s) still use the channel", channel->refcnt);
    return EBUSY;
  }
  close(channel->fd);
  delete FromPublic<CompChannel>(channel);
  return 0;
}

SV_EXPORT int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  if (!channel || !cq || !cq_context) {
    errno = EINVAL;
    return -1;
  }
  auto* ch = FromPublic<CompChannel>(channel);
  for (;;) {
    uint64_t one;
    if (read(channel->fd, &one, sizeof(one)) != sizeof(one)) return -1;
    std::lock_guard lock(ch->mutex);
    if (ch->pending.empty()) continue;  // the CQ was destroyed meanwhile
    *cq = ch->pending.front();
    ch->pending.pop_front();
    *cq_context = (*cq)->cq_context;
    return 0;
  }
}

SV_EXPORT void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
  if (!cq) return;
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += nevents;
  pthread_cond_signal(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}
