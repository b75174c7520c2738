#include "common/personality.h"

#include <stdlib.h>

#include "common/device_limits.h"
#include "common/log.h"

namespace softverbs {
namespace {

constexpr PersonalityInfo kPersonalities[] = {
    // personality          name       vendor_id            vendor_part_id
    {Personality::kGeneric, "generic", limits::kVendorId, limits::kVendorPartId},
    // Mellanox's OUI and the ConnectX-6 Dx PCI id (MT2892), which libmlx5's
    // and rdma-core's tests (mlx5_base.MLX5_DEVS) recognise.
    {Personality::kMlx5, "mlx5", 0x02c9, 0x101d},
};

const PersonalityInfo& ReadPersonality() {
  const char* env = getenv(kPersonalityEnv);
  if (env == nullptr || *env == '\0') return kPersonalities[0];
  if (const PersonalityInfo* info = FindPersonality(env)) return *info;
  Log("%s=%s: no such personality (generic, mlx5); the generic device is used", kPersonalityEnv,
      env);
  return kPersonalities[0];
}

}  // namespace

const PersonalityInfo* FindPersonality(std::string_view name) {
  for (const PersonalityInfo& info : kPersonalities) {
    if (name == info.name) return &info;
  }
  return nullptr;
}

const PersonalityInfo& InfoOf(Personality personality) {
  for (const PersonalityInfo& info : kPersonalities) {
    if (info.personality == personality) return info;
  }
  return kPersonalities[0];
}

const PersonalityInfo& ActivePersonality() {
  static const PersonalityInfo& active = ReadPersonality();
  return active;
}

}  // namespace softverbs
