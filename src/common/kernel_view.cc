#include "common/kernel_view.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>

#include "common/device_limits.h"
#include "common/port_facts.h"

namespace softverbs::kernel_view {
namespace {

namespace lim = softverbs::limits;

std::string Hex16Groups(uint64_t v, int groups) {
  std::string out;
  char buf[8];
  for (int i = groups - 1; i >= 0; --i) {
    snprintf(buf, sizeof(buf), "%04x", static_cast<unsigned>(v >> (16 * i)) & 0xffff);
    out += buf;
    if (i) out += ':';
  }
  return out;
}

// As the kernel prints a GID (%pI6): eight groups of four hex digits.
std::string GidText(const uint8_t raw[16]) {
  std::string out;
  char buf[8];
  for (int i = 0; i < 16; i += 2) {
    snprintf(buf, sizeof(buf), "%02x%02x", raw[i], raw[i + 1]);
    out += buf;
    if (i < 14) out += ':';
  }
  return out;
}

// ports/N/rate as the kernel writes it: per-lane rate (IBA 14.2.5.6) times
// the lane count, "10 Gb/sec (4X SDR)".
struct SpeedRow {
  uint8_t speed;        // ibv_port_attr.active_speed
  int lane_rate_100mb;  // in 100 Mb/s
  const char* name;
};
constexpr SpeedRow kSpeeds[] = {{1, 25, "SDR"},    {2, 50, "DDR"},    {4, 100, "QDR"},
                                {8, 100, "FDR10"}, {16, 140, "FDR"},  {32, 250, "EDR"},
                                {64, 500, "HDR"},  {128, 1000, "NDR"}};
struct WidthRow {
  uint8_t width;  // ibv_port_attr.active_width
  int lanes;
};
constexpr WidthRow kWidths[] = {{1, 1}, {2, 4}, {4, 8}, {8, 12}, {16, 2}};

std::string RateText(uint8_t width, uint8_t speed) {
  int lanes = 1;
  for (const auto& w : kWidths) {
    if (w.width == width) lanes = w.lanes;
  }
  const SpeedRow* s = &kSpeeds[0];
  for (const auto& row : kSpeeds) {
    if (row.speed == speed) s = &row;
  }
  int rate = s->lane_rate_100mb * lanes;
  char buf[64];
  snprintf(buf, sizeof(buf), "%d%s Gb/sec (%dX %s)", rate / 10, rate % 10 ? ".5" : "", lanes,
           s->name);
  return buf;
}

const char* PortStateText(ibv_port_state state) {
  switch (state) {
    case IBV_PORT_DOWN:
      return "1: DOWN";
    case IBV_PORT_INIT:
      return "2: INIT";
    case IBV_PORT_ARMED:
      return "3: ARMED";
    case IBV_PORT_ACTIVE:
      return "4: ACTIVE";
    case IBV_PORT_ACTIVE_DEFER:
      return "5: ACTIVE_DEFER";
    default:
      return "0: NOP";
  }
}

const char* PhysStateText(uint8_t phys) {
  static const char* const kNames[] = {"0: <unknown>",
                                       "1: Sleep",
                                       "2: Polling",
                                       "3: Disabled",
                                       "4: PortConfigurationTraining",
                                       "5: LinkUp",
                                       "6: LinkErrorRecovery",
                                       "7: Phy Test"};
  return phys < 8 ? kNames[phys] : kNames[0];
}

}  // namespace

std::vector<Entry> Entries(const GidTable& gids) {
  const std::string dev = std::string("sys/class/infiniband/") + lim::kDeviceName + "/";
  const std::string port = dev + "ports/1/";
  const std::string uverbs = std::string("sys/class/infiniband_verbs/") + kUverbsName + "/";
  const ibv_port_attr pa = PortAttributes(MtuForInterface(gids.mtu));
  const uint64_t guid = GuidFromMac(gids.mac);
  const std::string devnum =
      std::to_string(kUverbsMajor) + ":" + std::to_string(kUverbsMinorBase) + "\n";
  auto line = [](const std::string& s) { return s + "\n"; };
  char hex[32];

  std::vector<Entry> e;
  auto file = [&](const std::string& path, const std::string& text) {
    e.push_back({path, Kind::kFile, line(text)});
  };
  // The device (drivers/infiniband/core/sysfs.c's device attributes).
  file(dev + "node_type", "1: CA");
  file(dev + "node_guid", Hex16Groups(guid, 4));
  file(dev + "sys_image_guid", Hex16Groups(guid, 4));
  file(dev + "node_desc", std::string("softverbs ") + lim::kDeviceName);
  file(dev + "fw_ver", lim::kFirmwareVersion);
  file(dev + "hca_type", "softverbs");
  file(dev + "hw_rev", std::to_string(lim::kHwVersion));
  file(dev + "board_id", "softverbs");
  // Its parent device: no PCI function, no NUMA node; the network device the
  // port is bound to (as rxe's parent shows its netdev).
  file(dev + "device/numa_node", "-1");
  e.push_back({dev + "device/net/" + gids.netdev, Kind::kSymlink,
               std::string("/sys/class/net/") + gids.netdev});
  // Port 1.
  file(port + "state", PortStateText(pa.state));
  file(port + "phys_state", PhysStateText(pa.phys_state));
  file(port + "link_layer", pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand");
  file(port + "rate", RateText(pa.active_width, pa.active_speed));
  snprintf(hex, sizeof(hex), "0x%x", pa.lid);
  file(port + "lid", hex);
  file(port + "lid_mask_count", std::to_string(pa.lmc));
  snprintf(hex, sizeof(hex), "0x%x", pa.sm_lid);
  file(port + "sm_lid", hex);
  file(port + "sm_sl", std::to_string(pa.sm_sl));
  snprintf(hex, sizeof(hex), "0x%08x", pa.port_cap_flags);
  file(port + "cap_mask", hex);
  for (int i = 0; i < pa.pkey_tbl_len; ++i) {
    snprintf(hex, sizeof(hex), "0x%04x", lim::kDefaultPkey);
    file(port + "pkeys/" + std::to_string(i), hex);
  }
  // Every GID slot exists (empty ones read as zeros); the attributes exist
  // only for slots in use (the kernel fails reading an empty slot's).
  for (int i = 0; i < pa.gid_tbl_len; ++i) {
    uint8_t zero[16] = {};
    const bool used = i < gids.count;
    file(port + "gids/" + std::to_string(i), GidText(used ? gids.gids[i].raw : zero));
    if (!used) continue;
    file(port + "gid_attrs/types/" + std::to_string(i),
         gids.gids[i].type == GidType::kRoceV2 ? "RoCE v2" : "IB/RoCE v1");
    file(port + "gid_attrs/ndevs/" + std::to_string(i), gids.netdev);
  }
  // The uverbs class and node.
  file("sys/class/infiniband_verbs/abi_version", std::to_string(kUverbsAbiVersion));
  file(uverbs + "ibdev", lim::kDeviceName);
  file(uverbs + "abi_version", std::to_string(kDriverAbiVersion));
  e.push_back({uverbs + "dev", Kind::kFile, devnum});
  e.push_back({uverbs + "device", Kind::kSymlink,
               std::string("../../infiniband/") + lim::kDeviceName + "/device"});
  e.push_back({std::string("dev/infiniband/") + kUverbsName, Kind::kCharDevice, devnum});
  return e;
}

std::string RootOf(const std::string& runtime_dir) {
  return runtime_dir + "/" + kDirName;
}

bool Lookup(const std::vector<Entry>& entries, const std::string& absolute_path,
            std::string* content) {
  for (const auto& entry : entries) {
    if (entry.kind == Kind::kFile && absolute_path == "/" + entry.path) {
      *content = entry.content;
      return true;
    }
  }
  return false;
}

namespace {

int MakeParents(const std::string& root, const std::string& rel, std::string* why) {
  for (size_t pos = rel.find('/'); pos != std::string::npos; pos = rel.find('/', pos + 1)) {
    std::string dir = root + "/" + rel.substr(0, pos);
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      *why = "cannot create " + dir;
      return errno;
    }
  }
  return 0;
}

bool SameAsOnDisk(const std::string& path, const Entry& entry) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return false;
  if (entry.kind == Kind::kSymlink) {
    char buf[4096];
    ssize_t n = readlink(path.c_str(), buf, sizeof(buf));
    return S_ISLNK(st.st_mode) && n >= 0 && std::string(buf, n) == entry.content;
  }
  if (!S_ISREG(st.st_mode) || static_cast<size_t>(st.st_size) != entry.content.size()) {
    return false;
  }
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  std::string have(entry.content.size(), '\0');
  ssize_t n = read(fd, have.data(), have.size());
  close(fd);
  return n == static_cast<ssize_t>(have.size()) && have == entry.content;
}

int WriteOne(const std::string& path, const Entry& entry, std::string* why) {
  std::string tmp = path + ".new." + std::to_string(getpid());
  unlink(tmp.c_str());
  if (entry.kind == Kind::kSymlink) {
    if (symlink(entry.content.c_str(), tmp.c_str()) != 0) {
      *why = "cannot create the link " + tmp;
      return errno;
    }
  } else {
    int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
      *why = "cannot create " + tmp;
      return errno;
    }
    ssize_t n = write(fd, entry.content.data(), entry.content.size());
    // sysfs attributes are read-only; a uverbs node is crw-rw-rw-.
    fchmod(fd, entry.kind == Kind::kCharDevice ? 0666 : 0444);
    close(fd);
    if (n != static_cast<ssize_t>(entry.content.size())) {
      unlink(tmp.c_str());
      *why = "cannot write " + tmp;
      return EIO;
    }
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    *why = "cannot rename " + tmp + " to " + path;
    return err;
  }
  return 0;
}

// Paths nftw finds that are not entries (the callback has no user pointer).
thread_local const std::set<std::string>* t_wanted;
thread_local std::vector<std::string>* t_stale;
thread_local size_t t_root_len;

int CollectStale(const char* path, const struct stat*, int type, struct FTW*) {
  if (type == FTW_D || type == FTW_DP) return 0;
  std::string rel = std::string(path).substr(t_root_len);
  if (!t_wanted->count(rel)) t_stale->push_back(path);
  return 0;
}

}  // namespace

int Write(const std::string& root, const std::vector<Entry>& entries, std::string* why) {
  if (mkdir(root.c_str(), 0755) != 0 && errno != EEXIST) {
    *why = "cannot create " + root;
    return errno;
  }
  std::set<std::string> wanted;
  for (const auto& entry : entries) {
    wanted.insert(entry.path);
    if (int err = MakeParents(root, entry.path, why)) return err;
    std::string path = root + "/" + entry.path;
    if (SameAsOnDisk(path, entry)) continue;
    if (int err = WriteOne(path, entry, why)) return err;
  }
  // What an earlier view had and this one has not (a GID that went away).
  std::vector<std::string> stale;
  t_wanted = &wanted;
  t_stale = &stale;
  t_root_len = root.size() + 1;
  nftw(root.c_str(), CollectStale, 16, FTW_PHYS | FTW_DEPTH);
  for (const auto& path : stale) {
    // Another writer's file in flight is not stale.
    if (path.find(".new.") == std::string::npos) unlink(path.c_str());
  }
  return 0;
}

}  // namespace softverbs::kernel_view
