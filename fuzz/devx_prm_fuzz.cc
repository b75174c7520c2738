// libFuzzer target: arbitrary bytes become a sequence of DEVX calls against
// one firmware, so the fuzzer can build objects and then poke at them.
//
// Input format, repeated until the bytes run out:
//   byte 0      entry point (mod 5) and caller (bit 7: second client; bit 6:
//               context without DEVX uid)
//   byte 1      handle slot for modify/query/destroy (index into the handles
//               created so far)
//   bytes 2-3   input box length (big-endian, capped at what is left)
//   bytes 4-5   output box length (big-endian, capped at 8 KiB)
//   then        the input box
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fake_device_objects.h"
#include "firmware.h"

namespace {

using softverbs::devx::CallerContext;
using softverbs::devx::ClientId;
using softverbs::devx::EntryPoint;
using softverbs::devx::Firmware;
using softverbs::devx::ObjectHandle;
using softverbs::devx::ResourceKind;
using softverbs::devx::testing::FakeDeviceObjects;

constexpr size_t kHeaderBytes = 6;
constexpr size_t kMaxOutBytes = 8192;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FakeDeviceObjects device;
  Firmware firmware(device);
  const CallerContext clients[] = {{1, 11}, {2, 22}, {3, 0}};
  // Give both DEVX clients verbs objects to reference (numbers are
  // predictable: PD 0x10.., CQ 0x100.., UMEM 0x7000..).
  for (ClientId client : {1, 2}) {
    for (ResourceKind kind : {ResourceKind::kPd, ResourceKind::kCq, ResourceKind::kUmem,
                              ResourceKind::kUmem, ResourceKind::kUmem}) {
      device.AddVerbsObject(kind, client);
    }
  }
  std::vector<ObjectHandle> handles;
  size_t at = 0;
  while (size - at >= kHeaderBytes) {
    const uint8_t selector = data[at];
    const auto entry_point = static_cast<EntryPoint>((selector & 0x3f) % 5);
    const CallerContext& caller = clients[(selector & 0x40) ? 2 : (selector >> 7)];
    const uint8_t slot = data[at + 1];
    size_t in_bytes = size_t{data[at + 2]} << 8 | data[at + 3];
    const size_t out_bytes = (size_t{data[at + 4]} << 8 | data[at + 5]) % kMaxOutBytes;
    at += kHeaderBytes;
    if (in_bytes > size - at) in_bytes = size - at;
    const std::vector<uint8_t> in(data + at, data + at + in_bytes);
    at += in_bytes;
    std::vector<uint8_t> out(out_bytes);

    ObjectHandle handle = handles.empty() ? slot : handles[slot % handles.size()];
    const int error = firmware.Execute(entry_point, caller, in, out, &handle);
    if (entry_point == EntryPoint::kObjCreate && error == 0) handles.push_back(handle);
  }
  firmware.DestroyAllOf(1);
  firmware.DestroyAllOf(2);
  firmware.DestroyAllOf(3);
  // Every reference taken must have been given back.
  for (const auto& [key, count] : device.holds) {
    if (count != 0) __builtin_trap();
  }
  if (firmware.ObjectCount() != 0) __builtin_trap();
  return 0;
}
