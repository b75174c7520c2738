// The daemon's side of the emulated firmware's coupling (devx::DeviceObjects):
// answers from the Device's own tables, so verbs objects and DEVX objects share
// one object model. A DEVX QP can name a verbs CQ by its CQN; DEVX PD, CQ, QP
// and MKEY numbers come from the same counters as the verbs ones; a verbs PD
// or CQ held by a DEVX object counts as a user, so ibv_dealloc_pd /
// ibv_destroy_cq fail with EBUSY until the DEVX object is gone.
//
// UMEMs (mlx5dv_devx_umem_reg) live here too: only DEVX objects use them.
#pragma once

#include <cstdint>
#include <map>
#include <utility>

#include "daemon/objects.h"
#include "devx/device_objects.h"

namespace softverbs::daemon {

class Device;

struct Umem {
  uint32_t id;
  ClientId owner;
  uint64_t addr;
  uint64_t size;
  uint32_t access;
  int users = 0;  // DEVX objects whose buffers or doorbells live here
};

class DevxDeviceObjects : public devx::DeviceObjects {
 public:
  explicit DevxDeviceObjects(Device& device) : device_(device) {}

  devx::DeviceCaps Caps() const override;
  uint32_t AllocNumber(devx::ResourceKind kind) override;
  void FreeNumber(devx::ResourceKind kind, uint32_t number) override;
  bool VerbsObjectUsable(devx::ResourceKind kind, uint32_t number,
                         const devx::CallerContext& caller) override;
  void Hold(devx::ResourceKind kind, uint32_t number) override;
  void Release(devx::ResourceKind kind, uint32_t number) override;

  // UMEM registration. RegisterUmem returns the new id (never 0).
  uint32_t RegisterUmem(ClientId owner, uint64_t addr, uint64_t size, uint32_t access);
  // 0, ENOENT (not the caller's) or EBUSY (a DEVX object still uses it).
  int DeregisterUmem(ClientId owner, uint32_t id);
  // Drops the client's UMEMs; call after its DEVX objects are destroyed.
  void RemoveClient(ClientId owner);
  const std::map<uint32_t, Umem>& umems() const { return umems_; }

 private:
  // Adjusts the `users` count of the verbs object (or UMEM) of `kind` with
  // `number` by delta. Objects already gone are ignored.
  void AdjustUsers(devx::ResourceKind kind, uint32_t number, int delta);

  Device& device_;
  uint32_t next_umem_id_ = 1;
  std::map<uint32_t, Umem> umems_;
  // Holds on kinds whose verbs tables keep no user count (QPs, MR keys).
  std::map<std::pair<devx::ResourceKind, uint32_t>, int> other_holds_;
};

}  // namespace softverbs::daemon
