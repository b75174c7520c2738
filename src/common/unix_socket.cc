#include "common/unix_socket.h"

#include <errno.h>
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
int FillAddress(const std::string& path, sockaddr_un* addr) {
  if (path.size() >= sizeof(addr->sun_path)) return ENAMETOOLONG;
  memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  memcpy(addr->sun_path, path.c_str(), path.size() + 1);
  return 0;
}
}  // namespace

int ConnectSeqpacket(const std::string& path) {
  sockaddr_un addr;
  if (int err = FillAddress(path, &addr)) return -err;
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    close(fd);
    return -err;
  }
  return fd;
}

int ListenSeqpacket(const std::string& path) {
  sockaddr_un addr;
  if (int err = FillAddress(path, &addr)) return -err;
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -errno;
  unlink(path.c_str());
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 128) != 0) {
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
