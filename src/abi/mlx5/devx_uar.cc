// mlx5dv_devx_alloc_uar / mlx5dv_devx_free_uar. A UAR is a page of doorbell
// registers; on softverbs it is a private page of the process (the DEVX data
// path that would watch it is a later step). page_id is what DEVX users put
// into cqc.uar_page / qpc.uar_page; the firmware does not check it yet.
// MLX5DV_UAR_ALLOC_TYPE_NC returns the context's singleton NC UAR, as
// rdma-core does: two calls give the same page, and freeing it is a no-op
// (it lives as long as the context).
#include <sys/mman.h>

#include <atomic>
#include <map>
#include <mutex>
#include <new>
#include <utility>

#include "abi/ibverbs/softverbs_private.h"
#include "abi/mlx5/devx_internal.h"
#include "common/no_destructor.h"

using softverbs::mlx5::RejectNull;

namespace {

constexpr size_t kUarPageSize = 4096;
constexpr size_t kFirstDoorbellRegister = 0x800;  // reg_addr = base_addr + 0x800

struct Uar {
  mlx5dv_devx_uar pub;  // first: the caller holds a pointer to it
  bool singleton;
};

std::atomic<uint32_t> next_page_id{1};

// Singleton NC UARs by context. The daemon's client id tells a reopened
// context from a closed one that had the same address.
std::mutex singletons_mutex;
softverbs::NoDestructor<std::map<std::pair<ibv_context*, uint32_t>, Uar*>> singletons;

Uar* NewUar(bool singleton) {
  void* page =
      mmap(nullptr, kUarPageSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return nullptr;
  auto* uar = new (std::nothrow) Uar{};
  if (uar == nullptr) {
    munmap(page, kUarPageSize);
    return nullptr;
  }
  const uint32_t page_id = next_page_id++;
  uar->pub.base_addr = page;
  uar->pub.reg_addr = static_cast<char*>(page) + kFirstDoorbellRegister;
  uar->pub.page_id = page_id;
  uar->pub.mmap_off = static_cast<off_t>(page_id) * kUarPageSize;
  uar->singleton = singleton;
  return uar;
}

}  // namespace

SV_MLX5_EXPORT mlx5dv_devx_uar* mlx5dv_devx_alloc_uar(ibv_context* context, uint32_t flags) {
  if (context == nullptr || !softverbs_is_device(context->device)) {
    return RejectNull(EOPNOTSUPP, "mlx5dv_devx_alloc_uar: %s",
                      context == nullptr ? "context is NULL" : "the context is not softverbs'");
  }
  if (flags != MLX5DV_UAR_ALLOC_TYPE_BF && flags != MLX5DV_UAR_ALLOC_TYPE_NC) {
    return RejectNull(
        EOPNOTSUPP, "mlx5dv_devx_alloc_uar: flags 0x%x is neither MLX5DV_UAR_ALLOC_TYPE_BF nor _NC",
        flags);
  }
  if (flags == MLX5DV_UAR_ALLOC_TYPE_BF) {
    Uar* uar = NewUar(false);
    if (uar == nullptr) return RejectNull(ENOMEM, "mlx5dv_devx_alloc_uar: cannot map a UAR page");
    return &uar->pub;
  }
  std::lock_guard lock(singletons_mutex);
  Uar*& uar = (*singletons)[{context, softverbs_client_id(context)}];
  if (uar == nullptr) uar = NewUar(true);
  if (uar == nullptr) {
    singletons->erase({context, softverbs_client_id(context)});
    return RejectNull(ENOMEM, "mlx5dv_devx_alloc_uar: cannot map a UAR page");
  }
  return &uar->pub;
}

SV_MLX5_EXPORT void mlx5dv_devx_free_uar(mlx5dv_devx_uar* dv_uar) {
  if (dv_uar == nullptr) return;
  auto* uar = reinterpret_cast<Uar*>(dv_uar);
  if (uar->singleton) return;
  munmap(uar->pub.base_addr, kUarPageSize);
  delete uar;
}
