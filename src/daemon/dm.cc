// Device memory: the device's capacity is shared by every context; each
// allocation takes its size rounded up to the allocation granule, as mlx5's
// MEMIC does, and gives it back when freed or when its owner goes.
#include <errno.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include "common/device_limits.h"
#include "daemon/device.h"

namespace softverbs::daemon {

namespace lim = softverbs::limits;

Verdict Device::AllocDm(ClientId c, const protocol::AllocDmRequest& req,
                        protocol::AllocDmReply* out) {
  if (req.length == 0) return Verdict::Fail(EINVAL, "alloc_dm: length is 0");
  if (req.log_align > static_cast<uint32_t>(lim::kMaxDmLogAlign)) {
    return Verdict::Fail(EINVAL, "alloc_dm: log_align_req " + std::to_string(req.log_align) +
                                     " is above " + std::to_string(lim::kMaxDmLogAlign));
  }
  if (req.length > lim::kMaxDmSize) {
    return Verdict::Fail(ENOMEM, "alloc_dm: " + std::to_string(req.length) +
                                     " bytes is above max_dm_size " +
                                     std::to_string(lim::kMaxDmSize));
  }
  const uint64_t size =
      (req.length + lim::kDmAllocGranule - 1) / lim::kDmAllocGranule * lim::kDmAllocGranule;
  if (size > lim::kMaxDmSize - dm_bytes_used_) {
    return Verdict::Fail(ENOMEM, "alloc_dm: " + std::to_string(size) + " bytes asked, " +
                                     std::to_string(lim::kMaxDmSize - dm_bytes_used_) +
                                     " of the device memory free");
  }
  Dm dm{NextHandle(), c, req.length, size};
  dms_[dm.handle] = dm;
  dm_bytes_used_ += size;
  *out = {dm.handle, 0, size};
  return Verdict::Ok();
}

Verdict Device::FreeDm(ClientId c, Handle h) {
  Dm* dm = FindOwned(dms_, c, h);
  if (!dm) return Verdict::Fail(EINVAL, "free_dm: no such device memory in this context");
  if (dm->mrs > 0) {
    return Verdict::Fail(EBUSY, "free_dm: " + std::to_string(dm->mrs) +
                                    " MR(s) are still registered on this device memory");
  }
  dm_bytes_used_ -= dm->size;
  dms_.erase(h);
  return Verdict::Ok();
}

// Access flags a DM MR may carry (mlx5's MLX5_DM_ALLOWED_ACCESS).
constexpr uint32_t kDmMrAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                                 IBV_ACCESS_ZERO_BASED | IBV_ACCESS_OPTIONAL_RANGE;

Verdict Device::RegDmMr(ClientId c, const protocol::RegDmMrRequest& req, int backing_fd,
                        protocol::RegMrReply* out) {
  auto fail = [&](int err, std::string why) { return Verdict::Fail(err, "reg_dm_mr: " + why); };
  Dm* dm = FindOwned(dms_, c, req.dm);
  if (!dm) return fail(EINVAL, "no such device memory in this context");
  const uint32_t access = req.mr.reg.access;
  if (access & ~kDmMrAccess)
    return fail(EINVAL, "access 0x" + ToHex(access) + " has bits a DM MR cannot carry");
  if (!(access & IBV_ACCESS_ZERO_BASED)) {
    return fail(EINVAL, "DM MRs are zero-based: IBV_ACCESS_ZERO_BASED is required");
  }
  if (req.mr.reg.iova != 0) return fail(EINVAL, "a DM MR is addressed from 0");
  const uint64_t length = req.mr.reg.length;
  if (req.dm_offset > dm->length || length > dm->length - req.dm_offset) {
    return fail(EINVAL, "[" + std::to_string(req.dm_offset) + ", +" + std::to_string(length) +
                            ") is not inside the " + std::to_string(dm->length) +
                            " bytes of device memory");
  }
  Verdict v = RegMrBacked(c, req.mr, backing_fd, out, /*device_memory=*/true);
  if (!v.ok()) return v;
  mrs_.at(out->handle).dm = dm->handle;
  dm->mrs++;
  return Verdict::Ok();
}

}  // namespace softverbs::daemon
