// ALLOC_FLOW_COUNTER / QUERY_FLOW_COUNTER / DEALLOC_FLOW_COUNTER. There is
// no flow steering, so counters exist (DEVX users allocate them to test the
// object API) but always read zero.
#include <algorithm>

#include "handlers.h"
#include "prm_command_layouts.h"
#include "prm_opcodes.h"

namespace softverbs::devx {
namespace {

using namespace layout;

constexpr uint32_t kBulkUnit = 128;  // flow_counter_bulk counts 128 counters

}  // namespace

Check AllocFlowCounter(Command& command) {
  FirmwareState& state = command.state;
  const DeviceCaps caps = state.device.Caps();
  // The input flow_counter_id (or, in newer headers, a PD at DW2) is ignored.
  const uint32_t log_size = GetField(command.in, alloc_flow_counter::kBulkLogSize);
  const uint32_t bulk = GetField(command.in, alloc_flow_counter::kBulk);
  uint64_t count = 1;
  if (log_size != 0) {
    if (log_size > caps.log_max_flow_counter_bulk) return Check::kFlowCounterBulkTooBig;
    count = uint64_t{1} << log_size;
  } else if (bulk != 0) {
    count = uint64_t{bulk} * kBulkUnit;
    if (count > (uint64_t{1} << caps.log_max_flow_counter_bulk)) {
      return Check::kFlowCounterBulkTooBig;
    }
  }
  if (state.live_flow_counters + count > caps.max_flow_counters) return Check::kFlowCounterLimit;

  // Bulks start at a multiple of their size, as hardware hands them out.
  uint64_t base = (uint64_t{state.next_flow_counter} + count - 1) / count * count;
  if (base + count > UINT32_MAX) base = count;
  while (state.objects.Overlaps(opcode::kAllocFlowCounter, static_cast<uint32_t>(base),
                                static_cast<uint32_t>(count))) {
    base += count;
    if (base + count > UINT32_MAX) return Check::kFlowCounterLimit;
  }
  const auto first = static_cast<uint32_t>(base);
  FirmwareObject& counter = InsertCreated(command, opcode::kAllocFlowCounter, first);
  counter.range = static_cast<uint32_t>(count);
  state.next_flow_counter = static_cast<uint32_t>(base + count);
  state.live_flow_counters += count;
  SetField(command.out, alloc_flow_counter::kFlowCounterId, first);
  return Check::kPassed;
}

Check QueryFlowCounter(Command& command) {
  const uint32_t id = GetField(command.in, query_flow_counter::kFlowCounterId);
  const FirmwareObject* counter = FindOwned(command, opcode::kAllocFlowCounter, id);
  if (counter == nullptr) return Check::kFlowCounterNotFound;
  const uint64_t wanted =
      std::max<uint32_t>(GetField(command.in, query_flow_counter::kNumOfCounters), 1);
  if (id - counter->number + wanted > counter->range) return Check::kFlowCounterRange;
  // Every packets/octets record is zero; the answer box already is.
  return Check::kPassed;
}

Check DeallocFlowCounter(Command& command) {
  const uint32_t id = GetField(command.in, alloc_flow_counter::kFlowCounterId);
  FirmwareObject* counter =
      command.state.objects.Find(MakeObjectHandle(opcode::kAllocFlowCounter, 0, id));
  if (counter == nullptr || counter->uid != command.uid) return Check::kFlowCounterNotFound;
  command.state.live_flow_counters -= counter->range;
  command.state.objects.Erase(counter->handle);
  return Check::kPassed;
}

}  // namespace softverbs::devx
