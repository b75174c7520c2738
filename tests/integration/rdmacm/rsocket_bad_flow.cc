// rsockets' bad flows (and a few good ones) on one host, as real
// processes: bad descriptors (EBADF), unsupported types, calls on
// unconnected sockets (ENOTCONN), a connect nobody listens to (ECONNREFUSED,
// blocking and non-blocking with rpoll and SO_ERROR), a peer that closes
// (rrecv 0, rsend EPIPE/ECONNRESET, POLLHUP) or is killed, non-blocking calls
// that would block (EAGAIN), options, riowrite without a mapping; and data
// through rsendmsg/rreadv, MSG_PEEK, rselect and rpoll with an ordinary
// descriptor mixed in. Each case runs in a process of its own, which forks
// its peer before touching librdmacm. A failed check is printed and counted;
// the last line says "rsocket bad flows: N failures". Run under
// `softverbs run`.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <thread>

namespace {

int g_failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                            \
    }                                                                          \
  } while (0)
#define CHECK_ERR(call, err)                                                               \
  do {                                                                                     \
    errno = 0;                                                                             \
    long r_ = static_cast<long>(call);                                                     \
    if (r_ != -1 || errno != (err)) {                                                      \
      fprintf(stderr, "%s:%d: %s returned %ld errno %d (%s), expected -1 errno %d (%s)\n", \
              __FILE__, __LINE__, #call, r_, errno, strerror(errno), err, strerror(err));  \
      ++g_failures;                                                                        \
    }                                                                                      \
  } while (0)

[[noreturn]] void Die(const char* what) {
  fprintf(stderr, "setup failed: %s (%s)\n", what, strerror(errno));
  exit(2);
}

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

sockaddr_in Ipv4(const char* ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}

sockaddr* Sa(sockaddr_in* a) {
  return reinterpret_cast<sockaddr*>(a);
}

// A listening rsocket on 127.0.0.1:port.
int Listen(uint16_t port) {
  int fd = rsocket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) Die("rsocket");
  int one = 1;
  rsetsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a = Ipv4("127.0.0.1", port);
  if (rbind(fd, Sa(&a), sizeof(a)) || rlisten(fd, 4)) Die("rbind/rlisten");
  return fd;
}

int Connect(uint16_t port) {
  int fd = rsocket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) Die("rsocket");
  sockaddr_in a = Ipv4("127.0.0.1", port);
  if (rconnect(fd, Sa(&a), sizeof(a))) Die("rconnect");
  return fd;
}

bool ReadAll(int fd, void* buf, size_t len) {
  auto* p = static_cast<char*>(buf);
  while (len) {
    ssize_t n = rrecv(fd, p, len, 0);
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

// Runs server(listen_fd) in a child once it listens on port; the parent
// runs client(port). Answers after both ended; the child's failures count.
template <typename Server, typename Client>
void WithPeer(uint16_t port, Server server, Client client) {
  int ready[2];
  if (pipe(ready)) Die("pipe");
  pid_t pid = fork();
  if (pid < 0) Die("fork");
  if (pid == 0) {
    g_failures = 0;  // the child's own
    close(ready[0]);
    int lfd = Listen(port);
    char c = 1;
    if (write(ready[1], &c, 1) != 1) _exit(2);
    server(lfd);
    rclose(lfd);
    _exit(g_failures ? 1 : 0);
  }
  close(ready[1]);
  char c;
  if (read(ready[0], &c, 1) != 1) Die("the server did not start");
  close(ready[0]);
  client(port);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status)) {
    fprintf(stderr, "server of port %u ended with status 0x%x\n", port, status);
    ++g_failures;
  }
}

void BadDescriptors() {
  char b[4] = {};
  const int bad = 9999;
  CHECK_ERR(rsend(bad, b, 4, 0), EBADF);
  CHECK_ERR(rrecv(bad, b, 4, 0), EBADF);
  CHECK_ERR(rread(bad, b, 4), EBADF);
  CHECK_ERR(rwrite(bad, b, 4), EBADF);
  CHECK_ERR(rclose(bad), EBADF);
  CHECK_ERR(rshutdown(bad, SHUT_RDWR), EBADF);
  CHECK_ERR(rlisten(bad, 1), EBADF);
  CHECK_ERR(raccept(bad, nullptr, nullptr), EBADF);
  sockaddr_in a = Ipv4("127.0.0.1", 7000);
  CHECK_ERR(rbind(bad, Sa(&a), sizeof(a)), EBADF);
  CHECK_ERR(rconnect(bad, Sa(&a), sizeof(a)), EBADF);
  int v = 0;
  socklen_t len = sizeof(v);
  CHECK_ERR(rgetsockopt(bad, SOL_SOCKET, SO_ERROR, &v, &len), EBADF);
  CHECK_ERR(rsetsockopt(bad, SOL_SOCKET, SO_KEEPALIVE, &v, sizeof(v)), EBADF);
  CHECK_ERR(rfcntl(bad, F_GETFL), EBADF);
  CHECK_ERR(rgetpeername(bad, Sa(&a), &len), EBADF);
  CHECK_ERR(rgetsockname(bad, Sa(&a), &len), EBADF);
  CHECK_ERR(riomap(bad, b, 4, PROT_WRITE, 0, -1), EBADF);
  CHECK(riowrite(bad, b, 4, 0, 0) == static_cast<size_t>(-1) && errno == EBADF);
  // A closed rsocket is a bad descriptor too.
  int fd = rsocket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0);
  CHECK(rclose(fd) == 0);
  CHECK_ERR(rsend(fd, b, 4, 0), EBADF);
}

void UnsupportedAndUnconnected() {
  CHECK_ERR(rsocket(AF_INET, SOCK_DGRAM, 0), EOPNOTSUPP);
  CHECK_ERR(rsocket(AF_UNIX, SOCK_STREAM, 0), ENOTSUP);  // librdmacm's answers
  CHECK_ERR(rsocket(AF_INET, SOCK_STREAM, IPPROTO_UDP), ENOTSUP);
  CHECK_ERR(rsocket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), ENOTSUP);  // the type exactly
  CHECK_ERR(rsocket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ENOTSUP);
  int fd = rsocket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0);
  CHECK(rfcntl(fd, F_GETFL) == 0);  // librdmacm's fd_flags: 0 until F_SETFL
  CHECK_ERR(rfcntl(fd, F_GETFD), ENOTSUP);
  char b[4] = {};
  CHECK_ERR(rsend(fd, b, 4, 0), ENOTCONN);
  CHECK_ERR(rrecv(fd, b, 4, 0), ENOTCONN);
  CHECK_ERR(rshutdown(fd, SHUT_RDWR), ENOTCONN);
  sockaddr_in peer{};
  socklen_t len = sizeof(peer);
  CHECK_ERR(rgetpeername(fd, Sa(&peer), &len), ENOTCONN);
  CHECK_ERR(raccept(fd, nullptr, nullptr), EINVAL);  // not listening
  CHECK_ERR(riomap(fd, b, 4, PROT_WRITE, 0, -1), EINVAL);
  // Options before the connection.
  int v = 1 << 16;
  CHECK(rsetsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)) == 0);
  len = sizeof(v);
  CHECK(rgetsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, &len) == 0 && v == 1 << 17);
  v = 1;
  CHECK(rsetsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, sizeof(v)) == 0);
  v = 0;
  len = sizeof(v);
  CHECK(rgetsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &len) == 0 && v == 1);
  CHECK_ERR(rsetsockopt(fd, SOL_SOCKET, SO_BROADCAST, &v, sizeof(v)), ENOTSUP);
  v = 32;
  CHECK(rsetsockopt(fd, SOL_RDMA, RDMA_SQSIZE, &v, sizeof(v)) == 0);
  CHECK(rgetsockopt(fd, SOL_RDMA, RDMA_SQSIZE, &v, &len) == 0 && v == 32);
  CHECK(rfcntl(fd, F_SETFL, O_NONBLOCK | O_APPEND) == 0);
  CHECK(rfcntl(fd, F_GETFL) == (O_NONBLOCK | O_APPEND));  // what F_SETFL was given
  // A socket neither connected nor listening has no event (librdmacm's
  // rs_poll_rs; a TCP socket would say POLLOUT | POLLHUP).
  pollfd p{fd, POLLIN | POLLOUT, 0};
  CHECK(rpoll(&p, 1, 0) == 0 && p.revents == 0);
  CHECK(rpoll(&p, 1, 50) == 0 && p.revents == 0);
  // Bound twice, and a port in use.
  sockaddr_in a = Ipv4("127.0.0.1", 7391);
  CHECK(rbind(fd, Sa(&a), sizeof(a)) == 0);
  CHECK_ERR(rbind(fd, Sa(&a), sizeof(a)), EINVAL);
  int other = rsocket(AF_INET, SOCK_STREAM, 0);
  CHECK(rbind(other, Sa(&a), sizeof(a)) == -1 && errno == EADDRINUSE);
  rclose(other);
  rclose(fd);
}

void ConnectRefused() {
  // Blocking: ECONNREFUSED, in bounded time.
  int fd = rsocket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = Ipv4("127.0.0.1", 7392);
  double t0 = Now();
  CHECK_ERR(rconnect(fd, Sa(&a), sizeof(a)), ECONNREFUSED);
  CHECK(Now() - t0 < 10);
  char b[4];
  CHECK_ERR(rsend(fd, b, 4, 0), ENOTCONN);
  rclose(fd);
  // Non-blocking: EINPROGRESS, rpoll says POLLOUT|POLLERR, SO_ERROR says why.
  fd = rsocket(AF_INET, SOCK_STREAM, 0);
  rfcntl(fd, F_SETFL, O_NONBLOCK);
  CHECK_ERR(rconnect(fd, Sa(&a), sizeof(a)), EINPROGRESS);
  pollfd p{fd, POLLOUT, 0};
  CHECK(rpoll(&p, 1, 10000) == 1 && (p.revents & POLLERR));
  // rselect: writable (POLLOUT) and an exception (POLLERR), as librdmacm maps.
  fd_set w, e;
  FD_ZERO(&w);
  FD_ZERO(&e);
  FD_SET(fd, &w);
  FD_SET(fd, &e);
  timeval tv{1, 0};
  CHECK(rselect(fd + 1, nullptr, &w, &e, &tv) == 2 && FD_ISSET(fd, &w) && FD_ISSET(fd, &e));
  int err = 0;
  socklen_t len = sizeof(err);
  CHECK(rgetsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == ECONNREFUSED);
  // rconnect again after the failure: ENOTCONN, as librdmacm answers.
  CHECK_ERR(rconnect(fd, Sa(&a), sizeof(a)), ENOTCONN);
  rclose(fd);
}

// Data both ways: rsendmsg / rreadv with two buffers, MSG_PEEK, rselect;
// then the server closes: rrecv 0, POLLHUP, rsend EPIPE or ECONNRESET.
void DataAndPeerClose() {
  WithPeer(
      7393,
      [](int lfd) {
        int fd = raccept(lfd, nullptr, nullptr);
        CHECK(fd >= 0);
        char buf[11] = {};
        CHECK(ReadAll(fd, buf, 10));
        CHECK(memcmp(buf, "hello rdma", 10) == 0);
        CHECK(rsend(fd, "world", 5, 0) == 5);
        // Wait for the client's "bye" so it has read "world" before the end.
        CHECK(ReadAll(fd, buf, 3));
        CHECK(rclose(fd) == 0);
      },
      [](uint16_t port) {
        int fd = Connect(port);
        char none[1];
        CHECK(rrecv(fd, none, 0, 0) == 0);  // nothing asked: no wait, as recv(2)
        sockaddr_in name{};
        socklen_t len = sizeof(name);
        CHECK(rgetpeername(fd, Sa(&name), &len) == 0 && name.sin_port == htons(port));
        CHECK(rgetsockname(fd, Sa(&name), &len) == 0 && name.sin_family == AF_INET);
        char a[] = "hello", b[] = " rdma";
        iovec iov[2] = {{a, 5}, {b, 5}};
        msghdr m{};
        m.msg_iov = iov;
        m.msg_iovlen = 2;
        CHECK(rsendmsg(fd, &m, 0) == 10);
        fd_set r;
        FD_ZERO(&r);
        FD_SET(fd, &r);
        timeval tv{10, 0};
        CHECK(rselect(fd + 1, &r, nullptr, nullptr, &tv) == 1 && FD_ISSET(fd, &r));
        // An ordinary descriptor mixed in: both are ready.
        int pfd[2];
        CHECK(pipe(pfd) == 0);
        CHECK(write(pfd[1], "p", 1) == 1);
        pollfd mixed[2] = {{fd, POLLIN, 0}, {pfd[0], POLLIN, 0}};
        CHECK(rpoll(mixed, 2, 1000) == 2 && (mixed[0].revents & POLLIN) &&
              (mixed[1].revents & POLLIN));
        close(pfd[0]);
        close(pfd[1]);
        char peek[5] = {};
        CHECK(rrecv(fd, peek, 5, MSG_PEEK | MSG_WAITALL) >= 1 && peek[0] == 'w');
        char x[3] = {}, y[2] = {};
        iovec in[2] = {{x, 3}, {y, 2}};
        size_t got = 0;
        while (got < 5) {
          ssize_t n = rreadv(fd, in, 2);
          if (n <= 0) break;
          got += static_cast<size_t>(n);
          // A short read: the rest goes to the buffers' remainder.
          for (size_t k = 0, skip = static_cast<size_t>(n); k < 2; ++k) {
            size_t s = skip < in[k].iov_len ? skip : in[k].iov_len;
            in[k].iov_base = static_cast<char*>(in[k].iov_base) + s;
            in[k].iov_len -= s;
            skip -= s;
          }
        }
        CHECK(got == 5 && memcmp(x, "wor", 3) == 0 && memcmp(y, "ld", 2) == 0);
        CHECK(rsend(fd, "bye", 3, 0) == 3);
        char c;
        CHECK(rrecv(fd, &c, 1, 0) == 0);  // the server closed: end of stream
        pollfd p{fd, POLLIN, 0};
        CHECK(rpoll(&p, 1, 1000) == 1 && (p.revents & POLLHUP));
        errno = 0;
        CHECK(rsend(fd, "x", 1, 0) == -1 && (errno == EPIPE || errno == ECONNRESET));
        CHECK(rclose(fd) == 0);
      });
}

// A non-blocking connection: EINPROGRESS then POLLOUT; rrecv with nothing
// there is EAGAIN; rsend to a peer that does not read runs out of room
// (EAGAIN); options that only count before the connection are refused.
void NonBlocking() {
  // The client says (a byte here) when its rsend has run out of room; the
  // server reads nothing until then (20 s at most).
  static int full[2];
  if (pipe(full)) Die("pipe");
  WithPeer(
      7394,
      [](int lfd) {
        int fd = raccept(lfd, nullptr, nullptr);
        CHECK(fd >= 0);
        pollfd until_full{full[0], POLLIN, 0};
        CHECK(poll(&until_full, 1, 20000) == 1);
        char c;
        CHECK(ReadAll(fd, &c, 1));
        size_t total = 1;
        char buf[65536];
        for (;;) {
          ssize_t n = rrecv(fd, buf, sizeof(buf), 0);
          if (n <= 0) break;
          total += static_cast<size_t>(n);
        }
        CHECK(total > 1);
        rclose(fd);
      },
      [](uint16_t port) {
        int fd = rsocket(AF_INET, SOCK_STREAM, 0);
        rfcntl(fd, F_SETFL, O_NONBLOCK);
        sockaddr_in a = Ipv4("127.0.0.1", port);
        int r = rconnect(fd, Sa(&a), sizeof(a));
        CHECK(r == 0 || errno == EINPROGRESS);
        // rconnect again drives the connection on, as librdmacm's does: 0
        // once connected, EINPROGRESS until then (a loop on it ends).
        for (int i = 0; r != 0 && i < 10000; ++i) {
          r = rconnect(fd, Sa(&a), sizeof(a));
          if (r != 0) {
            CHECK(errno == EINPROGRESS);
            if (errno != EINPROGRESS) break;
            usleep(1000);
          }
        }
        CHECK(r == 0);
        CHECK(rconnect(fd, Sa(&a), sizeof(a)) == 0);  // connected: 0 again
        pollfd p{fd, POLLOUT, 0};
        CHECK(rpoll(&p, 1, 10000) == 1 && (p.revents & POLLOUT) && !(p.revents & POLLERR));
        int err = -1;
        socklen_t len = sizeof(err);
        CHECK(rgetsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0);
        char c;
        CHECK_ERR(rrecv(fd, &c, 1, 0), EAGAIN);
        int v = 64;
        CHECK_ERR(rsetsockopt(fd, SOL_RDMA, RDMA_INLINE, &v, sizeof(v)), EINVAL);
        static char chunk[65536];
        ssize_t n;
        size_t sent = 0;
        double t0 = Now();
        while ((n = rsend(fd, chunk, sizeof(chunk), 0)) > 0 && Now() - t0 < 10) sent += n;
        CHECK(n == -1 && errno == EAGAIN && sent > 0);
        CHECK(write(full[1], "f", 1) == 1);
        rfcntl(fd, F_SETFL, 0);
        CHECK(rshutdown(fd, SHUT_WR) == 0);
        CHECK_ERR(rsend(fd, chunk, 1, 0), EPIPE);
        CHECK(rrecv(fd, &c, 1, 0) == 0);  // the server's close
        rclose(fd);
      });
  close(full[0]);
  close(full[1]);
}

// riowrite into no mapping; riomap / riounmap.
void Iomap() {
  WithPeer(
      7395,
      [](int lfd) {
        int fd = raccept(lfd, nullptr, nullptr);
        CHECK(fd >= 0);
        char c;
        CHECK(ReadAll(fd, &c, 1));
        rclose(fd);
      },
      [](uint16_t port) {
        int fd = Connect(port);
        static char buf[4096];
        CHECK(riowrite(fd, buf, 16, 0, 0) == static_cast<size_t>(-1) && errno == EINVAL);
        CHECK_ERR(riomap(fd, buf, sizeof(buf), PROT_READ, 0, -1), EINVAL);
        // The peer offers no iomap entries (no RDMA_IOMAPSIZE): ENOMEM.
        CHECK_ERR(riomap(fd, buf, sizeof(buf), PROT_WRITE, 0, 0), ENOMEM);
        CHECK(riomap(fd, buf, sizeof(buf), PROT_NONE, 0, 0) == 0);
        CHECK(riounmap(fd, buf, sizeof(buf)) == 0);
        CHECK_ERR(riounmap(fd, buf, sizeof(buf)), EINVAL);
        CHECK(rsend(fd, "x", 1, 0) == 1);
        char c;
        CHECK(rrecv(fd, &c, 1, 0) == 0);
        rclose(fd);
      });
}

// A peer killed while connected: the blocked rrecv ends (0) in bounded
// time, rsend then fails, rpoll says POLLHUP.
void PeerKilled() {
  int ready[2];
  if (pipe(ready)) Die("pipe");
  pid_t pid = fork();
  if (pid < 0) Die("fork");
  if (pid == 0) {
    close(ready[0]);
    int lfd = Listen(7396);
    char c = 1;
    if (write(ready[1], &c, 1) != 1) _exit(2);
    int fd = raccept(lfd, nullptr, nullptr);
    if (fd < 0 || rsend(fd, "live", 4, 0) != 4) _exit(2);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char c;
  if (read(ready[0], &c, 1) != 1) Die("the server did not start");
  int fd = Connect(7396);
  char buf[4];
  CHECK(ReadAll(fd, buf, 4) && memcmp(buf, "live", 4) == 0);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  double t0 = Now();
  ssize_t n = rrecv(fd, buf, 4, 0);
  CHECK(n == 0 || (n == -1 && errno == ECONNRESET));
  CHECK(Now() - t0 < 10);
  pollfd p{fd, POLLIN | POLLOUT, 0};
  CHECK(rpoll(&p, 1, 1000) == 1 && (p.revents & (POLLHUP | POLLERR)));
  errno = 0;
  CHECK(rsend(fd, "x", 1, 0) == -1 && (errno == EPIPE || errno == ECONNRESET));
  CHECK(rclose(fd) == 0);
}

// Each case in a process of its own: a process's device context (and so its
// memory keys) must not be shared with the peer it forks.
void InOwnProcess(const char* name, void (*run)()) {
  fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) Die("fork");
  if (pid == 0) {
    g_failures = 0;  // the case's own, not those of the cases before it
    run();
    fflush(nullptr);
    _exit(g_failures > 100 ? 100 : g_failures);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  int failures = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  printf("%s: %s\n", name, failures ? "FAILED" : "ok");
  g_failures += failures;
}

// Connections are accepted before raccept asks (librdmacm's listen
// service; a TCP backlog): one thread connects to its own listener, rpoll
// then sees POLLIN on it, raccept takes the connection at once, data flows
// both ways; a second connection is still waiting when the listener is
// closed, which closes it: its client sees the connection end. The
// descriptor raccept answers is numbered when raccept takes the connection,
// above one the program opened just before (Debian's preload library opens
// its placeholder then, and its select maps rpoll's answers back by walking
// numbers upwards: an rsocket numbered below its placeholder was never seen
// ready; iperf3's server waited for data that had come).
void AcceptsBeforeRaccept() {
  int lfd = Listen(7397);
  rfcntl(lfd, F_SETFL, O_NONBLOCK);
  CHECK_ERR(raccept(lfd, nullptr, nullptr), EAGAIN);  // nothing yet
  int c1 = Connect(7397);                             // blocking: no raccept meanwhile
  pollfd p{lfd, POLLIN, 0};
  CHECK(rpoll(&p, 1, 10000) == 1 && (p.revents & POLLIN));
  sockaddr_in from{};
  socklen_t len = sizeof(from);
  const int placeholder = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (placeholder < 0) Die("open /dev/null");
  int s1 = raccept(lfd, Sa(&from), &len);
  CHECK(s1 > placeholder);
  close(placeholder);
  CHECK(len == sizeof(sockaddr_in) && from.sin_family == AF_INET);
  CHECK_ERR(raccept(lfd, nullptr, nullptr), EAGAIN);  // taken: none left
  p.revents = 0;
  CHECK(rpoll(&p, 1, 0) == 0);
  char out[6] = "hello", in[6] = {};
  CHECK(rsend(c1, out, sizeof(out), 0) == static_cast<ssize_t>(sizeof(out)));
  CHECK(ReadAll(s1, in, sizeof(in)) && memcmp(in, out, sizeof(out)) == 0);
  CHECK(rsend(s1, in, sizeof(in), 0) == static_cast<ssize_t>(sizeof(in)));
  CHECK(ReadAll(c1, out, sizeof(out)) && memcmp(in, out, sizeof(out)) == 0);
  int c2 = Connect(7397);   // accepted in the background, never taken
  CHECK(rclose(lfd) == 0);  // stops the acceptor, closes c2's accepted end
  pollfd end{c2, POLLIN, 0};
  CHECK(rpoll(&end, 1, 10000) == 1);
  char c = 0;
  ssize_t n = rrecv(c2, &c, 1, MSG_DONTWAIT);
  CHECK(n == 0 || (n < 0 && (errno == ECONNRESET || errno == ENOTCONN)));
  CHECK(rclose(c2) == 0);
  rclose(s1);
  rclose(c1);
}

// getsockopt is async-signal-safe (POSIX), and rdma-core's rgetsockopt
// takes no lock: a signal handler may call it while the thread it
// interrupted is inside an rsocket call on the same socket (iperf3's SIGINT
// handler asks for TCP_INFO while its thread is in rpoll). A timer aimed at
// the main thread interrupts rsend and rpoll thousands of times; every
// handler's rgetsockopt must return (a watchdog thread ends the process
// after 20 s otherwise).
int g_signal_fd = -1;
volatile sig_atomic_t g_handled = 0;
volatile sig_atomic_t g_handler_failed = 0;

void GetsockoptInHandler(int) {
  const int saved = errno;
  int v = 0;
  socklen_t len = sizeof(v);
  if (rgetsockopt(g_signal_fd, SOL_SOCKET, SO_SNDBUF, &v, &len) != 0 || v <= 0) {
    g_handler_failed = 1;
  }
  g_handled = g_handled + 1;
  errno = saved;
}

void GetsockoptFromASignalHandler() {
  WithPeer(
      7398,
      [](int lfd) {
        int fd = raccept(lfd, nullptr, nullptr);
        CHECK(fd >= 0);
        char buf[4096];
        while (rrecv(fd, buf, sizeof(buf), 0) > 0) {
        }
        rclose(fd);
      },
      [](uint16_t port) {
        g_signal_fd = Connect(port);
        sigset_t alrm;
        sigemptyset(&alrm);
        sigaddset(&alrm, SIGALRM);
        pthread_sigmask(SIG_BLOCK, &alrm, nullptr);  // the watchdog's mask
        std::thread([] {
          sleep(20);
          fprintf(stderr, "a signal handler's rgetsockopt did not return\n");
          _exit(1);
        }).detach();
        pthread_sigmask(SIG_UNBLOCK, &alrm, nullptr);
        struct sigaction sa {};
        sa.sa_handler = GetsockoptInHandler;
        sa.sa_flags = SA_RESTART;
        sigaction(SIGALRM, &sa, nullptr);
        sigevent ev{};
        ev.sigev_notify = SIGEV_THREAD_ID;
        ev.sigev_signo = SIGALRM;
        ev._sigev_un._tid = static_cast<pid_t>(syscall(SYS_gettid));
        timer_t timer;
        if (timer_create(CLOCK_MONOTONIC, &ev, &timer)) Die("timer_create");
        itimerspec every{{0, 20000}, {0, 20000}};  // 20 us
        timer_settime(timer, 0, &every, nullptr);
        char b[8] = {};
        const double t0 = Now();
        while (Now() - t0 < 1.0 && g_handled < 20000) {
          rsend(g_signal_fd, b, sizeof(b), 0);
          pollfd p{g_signal_fd, POLLOUT, 0};
          rpoll(&p, 1, 0);
        }
        timer_delete(timer);
        CHECK(g_handled > 1000);
        CHECK(!g_handler_failed);
        rclose(g_signal_fd);
      });
}

}  // namespace

int main() {
  InOwnProcess("bad descriptors", BadDescriptors);
  InOwnProcess("unsupported and unconnected", UnsupportedAndUnconnected);
  InOwnProcess("connect refused", ConnectRefused);
  InOwnProcess("data and peer close", DataAndPeerClose);
  InOwnProcess("non-blocking", NonBlocking);
  InOwnProcess("iomap", Iomap);
  InOwnProcess("peer killed", PeerKilled);
  InOwnProcess("accepts before raccept", AcceptsBeforeRaccept);
  InOwnProcess("getsockopt from a signal handler", GetsockoptFromASignalHandler);
  printf("rsocket bad flows: %d failures\n", g_failures);
  return g_failures ? 1 : 0;
}
