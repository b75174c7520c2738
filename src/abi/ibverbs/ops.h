// The provider operations that context.cc installs into ibv_context.ops and
// verbs_context. One family per file.
#pragma once

#include <infiniband/verbs.h>

namespace softverbs::provider {

// query.cc
int QueryPortOp(ibv_context* context, uint8_t port_num, ibv_port_attr* attr, size_t attr_len);
int QueryDeviceExOp(ibv_context* context, const ibv_query_device_ex_input* input,
                    ibv_device_attr_ex* attr, size_t attr_size);

// cq.cc
int PollCqOp(ibv_cq* cq, int num_entries, ibv_wc* wc);
int QueryRtValuesOp(ibv_context* context, ibv_values_ex* values);  // query.cc
int AdviseMrOp(ibv_pd* pd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge* sg_list,
               uint32_t num_sge);  // pd_mr.cc
// Device memory (dm.cc).
ibv_dm* AllocDmOp(ibv_context* context, ibv_alloc_dm_attr* attr);
int FreeDmOp(ibv_dm* dm);
ibv_mr* RegDmMrOp(ibv_pd* pd, ibv_dm* dm, uint64_t offset, size_t length, unsigned access);
// Memory windows (mw.cc).
ibv_mw* AllocMwOp(ibv_pd* pd, ibv_mw_type type);
int DeallocMwOp(ibv_mw* mw);
int BindMwOp(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* mw_bind);
int ReqNotifyCqOp(ibv_cq* cq, int solicited_only);
ibv_cq_ex* CreateCqExOp(ibv_context* context, ibv_cq_init_attr_ex* attr);

// qp.cc
ibv_qp* CreateQpExOp(ibv_context* context, ibv_qp_init_attr_ex* attr);
// mlx5's DC QPs (mlx5dv_create_qp): a DCI, or a DCT with its access key.
ibv_qp* CreateDcQp(ibv_context* context, ibv_qp_init_attr_ex* attr, bool dct,
                   uint64_t dc_access_key);
// A receive work queue's raw packet QP (wq.h): no CAP_NET_RAW asked.
ibv_qp* CreateWorkQueueQp(ibv_context* context, ibv_qp_init_attr_ex* attr);
ibv_qp* OpenQpOp(ibv_context* context, ibv_qp_open_attr* attr);
int PostSendOp(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr);
int PostRecvOp(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);

// srq.cc
ibv_srq* CreateSrqExOp(ibv_context* context, ibv_srq_init_attr_ex* attr);
int PostSrqOpsOp(ibv_srq* srq, ibv_ops_wr* wr, ibv_ops_wr** bad_op);  // srq_ops.cc
int GetSrqNumOp(ibv_srq* srq, uint32_t* srq_num);
int PostSrqRecvOp(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);

// flow.cc
ibv_flow* CreateFlowOp(ibv_qp* qp, ibv_flow_attr* attr);
int DestroyFlowOp(ibv_flow* flow);

// xrcd.cc
ibv_xrcd* OpenXrcdOp(ibv_context* context, ibv_xrcd_init_attr* attr);
int CloseXrcdOp(ibv_xrcd* xrcd);

}  // namespace softverbs::provider
