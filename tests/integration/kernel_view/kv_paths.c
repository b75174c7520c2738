/* kv_paths: run under `softverbs run`, checks that softverbs0's kernel view
 * is there for every path API a C program uses (open, openat, fopen, stat,
 * lstat, fstatat, statx, access, faccessat, opendir/readdir, scandir,
 * readlink, realpath) and that its values agree with what ibv_query_device,
 * ibv_query_port and ibv_query_gid report. Prints one line per failed check
 * and exits 1 if any failed. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* libibverbs' sysfs reader (rdma-core's <infiniband/driver.h>). */
int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size);

#define DEV "/sys/class/infiniband/softverbs0"
#define PORT DEV "/ports/1"

static int failures;

static void Fail(const char* what, const char* detail) {
  printf("FAIL %s: %s\n", what, detail);
  ++failures;
}

/* The file's first line, through open+read. */
static int ReadLine(const char* path, char* buf, size_t size) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, size - 1);
  close(fd);
  if (n < 0) return -1;
  buf[n] = '\0';
  char* nl = strchr(buf, '\n');
  if (nl) *nl = '\0';
  return 0;
}

static void Expect(const char* path, const char* want) {
  char have[256];
  char detail[600];
  if (ReadLine(path, have, sizeof(have)) != 0) {
    snprintf(detail, sizeof(detail), "cannot read: %s", strerror(errno));
    Fail(path, detail);
  } else if (strcmp(have, want) != 0) {
    snprintf(detail, sizeof(detail), "\"%s\", the verbs say \"%s\"", have, want);
    Fail(path, detail);
  }
}

static void CheckDeviceNode(void) {
  const char* node = "/dev/infiniband/uverbs0";
  struct stat st;
  if (stat(node, &st) != 0 || !S_ISCHR(st.st_mode) || major(st.st_rdev) != 231 ||
      minor(st.st_rdev) != 192) {
    Fail("stat /dev/infiniband/uverbs0", "not the character device 231:192");
  }
  if (lstat(node, &st) != 0 || !S_ISCHR(st.st_mode)) Fail("lstat uverbs0", "not a char device");
  if (fstatat(AT_FDCWD, node, &st, 0) != 0 || !S_ISCHR(st.st_mode)) {
    Fail("fstatat uverbs0", "not a char device");
  }
  struct statx stx;
  if (statx(AT_FDCWD, node, 0, STATX_BASIC_STATS, &stx) != 0 || !S_ISCHR(stx.stx_mode) ||
      stx.stx_rdev_major != 231 || stx.stx_rdev_minor != 192) {
    Fail("statx uverbs0", "not the character device 231:192");
  }
  if (access(node, R_OK | W_OK) != 0) Fail("access uverbs0 R_OK|W_OK", strerror(errno));
  if (faccessat(AT_FDCWD, node, R_OK | W_OK, 0) != 0) Fail("faccessat uverbs0", strerror(errno));
  /* Opening it, even to write or truncate, leaves the node what it was. */
  int fd = open(node, O_RDWR | O_TRUNC | O_CLOEXEC);
  if (fd < 0) {
    Fail("open uverbs0 O_RDWR", strerror(errno));
  } else {
    if (write(fd, "x", 1) >= 0) Fail("write uverbs0", "the placeholder took a write");
    close(fd);
  }
  FILE* f = fopen(node, "w");
  if (f) fclose(f);
  if (stat(node, &st) != 0 || !S_ISCHR(st.st_mode) || minor(st.st_rdev) != 192) {
    Fail("stat uverbs0 after open O_TRUNC / fopen w", "no longer the character device 231:192");
  }
}

static void CheckDirectories(const char* netdev) {
  DIR* d = opendir("/sys/class/infiniband");
  int found = 0;
  if (!d) {
    Fail("opendir /sys/class/infiniband", strerror(errno));
  } else {
    for (struct dirent* e; (e = readdir(d));) found |= strcmp(e->d_name, "softverbs0") == 0;
    closedir(d);
    if (!found) Fail("readdir /sys/class/infiniband", "no softverbs0");
  }
  struct dirent** list = NULL;
  int n = scandir(DEV "/device/net", &list, NULL, alphasort);
  found = 0;
  for (int i = 0; i < n; ++i) {
    found |= strcmp(list[i]->d_name, netdev) == 0;
    free(list[i]);
  }
  free(list);
  if (!found) Fail("scandir device/net", "the port's netdev is not listed");
  /* openat relative to a directory opened by its public path. */
  int dirfd = open(DEV, O_RDONLY | O_DIRECTORY);
  char buf[64];
  int fd = dirfd >= 0 ? openat(dirfd, "ports/1/state", O_RDONLY) : -1;
  if (fd < 0) {
    Fail("openat(<" DEV ">, ports/1/state)", strerror(errno));
  } else {
    ssize_t len = read(fd, buf, sizeof(buf) - 1);
    buf[len > 0 ? len : 0] = '\0';
    if (strncmp(buf, "4: ACTIVE", 9) != 0) Fail("openat ports/1/state", buf);
    close(fd);
  }
  if (dirfd >= 0) close(dirfd);
  /* The uverbs class names its device; links resolve; fopen reads. */
  Expect("/sys/class/infiniband_verbs/uverbs0/ibdev", "softverbs0");
  Expect("/sys/class/infiniband_verbs/uverbs0/dev", "231:192");
  Expect("/sys/class/infiniband_verbs/abi_version", "6");
  char target[PATH_MAX];
  char want[PATH_MAX];
  snprintf(want, sizeof(want), "/sys/class/net/%s", netdev);
  snprintf(buf, sizeof(buf), DEV "/device/net/%s", netdev);
  ssize_t len = readlink(buf, target, sizeof(target) - 1);
  if (len < 0 || (target[len] = '\0', strcmp(target, want) != 0)) {
    Fail("readlink device/net/<netdev>", len < 0 ? strerror(errno) : target);
  }
  char* real = realpath("/sys/class/infiniband_verbs/uverbs0/device", NULL);
  if (!real || strcmp(real, DEV "/device") != 0) {
    Fail("realpath uverbs0/device", real ? real : strerror(errno));
  }
  free(real);
  FILE* f = fopen(DEV "/node_type", "r");
  if (!f || !fgets(buf, sizeof(buf), f) || strcmp(buf, "1: CA\n") != 0) {
    Fail("fopen node_type", f ? buf : strerror(errno));
  }
  if (f) fclose(f);
  /* sysfs attributes are read-only. */
  if (open(DEV "/node_desc", O_WRONLY) >= 0 || errno != EACCES) {
    Fail("open node_desc O_WRONLY", "did not fail with EACCES");
  }
}

static void CheckAgainstVerbs(char* netdev, size_t netdev_size) {
  int num = 0;
  struct ibv_device** list = ibv_get_device_list(&num);
  if (!list || num < 1) {
    Fail("ibv_get_device_list", "no device");
    return;
  }
  struct ibv_context* ctx = ibv_open_device(list[0]);
  struct ibv_device_attr dev;
  struct ibv_port_attr port;
  if (!ctx || ibv_query_device(ctx, &dev) || ibv_query_port(ctx, 1, &port)) {
    Fail("ibv_open_device/query", strerror(errno));
    return;
  }
  char buf[128];
  uint64_t guid = be64toh(dev.node_guid);
  snprintf(buf, sizeof(buf), "%04x:%04x:%04x:%04x", (unsigned)(guid >> 48) & 0xffff,
           (unsigned)(guid >> 32) & 0xffff, (unsigned)(guid >> 16) & 0xffff,
           (unsigned)guid & 0xffff);
  Expect(DEV "/node_guid", buf);
  Expect(DEV "/fw_ver", dev.fw_ver);
  /* "N: NAME": the number is ibv_port_attr's. */
  char have[64];
  if (ReadLine(PORT "/state", have, sizeof(have)) != 0 || atoi(have) != (int)port.state) {
    Fail(PORT "/state", "differs from ibv_query_port");
  }
  if (ReadLine(PORT "/phys_state", have, sizeof(have)) != 0 || atoi(have) != port.phys_state) {
    Fail(PORT "/phys_state", "differs from ibv_query_port");
  }
  Expect(PORT "/link_layer",
         port.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand");
  snprintf(buf, sizeof(buf), "0x%x", port.lid);
  Expect(PORT "/lid", buf);
  snprintf(buf, sizeof(buf), "0x%08x", port.port_cap_flags);
  Expect(PORT "/cap_mask", buf);
  __be16 pkey;
  if (ibv_query_pkey(ctx, 1, 0, &pkey) == 0) {
    snprintf(buf, sizeof(buf), "0x%04x", be16toh(pkey));
    Expect(PORT "/pkeys/0", buf);
  }
  if (ReadLine(PORT "/gid_attrs/ndevs/0", netdev, netdev_size) != 0) {
    Fail("ndevs/0", "cannot read");
  }
  for (int i = 0; i < port.gid_tbl_len; ++i) {
    union ibv_gid gid;
    if (ibv_query_gid(ctx, 1, i, &gid) != 0) continue;
    char path[128];
    char* p = buf;
    for (int b = 0; b < 16; b += 2)
      p += sprintf(p, "%02x%02x%s", gid.raw[b], gid.raw[b + 1], b < 14 ? ":" : "");
    snprintf(path, sizeof(path), PORT "/gids/%d", i);
    Expect(path, buf);
    struct ibv_gid_entry entry;
    if (ibv_query_gid_ex(ctx, 1, i, &entry, 0) != 0) continue; /* an empty slot */
    snprintf(path, sizeof(path), PORT "/gid_attrs/types/%d", i);
    Expect(path, entry.gid_type == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2" : "IB/RoCE v1");
    snprintf(path, sizeof(path), PORT "/gid_attrs/ndevs/%d", i);
    Expect(path, netdev);
  }
  /* libibverbs' own sysfs reader answers the same. */
  if (ibv_read_sysfs_file(DEV, "fw_ver", have, sizeof(have)) < 0 || strcmp(have, dev.fw_ver)) {
    Fail("ibv_read_sysfs_file fw_ver", have);
  }
  ibv_close_device(ctx);
  ibv_free_device_list(list);
}

int main(void) {
  char netdev[64] = "";
  CheckAgainstVerbs(netdev, sizeof(netdev));
  CheckDeviceNode();
  CheckDirectories(netdev);
  /* A path outside the view is the host's. */
  struct stat st;
  if (stat("/sys/class/net", &st) != 0) Fail("stat /sys/class/net", strerror(errno));
  if (stat("/sys/class/infiniband_mad/none", &st) == 0) Fail("infiniband_mad", "mapped");
  printf("%s: %d failed check(s)\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
