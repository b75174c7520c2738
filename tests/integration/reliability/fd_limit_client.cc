// The daemon at its descriptor limit (fd_limit.sh).
//
//   fd_limit_client fill  opens the device and creates RC QPs until
//                         ibv_create_qp fails; prints {"qps": n, "errno": e}
//                         and holds them until stdin closes
//   fd_limit_client open  ibv_open_device once; prints {"ok": 0|1,
//                         "errno": e, "ms": t}
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <string>

namespace {

double NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

ibv_context* Open(int* err) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n < 1) {
    *err = errno;
    return nullptr;
  }
  errno = 0;
  ibv_context* ctx = ibv_open_device(list[0]);
  *err = ctx ? 0 : errno;
  ibv_free_device_list(list);
  return ctx;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  int err = 0;
  if (mode == "open") {
    const double start = NowMs();
    ibv_context* ctx = Open(&err);
    printf("{\"ok\": %d, \"errno\": %d, \"ms\": %.0f}\n", ctx ? 1 : 0, err, NowMs() - start);
    if (ctx) ibv_close_device(ctx);
    return 0;
  }
  if (mode != "fill") {
    fprintf(stderr, "usage: fd_limit_client fill|open\n");
    return 2;
  }
  ibv_context* ctx = Open(&err);
  if (!ctx) {
    fprintf(stderr, "fd_limit_client: ibv_open_device: %s\n", strerror(err));
    return 1;
  }
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  if (!pd || !cq) {
    fprintf(stderr, "fd_limit_client: pd/cq: %s\n", strerror(errno));
    return 1;
  }
  int qps = 0;
  for (; qps < 100000; ++qps) {
    ibv_qp_init_attr init{};
    init.send_cq = init.recv_cq = cq;
    init.cap = {4, 4, 1, 1, 0};
    init.qp_type = IBV_QPT_RC;
    errno = 0;
    if (!ibv_create_qp(pd, &init)) {
      err = errno;
      break;
    }
  }
  printf("{\"qps\": %d, \"errno\": %d}\n", qps, err);
  fflush(stdout);
  char c;
  while (read(0, &c, 1) > 0) {
  }
  return 0;
}
