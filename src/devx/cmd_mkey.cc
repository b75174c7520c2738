// CREATE_MKEY / QUERY_MKEY / DESTROY_MKEY. An mkey index comes from the
// daemon's MR key table, so DEVX mkeys and verbs MRs never collide; the
// key is index << 8 | mkc.mkey_7_0.
#include <algorithm>

#include "handlers.h"
#include "prm_command_layouts.h"
#include "prm_context_layouts.h"
#include "prm_opcodes.h"

namespace softverbs::devx {
namespace {

using namespace layout;

uint32_t AccessMode(std::span<const uint8_t> mkc) {
  return GetField(mkc, mkc::kAccessMode4To2) << 2 | GetField(mkc, mkc::kAccessMode1To0);
}

}  // namespace

Check CreateMkey(Command& command) {
  const auto mkc = SubBox(command.in, create_mkey::kMkcByte);
  // Only memory-backed keys: PA needs physical addresses, KLM/KSM indirect
  // keys need UMR-style translation that the data path does not have.
  if (AccessMode(mkc) != mkey_access_mode::kMtt) return Check::kMkeyAccessMode;
  const DeviceCaps caps = command.state.device.Caps();
  if (GetField(mkc, mkc::kLength64) || GetField64(mkc, mkc::kLen) > caps.max_mr_size) {
    return Check::kMkeyTooLong;
  }
  const auto pd = Resolve(command, ResourceKind::kPd, GetField(mkc, mkc::kPd));
  if (!pd) return Check::kMkeyPd;
  const auto umem =
      Resolve(command, ResourceKind::kUmem, GetField(command.in, create_mkey::kMkeyUmemId));
  if (!umem) return Check::kMkeyUmem;
  const uint32_t index = command.state.device.AllocNumber(ResourceKind::kMkey);
  if (index == 0) return Check::kMkeyNumbersExhausted;

  FirmwareObject& mkey = InsertCreated(command, opcode::kCreateMkey, index);
  mkey.context.assign(mkc::kBytes, 0);
  std::copy_n(mkc.begin(), std::min(mkc.size(), mkc::kBytes), mkey.context.begin());
  Pin(command.state, mkey, *pd);
  Pin(command.state, mkey, *umem);
  ReportObjectNumber(command, index);
  return Check::kPassed;
}

Check QueryMkey(Command& command) {
  const FirmwareObject* mkey =
      FindOwned(command, opcode::kCreateMkey, GetField(command.in, kObjectNumber));
  if (mkey == nullptr) return Check::kMkeyNotFound;
  std::copy(mkey->context.begin(), mkey->context.end(), command.out.begin() + query_mkey::kMkcByte);
  return Check::kPassed;
}

Check DestroyMkey(Command& command) {
  const uint32_t index = GetField(command.in, kObjectNumber);
  FirmwareObject* mkey = FindOwned(command, opcode::kCreateMkey, index);
  if (mkey == nullptr) return Check::kMkeyNotFound;
  ReleaseHolds(command.state, *mkey);
  command.state.device.FreeNumber(ResourceKind::kMkey, index);
  command.state.objects.Erase(mkey->handle);
  return Check::kPassed;
}

}  // namespace softverbs::devx
