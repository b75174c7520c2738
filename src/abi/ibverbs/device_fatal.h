// The device's death: softverbsd went away (killed, crashed, stopped) under
// open contexts. As the kernel does when a device is reset or removed under
// open uverbs files (disassociation): IBV_EVENT_DEVICE_FATAL once on the
// async fd, then nothing more there (ibv_get_async_event fails with EIO and
// the fd is no longer readable, so a poll loop sleeps instead of spinning);
// ports report DOWN; every QP goes to the error state with its work flushed;
// destroy verbs succeed (the resources went with the device; rdma-core treats
// the kernel's EIO on a destroy the same way); a new ibv_open_device starts a
// new daemon. docs/architecture.md, "When the daemon dies".
#pragma once

#include <infiniband/verbs.h>

namespace softverbs::provider {

struct Context;

// Starts the context's watcher: a thread that sleeps in poll() on the
// control connection and puts the context in the fatal state when the
// daemon's end closes. Returns 0 or an errno.
int StartDeviceWatch(Context* ctx);
// Stops it (ibv_close_device).
void StopDeviceWatch(Context* ctx);

// Whether the device is gone: the fatal state, or the control connection
// found closed now (which enters the fatal state). Does not block.
bool DeviceGone(Context* ctx);

// Enters the fatal state once: every QP of the context in error, its waiting
// sends and posted receives completed with IBV_WC_WR_FLUSH_ERR.
void EnterFatalState(Context* ctx);

// The event connection ended: the first caller gets IBV_EVENT_DEVICE_FATAL
// in *event (true) and the async fd is made quiet; later callers get false.
bool TakeFatalEvent(Context* ctx, ibv_async_event* event);

}  // namespace softverbs::provider
