// A small verbs client driven by test_multiprocess.py.
//
//   it_client hold        open the device, create one of each object (PD, MR,
//                         CQ, comp channel, RC/UD QPs, SRQ, AH), print a JSON
//                         line {"pid":..,"qpns":[..]}, then wait for stdin EOF
//   it_client bad-modify  RESET->INIT on an RC QP without IBV_QP_PORT; print
//                         {"rc":..} (the reason goes to the log channel)
#include <infiniband/verbs.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace {

int Fail(const char* what) {
  fprintf(stderr, "it_client: %s failed: %s\n", what, strerror(errno));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n < 1) return Fail("ibv_get_device_list");
  ibv_context* ctx = ibv_open_device(list[0]);
  if (!ctx) return Fail("ibv_open_device");
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, ch, 0);
  if (!pd || !ch || !cq) return Fail("pd/channel/cq");
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = cq;
  init.cap = {4, 4, 1, 1, 0};
  init.qp_type = IBV_QPT_RC;
  ibv_qp* rc = ibv_create_qp(pd, &init);
  if (!rc) return Fail("create RC QP");
  if (mode == "bad-modify") {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    int rc_val = ibv_modify_qp(rc, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS);
    printf("{\"rc\": %d, \"state\": %d}\n", rc_val, rc->state);
    return 0;
  }
  static char buf[1 << 16];
  ibv_mr* mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  init.qp_type = IBV_QPT_UD;
  ibv_qp* ud = ibv_create_qp(pd, &init);
  ibv_srq_init_attr sinit{};
  sinit.attr = {16, 1, 0};
  ibv_srq* srq = ibv_create_srq(pd, &sinit);
  if (!mr || !ud || !srq) return Fail("mr/ud/srq");
  ibv_port_attr port{};
  ibv_query_port(ctx, 1, &port);
  ibv_ah_attr ah_attr{};
  ah_attr.port_num = 1;
  ah_attr.is_global = 1;
  for (int i = 0; i < port.gid_tbl_len; ++i) {
    ibv_gid_entry e{};
    if (ibv_query_gid_ex(ctx, 1, i, &e, 0) == 0 && e.gid_type == IBV_GID_TYPE_ROCE_V2) {
      ah_attr.grh.sgid_index = i;
      ah_attr.grh.dgid = e.gid;
      break;
    }
  }
  ibv_ah* ah = ibv_create_ah(pd, &ah_attr);
  if (!ah) return Fail("create AH");
  ibv_gid mgid{};
  mgid.raw[0] = 0xff;
  mgid.raw[15] = 1;
  if (ibv_attach_mcast(ud, &mgid, 0) != 0) return Fail("attach_mcast");
  printf("{\"pid\": %d, \"qpns\": [%u, %u]}\n", getpid(), rc->qp_num, ud->qp_num);
  fflush(stdout);
  char c;
  while (read(0, &c, 1) > 0) {
  }
  return 0;  // exit without cleanup: the daemon must release everything
}
