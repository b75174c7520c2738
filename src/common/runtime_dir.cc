#include "common/runtime_dir.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

namespace softverbs {

std::string RuntimeDirPath() {
  if (const char* dir = getenv(kRuntimeDirEnv); dir && *dir) return dir;
  if (const char* xdg = getenv("XDG_RUNTIME_DIR"); xdg && *xdg) {
    return std::string(xdg) + "/softverbs";
  }
  return "/tmp/softverbs-" + std::to_string(getuid());
}

int EnsureRuntimeDir(const std::string& dir, std::string* why) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    int err = errno;
    if (why) *why = "cannot create runtime directory " + dir;
    return err;
  }
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) {
    int err = errno;
    if (why) *why = "cannot stat runtime directory " + dir;
    return err;
  }
  if (!S_ISDIR(st.st_mode)) {
    if (why) *why = dir + " is not a directory";
    return ENOTDIR;
  }
  if (st.st_uid != getuid()) {
    if (why) *why = dir + " belongs to uid " + std::to_string(st.st_uid) + ", not to this user";
    return EACCES;
  }
  if ((st.st_mode & 077) != 0) {
    if (why) *why = dir + " is accessible by group or others (mode must be 0700)";
    return EACCES;
  }
  return 0;
}

std::string DaemonSocketPath(const std::string& dir) {
  return dir + "/softverbsd.sock";
}
std::string DaemonLockPath(const std::string& dir) {
  return dir + "/softverbsd.lock";
}

}  // namespace softverbs
