#include "command_table.h"

#include "handlers.h"
#include "prm_command_layouts.h"
#include "prm_opcodes.h"

namespace softverbs::devx {
namespace {

using namespace layout;

constexpr size_t kHeaderOnly = 16;

constexpr CommandSpec kCommands[] = {
    {opcode::kQueryHcaCap, "QUERY_HCA_CAP", query_hca_cap::kOutBytes, QueryHcaCap},
    {opcode::kQueryAdapter, "QUERY_ADAPTER", query_adapter::kOutBytes, QueryAdapter},
    {opcode::kQueryHcaVportContext, "QUERY_HCA_VPORT_CONTEXT", query_hca_vport_context::kOutBytes,
     QueryHcaVportContext},
    {opcode::kNop, "NOP", kHeaderOnly, Nop},
    {opcode::kAllocPd, "ALLOC_PD", kCreateOutBytes, AllocPd},
    {opcode::kDeallocPd, "DEALLOC_PD", kHeaderOnly, DeallocPd},
    {opcode::kAllocTransportDomain, "ALLOC_TRANSPORT_DOMAIN", kCreateOutBytes,
     AllocTransportDomain},
    {opcode::kDeallocTransportDomain, "DEALLOC_TRANSPORT_DOMAIN", kHeaderOnly,
     DeallocTransportDomain},
    {opcode::kCreateMkey, "CREATE_MKEY", kCreateOutBytes, CreateMkey},
    {opcode::kQueryMkey, "QUERY_MKEY", query_mkey::kOutBytes, QueryMkey},
    {opcode::kDestroyMkey, "DESTROY_MKEY", kHeaderOnly, DestroyMkey},
    {opcode::kCreateCq, "CREATE_CQ", kCreateOutBytes, CreateCq},
    {opcode::kQueryCq, "QUERY_CQ", query_cq::kOutBytes, QueryCq},
    {opcode::kDestroyCq, "DESTROY_CQ", kHeaderOnly, DestroyCq},
    {opcode::kCreateQp, "CREATE_QP", kCreateOutBytes, CreateQp},
    {opcode::kQueryQp, "QUERY_QP", query_qp::kOutBytes, QueryQp},
    {opcode::kDestroyQp, "DESTROY_QP", kHeaderOnly, DestroyQp},
    {opcode::kRst2InitQp, "RST2INIT_QP", kHeaderOnly, ModifyQpState},
    {opcode::kInit2InitQp, "INIT2INIT_QP", kHeaderOnly, ModifyQpState},
    {opcode::kInit2RtrQp, "INIT2RTR_QP", kHeaderOnly, ModifyQpState},
    {opcode::kRtr2RtsQp, "RTR2RTS_QP", kHeaderOnly, ModifyQpState},
    {opcode::kRts2RtsQp, "RTS2RTS_QP", kHeaderOnly, ModifyQpState},
    {opcode::kSqerr2RtsQp, "SQERR2RTS_QP", kHeaderOnly, ModifyQpState},
    {opcode::k2ErrQp, "2ERR_QP", kHeaderOnly, ModifyQpState},
    {opcode::k2RstQp, "2RST_QP", kHeaderOnly, ModifyQpState},
    {opcode::kAllocFlowCounter, "ALLOC_FLOW_COUNTER", kCreateOutBytes, AllocFlowCounter},
    {opcode::kQueryFlowCounter, "QUERY_FLOW_COUNTER",
     query_flow_counter::kStatisticsByte + query_flow_counter::kRecordBytes, QueryFlowCounter},
    {opcode::kDeallocFlowCounter, "DEALLOC_FLOW_COUNTER", kHeaderOnly, DeallocFlowCounter},
};

constexpr DestroyRule kDestroyRules[] = {
    {opcode::kAllocPd, opcode::kDeallocPd, kObjectNumber},
    {opcode::kAllocTransportDomain, opcode::kDeallocTransportDomain, kObjectNumber},
    {opcode::kCreateMkey, opcode::kDestroyMkey, kObjectNumber},
    {opcode::kCreateCq, opcode::kDestroyCq, kObjectNumber},
    {opcode::kCreateQp, opcode::kDestroyQp, kObjectNumber},
    {opcode::kAllocFlowCounter, opcode::kDeallocFlowCounter, alloc_flow_counter::kFlowCounterId},
};

}  // namespace

const CommandSpec* FindCommand(uint16_t opcode) {
  for (const CommandSpec& spec : kCommands) {
    if (spec.opcode == opcode) return &spec;
  }
  return nullptr;
}

const DestroyRule* FindDestroyRule(uint16_t creator_opcode) {
  for (const DestroyRule& rule : kDestroyRules) {
    if (rule.creator_opcode == creator_opcode) return &rule;
  }
  return nullptr;
}

}  // namespace softverbs::devx
