// Asynchronous events. The daemon pushes one AsyncEventRecord per event on the
// context's event connection, whose fd is ibv_context.async_fd: it works with
// poll/epoll, and a blocking or O_NONBLOCK read behaves as on a uverbs fd.
// Events that name a CQ, QP or SRQ follow the lifetime rule of
// event_lifetime.h: counted as reported when handed out, dropped when their
// object was destroyed before they were read.
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "abi/ibverbs/device_fatal.h"
#include "abi/ibverbs/event_lifetime.h"
#include "abi/ibverbs/exports.h"
#include "abi/ibverbs/provider.h"
#include "abi/ibverbs/reject.h"
#include "abi/ibverbs/xrc_legacy_registry.h"
#include "common/log.h"
#include "softverbs/xrc_legacy.h"

using namespace softverbs::provider;
using softverbs::Log;
namespace protocol = softverbs::protocol;

namespace softverbs::provider {
namespace {

// Which object's counter an event's acknowledgement advances
// (ibv_ack_async_event(3)); events of other types name no object.
enum class AckedOn { kNothing, kCq, kQp, kSrq };

AckedOn AckedOnOf(uint32_t event_type) {
  switch (event_type) {
    case IBV_EVENT_CQ_ERR:
      return AckedOn::kCq;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
      return AckedOn::kQp;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED:
      return AckedOn::kSrq;
    default:
      return AckedOn::kNothing;
  }
}

// ibv_async_event.event_type as the integer it may hold: the legacy XRC API
// ORs IBV_XRC_QP_EVENT_FLAG (0x80000000) into it, a value outside the enum
// that C++ may not load through the enum type. Stored and read as bytes.
static_assert(sizeof(ibv_event_type) == sizeof(uint32_t));
uint32_t RawEventType(const ibv_async_event* event) {
  uint32_t v;
  memcpy(&v, &event->event_type, sizeof(v));
  return v;
}
void SetRawEventType(ibv_async_event* event, uint32_t v) {
  memcpy(&event->event_type, &v, sizeof(v));
}

bool NamesAnObject(const protocol::AsyncEventRecord& rec) {
  switch (static_cast<protocol::EventElement>(rec.element)) {
    case protocol::EventElement::kCq:
    case protocol::EventElement::kQp:
    case protocol::EventElement::kSrq:
      return true;
    default:
      return false;
  }
}

// Under objects_mutex: whether the record names an object that is gone.
bool OfDestroyedObject(const Context& ctx, const protocol::AsyncEventRecord& rec) {
  return NamesAnObject(rec) && ctx.objects.find(rec.handle) == ctx.objects.end();
}

void CountUnderMutex(pthread_mutex_t* mutex, uint32_t* counter, pthread_cond_t* cond) {
  pthread_mutex_lock(mutex);
  ++*counter;
  if (cond) pthread_cond_broadcast(cond);
  pthread_mutex_unlock(mutex);
}

// Fills *event from rec and counts it as reported on its object. False when
// the object was destroyed before the event was read: the event is dropped.
bool Deliver(Context* ctx, const protocol::AsyncEventRecord& rec, ibv_async_event* event) {
  // Held until the count is taken: a destroy that untracks the object after
  // this finds the count final and waits for its acknowledgement.
  std::lock_guard lock(ctx->objects_mutex);
  void* object = nullptr;
  if (NamesAnObject(rec)) {
    auto it = ctx->objects.find(rec.handle);
    if (it == ctx->objects.end()) return false;
    object = it->second;
  }
  const AckedOn acked_on = AckedOnOf(rec.event_type);
  SetRawEventType(event, rec.event_type);
  switch (static_cast<protocol::EventElement>(rec.element)) {
    case protocol::EventElement::kCq: {
      auto* cq = static_cast<ibv_cq*>(object);
      event->element.cq = cq;
      if (acked_on == AckedOn::kCq) {
        Cq* c = FromPublic<Cq>(reinterpret_cast<ibv_cq_ex*>(cq));
        CountUnderMutex(&cq->mutex, &c->async_events_reported, nullptr);
      }
      break;
    }
    case protocol::EventElement::kQp: {
      auto* qp = static_cast<ibv_qp*>(object);
      uint32_t qpn;
      if (LegacyXrcQpNumber(qp, &qpn)) {
        // A legacy receive QP has no ibv_qp of its own in the OFED API: the
        // event names it by number, flagged (and its ack counts on nothing).
        SetRawEventType(event, rec.event_type | IBV_XRC_QP_EVENT_FLAG);
        *reinterpret_cast<uint32_t*>(&event->element) = qpn;
      } else {
        event->element.qp = qp;
        if (acked_on == AckedOn::kQp) {
          Qp* q = FromPublic<Qp>(reinterpret_cast<ibv_qp_ex*>(qp));
          CountUnderMutex(&qp->mutex, &q->events_reported, nullptr);
        }
      }
      break;
    }
    case protocol::EventElement::kSrq: {
      auto* srq = static_cast<ibv_srq*>(object);
      event->element.srq = srq;
      if (acked_on == AckedOn::kSrq) {
        CountUnderMutex(&srq->mutex, &FromPublic<Srq>(srq)->events_reported, nullptr);
      }
      break;
    }
    case protocol::EventElement::kPort:
      event->element.port_num = static_cast<int>(rec.number);
      break;
    default:
      event->element.port_num = 0;
      break;
  }
  return true;
}

// Under event_read_mutex: consumes the records at the head of the event
// connection that name destroyed objects, without blocking.
void DropDeadHead(Context* ctx) {
  for (;;) {
    protocol::AsyncEventRecord rec{};
    ssize_t n = recv(ctx->event_fd, &rec, sizeof(rec), MSG_PEEK | MSG_DONTWAIT);
    if (n != static_cast<ssize_t>(sizeof(rec))) return;
    {
      std::lock_guard lock(ctx->objects_mutex);
      if (!OfDestroyedObject(*ctx, rec)) return;
    }
    if (recv(ctx->event_fd, &rec, sizeof(rec), MSG_DONTWAIT) != static_cast<ssize_t>(sizeof(rec))) {
      return;
    }
    Log("ibv_get_async_event: dropped %s of handle %u: its object was destroyed before the event "
        "was read",
        ibv_event_type_str(static_cast<ibv_event_type>(rec.event_type)), rec.handle);
  }
}

}  // namespace

void DropUnreadEventsOfDestroyedObjects(Context* ctx) {
  std::unique_lock reader(ctx->event_read_mutex, std::try_to_lock);
  if (reader.owns_lock()) DropDeadHead(ctx);
}

}  // namespace softverbs::provider

SV_EXPORT int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
  if (!context || !event) {
    return RejectMinusOne(EINVAL, "ibv_get_async_event: %s is NULL",
                          !context ? "context" : "event");
  }
  Context* ctx = Context::From(context);
  std::lock_guard reader(ctx->event_read_mutex);
  if (ctx->fatal_reported.load()) {
    // As the kernel's read after IBV_EVENT_DEVICE_FATAL (device_fatal.h).
    return RejectMinusOne(EIO,
                          "ibv_get_async_event: the device is gone (IBV_EVENT_DEVICE_FATAL "
                          "was reported); close the context and open the device again");
  }
  for (;;) {
    protocol::AsyncEventRecord rec{};
    ssize_t n;
    do {
      n = recv(context->async_fd, &rec, sizeof(rec), 0);
    } while (n < 0 && errno == EINTR);
    if (n == 0 || (n < 0 && (errno == ECONNRESET || errno == ENOTCONN))) {
      // The daemon's end closed: every event it sent has been read.
      if (TakeFatalEvent(ctx, event)) return 0;
      return RejectMinusOne(EIO, "ibv_get_async_event: the device is gone");
    }
    if (n < 0) return -1;
    if (n != sizeof(rec)) {
      return RejectMinusOne(EIO, "ibv_get_async_event: a %zd-byte event record, expected %zu", n,
                            sizeof(rec));
    }
    if (rec.dropped_before) {
      Log("ibv_get_async_event: %u async events were lost before this one: the context's event "
          "queue was full (its async fd was not read)",
          rec.dropped_before);
    }
    if (Deliver(ctx, rec, event)) {
      DropDeadHead(ctx);  // so the fd is not left readable for dropped events
      return 0;
    }
    Log("ibv_get_async_event: dropped %s of handle %u: its object was destroyed before the event "
        "was read",
        ibv_event_type_str(static_cast<ibv_event_type>(rec.event_type)), rec.handle);
  }
}

SV_EXPORT void ibv_ack_async_event(ibv_async_event* event) {
  if (!event) return;
  switch (AckedOnOf(RawEventType(event))) {
    case AckedOn::kCq:
      if (event->element.cq) {
        CountUnderMutex(&event->element.cq->mutex, &event->element.cq->async_events_completed,
                        &event->element.cq->cond);
      }
      break;
    case AckedOn::kQp:
      if (event->element.qp) {
        CountUnderMutex(&event->element.qp->mutex, &event->element.qp->events_completed,
                        &event->element.qp->cond);
      }
      break;
    case AckedOn::kSrq:
      if (event->element.srq) {
        CountUnderMutex(&event->element.srq->mutex, &event->element.srq->events_completed,
                        &event->element.srq->cond);
      }
      break;
    case AckedOn::kNothing:
      break;  // port and device events, and flagged legacy XRC events
  }
}
