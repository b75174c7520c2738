// The device's objects as the daemon (the "kernel" of the softverbs device)
// keeps them. Every object records the client (context connection) that owns
// it, so that a client's death releases exactly what it owned.
#pragma once

#include <infiniband/verbs.h>
#include <sys/types.h>

#include <array>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "protocol/messages.h"

namespace softverbs::daemon {

using protocol::Handle;
using ClientId = uint32_t;

struct Pd {
  Handle handle;
  ClientId owner;
  uint32_t pdn;
  int users = 0;  // MRs, QPs, SRQs, AHs that name this PD
};

struct Mr {
  Handle handle;
  ClientId owner;
  Handle pd;
  uint64_t addr;
  uint64_t length;
  uint64_t iova;
  uint32_t access;
  uint32_t lkey;
  uint32_t rkey;
  // Data path (docs/datapath.md): the memfd backing the MR's whole pages
  // (-1: none) - or the SysV segment the owner mapped there - and the owner
  // va range it covers.
  int backing_fd = -1;                         // held in Device::backings_, shared by the MRs on it
  std::pair<uint64_t, uint64_t> backing_id{};  // its (st_dev, st_ino)
  int backing_shmid = -1;                      // the SysV segment peers attach; -1: none
  uint64_t backing_ipc_ns = 0;                 // the IPC namespace its id is of
  bool backed() const { return backing_fd >= 0 || backing_shmid >= 0; }
  uint64_t backed_begin = 0;
  uint64_t backed_end = 0;
  uint64_t backed_offset = 0;
  Handle dm = 0;    // a DM MR: the device memory it is registered on
  int windows = 0;  // memory windows bound to it (it cannot be deregistered while any are)
};

// A memory window (ibv_alloc_mw). Its key index is an MR key index (its
// device-table slot, datapath/layout.h); the key's low 8 bits change with
// each bind. Type 1 windows are bound by ibv_bind_mw and serve any QP of
// their PD; type 2 windows by IBV_WR_BIND_MW to one QP, and must be
// invalidated (LOCAL_INV, SEND_WITH_INV) before they are bound again.
struct Mw {
  Handle handle;
  ClientId owner;
  Handle pd;
  ibv_mw_type type;
  uint32_t rkey;           // the window's key, bound or not
  bool bound = false;      // published in the device table
  Handle mr = 0;           // bound: the MR it lies in
  uint32_t bound_qpn = 0;  // bound type 2: the QP it serves
  uint64_t addr = 0;       // bound: the range, in the MR's iova space
  uint64_t length = 0;
  uint32_t access = 0;  // bound: IBV_ACCESS_REMOTE_* it grants
};

// mlx5's indirect memory key (mlx5dv_create_mkey): free until a UMR gives
// it a layout, free again once invalidated.
struct Mkey {
  Handle handle;
  ClientId owner;
  Handle pd;
  uint32_t lkey;
  uint32_t rkey;
  uint32_t max_entries;            // the most entries a layout may have
  bool remote_invalidate = false;  // a SEND_WITH_INV may invalidate it
  bool signature = false;          // a UMR may give it a block signature
  bool configured = false;         // published in the device table
  // What the last UMR gave it (a UMR that sets one of them keeps the other).
  uint32_t access = 0;
  uint32_t repeat_count = 1;
  std::vector<datapath::UmrEntry> layout;
  datapath::SigAttr sig{};  // its block signature (enabled 0: none)
  // The first bad signature since the last UMR (which arms the key again),
  // until mlx5dv_mkey_check reads it.
  bool sig_armed = false;
  bool sig_error_kept = false;
  datapath::SigError sig_error{};
};

struct Cq {
  Handle handle;
  ClientId owner;
  uint32_t cqn;
  uint32_t cqe;
  uint32_t comp_vector;
  int users = 0;      // QPs and XRC SRQs completing on this CQ
  int ring_fd = -1;   // data path: the CQ ring (memfd)
  int event_fd = -1;  // the completion channel's eventfd, -1 without a channel
  // The shadow of a CQ created through DEVX (devx_queues.cc): peers push
  // completions into ring_fd, the owner's DEVX queue engine turns them into
  // CQEs. Not reachable through verbs.
  bool devx = false;
};

struct Srq {
  Handle handle;
  ClientId owner;
  uint32_t srqn;
  Handle pd;
  ibv_srq_type type;
  Handle xrcd;         // 0 unless XRC
  Handle cq;           // XRC and TM: its CQ; else 0
  Handle xrcd_handle;  // the XRC domain handle it was created through, 0 unless XRC
  uint32_t max_wr;
  uint32_t max_sge;
  uint32_t srq_limit;
  int users = 0;     // QPs attached
  int ring_fd = -1;  // data path: the SRQ's receive queue (memfd)
};

// A QP is reached through handles: one for its creator and, for XRC receive
// QPs, one more per ibv_open_qp. The QP lives until its last handle goes.
struct Qp {
  uint32_t qpn;
  ClientId creator;
  ibv_qp_type type;
  Handle pd;
  Handle send_cq;
  Handle recv_cq;
  Handle srq;
  Handle xrcd;
  ibv_qp_cap cap;
  uint32_t sq_sig_all;
  uint32_t create_flags;
  ibv_qp_state state = IBV_QPS_RESET;
  ibv_qp_attr attr{};  // every attribute that was set, as last set
  uint32_t attr_set_mask = 0;
  std::set<std::vector<uint8_t>> mcast_groups;  // gid bytes (UD only)
  uint32_t flows = 0;                           // flow rules steering to it (raw packet only)
  // RSS (raw packet): an RSS QP's indirection table and hash; a receive
  // work queue's count of the tables that name it (destroy: EBUSY).
  Handle ind_table = 0;
  uint64_t rx_hash_fields = 0;
  std::array<uint8_t, verbs::kRssKeyBytes> rx_hash_key{};
  uint32_t in_ind_tables = 0;
  std::vector<Handle> handles;
  int rq_fd = -1;  // data path: the QP's receive queue (memfd; header only with an SRQ)
  // The shadow of a QP created through DEVX (devx_queues.cc): published in
  // the device table so that peers reach it, but no verbs handle names it.
  // Its PD is a number (a verbs PD or one allocated through DEVX).
  bool devx = false;
  uint32_t devx_pdn = 0;
  // The UDP source port of its RoCE v2 packets (mlx5dv_modify_qp_udp_sport;
  // 0: derived from its number, roce/flow.h). RESET and a new path clear it.
  uint16_t udp_sport = 0;
  // A DCT (verbs::kQptDcTgt): the access key a DCI's message must carry.
  uint64_t dc_access_key = 0;
};

struct QpHandle {
  Handle handle;
  ClientId owner;
  uint32_t qpn;
  Handle xrcd_handle = 0;  // XRC_RECV: the domain handle it was created or opened through
};

// A flow steering rule (ibv_create_flow) of a raw packet QP: it holds the
// QP, whose destroy fails with EBUSY until the rule is gone, as the kernel's.
struct Flow {
  Handle handle;
  ClientId owner;
  uint32_t qpn;
  verbs::FlowRule rule;
};

// A receive work queue indirection table (ibv_create_rwq_ind_table): the
// QP numbers of its receive work queues, held while the table lives.
struct RwqIndTable {
  Handle handle;
  ClientId owner;
  uint32_t number;
  std::vector<uint32_t> wqns;
  uint32_t users = 0;  // RSS QPs that spread over it
};

struct Ah {
  Handle handle;
  ClientId owner;
  Handle pd;
  ibv_ah_attr attr;
};

// A piece of device memory (ibv_alloc_dm), counted against the device's
// capacity until it is freed or its owner goes.
struct Dm {
  Handle handle;
  ClientId owner;
  uint64_t length;  // bytes asked for: DM MRs and copies stay inside them
  uint64_t size;    // bytes taken from the device's capacity
  int mrs = 0;      // DM MRs registered on it (it cannot be freed while any exist)
};

// An XRC domain, shared by every process that opens the same inode.
struct Xrcd {
  Handle id;  // internal id; each opener gets its own handle
  dev_t dev = 0;
  ino_t ino = 0;
  bool bound_to_inode = false;
  int opens = 0;  // open handles
  int users = 0;  // SRQs and QPs that hold the domain
};

// One context's open of a domain. As the kernel's uverbs XRCD object, a
// handle cannot be closed while objects created through *it* exist (XRC
// SRQs, XRC_RECV QP handles from create_qp or ibv_open_qp); objects created
// through another handle of the same domain do not hold it.
struct XrcdHandle {
  Handle handle;
  ClientId owner;
  Handle xrcd;
  int users = 0;  // XRC SRQs and XRC_RECV QP handles created through this handle
};

}  // namespace softverbs::daemon
