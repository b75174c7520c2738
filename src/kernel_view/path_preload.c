/* libsoftverbs-kernel-view.so: shows softverbs0's kernel view to unmodified
 * programs. Loaded with LD_PRELOAD by `softverbs run` (and `softverbs env`),
 * it maps three absolute path prefixes into the tree that `softverbs run`
 * generated in $SOFTVERBS_RUNTIME_DIR/kernel-view (common/kernel_view.h):
 *
 *   /sys/class/infiniband[/...]        -> <view>/sys/class/infiniband[/...]
 *   /sys/class/infiniband_verbs[/...]  -> <view>/sys/class/infiniband_verbs[/...]
 *   /dev/infiniband[/...]              -> <view>/dev/infiniband[/...]
 *
 * Every other path goes to libc unchanged, after one byte compare for most
 * paths. A file under /dev/infiniband is a character device to stat/lstat/
 * fstatat/statx: S_IFCHR and the MAJOR:MINOR the file holds (an ordinary
 * user cannot create a device node; the view's placeholder stands in for
 * it). docs/kernel_view.md lists the functions covered and what is not.
 *
 * Plain C and libc only: this loads into every process of a run. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/xattr.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* ---- the view's root ---------------------------------------------------- */

static struct {
  char root[PATH_MAX];     /* $SOFTVERBS_RUNTIME_DIR/kernel-view */
  size_t root_len;         /* 0: no view, every call passes through */
  char resolved[PATH_MAX]; /* realpath(root), for realpath's answers */
  size_t resolved_len;
} g_view;
static pthread_once_t g_view_once = PTHREAD_ONCE_INIT;

static void InitView(void) {
  const char* rt = getenv("SOFTVERBS_RUNTIME_DIR");
  if (!rt || rt[0] != '/') return;
  int n = snprintf(g_view.root, sizeof(g_view.root), "%s/kernel-view", rt);
  /* Room for the longest mapped path; a root that long disables the view. */
  if (n <= 0 || (size_t)n >= sizeof(g_view.root) / 2) return;
  g_view.root_len = (size_t)n;
}

static size_t ViewRootLen(void) {
  pthread_once(&g_view_once, InitView);
  return g_view.root_len;
}

/* ---- the real functions ------------------------------------------------- */

/* Declares real_<name>, the next definition of <name> (libc's), found once. */
#define REAL(type, name)                                               \
  static __typeof__(type) real_##name;                                 \
  {                                                                    \
    void* f = __atomic_load_n((void**)&real_##name, __ATOMIC_ACQUIRE); \
    if (!f) {                                                          \
      f = dlsym(RTLD_NEXT, #name);                                     \
      __atomic_store_n((void**)&real_##name, f, __ATOMIC_RELEASE);     \
    }                                                                  \
  }

/* ---- path mapping ------------------------------------------------------- */

/* Length of the mapped prefix of `path` (0: not mapped). A prefix matches as
 * whole components: /sys/class/infiniband_mad stays the host's. */
static size_t MappedPrefix(const char* path) {
  static const char* const kPrefixes[] = {"/sys/class/infiniband_verbs", "/sys/class/infiniband",
                                          "/dev/infiniband"};
  if (!path || path[0] != '/' || (path[1] != 's' && path[1] != 'd')) return 0;
  for (size_t i = 0; i < sizeof(kPrefixes) / sizeof(kPrefixes[0]); ++i) {
    size_t len = strlen(kPrefixes[i]);
    if (strncmp(path, kPrefixes[i], len) == 0 && (path[len] == '\0' || path[len] == '/')) {
      return len;
    }
  }
  return 0;
}

/* The path to use for `path`: `path` itself or the view's file in `buf`.
 * NULL with errno ENAMETOOLONG when the mapped path does not fit. */
static const char* Map(const char* path, char* buf) {
  if (!MappedPrefix(path)) return path;
  size_t root_len = ViewRootLen();
  if (!root_len) return path;
  size_t len = strlen(path);
  if (root_len + len + 1 > PATH_MAX) {
    errno = ENAMETOOLONG;
    return NULL;
  }
  memcpy(buf, g_view.root, root_len);
  memcpy(buf + root_len, path, len + 1);
  return buf;
}

/* A device node of the view: a file (not the directory) under /dev/infiniband. */
static int IsDeviceNode(const char* path) {
  return MappedPrefix(path) == strlen("/dev/infiniband") && path[15] == '/' && path[16] != '\0' &&
         ViewRootLen() != 0;
}

/* Writing to a sysfs attribute of the view fails as for a read-only kernel
 * attribute (EACCES). */
static int RefusedWrite(const char* path, int flags) {
  return (flags & O_ACCMODE) != O_RDONLY && strncmp(path, "/sys/", 5) == 0;
}

/* MAJOR:MINOR from the placeholder of a device node. */
static int DeviceNumber(const char* mapped, dev_t* rdev) {
  REAL(int (*)(const char*, int, ...), open);
  int fd = real_open(mapped, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char text[32];
  ssize_t n = read(fd, text, sizeof(text) - 1);
  close(fd);
  unsigned major_num, minor_num;
  if (n <= 0) return -1;
  text[n] = '\0';
  if (sscanf(text, "%u:%u", &major_num, &minor_num) != 2) return -1;
  *rdev = makedev(major_num, minor_num);
  return 0;
}

static void AsDeviceNode(const char* mapped, struct stat* st) {
  dev_t rdev;
  if (!S_ISREG(st->st_mode) || DeviceNumber(mapped, &rdev) != 0) return;
  st->st_mode = S_IFCHR | (st->st_mode & 07777);
  st->st_rdev = rdev;
  st->st_size = 0;
  st->st_blocks = 0;
}

static void AsDeviceNodeX(const char* mapped, struct statx* stx) {
  dev_t rdev;
  if (!S_ISREG(stx->stx_mode) || DeviceNumber(mapped, &rdev) != 0) return;
  stx->stx_mode = (uint16_t)(S_IFCHR | (stx->stx_mode & 07777));
  stx->stx_rdev_major = major(rdev);
  stx->stx_rdev_minor = minor(rdev);
  stx->stx_size = 0;
  stx->stx_blocks = 0;
}

/* Maps `path` into `m` or returns `fail` from the calling function. */
#define MAP_OR_FAIL(path, m, fail)      \
  char m##_buf[PATH_MAX];               \
  const char* m = Map((path), m##_buf); \
  if (!m) return (fail)

/* ---- open --------------------------------------------------------------- */

static mode_t ModeArg(int flags, va_list ap) {
  return (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
}

static int OpenAt(const char* fn, int dirfd, const char* path, int flags, mode_t mode) {
  MAP_OR_FAIL(path, m, -1);
  if (m != path && RefusedWrite(path, flags)) {
    errno = EACCES;
    return -1;
  }
  if (m != path && IsDeviceNode(path)) {
    /* The placeholder holds the node's MAJOR:MINOR: it is opened read-only,
     * never created or truncated (a write to the descriptor fails with
     * EBADF; nothing writes to it: the verbs go through libibverbs). */
    flags = (flags & ~(O_ACCMODE | O_CREAT | O_TRUNC | O_APPEND | O_TMPFILE)) | O_RDONLY;
  }
  REAL(int (*)(int, const char*, int, ...), openat);
  (void)fn;
  return real_openat(dirfd, m, flags, mode);
}

EXPORT int open(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = ModeArg(flags, ap);
  va_end(ap);
  return OpenAt("open", AT_FDCWD, path, flags, mode);
}
EXPORT int open64(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = ModeArg(flags, ap);
  va_end(ap);
  return OpenAt("open64", AT_FDCWD, path, flags, mode);
}
EXPORT int openat(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = ModeArg(flags, ap);
  va_end(ap);
  return OpenAt("openat", dirfd, path, flags, mode);
}
EXPORT int openat64(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = ModeArg(flags, ap);
  va_end(ap);
  return OpenAt("openat64", dirfd, path, flags, mode);
}
/* _FORTIFY_SOURCE's checked variants (no mode argument). */
EXPORT int __open_2(const char* path, int flags) {
  return OpenAt("__open_2", AT_FDCWD, path, flags, 0);
}
EXPORT int __open64_2(const char* path, int flags) {
  return OpenAt("__open64_2", AT_FDCWD, path, flags, 0);
}
EXPORT int __openat_2(int dirfd, const char* path, int flags) {
  return OpenAt("__openat_2", dirfd, path, flags, 0);
}
EXPORT int __openat64_2(int dirfd, const char* path, int flags) {
  return OpenAt("__openat64_2", dirfd, path, flags, 0);
}

/* fopen's own open happens inside libc, out of reach: map here. */
static int FopenWrites(const char* mode) {
  return mode && (mode[0] == 'w' || mode[0] == 'a' || strchr(mode, '+'));
}

EXPORT FILE* fopen(const char* path, const char* mode) {
  MAP_OR_FAIL(path, m, NULL);
  if (m != path && RefusedWrite(path, FopenWrites(mode) ? O_RDWR : O_RDONLY)) {
    errno = EACCES;
    return NULL;
  }
  if (m != path && IsDeviceNode(path)) mode = "re"; /* as open() above */
  REAL(FILE * (*)(const char*, const char*), fopen);
  return real_fopen(m, mode);
}
EXPORT FILE* fopen64(const char* path, const char* mode) {
  return fopen(path, mode);
}
EXPORT FILE* freopen(const char* path, const char* mode, FILE* stream) {
  MAP_OR_FAIL(path, m, NULL);
  REAL(FILE * (*)(const char*, const char*, FILE*), freopen);
  return real_freopen(m, mode, stream);
}
EXPORT FILE* freopen64(const char* path, const char* mode, FILE* stream) {
  return freopen(path, mode, stream);
}

/* ---- stat --------------------------------------------------------------- */

static int StatAt(int dirfd, const char* path, struct stat* st, int flags) {
  MAP_OR_FAIL(path, m, -1);
  REAL(int (*)(int, const char*, struct stat*, int), fstatat);
  int rc = real_fstatat(dirfd, m, st, flags);
  if (rc == 0 && m != path && IsDeviceNode(path)) AsDeviceNode(m, st);
  return rc;
}

EXPORT int stat(const char* path, struct stat* st) {
  return StatAt(AT_FDCWD, path, st, 0);
}
EXPORT int stat64(const char* path, struct stat64* st) {
  return StatAt(AT_FDCWD, path, (struct stat*)st, 0);
}
EXPORT int lstat(const char* path, struct stat* st) {
  return StatAt(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW);
}
EXPORT int lstat64(const char* path, struct stat64* st) {
  return StatAt(AT_FDCWD, path, (struct stat*)st, AT_SYMLINK_NOFOLLOW);
}
EXPORT int fstatat(int dirfd, const char* path, struct stat* st, int flags) {
  return StatAt(dirfd, path, st, flags);
}
EXPORT int fstatat64(int dirfd, const char* path, struct stat64* st, int flags) {
  return StatAt(dirfd, path, (struct stat*)st, flags);
}
/* Binaries built against glibc < 2.33 call these (ver 1 on x86-64: the
 * kernel's struct stat, which is struct stat here). */
EXPORT int __xstat(int ver, const char* path, struct stat* st) {
  (void)ver;
  return StatAt(AT_FDCWD, path, st, 0);
}
EXPORT int __xstat64(int ver, const char* path, struct stat64* st) {
  (void)ver;
  return StatAt(AT_FDCWD, path, (struct stat*)st, 0);
}
EXPORT int __lxstat(int ver, const char* path, struct stat* st) {
  (void)ver;
  return StatAt(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW);
}
EXPORT int __lxstat64(int ver, const char* path, struct stat64* st) {
  (void)ver;
  return StatAt(AT_FDCWD, path, (struct stat*)st, AT_SYMLINK_NOFOLLOW);
}
EXPORT int __fxstatat(int ver, int dirfd, const char* path, struct stat* st, int flags) {
  (void)ver;
  return StatAt(dirfd, path, st, flags);
}
EXPORT int __fxstatat64(int ver, int dirfd, const char* path, struct stat64* st, int flags) {
  (void)ver;
  return StatAt(dirfd, path, (struct stat*)st, flags);
}

EXPORT int statx(int dirfd, const char* path, int flags, unsigned int mask, struct statx* stx) {
  MAP_OR_FAIL(path, m, -1);
  REAL(int (*)(int, const char*, int, unsigned int, struct statx*), statx);
  int rc = real_statx(dirfd, m, flags, mask, stx);
  if (rc == 0 && m != path && IsDeviceNode(path)) AsDeviceNodeX(m, stx);
  return rc;
}

/* ---- access ------------------------------------------------------------- */

static int AccessRefused(const char* path, const char* m, int how) {
  return m != path && (how & W_OK) && strncmp(path, "/sys/", 5) == 0;
}

EXPORT int access(const char* path, int how) {
  MAP_OR_FAIL(path, m, -1);
  if (AccessRefused(path, m, how)) {
    errno = EACCES;
    return -1;
  }
  REAL(int (*)(const char*, int), access);
  return real_access(m, how);
}
EXPORT int faccessat(int dirfd, const char* path, int how, int flags) {
  MAP_OR_FAIL(path, m, -1);
  if (AccessRefused(path, m, how)) {
    errno = EACCES;
    return -1;
  }
  REAL(int (*)(int, const char*, int, int), faccessat);
  return real_faccessat(dirfd, m, how, flags);
}
EXPORT int euidaccess(const char* path, int how) {
  MAP_OR_FAIL(path, m, -1);
  if (AccessRefused(path, m, how)) {
    errno = EACCES;
    return -1;
  }
  REAL(int (*)(const char*, int), euidaccess);
  return real_euidaccess(m, how);
}
EXPORT int eaccess(const char* path, int how) {
  return euidaccess(path, how);
}

/* ---- directories -------------------------------------------------------- */

EXPORT DIR* opendir(const char* path) {
  MAP_OR_FAIL(path, m, NULL);
  REAL(DIR * (*)(const char*), opendir);
  return real_opendir(m);
}

typedef int (*ScandirFilter)(const struct dirent*);
typedef int (*ScandirCompare)(const struct dirent**, const struct dirent**);

EXPORT int scandir(const char* path, struct dirent*** list, ScandirFilter filter,
                   ScandirCompare compare) {
  MAP_OR_FAIL(path, m, -1);
  REAL(int (*)(const char*, struct dirent***, ScandirFilter, ScandirCompare), scandir);
  return real_scandir(m, list, filter, compare);
}

typedef int (*Scandir64Filter)(const struct dirent64*);
typedef int (*Scandir64Compare)(const struct dirent64**, const struct dirent64**);

EXPORT int scandir64(const char* path, struct dirent64*** list, Scandir64Filter filter,
                     Scandir64Compare compare) {
  MAP_OR_FAIL(path, m, -1);
  REAL(int (*)(const char*, struct dirent64***, Scandir64Filter, Scandir64Compare), scandir64);
  return real_scandir64(m, list, filter, compare);
}

/* ---- links and canonical names ------------------------------------------ */

EXPORT ssize_t readlink(const char* path, char* buf, size_t size) {
  MAP_OR_FAIL(path, m, -1);
  REAL(ssize_t(*)(const char*, char*, size_t), readlink);
  return real_readlink(m, buf, size);
}
EXPORT ssize_t readlinkat(int dirfd, const char* path, char* buf, size_t size) {
  MAP_OR_FAIL(path, m, -1);
  REAL(ssize_t(*)(int, const char*, char*, size_t), readlinkat);
  return real_readlinkat(dirfd, m, buf, size);
}
EXPORT ssize_t __readlink_chk(const char* path, char* buf, size_t size, size_t buflen) {
  if (size > buflen) abort(); /* as glibc's __chk_fail would */
  return readlink(path, buf, size);
}
EXPORT ssize_t __readlinkat_chk(int dirfd, const char* path, char* buf, size_t size,
                                size_t buflen) {
  if (size > buflen) abort();
  return readlinkat(dirfd, path, buf, size);
}

/* The view's files resolve inside the view; the answer names them by their
 * public path again (/sys/class/infiniband/...), as a kernel device's would. */
static void ResolvedRoot(void) {
  if (g_view.resolved_len) return;
  REAL(char* (*)(const char*, char*), realpath);
  char buf[PATH_MAX];
  if (real_realpath(g_view.root, buf)) {
    size_t len = strlen(buf);
    memcpy(g_view.resolved, buf, len + 1);
    __atomic_store_n(&g_view.resolved_len, len, __ATOMIC_RELEASE);
  }
}

static char* Unmapped(char* resolved) {
  if (!resolved) return NULL;
  size_t len = __atomic_load_n(&g_view.resolved_len, __ATOMIC_ACQUIRE);
  if (len && strncmp(resolved, g_view.resolved, len) == 0 && resolved[len] == '/') {
    memmove(resolved, resolved + len, strlen(resolved + len) + 1);
  }
  return resolved;
}

EXPORT char* realpath(const char* path, char* resolved) {
  MAP_OR_FAIL(path, m, NULL);
  REAL(char* (*)(const char*, char*), realpath);
  if (m == path) return real_realpath(path, resolved);
  ResolvedRoot();
  return Unmapped(real_realpath(m, resolved));
}
EXPORT char* __realpath_chk(const char* path, char* resolved, size_t resolvedlen) {
  if (resolvedlen < PATH_MAX) abort();
  return realpath(path, resolved);
}
EXPORT char* canonicalize_file_name(const char* path) {
  return realpath(path, NULL);
}

/* ---- extended attributes (ls -l asks for them) --------------------------- */

EXPORT ssize_t getxattr(const char* path, const char* name, void* value, size_t size) {
  MAP_OR_FAIL(path, m, -1);
  REAL(ssize_t(*)(const char*, const char*, void*, size_t), getxattr);
  return real_getxattr(m, name, value, size);
}
EXPORT ssize_t lgetxattr(const char* path, const char* name, void* value, size_t size) {
  MAP_OR_FAIL(path, m, -1);
  REAL(ssize_t(*)(const char*, const char*, void*, size_t), lgetxattr);
  return real_lgetxattr(m, name, value, size);
}
EXPORT ssize_t listxattr(const char* path, char* list, size_t size) {
  MAP_OR_FAIL(path, m, -1);
  REAL(ssize_t(*)(const char*, char*, size_t), listxattr);
  return real_listxattr(m, list, size);
}
EXPORT ssize_t llistxattr(const char* path, char* list, size_t size) {
  MAP_OR_FAIL(path, m, -1);
  REAL(ssize_t(*)(const char*, char*, size_t), llistxattr);
  return real_llistxattr(m, list, size);
}
