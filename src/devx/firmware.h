// The emulated mlx5 firmware behind softverbsd's DEVX commands: the kernel's
// DEVX checks (entry-point classes, object handles, uid stamping) followed
// by a PRM command processor. Pure library: no I/O, no threads of its own.
//
// Result convention, as the kernel's DEVX ioctls:
//   0          success; the answer (possibly truncated to out.size()) is in `out`.
//   EREMOTEIO  the firmware ran the command and failed it; `out` holds the
//              status and syndrome (and whatever else fits).
//   EINVAL     rejected before reaching firmware (wrong entry point, a handle
//              that does not match the box, a box shorter than a header,
//              vhca_tunnel_id set, a non-DEVX context, ...); `out` untouched.
// Destroy reports a firmware failure as the mapped errno (EBUSY for a CQ
// still used by a QP) and keeps the object, like mlx5_cmd_exec.
#ifndef SOFTVERBS_DEVX_FIRMWARE_H_
#define SOFTVERBS_DEVX_FIRMWARE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "device_objects.h"
#include "kernel_gate.h"
#include "object_handle.h"

namespace softverbs::devx {

struct FirmwareState;

// A snapshot of a firmware object, for the daemon's data path and for tests.
struct ObjectSnapshot {
  ObjectHandle handle = 0;
  ClientId client = 0;
  uint16_t uid = 0;
  uint32_t number = 0;
  std::vector<uint8_t> context;  // qpc / cqc / mkc as stored (empty for PD, TD, counters)
};

class Firmware {
 public:
  explicit Firmware(DeviceObjects& device);
  ~Firmware();
  Firmware(const Firmware&) = delete;
  Firmware& operator=(const Firmware&) = delete;

  // Runs one DEVX call. `handle`:
  //   kObjCreate: receives the new object's handle on success (may be null).
  //   kObjModify, kObjQuery: the handle of the object the caller holds; the
  //     object named inside `in` must be that object.
  //   kObjDestroy: the object to destroy; `in` and `out` are ignored.
  //   kGeneralCmd: unused.
  // The asynchronous query is a kObjQuery whose `out` the daemon queues.
  int Execute(EntryPoint entry_point, const CallerContext& caller, std::span<const uint8_t> in,
              std::span<uint8_t> out, ObjectHandle* handle = nullptr);

  // mlx5dv_devx_obj_destroy: runs the destroy command the kernel stored at
  // creation. ENOENT when the caller holds no such object.
  int Destroy(const CallerContext& caller, ObjectHandle handle);

  // Destroys every object of a client that went away, children first. Call
  // before releasing the client's verbs objects (DEVX objects hold them).
  // Returns how many objects were destroyed.
  size_t DestroyAllOf(ClientId client);

  std::optional<ObjectSnapshot> Lookup(ObjectHandle handle) const;

  // The data path moved QP `qpn`, created through DEVX, to qpc state
  // `prm_state` (an error completion moves it to ERR): QUERY_QP and the
  // transition commands see that state, as on hardware. No-op when the
  // firmware has no such QP.
  void SetQpState(uint32_t qpn, uint32_t prm_state);
  size_t ObjectCount() const;

  // Off by default: one line per failed command, saying which rule failed.
  using LogSink = std::function<void(std::string_view line)>;
  void SetLogSink(LogSink sink);

 private:
  int ExecuteLocked(EntryPoint entry_point, const CallerContext& caller,
                    std::span<const uint8_t> in, std::span<uint8_t> out, ObjectHandle* handle);
  int DestroyLocked(const CallerContext& caller, ObjectHandle handle);
  // The firmware proper: runs a uid-stamped box and builds the whole answer.
  uint8_t RunCommand(EntryPoint entry_point, const CallerContext& caller, uint16_t uid,
                     std::span<const uint8_t> in, size_t out_bytes, std::vector<uint8_t>& answer,
                     ObjectHandle* created);
  bool HandleMatches(std::span<const uint8_t> in, ObjectHandle handle, const CallerContext& caller);

  mutable std::mutex mutex_;
  std::unique_ptr<FirmwareState> state_;
  LogSink log_;
};

}  // namespace softverbs::devx

#endif  // SOFTVERBS_DEVX_FIRMWARE_H_
