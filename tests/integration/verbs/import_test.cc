// Importing a context and its objects (ibv_import_device(3), ibv_import_pd,
// ibv_import_mr, ibv_import_dm): a context opened on another descriptor of
// a context's connection (as the kernel's ufile: os.dup of cmd_fd) shares
// its objects; the connection, and so the objects, live while either
// context is open; what cannot be imported is refused with the errno and
// nothing changes.
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "test_env.h"

namespace softverbs::it {
namespace {

constexpr unsigned kAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

class ImportTest : public ContextTest {
 protected:
  ibv_context* Import() {
    const int fd = dup(ctx_->cmd_fd);
    EXPECT_GE(fd, 0);
    ibv_context* imported = ibv_import_device(fd);
    if (!imported) close(fd);
    return imported;
  }
};

TEST_F(ImportTest, ImportedContextSharesTheObjects) {
  ibv_context* imported = Import();
  ASSERT_NE(imported, nullptr) << strerror(errno);
  EXPECT_NE(imported->cmd_fd, ctx_->cmd_fd) << "the imported context owns the fd it was given";
  EXPECT_GE(imported->async_fd, 0);
  EXPECT_EQ(MyClients().size(), 1u) << "one device client: the connection is shared";

  ibv_pd* pd = ibv_import_pd(imported, pd_->handle);
  ASSERT_NE(pd, nullptr) << strerror(errno);
  EXPECT_EQ(pd->handle, pd_->handle);
  EXPECT_EQ(pd->context, imported);

  std::vector<uint8_t> buf(4096, 0);
  ibv_mr* mr = ibv_reg_mr(pd_, buf.data(), buf.size(), kAccess);
  ASSERT_NE(mr, nullptr);
  ibv_mr* imr = ibv_import_mr(pd, mr->handle);
  ASSERT_NE(imr, nullptr) << strerror(errno);
  EXPECT_EQ(imr->lkey, mr->lkey);
  EXPECT_EQ(imr->rkey, mr->rkey);
  EXPECT_EQ(imr->length, mr->length);
  EXPECT_EQ(imr->addr, nullptr) << "as rdma-core's ibv_cmd_query_mr";
  EXPECT_EQ(imr->pd, pd);
  // rdma-core's ibv_rereg_mr refuses an imported MR before any command.
  errno = 0;
  EXPECT_EQ(ibv_rereg_mr(imr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, kAccess),
            IBV_REREG_MR_ERR_INPUT);
  EXPECT_EQ(errno, EINVAL);

  ibv_unimport_mr(imr);
  ibv_unimport_pd(pd);
  EXPECT_EQ(MyObjectCount("mr"), 1u) << "unimport frees only the importer's struct";
  EXPECT_EQ(MyObjectCount("pd"), 1u);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_close_device(imported), 0);
  EXPECT_EQ(MyObjectCount("pd"), 1u) << "closing the imported context keeps the objects";
}

// Objects made through the imported context are the connection's: they
// work with the original's, and outlive the original context's close.
TEST_F(ImportTest, ConnectionOutlivesTheFirstContext) {
  ibv_context* imported = Import();
  ASSERT_NE(imported, nullptr) << strerror(errno);
  ibv_pd* pd = ibv_import_pd(imported, pd_->handle);
  ASSERT_NE(pd, nullptr);
  ibv_cq* cq = ibv_create_cq(imported, 16, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap = {16, 16, 1, 1, 0};
  ibv_qp* a = ibv_create_qp(pd, &init);
  ibv_qp* b = ibv_create_qp(pd, &init);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(ConnectRc(imported, a, b->qp_num));
  ASSERT_TRUE(ConnectRc(imported, b, a->qp_num));
  std::vector<uint64_t> src(512), dst(512, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = i * 0x9e3779b97f4a7c15ull;
  // The destination is registered by the original context.
  ibv_mr* dst_mr = ibv_reg_mr(pd_, dst.data(), dst.size() * 8, kAccess);
  ASSERT_NE(dst_mr, nullptr);
  ibv_mr* dst_imported = ibv_import_mr(pd, dst_mr->handle);
  ASSERT_NE(dst_imported, nullptr);
  ibv_unimport_mr(dst_imported);  // only its keys were needed
  ibv_mr* src_mr = ibv_reg_mr(pd, src.data(), src.size() * 8, kAccess);
  ASSERT_NE(src_mr, nullptr);

  // The original context goes; its connection stays with the imported one.
  ibv_destroy_cq(cq_);
  cq_ = nullptr;
  ibv_context* original = ctx_;
  ctx_ = nullptr;
  ibv_pd* original_pd = pd_;
  pd_ = nullptr;
  ASSERT_EQ(ibv_close_device(original), 0);
  EXPECT_EQ(MyClients().size(), 1u) << "the device client lives while a context is open";

  ibv_sge sge{reinterpret_cast<uint64_t>(src.data()), static_cast<uint32_t>(src.size() * 8),
              src_mr->lkey};
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = 7;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(dst.data());
  wr.wr.rdma.rkey = dst_mr->rkey;
  ASSERT_EQ(ibv_post_send(a, &wr, &bad), 0);
  ibv_wc wc{};
  ASSERT_EQ(PollOne(cq, &wc), 1);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(dst, src) << "written through the original context's MR after it closed";

  EXPECT_EQ(ibv_destroy_qp(a), 0);
  EXPECT_EQ(ibv_destroy_qp(b), 0);
  EXPECT_EQ(ibv_dereg_mr(src_mr), 0);
  // dst_mr's and original_pd's structs belonged to the closed context
  // (freed as an unimport frees them); the MR object is deregistered through
  // an import of it.
  const uint32_t dst_handle = dst_mr->handle;
  ibv_unimport_mr(dst_mr);
  ibv_unimport_pd(original_pd);
  ibv_mr* dst_again = ibv_import_mr(pd, dst_handle);
  ASSERT_NE(dst_again, nullptr);
  EXPECT_EQ(ibv_dereg_mr(dst_again), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0) << "dealloc through the import destroys the PD";
  EXPECT_EQ(MyObjectCount("pd"), 0u);
  EXPECT_EQ(ibv_close_device(imported), 0);
}

TEST_F(ImportTest, DeviceMemoryImportSeesTheSameBytes) {
  ibv_alloc_dm_attr attr{};
  attr.length = 256;
  ibv_dm* dm = ibv_alloc_dm(ctx_, &attr);
  ASSERT_NE(dm, nullptr) << strerror(errno);
  ibv_context* imported = Import();
  ASSERT_NE(imported, nullptr);
  ibv_dm* idm = ibv_import_dm(imported, dm->handle);
  ASSERT_NE(idm, nullptr) << strerror(errno);
  uint32_t in[16], out[16] = {};
  for (uint32_t i = 0; i < 16; ++i) in[i] = 0xabcd0000 + i;
  ASSERT_EQ(ibv_memcpy_to_dm(dm, 64, in, sizeof(in)), 0);
  ASSERT_EQ(ibv_memcpy_from_dm(out, idm, 64, sizeof(out)), 0);
  EXPECT_EQ(memcmp(in, out, sizeof(in)), 0);
  EXPECT_EQ(ibv_memcpy_to_dm(idm, 256, in, 4), EFAULT) << "the import keeps the length's rule";
  ibv_unimport_dm(idm);
  const uint32_t dm_handle = dm->handle;
  EXPECT_EQ(ibv_free_dm(dm), 0);
  errno = 0;
  EXPECT_EQ(ibv_import_dm(imported, dm_handle), nullptr);
  EXPECT_EQ(errno, EINVAL) << "freed device memory cannot be imported";
  EXPECT_EQ(ibv_close_device(imported), 0);
}

// Another process imports this context (its cmd_fd passed over a socket,
// as SCM_RIGHTS users do): it joins the connection's group, uses our PD and
// MR by handle and key - reads our memory, writes it, sends from it by our
// MR's lkey - and its own MR on our PD. When it exits its objects stay with
// the group (the kernel's ufile lives while we hold it): our PD is busy.
TEST_F(ImportTest, AnotherProcessJoinsTheConnection) {
  std::vector<uint8_t> buf(8192);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(i * 7 + 3);
  const std::vector<uint8_t> original = buf;
  ibv_mr* mr = ibv_reg_mr(pd_, buf.data(), buf.size(), kAccess);
  ASSERT_NE(mr, nullptr);
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = cq_;
  init.qp_type = IBV_QPT_RC;
  init.cap = {8, 8, 1, 1, 0};
  ibv_qp* qp = ibv_create_qp(pd_, &init);
  ASSERT_NE(qp, nullptr);
  std::vector<uint8_t> inbox(64, 0);
  ibv_mr* inbox_mr = ibv_reg_mr(pd_, inbox.data(), inbox.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(inbox_mr, nullptr);

  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(pair[0]);
    const int keep = dup(pair[1]);  // without CLOEXEC, for the peer
    const std::string arg = std::to_string(keep);
    execl(IMPORT_PEER, IMPORT_PEER, arg.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(pair[1]);
  struct {
    uint32_t pd_handle, mr_handle, rkey, qpn;
    uint64_t addr, length;
  } ex{pd_->handle, mr->handle, mr->rkey, qp->qp_num, reinterpret_cast<uint64_t>(buf.data()),
       buf.size()};
  const int cmd_fd = ctx_->cmd_fd;
  char control[CMSG_SPACE(sizeof(int))] = {};
  iovec iov{&ex, sizeof(ex)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &cmd_fd, sizeof(int));
  ASSERT_EQ(sendmsg(pair[0], &msg, 0), static_cast<ssize_t>(sizeof(ex)));
  uint32_t peer_qpn = 0;
  ASSERT_EQ(read(pair[0], &peer_qpn, sizeof(peer_qpn)), static_cast<ssize_t>(sizeof(peer_qpn)))
      << "the peer did not import (its stderr says why)";
  ASSERT_TRUE(ConnectRc(ctx_, qp, peer_qpn));
  ibv_sge rsge{reinterpret_cast<uint64_t>(inbox.data()), 64, inbox_mr->lkey};
  ibv_recv_wr rwr{};
  ibv_recv_wr* rbad = nullptr;
  rwr.sg_list = &rsge;
  rwr.num_sge = 1;
  ASSERT_EQ(ibv_post_recv(qp, &rwr, &rbad), 0);
  const char go = 1;
  ASSERT_EQ(write(pair[0], &go, 1), 1);
  char done = 0;
  EXPECT_EQ(read(pair[0], &done, 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  close(pair[0]);

  const size_t half = buf.size() / 2;
  EXPECT_TRUE(std::equal(buf.begin(), buf.begin() + half, original.begin()));
  for (size_t i = 0; i < half; ++i) {
    ASSERT_EQ(buf[half + i], static_cast<uint8_t>(0xff - i)) << "written by the peer at " << i;
  }
  ibv_wc wc{};
  ASSERT_EQ(PollOne(cq_, &wc), 1);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV);
  EXPECT_EQ(wc.byte_len, 64u);
  EXPECT_TRUE(std::equal(inbox.begin(), inbox.end(), original.begin()))
      << "sent from our memory by our lkey";

  // The peer's QP and MR on our PD outlive it, with the group.
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_dereg_mr(inbox_mr), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd_), EBUSY) << "the departed peer's objects still use it";
  ibv_unimport_pd(pd_);  // the group releases it with the connection
  pd_ = nullptr;
}

TEST_F(ImportTest, BadImportsAreRefused) {
  errno = 0;
  EXPECT_EQ(ibv_import_device(-1), nullptr);
  EXPECT_EQ(errno, EINVAL) << "not a descriptor";
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  errno = 0;
  EXPECT_EQ(ibv_import_device(pipe_fds[0]), nullptr);
  EXPECT_EQ(errno, EINVAL) << "not a context's cmd_fd";
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  // A socket that is no context's connection: the device refuses it, and
  // the fd stays the caller's.
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  errno = 0;
  EXPECT_EQ(ibv_import_device(pair[0]), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(close(pair[0]), 0) << "a failed import leaves the fd open";
  close(pair[1]);

  ibv_context* imported = Import();
  ASSERT_NE(imported, nullptr);
  errno = 0;
  EXPECT_EQ(ibv_import_pd(imported, pd_->handle + 1000), nullptr);
  EXPECT_EQ(errno, EINVAL) << "no such PD";
  ibv_pd* pd = ibv_import_pd(imported, pd_->handle);
  ASSERT_NE(pd, nullptr);
  errno = 0;
  EXPECT_EQ(ibv_import_mr(pd, 123456), nullptr);
  EXPECT_EQ(errno, EINVAL) << "no such MR";
  errno = 0;
  EXPECT_EQ(ibv_import_mr(pd, pd_->handle), nullptr);
  EXPECT_EQ(errno, EINVAL) << "a PD's handle is no MR's";
  errno = 0;
  EXPECT_EQ(ibv_import_dm(imported, 99999), nullptr);
  EXPECT_EQ(errno, EINVAL) << "no such device memory";
  ibv_unimport_pd(pd);
  EXPECT_EQ(MyObjectCount("pd"), 1u) << "failed imports changed nothing";
  EXPECT_EQ(MyObjectCount("mr"), 0u);
  EXPECT_EQ(ibv_close_device(imported), 0);
}

}  // namespace
}  // namespace softverbs::it
