// Where a user's softverbs device lives on this host: a private directory
// (mode 0700, owned by the user) holding the daemon's socket and lock.
#pragma once

#include <string>

namespace softverbs {

// The environment variable that selects a private runtime directory. Tests and
// parallel runs set it so that each gets its own daemon and device.
inline constexpr const char* kRuntimeDirEnv = "SOFTVERBS_RUNTIME_DIR";

// $SOFTVERBS_RUNTIME_DIR, else $XDG_RUNTIME_DIR/softverbs, else
// /tmp/softverbs-<uid>.
std::string RuntimeDirPath();

// Creates the directory if missing and checks that it is a directory owned by
// the calling user with no access for group or others. Returns 0 or an errno
// (EACCES when the directory belongs to someone else or is group/world
// accessible: one user's processes must never reach another user's device).
int EnsureRuntimeDir(const std::string& dir, std::string* why);

std::string DaemonSocketPath(const std::string& dir);
std::string DaemonLockPath(const std::string& dir);

}  // namespace softverbs
