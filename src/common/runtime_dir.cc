#include "common/runtime_dir.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

namespace softverbs {

namespace {

// Whether dir may serve as this user's runtime directory as it stands:
// absent (it will be created 0700), or a directory (not a symlink) owned by
// the user with no access for group or others. *why says what is wrong.
bool UsableOrAbsent(const std::string& dir, std::string* why) {
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) return errno == ENOENT;
  if (!S_ISDIR(st.st_mode)) {
    *why = dir + " is not a directory";
    return false;
  }
  if (st.st_uid != getuid()) {
    *why = dir + " belongs to uid " + std::to_string(st.st_uid) + ", not to this user (uid " +
           std::to_string(getuid()) + ")";
    return false;
  }
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    snprintf(mode, sizeof(mode), "%03o", st.st_mode & 0777);
    *why = dir + " has mode " + mode + " (group or others have access; it must be 0700)";
    return false;
  }
  return true;
}

std::string HomeDir() {
  std::vector<char> buf(16384);
  passwd pw;
  passwd* found = nullptr;
  if (getpwuid_r(getuid(), &pw, buf.data(), buf.size(), &found) == 0 && found && found->pw_dir &&
      *found->pw_dir) {
    return found->pw_dir;
  }
  const char* home = getenv("HOME");
  return home && *home ? home : "";
}

// <home>/.cache/softverbs/run-<hostname>, with the directories above it
// created 0700 when missing (EnsureRuntimeDir checks the last one).
std::string PrivateFallbackDir() {
  std::string home = HomeDir();
  if (home.empty()) return "";
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string cache = home + "/.cache";
  mkdir(cache.c_str(), 0700);
  mkdir((cache + "/softverbs").c_str(), 0700);
  return cache + "/softverbs/run-" + host;
}

}  // namespace

std::string RuntimeDirPath(std::string* warning) {
  if (const char* dir = getenv(kRuntimeDirEnv); dir && *dir) return dir;
  if (const char* xdg = getenv("XDG_RUNTIME_DIR"); xdg && *xdg) {
    return std::string(xdg) + "/softverbs";
  }
  std::string tmp = "/tmp/softverbs-" + std::to_string(getuid());
  std::string why;
  if (UsableOrAbsent(tmp, &why)) return tmp;
  std::string fallback = PrivateFallbackDir();
  if (fallback.empty()) {
    // Nowhere private to go: EnsureRuntimeDir refuses tmp with the reason.
    if (warning) *warning = why + ", and no home directory to fall back to";
    return tmp;
  }
  if (warning) {
    *warning = why + "; using " + fallback +
               " instead (set XDG_RUNTIME_DIR or SOFTVERBS_RUNTIME_DIR to choose)";
  }
  return fallback;
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
