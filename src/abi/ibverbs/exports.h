// Declarations shared by the files that make up libibverbs.so.1.
#pragma once

#include <infiniband/verbs.h>

#include "abi/ibverbs/rdma_core_private.h"
#include "common/gid_table.h"

// Marks a function as part of the library's ABI (the build hides everything
// else; the version script assigns the version node).
#define SV_EXPORT extern "C" __attribute__((visibility("default")))

namespace softverbs::provider {

const ibv_device* SoftverbsDevice();
const GidTable& HostGidTable();
uint64_t DeviceGuid();

// Fills ops of a new context (context.cc).
void InstallContextOps(ibv_context* ctx);

// Sets errno and returns nullptr: the convention of creators.
template <typename T = void>
T* FailNull(int err) {
  errno = err;
  return nullptr;
}

}  // namespace softverbs::provider
