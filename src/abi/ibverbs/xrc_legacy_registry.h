// Which ibv_qp handles stand for legacy (OFED) XRC receive-QP registrations:
// their async events are delivered with IBV_XRC_QP_EVENT_FLAG.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

namespace softverbs::provider {

// True, with the QP number, when qp is a legacy receive-QP registration.
bool LegacyXrcQpNumber(ibv_qp* qp, uint32_t* qpn);

}  // namespace softverbs::provider
