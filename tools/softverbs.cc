// softverbs: run programs on the softverbs device and look at it.
//
//   softverbs run [--personality mlx5] -- <cmd> [args]
//                                   run <cmd> on the drop-in libraries, daemon up,
//                                   with softverbs0's kernel view (sysfs, /dev)
//   softverbs env                   the same set-up as shell lines (for MPI launchers)
//   softverbs status [--json]       devices, client processes and their objects
//   softverbs daemon start|stop     start or stop this user's daemon
#include <errno.h>
#include <fmt/core.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "common/daemon_launcher.h"
#include "common/gid_table.h"
#include "common/kernel_view.h"
#include "common/personality.h"
#include "common/runtime_dir.h"
#include "common/unix_socket.h"
#include "protocol/messages.h"

namespace {

namespace protocol = softverbs::protocol;

std::string SelfDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  buf[n] = '\0';
  std::string path(buf);
  return path.substr(0, path.rfind('/'));
}

// Installed or build tree: <prefix>/bin/softverbs with the libraries in
// <prefix>/lib (build tree) or <prefix>/lib/softverbs (installed).
std::string LibraryDir() {
  std::string bin = SelfDir();
  for (const std::string& dir : {bin + "/../lib/softverbs", bin + "/../lib"}) {
    if (access((dir + "/libibverbs.so.1").c_str(), R_OK) == 0) {
      char real[PATH_MAX];
      return realpath(dir.c_str(), real) ? std::string(real) : dir;
    }
  }
  return bin + "/../lib";
}

std::string DaemonBinary() {
  return SelfDir() + "/softverbsd";
}

// One request on a CLI connection; returns the reply body or throws.
std::string Ask(int fd, protocol::Op op) {
  protocol::RequestHeader hdr{protocol::kProtocolVersion, static_cast<uint16_t>(op), 0, 0, 1};
  if (op == protocol::Op::kHello) {
    protocol::HelloRequest hello{static_cast<uint32_t>(protocol::Role::kCli),
                                 static_cast<uint32_t>(getpid()), 0};
    hdr.body_size = sizeof(hello);
    softverbs::SendMessage(fd, &hdr, sizeof(hdr), &hello, sizeof(hello));
  } else {
    softverbs::SendMessage(fd, &hdr, sizeof(hdr), nullptr, 0);
  }
  std::vector<uint8_t> buf(4 << 20);
  ssize_t n = softverbs::ReceiveMessage(fd, buf.data(), buf.size(), nullptr);
  if (n < static_cast<ssize_t>(sizeof(protocol::ReplyHeader))) {
    throw std::runtime_error("the daemon closed the connection");
  }
  protocol::ReplyHeader rh;
  memcpy(&rh, buf.data(), sizeof(rh));
  const char* body = reinterpret_cast<const char*>(buf.data() + sizeof(rh));
  if (rh.err) {
    throw std::runtime_error(std::string(strerror(rh.err)) + ": " +
                             std::string(body + rh.body_size, rh.reason_len));
  }
  return std::string(body, rh.body_size);
}

int Connect(bool start, std::string* why_out = nullptr) {
  std::string why;
  int fd = softverbs::ConnectToDaemon(start ? DaemonBinary() : std::string(), &why);
  if (why_out) *why_out = why;
  if (fd < 0) return fd;
  Ask(fd, protocol::Op::kHello);
  return fd;
}

// The path interposer that shows the kernel view (src/kernel_view/).
constexpr const char* kKernelViewPreload = "libsoftverbs-kernel-view.so";

// What a program needs to run on softverbs: the daemon up, the kernel view
// written, and the variables that load the drop-in libraries (and, unless
// `kernel_view` is false, the interposer). Returns the variables to set, or
// an empty list after printing why not.
std::vector<std::pair<std::string, std::string>> RunEnvironment(const char* who, bool kernel_view,
                                                                const std::string& personality) {
  // Bring the daemon up first so that the program's first verb does not pay
  // for the start, and so a failure is reported here, clearly.
  std::string why;
  int fd = Connect(true, &why);
  if (fd < 0) {
    fmt::print(stderr, "{}: cannot start the daemon: {}{}\n", who, why.empty() ? "" : why + ": ",
               strerror(-fd));
    return {};
  }
  close(fd);
  const std::string runtime_dir = softverbs::RuntimeDirPath();
  const std::string libdir = LibraryDir();
  std::vector<std::pair<std::string, std::string>> env;
  std::string path = libdir;
  if (const char* old = getenv("LD_LIBRARY_PATH"); old && *old) path += std::string(":") + old;
  env.emplace_back("LD_LIBRARY_PATH", path);
  if (kernel_view) {
    namespace kv = softverbs::kernel_view;
    std::string why;
    if (int err =
            kv::Write(kv::RootOf(runtime_dir), kv::Entries(softverbs::BuildGidTable()), &why)) {
      fmt::print(stderr, "{}: cannot write the kernel view: {}: {}\n", who, why, strerror(err));
      return {};
    }
    std::string preload = libdir + "/" + kKernelViewPreload;
    // Nested runs (softverbs run inside softverbs run) keep one copy.
    if (const char* old = getenv("LD_PRELOAD"); old && *old) {
      preload = std::string(old).find(preload) == std::string::npos ? preload + ":" + old : old;
    }
    env.emplace_back("LD_PRELOAD", preload);
  }
  env.emplace_back("SOFTVERBSD", getenv("SOFTVERBSD") ? getenv("SOFTVERBSD") : DaemonBinary());
  // The runtime directory, explicit for the program and its children: the
  // interposer finds the kernel view there.
  env.emplace_back(softverbs::kRuntimeDirEnv, runtime_dir);
  // Empty: the caller's own SOFTVERBS_PERSONALITY (if any) stays.
  if (!personality.empty()) env.emplace_back(softverbs::kPersonalityEnv, personality);
  return env;
}

int Run(std::vector<std::string> command, bool kernel_view, const std::string& personality) {
  if (command.empty()) {
    fmt::print(stderr, "softverbs run: no command given (softverbs run -- <cmd> [args])\n");
    return 2;
  }
  auto env = RunEnvironment("softverbs run", kernel_view, personality);
  if (env.empty()) return 1;
  for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
  std::vector<char*> argv;
  for (auto& arg : command) argv.push_back(arg.data());
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  fmt::print(stderr, "softverbs run: cannot run {}: {}\n", command[0], strerror(errno));
  return 127;
}

// A value in single quotes for sh.
std::string ShellQuoted(const std::string& value) {
  std::string out = "'";
  for (char c : value) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

int Env(bool kernel_view, const std::string& personality) {
  auto env = RunEnvironment("softverbs env", kernel_view, personality);
  if (env.empty()) return 1;
  for (const auto& [name, value] : env) fmt::print("export {}={}\n", name, ShellQuoted(value));
  return 0;
}

void PrintStatus(const nlohmann::json& s) {
  const auto& dev = s["device"];
  fmt::print("device {} (port 1 on {})\n", dev["name"].get<std::string>(),
             dev["netdev"].get<std::string>());
  for (const auto& g : dev["gids"]) {
    fmt::print("  gid {:2} {} {}\n", g["index"].get<int>(), g["gid"].get<std::string>(),
               g["type"].get<std::string>());
  }
  const auto& clients = s["clients"];
  fmt::print("{} client context(s)\n", clients.size());
  for (const auto& c : clients) {
    const auto count = [&c](const char* kind) { return c.contains(kind) ? c[kind].size() : 0; };
    fmt::print(
        "client {} pid {} ({}): {} pd, {} mr, {} mw, {} mkey, {} cq, {} srq, {} qp, {} ah, {} "
        "xrcd\n",
        c["client"].get<int>(), c["pid"].get<int>(), c["comm"].get<std::string>(), count("pd"),
        count("mr"), count("mw"), count("mkey"), count("cq"), count("srq"), count("qp"),
        count("ah"), count("xrcd"));
    for (const auto& qp : c["qp"]) {
      fmt::print("  qp 0x{:06x} {} {}\n", qp["qpn"].get<uint32_t>(), qp["type"].get<std::string>(),
                 qp["state"].get<std::string>());
    }
    for (const auto& mr : c["mr"]) {
      fmt::print("  mr lkey 0x{:08x} rkey 0x{:08x} length {}\n", mr["lkey"].get<uint32_t>(),
                 mr["rkey"].get<uint32_t>(), mr["length"].get<uint64_t>());
    }
    if (c.contains("mkey")) {
      for (const auto& mkey : c["mkey"]) {
        fmt::print("  mkey lkey 0x{:08x} rkey 0x{:08x} {} ({} of {} entries){}{}\n",
                   mkey["lkey"].get<uint32_t>(), mkey["rkey"].get<uint32_t>(),
                   mkey["configured"].get<bool>() ? "configured" : "free",
                   mkey["entries"].get<size_t>(), mkey["max_entries"].get<uint32_t>(),
                   mkey.value("signed", false) ? ", block signature" : "",
                   mkey.value("sig_error_kept", false) ? ", a bad signature kept" : "");
      }
    }
    for (const auto& cq : c["cq"]) {
      fmt::print("  cq 0x{:06x} cqe {}\n", cq["cqn"].get<uint32_t>(), cq["cqe"].get<uint32_t>());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"softverbs - a user-space RDMA device"};
  app.require_subcommand(1);
  std::string runtime_dir;
  app.add_option("--runtime-dir", runtime_dir,
                 "runtime directory of the device (default: $SOFTVERBS_RUNTIME_DIR, "
                 "$XDG_RUNTIME_DIR/softverbs or /tmp/softverbs-<uid>)");

  auto* run = app.add_subcommand("run", "run a program on softverbs");
  std::vector<std::string> command;
  run->add_option("command", command, "the program and its arguments");
  run->prefix_command();
  run->footer("Usage: softverbs run -- <program> [args...]");
  bool no_kernel_view = false;
  run->add_flag("--no-kernel-view", no_kernel_view,
                "do not show softverbs0 in /sys/class/infiniband and /dev/infiniband");
  std::string personality;
  const auto personality_check = CLI::Validator(
      [](std::string& name) -> std::string {
        return softverbs::FindPersonality(name) ? "" : "no such personality (generic, mlx5)";
      },
      "generic|mlx5");
  run->add_option("--personality", personality,
                  "what the device reports itself as: generic (default) or mlx5 (a "
                  "ConnectX-6 Dx, for mlx5 software and DEVX; sets " +
                      std::string(softverbs::kPersonalityEnv) + ")")
      ->check(personality_check);

  auto* env = app.add_subcommand(
      "env",
      "print the environment `softverbs run` sets, as sh export lines (eval them; "
      "for MPI launchers: mpirun -x each variable)");
  env->add_flag("--no-kernel-view", no_kernel_view, "leave out the kernel view's LD_PRELOAD");
  env->add_option("--personality", personality, "as for run")->check(personality_check);

  auto* status = app.add_subcommand("status", "show the device, its clients and their objects");
  bool json = false;
  status->add_flag("--json", json, "machine-readable output");

  auto* daemon = app.add_subcommand("daemon", "control this user's daemon");
  daemon->require_subcommand(1);
  auto* start = daemon->add_subcommand("start", "start the daemon if it is not running");
  auto* stop = daemon->add_subcommand("stop", "stop the daemon");

  CLI11_PARSE(app, argc, argv);
  if (!runtime_dir.empty()) setenv(softverbs::kRuntimeDirEnv, runtime_dir.c_str(), 1);
  std::string dir_warning;
  softverbs::RuntimeDirPath(&dir_warning);
  if (!dir_warning.empty()) fmt::print(stderr, "softverbs: warning: {}\n", dir_warning);

  try {
    if (*run) {
      // The program's argv is the tail of ours, verbatim. CLI11 splits it
      // between `command` and remaining() and reorders a "--" separator to
      // the end of remaining(), which used to reach the program as a
      // trailing "--" argument; only their total count is reliable.
      size_t n = command.size() + run->remaining().size();
      command.assign(argv + argc - static_cast<int>(n), argv + argc);
      if (!command.empty() && command.front() == "--") command.erase(command.begin());
      return Run(command, !no_kernel_view, personality);
    }
    if (*env) return Env(!no_kernel_view, personality);
    if (*status) {
      std::string why;
      int fd = Connect(false, &why);
      if (fd < 0 && fd != -ENOENT && fd != -ECONNREFUSED) {
        // Not "no daemon": the device cannot be reached (a runtime
        // directory of another user, a full daemon...).
        fmt::print(stderr, "softverbs status: {}: {}\n", why, strerror(-fd));
        return 1;
      }
      if (fd < 0) {
        if (json) {
          fmt::print(
              "{}\n",
              nlohmann::json{{"device", nullptr}, {"clients", nlohmann::json::array()}}.dump(2));
        } else {
          fmt::print("no softverbs daemon is running for this user ({})\n",
                     softverbs::RuntimeDirPath());
        }
        return 0;
      }
      std::string body = Ask(fd, protocol::Op::kStatus);
      close(fd);
      if (json) {
        fmt::print("{}\n", body);
      } else {
        PrintStatus(nlohmann::json::parse(body));
      }
      return 0;
    }
    if (*start) {
      std::string why;
      int fd = Connect(true, &why);
      if (fd < 0) {
        fmt::print(stderr, "softverbs daemon start: {}{}\n", why.empty() ? "" : why + ": ",
                   strerror(-fd));
        return 1;
      }
      close(fd);
      return 0;
    }
    if (*stop) {
      int fd = Connect(false);
      if (fd < 0) return 0;  // nothing to stop
      Ask(fd, protocol::Op::kShutdown);
      // Wait until it has gone (its socket closes our connection).
      char byte;
      while (read(fd, &byte, 1) > 0) {
      }
      close(fd);
      return 0;
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "softverbs: {}\n", e.what());
    return 1;
  }
  return 0;
}
