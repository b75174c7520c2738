// IBV_EVENT_COMM_EST (IBA 11.6.3): the first message a connected QP (RC, UC,
// XRC receive) gets while in RTR establishes communication - once per
// arrival in RTR (the daemon clears QpEntry::comm_est when the QP goes back
// to RESET or INIT). Both engines raise it: the shared-memory responder and
// the network transport's.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>

#include "datapath/engine.h"
#include "datapath/layout.h"

namespace softverbs::datapath {

inline void RaiseCommEstOnce(Host& host, QpEntry* te, uint32_t target_qpn) {
  if (te && te->state.load() == IBV_QPS_RTR && te->comm_est.load(std::memory_order_relaxed) == 0 &&
      te->comm_est.exchange(1) == 0) {
    host.RaiseQpEvent(target_qpn, IBV_EVENT_COMM_EST);
  }
}

}  // namespace softverbs::datapath
