// Command handlers, one file per command family (cmd_*.cc). The opcode ->
// handler table is in command_table.cc.
#ifndef SOFTVERBS_DEVX_HANDLERS_H_
#define SOFTVERBS_DEVX_HANDLERS_H_

#include "command.h"

namespace softverbs::devx {

// cmd_device_queries.cc
Check QueryHcaCap(Command& command);
Check QueryHcaVportContext(Command& command);
Check QueryAdapter(Command& command);
Check Nop(Command& command);

// cmd_pd.cc
Check AllocPd(Command& command);
Check DeallocPd(Command& command);

// cmd_transport_domain.cc
Check AllocTransportDomain(Command& command);
Check DeallocTransportDomain(Command& command);

// cmd_mkey.cc
Check CreateMkey(Command& command);
Check QueryMkey(Command& command);
Check DestroyMkey(Command& command);

// cmd_cq.cc
Check CreateCq(Command& command);
Check QueryCq(Command& command);
Check DestroyCq(Command& command);

// cmd_qp.cc
Check CreateQp(Command& command);
Check QueryQp(Command& command);
Check DestroyQp(Command& command);

// qp_transitions.cc: RST2INIT, INIT2INIT, INIT2RTR, RTR2RTS, RTS2RTS,
// SQERR2RTS, 2ERR, 2RST (the opcode picks the row of the transition table).
Check ModifyQpState(Command& command);

// cmd_flow_counter.cc
Check AllocFlowCounter(Command& command);
Check QueryFlowCounter(Command& command);
Check DeallocFlowCounter(Command& command);

}  // namespace softverbs::devx

#endif  // SOFTVERBS_DEVX_HANDLERS_H_
