// Where a user's softverbs device lives on this host: a private directory
// (mode 0700, owned by the user) holding the daemon's socket and lock.
#pragma once

#include <string>

namespace softverbs {

// The environment variable that selects a private runtime directory. Tests and
// parallel runs set it so that each gets its own daemon and device.
inline constexpr const char* kRuntimeDirEnv = "SOFTVERBS_RUNTIME_DIR";

// $SOFTVERBS_RUNTIME_DIR, else $XDG_RUNTIME_DIR/softverbs, else
// /tmp/softverbs-<uid> - unless that exists and is not a usable private
// directory of this user (another user can create it first in /tmp): then
// the private fallback, <home>/.cache/softverbs/run-<hostname> (home from the
// password database, else $HOME), which every process of the user finds the
// same way. *warning (if given) then says what was wrong and where the
// device lives instead; it stays empty otherwise.
std::string RuntimeDirPath(std::string* warning = nullptr);

// Creates the directory if missing and checks that it is a directory owned by
// the calling user with no access for group or others. Returns 0 or an errno
// (EACCES when the directory belongs to someone else or is group/world
// accessible: one user's processes must never reach another user's device).
int EnsureRuntimeDir(const std::string& dir, std::string* why);

std::string DaemonSocketPath(const std::string& dir);
std::string DaemonLockPath(const std::string& dir);

}  // namespace softverbs
