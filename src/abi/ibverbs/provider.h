// The softverbs provider's objects inside an application's process. Each
// wraps the public libibverbs struct first (so the header-inline verbs, which
// only know the public layout, work on it) and adds what the provider needs:
// the daemon handle of the object and, later, its shared-memory rings.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "abi/ibverbs/daemon_channel.h"
#include "common/gid_table.h"
#include "protocol/messages.h"

namespace softverbs::provider {

using protocol::Handle;

// Every provider object starts with its public struct, so a pointer to the
// public struct converts to the provider object.
template <typename Outer, typename Public>
Outer* FromPublic(Public* p) {
  return reinterpret_cast<Outer*>(p);
}

struct Context {
  // First, as in every rdma-core provider: the header-inline verbs find the
  // verbs_context right before the ibv_context they are given.
  verbs_context vctx;
  DaemonChannel channel;  // requests to softverbsd
  int event_fd = -1;      // the event connection; also ibv_context.async_fd
  uint32_t client_id = 0;
  ibv_mtu active_mtu = IBV_MTU_1024;
  GidTable gids{};
  std::mutex objects_mutex;                   // guards objects (async events look objects up)
  std::unordered_map<Handle, void*> objects;  // daemon handle -> ibv_cq/qp/srq

  static Context* From(ibv_context* ctx) { return reinterpret_cast<Context*>(verbs_get_ctx(ctx)); }
  ibv_context* ibv() { return &vctx.context; }
  void Track(Handle h, void* obj) {
    std::lock_guard lock(objects_mutex);
    objects[h] = obj;
  }
  void Untrack(Handle h) {
    std::lock_guard lock(objects_mutex);
    objects.erase(h);
  }
};

struct Pd {
  ibv_pd ibv;  // first
  Handle handle;
  uint32_t pdn = 0;  // for mlx5dv_init_obj
};

struct Mr {
  ibv_mr ibv;  // first
  Handle handle;
};

struct CompChannel {
  ibv_comp_channel ibv;  // first
  std::mutex mutex;
  std::deque<ibv_cq*> pending;  // CQs with an undelivered completion event
};

struct Cq {
  ibv_cq_ex ibv;  // first; its leading members are struct ibv_cq
  Handle handle;
  uint32_t cqn;
  uint64_t wc_flags;
};

struct Srq {
  ibv_srq ibv;  // first
  Handle handle;
  uint32_t srqn;
  ibv_srq_type type;
};

struct Qp {
  ibv_qp_ex ibv;  // first; its leading member is struct ibv_qp
  Handle handle;
  ibv_qp_cap cap;
  bool sq_sig_all = false;
  bool has_qp_ex = false;  // created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS
};

struct Ah {
  ibv_ah ibv;  // first
  Handle handle;
  ibv_ah_attr attr;
};

struct Xrcd {
  ibv_xrcd ibv;  // first
  Handle handle;
};

}  // namespace softverbs::provider
