// softverbsd's DEVX service: the emulated mlx5 firmware (src/devx) wired to
// the device's object tables, one DEVX uid per client that opened its context
// with MLX5DV_CONTEXT_FLAGS_DEVX, and the requests of libmlx5's mlx5dv_devx_*
// calls. Lives inside Device (Device::devx()); runs on the daemon's single
// thread like the rest of it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <vector>

#include "daemon/devx_device_objects.h"
#include "daemon/objects.h"
#include "daemon/verdict.h"
#include "devx/firmware.h"
#include "protocol/devx_messages.h"

namespace softverbs::daemon {

class Device;

class DevxService {
 public:
  explicit DevxService(Device& device);
  ~DevxService();
  DevxService(const DevxService&) = delete;
  DevxService& operator=(const DevxService&) = delete;

  // kDevxOpen: the client becomes a DEVX context (idempotent).
  Verdict Open(ClientId c, protocol::DevxOpenReply* out);
  // kDevxCommand: `body` is a DevxCommandRequest and the input box; `reply`
  // receives a DevxCommandReply and the output box, and for a failed command
  // the rule it broke (text, up to the end of the reply). The verdict fails
  // only for malformed requests; the command's own outcome is in the reply.
  Verdict Command(ClientId c, const uint8_t* body, size_t len, std::vector<uint8_t>* reply);
  // kDevxDestroy: mlx5dv_devx_obj_destroy.
  Verdict Destroy(ClientId c, const protocol::DevxDestroyRequest& req);
  Verdict UmemReg(ClientId c, const protocol::DevxUmemRegRequest& req,
                  protocol::DevxUmemRegReply* out);
  Verdict UmemDereg(ClientId c, const protocol::DevxUmemDeregRequest& req);

  // Destroys the client's DEVX objects and UMEMs and frees its uid. Runs
  // before its verbs objects are released: DEVX objects hold them.
  void RemoveClient(ClientId c);

  // The data path moved a DEVX QP to ERR: the firmware's qpc follows.
  void QpEnteredError(uint32_t qpn);

  // The client's uid and DEVX objects, for `softverbs status --json`.
  nlohmann::json StatusJson(ClientId c) const;

 private:
  devx::CallerContext CallerOf(ClientId c) const;
  // c's DEVX uid, allocated on first use (0: every uid is taken).
  uint16_t EnsureUid(ClientId c);
  uint16_t AllocUid();
  // Tells the device about a CQ or QP the firmware just created, modified
  // or destroyed (its data-path shadow follows).
  void NoteQueueCommand(ClientId c, devx::EntryPoint entry_point, std::span<const uint8_t> in,
                        devx::ObjectHandle handle);

  Device& device_;
  DevxDeviceObjects objects_;
  devx::Firmware firmware_;
  uint16_t next_uid_ = 1;
  std::map<ClientId, uint16_t> uids_;
  // Live DEVX objects of each client (handles, sorted by kind and number).
  std::map<ClientId, std::set<devx::ObjectHandle>> handles_;
  std::string last_rule_;  // the firmware's explanation of the last failed command
};

}  // namespace softverbs::daemon
