// What the device says it is. The generic softverbs device (the default)
// reports its own ids (common/device_limits.h); the mlx5 personality
// (SOFTVERBS_PERSONALITY=mlx5, or `softverbs run --personality mlx5`)
// reports a ConnectX-6 Dx, so that mlx5 software and rdma-core's mlx5 tests
// take their mlx5 paths (DEVX queues, mlx5dv). Only the identity changes:
// every limit and behaviour is the device's own either way, and what the
// personality does not implement answers as libmlx5/firmware do
// (docs/devx.md, "The mlx5 personality").
#pragma once

#include <cstdint>
#include <string_view>

namespace softverbs {

enum class Personality : uint8_t { kGeneric, kMlx5 };

inline constexpr const char* kPersonalityEnv = "SOFTVERBS_PERSONALITY";

struct PersonalityInfo {
  Personality personality;
  const char* name;         // the value of SOFTVERBS_PERSONALITY
  uint32_t vendor_id;       // ibv_device_attr.vendor_id (IEEE OUI)
  uint32_t vendor_part_id;  // ibv_device_attr.vendor_part_id (PCI device id)
};

// The personality named `name`, or nullptr if there is none by that name.
const PersonalityInfo* FindPersonality(std::string_view name);
const PersonalityInfo& InfoOf(Personality personality);

// The process's personality, read once from SOFTVERBS_PERSONALITY (unset or
// empty: generic). An unknown name selects the generic device and says so
// on the log channel.
const PersonalityInfo& ActivePersonality();

}  // namespace softverbs
