// Asynchronous events. The daemon pushes one AsyncEventRecord per event on the
// context's event connection, whose fd is ibv_context.async_fd: it works with
// poll/epoll, and a blocking or O_NONBLOCK read behaves as on a uverbs fd.
#include <errno.h>
#include <sys/socket.h>

#include "abi/ibverbs/exports.h"
#include "abi/ibverbs/provider.h"
#include "abi/ibverbs/reject.h"
#include "abi/ibverbs/xrc_legacy_registry.h"
#include "common/log.h"
#include "softverbs/xrc_legacy.h"

using namespace softverbs::provider;
namespace protocol = softverbs::protocol;

SV_EXPORT int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
  if (!context || !event) {
    return RejectMinusOne(EINVAL, "ibv_get_async_event: %s is NULL",
                          !context ? "context" : "event");
  }
  Context* ctx = Context::From(context);
  protocol::AsyncEventRecord rec{};
  ssize_t n;
  do {
    n = recv(context->async_fd, &rec, sizeof(rec), 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return -1;
  if (n != sizeof(rec)) {
    return RejectMinusOne(EIO, "ibv_get_async_event: a %zd-byte event record, expected %zu", n,
                          sizeof(rec));
  }
  event->event_type = static_cast<ibv_event_type>(rec.event_type);
  void* object = nullptr;
  {
    std::lock_guard lock(ctx->objects_mutex);
    auto it = ctx->objects.find(rec.handle);
    if (it != ctx->objects.end()) object = it->second;
  }
  switch (static_cast<protocol::EventElement>(rec.element)) {
    case protocol::EventElement::kCq:
      event->element.cq = static_cast<ibv_cq*>(object);
      break;
    case protocol::EventElement::kQp: {
      auto* qp = static_cast<ibv_qp*>(object);
      uint32_t qpn;
      if (qp && LegacyXrcQpNumber(qp, &qpn)) {
        // A legacy receive QP has no ibv_qp of its own in the OFED API: the
        // event names it by number, flagged.
        event->event_type = static_cast<ibv_event_type>(rec.event_type | IBV_XRC_QP_EVENT_FLAG);
        *reinterpret_cast<uint32_t*>(&event->element) = qpn;
      } else {
        event->element.qp = qp;
      }
      break;
    }
    case protocol::EventElement::kSrq:
      event->element.srq = static_cast<ibv_srq*>(object);
      break;
    case protocol::EventElement::kPort:
      event->element.port_num = static_cast<int>(rec.number);
      break;
    default:
      event->element.port_num = 0;
      break;
  }
  return 0;
}

namespace {
template <typename T>
void CountAck(T* obj, uint32_t T::*counter) {
  pthread_mutex_lock(&obj->mutex);
  ++(obj->*counter);
  pthread_cond_signal(&obj->cond);
  pthread_mutex_unlock(&obj->mutex);
}
}  // namespace

SV_EXPORT void ibv_ack_async_event(ibv_async_event* event) {
  if (!event) return;
  switch (event->event_type) {
    case IBV_EVENT_CQ_ERR:
      if (event->element.cq) CountAck(event->element.cq, &ibv_cq::async_events_completed);
      break;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
      if (event->element.qp) CountAck(event->element.qp, &ibv_qp::events_completed);
      break;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED:
      if (event->element.srq) CountAck(event->element.srq, &ibv_srq::events_completed);
      break;
    default:
      break;  // port and device events carry no object
  }
}
