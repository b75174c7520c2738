// The device list: softverbs provides exactly one device, softverbs0, whose
// port is bound to a host interface (see common/gid_table.h). Its sysfs files
// are those of the kernel view (common/kernel_view.h): ibv_read_sysfs_file
// answers them from the same entries `softverbs run` writes.
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mutex>
#include <string>
#include <vector>

#include "abi/ibverbs/exports.h"
#include "abi/ibverbs/fork_state.h"
#include "abi/ibverbs/reject.h"
#include "common/device_limits.h"
#include "common/gid_table.h"
#include "common/kernel_view.h"
#include "common/no_destructor.h"

namespace softverbs::provider {
namespace {

constexpr const char* kSysfsClassPath = "/sys/class/infiniband/";

struct DeviceRecord {
  ibv_device device;
  uint64_t guid;  // host order
  GidTable gids;
  std::vector<kernel_view::Entry> sysfs;  // the kernel view's files
};

DeviceRecord& TheDevice() {
  static NoDestructor<DeviceRecord> record([] {
    DeviceRecord r{};
    r.device.node_type = IBV_NODE_CA;
    r.device.transport_type = IBV_TRANSPORT_IB;
    snprintf(r.device.name, sizeof(r.device.name), "%s", limits::kDeviceName);
    snprintf(r.device.dev_name, sizeof(r.device.dev_name), "%s", kernel_view::kUverbsName);
    snprintf(r.device.dev_path, sizeof(r.device.dev_path), "/sys/class/infiniband_verbs/%s",
             kernel_view::kUverbsName);
    snprintf(r.device.ibdev_path, sizeof(r.device.ibdev_path), "%s%s", kSysfsClassPath,
             limits::kDeviceName);
    r.gids = BuildGidTable();
    r.guid = GuidFromMac(r.gids.mac);
    r.sysfs = kernel_view::Entries(r.gids);
    return r;
  }());
  return *record;
}

}  // namespace

const ibv_device* SoftverbsDevice() {
  return &TheDevice().device;
}
const GidTable& HostGidTable() {
  return TheDevice().gids;
}
uint64_t DeviceGuid() {
  return TheDevice().guid;
}

}  // namespace softverbs::provider

using namespace softverbs::provider;

SV_EXPORT ibv_device** ibv_get_device_list(int* num_devices) {
  if (num_devices) *num_devices = 0;  // as libibverbs, also on failure
  static std::once_flag fork_env_once;
  std::call_once(fork_env_once, ForkInitFromEnvironment);
  auto** list = static_cast<ibv_device**>(calloc(2, sizeof(ibv_device*)));
  if (!list) return RejectNull(ENOMEM, "ibv_get_device_list: out of memory for the list");
  list[0] = const_cast<ibv_device*>(SoftverbsDevice());
  if (num_devices) *num_devices = 1;
  return list;
}

SV_EXPORT void ibv_free_device_list(ibv_device** list) {
  free(list);
}

SV_EXPORT const char* ibv_get_device_name(ibv_device* device) {
  if (!device) return RejectNull(EINVAL, "ibv_get_device_name: device is NULL");
  return device->name;
}

SV_EXPORT __be64 ibv_get_device_guid(ibv_device* device) {
  if (!device) return static_cast<__be64>(Reject(0, "ibv_get_device_guid: device is NULL"));
  return htobe64(DeviceGuid());
}

SV_EXPORT int ibv_get_device_index(ibv_device* device) {
  if (device != SoftverbsDevice()) {
    return Reject(-1, "ibv_get_device_index: %p is not a device of softverbs' device list",
                  static_cast<void*>(device));
  }
  return 0;
}

SV_EXPORT int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size) {
  std::string path = std::string(dir ? dir : "") + "/" + (file ? file : "");
  std::string value;
  if (softverbs::kernel_view::Lookup(TheDevice().sysfs, path, &value)) {
    if (size == 0) return -1;
    size_t len = std::min(value.size(), size - 1);
    memcpy(buf, value.data(), len);
    buf[len] = '\0';
    if (len > 0 && buf[len - 1] == '\n') buf[--len] = '\0';
    return static_cast<int>(len);
  }
  // Anything else is a real file, as in libibverbs.
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t len = read(fd, buf, size);
  close(fd);
  if (len <= 0) return -1;
  if (static_cast<size_t>(len) < size) buf[len] = '\0';
  if (len > 0 && buf[len - 1] == '\n') buf[--len] = '\0';
  return static_cast<int>(len);
}

// Where sysfs is mounted, as libibverbs answers it: $SYSFS_PATH (trailing
// slashes dropped) unless the program runs set-uid, otherwise "/sys"; worked
// out once and kept for the life of the process.
SV_EXPORT const char* ibv_get_sysfs_path(void) {
  static const softverbs::NoDestructor<std::string> path([] {
    const char* env = getuid() == geteuid() ? getenv("SYSFS_PATH") : nullptr;
    std::string p = env ? env : "/sys";
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    return p;
  }());
  return path->c_str();
}
