// XRC domains, shared between processes through the inode of a file.
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "common/device_limits.h"
#include "daemon/device.h"

namespace softverbs::daemon {

namespace lim = softverbs::limits;

Verdict Device::OpenXrcd(ClientId c, int fd, uint32_t oflags, protocol::OpenXrcdReply* out) {
  if (oflags & ~static_cast<uint32_t>(O_CREAT | O_EXCL)) {
    return Verdict::Fail(EINVAL, "open_xrcd: oflags may only hold O_CREAT and O_EXCL");
  }
  Xrcd* found = nullptr;
  struct stat st {};
  if (fd >= 0) {
    if (fstat(fd, &st) != 0) return Verdict::Fail(EBADF, "open_xrcd: fd is not an open file");
    for (auto& [id, x] : xrcds_) {
      if (x.bound_to_inode && x.dev == st.st_dev && x.ino == st.st_ino) found = &x;
    }
    if (!found && !(oflags & O_CREAT)) {
      return Verdict::Fail(EAGAIN,
                           "open_xrcd: no domain is bound to this file and O_CREAT is not set");
    }
    if (found && (oflags & O_EXCL)) {
      return Verdict::Fail(EINVAL, "open_xrcd: a domain is already bound to this file (O_EXCL)");
    }
  }
  if (!found && xrcds_.size() >= static_cast<size_t>(lim::kMaxXrcd)) {
    return Verdict::Fail(ENOMEM, "device limit of XRC domains reached");
  }
  if (!found) {
    Xrcd x;
    x.id = NextHandle();
    if (fd >= 0) {
      x.bound_to_inode = true;
      x.dev = st.st_dev;
      x.ino = st.st_ino;
    }
    found = &(xrcds_[x.id] = x);
  }
  found->opens++;
  XrcdHandle h{NextHandle(), c, found->id};
  xrcd_handles_[h.handle] = h;
  *out = {h.handle, 0};
  return Verdict::Ok();
}

Verdict Device::CloseXrcd(ClientId c, Handle h) {
  XrcdHandle* xh = FindOwned(xrcd_handles_, c, h);
  if (!xh) return Verdict::Fail(EINVAL, "close_xrcd: no such XRC domain in this context");
  if (xh->users > 0) {
    return Verdict::Fail(EBUSY,
                         "close_xrcd: " + std::to_string(xh->users) +
                             " XRC SRQ/QP object(s) created through this handle still exist");
  }
  Xrcd& x = xrcds_.at(xh->xrcd);
  Handle id = xh->xrcd;
  xrcd_handles_.erase(h);
  x.opens--;
  FreeXrcdIfUnused(id);
  return Verdict::Ok();
}

void Device::ReleaseXrcdHandleUse(Handle xrcd_handle) {
  if (!xrcd_handle) return;
  if (auto it = xrcd_handles_.find(xrcd_handle); it != xrcd_handles_.end()) it->second.users--;
}

void Device::ReleaseXrcdUse(Handle id) {
  auto it = xrcds_.find(id);
  if (it == xrcds_.end()) return;
  it->second.users--;
  FreeXrcdIfUnused(id);
}

void Device::FreeXrcdIfUnused(Handle id) {
  auto it = xrcds_.find(id);
  if (it != xrcds_.end() && it->second.opens == 0 && it->second.users == 0) xrcds_.erase(it);
}

}  // namespace softverbs::daemon
