// The kernel view of softverbs0: the sysfs and /dev files a kernel RDMA
// device has (/sys/class/infiniband/softverbs0/..., /sys/class/infiniband_verbs/
// uverbs0/..., /dev/infiniband/uverbs0), generated from the same facts the
// verbs report (device_limits.h, port_facts.h, the GID table). `softverbs run`
// writes them into <runtime dir>/kernel-view/, where the path interposer
// (src/kernel_view/) shows them to programs at their real paths
// (docs/kernel_view.md); ibv_read_sysfs_file answers from them directly.
#pragma once

#include <string>
#include <vector>

#include "common/gid_table.h"

namespace softverbs::kernel_view {

// The uverbs node of softverbs0 (ibv_device.dev_name).
inline constexpr const char* kUverbsName = "uverbs0";

// <runtime dir>/<kDirName>/ holds sys/... and dev/... as they appear under /.
inline constexpr const char* kDirName = "kernel-view";

// The uverbs character devices: major 231 (IB_UVERBS_MAJOR), minors from 192.
inline constexpr unsigned kUverbsMajor = 231;
inline constexpr unsigned kUverbsMinorBase = 192;
// /sys/class/infiniband_verbs/abi_version (IB_USER_VERBS_ABI_VERSION) and the
// driver ABI of uverbs0 (its abi_version file).
inline constexpr int kUverbsAbiVersion = 6;
inline constexpr int kDriverAbiVersion = 1;

enum class Kind {
  kFile,        // a sysfs attribute: content is its text
  kSymlink,     // content is the link's target
  kCharDevice,  // a /dev node; content is "MAJOR:MINOR\n" (as sysfs' dev file)
};

struct Entry {
  std::string path;  // relative to the view's root: "sys/class/...", "dev/..."
  Kind kind;
  std::string content;
};

// Every file of the view, for the device whose port is on `gids`' interface.
std::vector<Entry> Entries(const GidTable& gids);

std::string RootOf(const std::string& runtime_dir);

// Brings the tree at `root` in line with `entries`: writes what differs (each
// file replaced by rename, so a reader never sees half a file) and removes
// what is no longer an entry. Returns 0 or an errno with `why`.
int Write(const std::string& root, const std::vector<Entry>& entries, std::string* why);

// The content of the entry at `absolute_path` ("/sys/class/..."); false if
// the view has no such file.
bool Lookup(const std::vector<Entry>& entries, const std::string& absolute_path,
            std::string* content);

}  // namespace softverbs::kernel_view
