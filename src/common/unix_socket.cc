#include "common/unix_socket.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace softverbs {

int SendMessage(int sock, const void* part1, size_t len1, const void* part2, size_t len2,
                const int* fds, size_t nfds) {
  iovec iov[2] = {{const_cast<void*>(part1), len1}, {const_cast<void*>(part2), len2}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = len2 ? 2 : 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)];
  if (nfds > 0) {
    if (nfds > kMaxFdsPerMessage) return EINVAL;
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * nfds);
  }
  for (;;) {
    ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n >= 0) return 0;
    if (errno != EINTR) return errno;
  }
}

ssize_t ReceiveMessage(int sock, void* buf, size_t cap, std::vector<int>* fds) {
  iovec iov{buf, cap};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)];
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return -errno;
  for (cmsghdr* cmsg = CMSG_FIRSTHDR(&msg); cmsg; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
    if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    int* received = reinterpret_cast<int*>(CMSG_DATA(cmsg));
    for (size_t i = 0; i < count; ++i) {
      if (fds) {
        fds->push_back(received[i]);
      } else {
        close(received[i]);
      }
    }
  }
  if (msg.msg_flags & MSG_TRUNC) return -EMSGSIZE;
  return n;
}

namespace {

// A socket path longer than sun_path (108 bytes: deep CI checkouts) is
// reached through the directory's descriptor: /proc/self/fd/<n>/<name>
// resolves to the same inode and is short. The descriptor must stay open
// until bind/connect returns.
class SocketAddress {
 public:
  explicit SocketAddress(const std::string& path) {
    memset(&addr_, 0, sizeof(addr_));
    addr_.sun_family = AF_UNIX;
    std::string usable = path;
    if (path.size() >= sizeof(addr_.sun_path)) {
      size_t slash = path.rfind('/');
      std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
      dir_fd_ = open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (dir_fd_ < 0) {
        err_ = errno;
        return;
      }
      usable = "/proc/self/fd/" + std::to_string(dir_fd_) + "/" + path.substr(slash + 1);
      if (usable.size() >= sizeof(addr_.sun_path)) {
        err_ = ENAMETOOLONG;
        return;
      }
    }
    memcpy(addr_.sun_path, usable.c_str(), usable.size() + 1);
  }
  ~SocketAddress() {
    if (dir_fd_ >= 0) close(dir_fd_);
  }
  int error() const { return err_; }
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&addr_); }
  socklen_t size() const { return sizeof(addr_); }

 private:
  sockaddr_un addr_;
  int dir_fd_ = -1;
  int err_ = 0;
};

}  // namespace

int ConnectSeqpacket(const std::string& path) {
  SocketAddress addr(path);
  if (int err = addr.error()) return -err;
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  if (connect(fd, addr.get(), addr.size()) != 0) {
    int err = errno;
    close(fd);
    return -err;
  }
  return fd;
}

int ListenSeqpacket(const std::string& path) {
  SocketAddress addr(path);
  if (int err = addr.error()) return -err;
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -errno;
  unlink(path.c_str());
  if (bind(fd, addr.get(), addr.size()) != 0 || listen(fd, 128) != 0) {
    int err = errno;
    close(fd);
    return -err;
  }
  return fd;
}

int GetPeerCredentials(int sock, PeerCredentials* creds) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return errno;
  creds->pid = cred.pid;
  creds->uid = cred.uid;
  return 0;
}

}  // namespace softverbs
