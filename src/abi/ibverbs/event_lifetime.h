// The lifetime rule of events that name an object (the kernel's uverbs
// contract, kept by libibverbs with events_reported / events_completed):
//   - an event handed to the application carries a valid object pointer;
//   - ibv_destroy_qp / ibv_destroy_cq / ibv_destroy_srq return only once
//     every event reported for the object has been acknowledged
//     (ibv_ack_async_event, ibv_ack_cq_events);
//   - events not yet read when the object is destroyed are dropped.
// The "reported" side is counted here when ibv_get_async_event /
// ibv_get_cq_event hand an event out (under the object's mutex, with the
// object still tracked); the "completed" side lives in the public structs.
#pragma once

#include <pthread.h>

#include "abi/ibverbs/provider.h"

namespace softverbs::provider {

// Blocks until done() holds, re-checking whenever cond is signalled (the
// acknowledgements signal it under mutex).
template <typename Done>
void WaitUnderMutex(pthread_mutex_t* mutex, pthread_cond_t* cond, Done done) {
  pthread_mutex_lock(mutex);
  while (!done()) pthread_cond_wait(cond, mutex);
  pthread_mutex_unlock(mutex);
}

// Called by the destroy verbs after Untrack: drops the events of objects that
// are gone from the head of the context's event connection, so that the
// async fd does not stay readable for events nobody will receive. Skipped
// while another thread is reading events (it drops them as it reads).
void DropUnreadEventsOfDestroyedObjects(Context* ctx);

}  // namespace softverbs::provider
