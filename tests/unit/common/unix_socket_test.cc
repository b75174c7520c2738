// The control channel's transport: message boundaries, fd passing, and
// socket paths longer than sun_path (deep build directories in CI).
#include "common/unix_socket.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

namespace softverbs {
namespace {

class UnixSocketTest : public ::testing::TestWithParam<size_t> {
 protected:
  void SetUp() override {
    char base[] = "/tmp/sv-sock-XXXXXX";
    ASSERT_NE(mkdtemp(base), nullptr);
    root_ = base;
    dir_ = root_;
    // Nest directories until the socket path has the wanted length.
    while (dir_.size() + 16 < GetParam()) {
      dir_ += "/" + std::string(std::min<size_t>(40, GetParam() - dir_.size() - 16), 'd');
      ASSERT_EQ(mkdir(dir_.c_str(), 0700), 0);
    }
    path_ = dir_ + "/test.sock";
  }
  void TearDown() override { system(("rm -rf " + root_).c_str()); }

  std::string root_, dir_, path_;
};

TEST_P(UnixSocketTest, MessagesAndDescriptorsCrossTheSocket) {
  int listener = ListenSeqpacket(path_);
  ASSERT_GE(listener, 0) << "path of " << path_.size() << " bytes";
  int client = ConnectSeqpacket(path_);
  ASSERT_GE(client, 0);
  int server = accept(listener, nullptr, nullptr);
  ASSERT_GE(server, 0);

  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const char header[] = "head";
  const char body[] = "body!";
  ASSERT_EQ(SendMessage(client, header, 4, body, 5, &pipe_fds[1], 1), 0);
  char buf[64];
  std::vector<int> fds;
  ASSERT_EQ(ReceiveMessage(server, buf, sizeof(buf), &fds), 9);
  EXPECT_EQ(std::string(buf, 9), "headbody!");
  ASSERT_EQ(fds.size(), 1u);
  // The received descriptor is the pipe's write end.
  ASSERT_EQ(write(fds[0], "x", 1), 1);
  char c = 0;
  ASSERT_EQ(read(pipe_fds[0], &c, 1), 1);
  EXPECT_EQ(c, 'x');

  // The peer's death is an end of file.
  close(client);
  EXPECT_EQ(ReceiveMessage(server, buf, sizeof(buf), nullptr), 0);
  for (int fd : {fds[0], pipe_fds[0], pipe_fds[1], server, listener}) close(fd);
}

// 60 bytes fits sun_path; 150 and 250 do not and go through /proc/self/fd.
INSTANTIATE_TEST_SUITE_P(PathLengths, UnixSocketTest, ::testing::Values(60, 150, 250));

}  // namespace
}  // namespace softverbs
