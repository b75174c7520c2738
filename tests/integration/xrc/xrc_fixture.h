// Building blocks of the XRC traffic tests: each test process opens its own
// context and makes the objects its role needs (a receive QP, XRC SRQs with
// their CQs, a send QP), moves QPs through the states the examples use,
// posts, polls with a deadline and waits for async events.
#pragma once

#include <infiniband/verbs.h>
#include <stdio.h>
#include <unistd.h>

#include <cstdint>
#include <string>

// In a child process: on failure, say what failed and exit with code.
#define CHILD_CHECK(cond, code)                                                              \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      fprintf(stderr, "child %d: %s failed (%s:%d)\n", getpid(), #cond, __FILE__, __LINE__); \
      return code;                                                                           \
    }                                                                                        \
  } while (0)

namespace softverbs::it {

// A page-aligned buffer registered with every access right.
struct Buffer {
  char* data = nullptr;
  ibv_mr* mr = nullptr;
};
Buffer RegisterBuffer(ibv_pd* pd, size_t size);

// Opens the XRC domain bound to the file at path (modern API).
ibv_xrcd* OpenXrcd(ibv_context* ctx, const std::string& path, int oflags);

ibv_srq* CreateXrcSrq(ibv_context* ctx, ibv_pd* pd, ibv_xrcd* xrcd, ibv_cq* cq);
uint32_t SrqNumber(ibv_srq* srq);  // 0 on failure
ibv_qp* CreateRecvQp(ibv_context* ctx, ibv_xrcd* xrcd);
// An XRC_SEND QP; with_wr_api: created with send_ops_flags for ibv_wr_*.
ibv_qp* CreateSendQp(ibv_context* ctx, ibv_pd* pd, ibv_cq* cq, bool with_wr_api);

// RESET -> INIT -> RTR of a receive QP (the xsrq_pingpong masks).
int ReceiveToRtr(ibv_qp* qp, uint32_t dest_qpn);
// RESET -> INIT -> RTR -> RTS of a send QP; timeout/retry_cnt bound how
// long a vanished target is retried.
int SendToRts(ibv_qp* qp, uint32_t dest_qpn, uint8_t timeout = 14, uint8_t retry_cnt = 7);

int PostSrqReceive(ibv_srq* srq, const Buffer& b, size_t offset, uint32_t length, uint64_t wr_id);
// One signaled SEND of length bytes at offset, to SRQ srqn (ibv_post_send).
int PostXrcSend(ibv_qp* qp, const Buffer& b, size_t offset, uint32_t length, uint32_t srqn,
                uint64_t wr_id);

// Polls one completion; false if none came within timeout_ms.
bool PollOne(ibv_cq* cq, ibv_wc* wc, int timeout_ms = 5000);
// No completion arrives within ms.
bool StaysEmpty(ibv_cq* cq, int ms);
ibv_qp_state QueryState(ibv_qp* qp);
// Reads one async event (acked); false if none came within timeout_ms.
bool NextAsyncEvent(ibv_context* ctx, ibv_async_event* ev, int timeout_ms = 5000);

// A unique file whose inode names a domain; removed by the destructor.
class DomainFile {
 public:
  DomainFile();
  ~DomainFile();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace softverbs::it
