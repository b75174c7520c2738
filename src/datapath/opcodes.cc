#include "datapath/opcodes.h"

namespace softverbs::datapath {

uint64_t SendOpsFlagsOf(uint32_t qp_type) {
  uint64_t flags = 0;
  for (const WrOpcodeInfo& row : kWrOpcodeRows) {
    if (WrOpcodeAllowed(row, qp_type)) flags |= row.send_ops_flag;
  }
  return flags;
}

IbtaTransport TransportOf(uint32_t qp_type) {
  switch (qp_type) {
    case IBV_QPT_UC:
      return IbtaTransport::kUc;
    case IBV_QPT_UD:
      return IbtaTransport::kUd;
    case IBV_QPT_XRC_SEND:
    case IBV_QPT_XRC_RECV:
      return IbtaTransport::kXrc;
    default:
      return IbtaTransport::kRc;
  }
}

}  // namespace softverbs::datapath
