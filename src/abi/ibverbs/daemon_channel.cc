#include "abi/ibverbs/daemon_channel.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <vector>

#include "common/daemon_launcher.h"
#include "common/log.h"
#include "common/runtime_dir.h"
#include "common/unix_socket.h"

namespace softverbs::provider {

namespace {

// softverbsd is found next to the libraries: $SOFTVERBSD, else
// <libdir>/../bin/softverbsd, else <libdir>/softverbsd.
std::string DaemonBinary() {
  if (const char* env = getenv("SOFTVERBSD"); env && *env) return env;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&DaemonBinary), &info) && info.dli_fname) {
    std::string lib = info.dli_fname;
    std::string dir = lib.substr(0, lib.rfind('/'));
    for (const std::string& candidate : {dir + "/../bin/softverbsd", dir + "/softverbsd"}) {
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  return "softverbsd";  // from PATH
}

// The ops that release a resource. Once the device is gone they succeed:
// the resource went with it (rdma-core's verbs_is_destroy_err treats the
// kernel's EIO after a disassociation the same way).
bool ReleasesAResource(protocol::Op op) {
  switch (op) {
    case protocol::Op::kDeallocPd:
    case protocol::Op::kDeregMr:
    case protocol::Op::kDestroyCq:
    case protocol::Op::kDestroySrq:
    case protocol::Op::kDestroyQp:
    case protocol::Op::kDestroyAh:
    case protocol::Op::kDetachMcast:
    case protocol::Op::kCloseXrcd:
    case protocol::Op::kDevxDestroy:
    case protocol::Op::kDevxUmemDereg:
    case protocol::Op::kFreeDm:
      return true;
    default:
      return false;
  }
}

}  // namespace

DaemonChannel::~DaemonChannel() {
  if (fd_ >= 0) close(fd_);
}

void DaemonChannel::Disconnect() {
  std::lock_guard lock(mutex_);
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

int DaemonChannel::Release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

int DaemonChannel::Connect(protocol::Role role) {
  (void)role;
  std::string why;
  int fd = ConnectToDaemon(DaemonBinary(), &why);
  if (fd < 0) {
    Log("cannot reach the softverbs daemon: %s: %s", why.c_str(), strerror(-fd));
    return -fd;
  }
  fd_ = fd;
  gone_.store(false, std::memory_order_release);
  return 0;
}

int DaemonChannel::Call(protocol::Op op, const void* req, size_t req_len, void* rep, size_t rep_len,
                        const int* fds, size_t nfds, size_t* rep_body_len,
                        std::vector<int>* fds_out) {
  std::lock_guard lock(mutex_);
  if (fd_ < 0) return ENODEV;
  auto device_gone = [&] {
    gone_.store(true, std::memory_order_release);
    return ReleasesAResource(op) ? 0 : ENODEV;
  };
  if (gone()) return device_gone();
  protocol::RequestHeader hdr{protocol::kProtocolVersion, static_cast<uint16_t>(op), 0,
                              static_cast<uint32_t>(req_len), ++seq_};
  // Status replies can be large; everything else fits the default buffer.
  std::vector<uint8_t> buf(op == protocol::Op::kStatus ? (4 << 20) : protocol::kMaxMessageSize);
  ssize_t n;
  if (int err = SendMessage(fd_, &hdr, sizeof(hdr), req, req_len, fds, nfds)) {
    if (err != EPIPE && err != ECONNRESET && err != ENOTCONN) {
      Log("%s: the daemon connection failed: %s", protocol::OpName(op), strerror(err));
      return err;
    }
    // The daemon closed the connection; it may have said why first (a
    // daemon out of descriptors refuses new clients that way).
    n = recv(fd_, buf.data(), buf.size(), MSG_DONTWAIT);
  } else {
    n = ReceiveMessage(fd_, buf.data(), buf.size(), fds_out);
  }
  if (n < static_cast<ssize_t>(sizeof(protocol::ReplyHeader))) {
    Log("%s: the daemon went away", protocol::OpName(op));
    return device_gone();
  }
  protocol::ReplyHeader rh;
  memcpy(&rh, buf.data(), sizeof(rh));
  const uint8_t* body = buf.data() + sizeof(rh);
  if (rh.err != 0) {
    std::string why(reinterpret_cast<const char*>(body + rh.body_size), rh.reason_len);
    Log("%s rejected (%s): %s", protocol::OpName(op), strerror(rh.err), why.c_str());
    return rh.err;
  }
  if (rep && rep_len) memcpy(rep, body, std::min<size_t>(rep_len, rh.body_size));
  if (rep_body_len) *rep_body_len = rh.body_size;
  return 0;
}

}  // namespace softverbs::provider
