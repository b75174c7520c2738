// Device, port, GID and P_Key queries. Every number reported comes from
// common/device_limits.h (what the daemon enforces) or from the daemon's view
// of the port (active MTU, GID table).
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "abi/ibverbs/device_fatal.h"
#include "abi/ibverbs/exports.h"
#include "abi/ibverbs/ops.h"
#include "abi/ibverbs/provider.h"
#include "abi/ibverbs/reject.h"
#include "common/device_limits.h"
#include "common/log.h"
#include "common/personality.h"
#include "common/port_facts.h"
#include "datapath/tag_matching.h"
#include "datapath/timers.h"
#include "verbs/flow_rule.h"

#undef ibv_query_port

namespace softverbs::provider {

namespace lim = softverbs::limits;

namespace {

constexpr unsigned kDeviceCapFlags =
    IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_CURR_QP_STATE_MOD | IBV_DEVICE_PORT_ACTIVE_EVENT |
    IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_SRQ_RESIZE | IBV_DEVICE_N_NOTIFY_CQ | IBV_DEVICE_XRC |
    IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B;

void FillDeviceAttr(ibv_device_attr* a) {
  memset(a, 0, sizeof(*a));
  snprintf(a->fw_ver, sizeof(a->fw_ver), "%s", lim::kFirmwareVersion);
  a->node_guid = htobe64(DeviceGuid());
  a->sys_image_guid = a->node_guid;
  a->max_mr_size = lim::kMaxMrSize;
  a->page_size_cap = lim::kPageSizeCap;
  a->vendor_id = ActivePersonality().vendor_id;
  a->vendor_part_id = ActivePersonality().vendor_part_id;
  a->hw_ver = lim::kHwVersion;
  a->max_qp = lim::kMaxQp;
  a->max_qp_wr = lim::kMaxQpWr;
  a->device_cap_flags = kDeviceCapFlags;
  a->max_sge = lim::kMaxSge;
  a->max_sge_rd = lim::kMaxSgeRd;
  a->max_cq = lim::kMaxCq;
  a->max_cqe = lim::kMaxCqe;
  a->max_mr = lim::kMaxMr;
  a->max_pd = lim::kMaxPd;
  a->max_qp_rd_atom = lim::kMaxQpRdAtom;
  a->max_ee_rd_atom = 0;
  a->max_res_rd_atom = lim::kMaxResRdAtom;
  a->max_qp_init_rd_atom = lim::kMaxQpInitRdAtom;
  a->max_ee_init_rd_atom = 0;
  a->atomic_cap = IBV_ATOMIC_HCA;
  a->max_ee = 0;
  a->max_rdd = 0;
  a->max_mw = lim::kMaxMw;
  a->max_raw_ipv6_qp = 0;
  a->max_raw_ethy_qp = 0;
  a->max_mcast_grp = lim::kMaxMcastGrp;
  a->max_mcast_qp_attach = lim::kMaxMcastQpAttach;
  a->max_total_mcast_qp_attach = lim::kMaxTotalMcastQpAttach;
  a->max_ah = lim::kMaxAh;
  a->max_fmr = 0;
  a->max_map_per_fmr = 0;
  a->max_srq = lim::kMaxSrq;
  a->max_srq_wr = lim::kMaxSrqWr;
  a->max_srq_sge = lim::kMaxSrqSge;
  a->max_pkeys = lim::kMaxPkeys;
  a->local_ca_ack_delay = lim::kLocalCaAckDelay;
  a->phys_port_cnt = lim::kPhysPortCount;
}

void FillPortAttr(const Context& ctx, ibv_port_attr* a) {
  *a = softverbs::PortAttributes(ctx.active_mtu);
}

// The rule every verb with a port number checks.
#define SV_NO_SUCH_PORT "%s: port %u does not exist (the device has port 1 only)"

int CheckPort(uint32_t port_num, const char* verb) {
  if (port_num != 1) return Reject(EINVAL, SV_NO_SUCH_PORT, verb, port_num);
  return 0;
}

}  // namespace

int QueryPortOp(ibv_context* context, uint8_t port_num, ibv_port_attr* attr, size_t attr_len) {
  if (!context || !attr) {
    return Reject(EINVAL, "ibv_query_port: %s is NULL", !context ? "context" : "port_attr");
  }
  // As libibverbs' __lib_query_port: a full-size attr is zeroed before the
  // provider looks at the port (a shorter one only gets a copy on success).
  if (attr_len >= sizeof(ibv_port_attr)) memset(attr, 0, attr_len);
  if (int err = CheckPort(port_num, "ibv_query_port")) return err;
  ibv_port_attr full;
  Context* ctx = Context::From(context);
  FillPortAttr(*ctx, &full);
  if (DeviceGone(ctx)) {
    // The device is gone (device_fatal.h): its port with it.
    full.state = IBV_PORT_DOWN;
    full.phys_state = 3;  // Disabled (IBTA PortPhysicalState)
  }
  memset(attr, 0, attr_len);
  memcpy(attr, &full, std::min(attr_len, sizeof(full)));
  return 0;
}

int QueryDeviceExOp(ibv_context* context, const ibv_query_device_ex_input* input,
                    ibv_device_attr_ex* attr, size_t attr_size) {
  if (!context || !attr) {
    return Reject(EINVAL, "ibv_query_device_ex: %s is NULL", !context ? "context" : "attr");
  }
  if (input && input->comp_mask != 0) {
    return Reject(EINVAL, "ibv_query_device_ex: input comp_mask 0x%x has unknown bits",
                  input->comp_mask);
  }
  if (attr_size < sizeof(ibv_device_attr)) {
    return Reject(EINVAL,
                  "ibv_query_device_ex: attr_size %zu is smaller than ibv_device_attr (%zu)",
                  attr_size, sizeof(ibv_device_attr));
  }
  ibv_device_attr_ex full{};
  FillDeviceAttr(&full.orig_attr);
  full.device_cap_flags_ex = full.orig_attr.device_cap_flags;
  full.phys_port_cnt_ex = lim::kPhysPortCount;
  full.max_dm_size = lim::kMaxDmSize;
  // Tag matching on RC QPs (datapath/tag_matching.h), a ConnectX's sizes.
  full.tm_caps.max_rndv_hdr_size = datapath::kTmMaxRndvHdrSize;
  full.tm_caps.max_num_tags = datapath::kTmMaxNumTags;
  full.tm_caps.flags = IBV_TM_CAP_RC;
  full.tm_caps.max_ops = datapath::kTmMaxOps;
  full.tm_caps.max_sge = datapath::kTmMaxSge;
  // RSS over receive work queues of raw packet QPs (docs/raw_packet.md).
  full.rss_caps.supported_qpts = 1u << IBV_QPT_RAW_PACKET;
  full.rss_caps.max_rwq_indirection_tables = lim::kMaxRwqIndTables;
  full.rss_caps.max_rwq_indirection_table_size = lim::kMaxRwqIndTableSize;
  full.rss_caps.rx_hash_fields_mask = verbs::kRssHashFields;
  full.rss_caps.rx_hash_function = IBV_RX_HASH_FUNC_TOEPLITZ;
  full.max_wq_type_rq = lim::kMaxQp;
  full.cq_mod_caps.max_cq_count = lim::kMaxCqModerationCount;
  full.cq_mod_caps.max_cq_period = lim::kMaxCqModerationPeriodUs;
  // On-demand paging (docs/datapath.md, "On-demand paging"): explicit and
  // implicit MRs, every operation of the transports the device has.
  constexpr uint32_t kOdpOps = lim::kOdpReliableOps;
  full.odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
  full.odp_caps.per_transport_caps.rc_odp_caps = kOdpOps;
  full.odp_caps.per_transport_caps.uc_odp_caps =
      IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE;
  full.odp_caps.per_transport_caps.ud_odp_caps =
      IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_SRQ_RECV;
  full.xrc_odp_caps = kOdpOps;
  // Completion timestamps count the device clock: nanoseconds, 64 bits.
  full.completion_timestamp_mask = UINT64_MAX;
  full.hca_core_clock = lim::kHcaCoreClockKhz;
  memset(attr, 0, attr_size);
  memcpy(attr, &full, std::min(attr_size, sizeof(full)));
  return 0;
}

// ibv_query_rt_values_ex: the device clock's current value, as libmlx5
// reports its HCA clock (cycles in raw_clock.tv_nsec, tv_sec 0); our cycles
// are nanoseconds. comp_mask comes back with what was filled.
int QueryRtValuesOp(ibv_context* context, ibv_values_ex* values) {
  if (!context || !values) {
    return Reject(EINVAL, "ibv_query_rt_values_ex: %s is NULL", !context ? "context" : "values");
  }
  if (values->comp_mask & ~static_cast<uint32_t>(IBV_VALUES_MASK_RAW_CLOCK)) {
    return Reject(EINVAL, "ibv_query_rt_values_ex: comp_mask 0x%x has unknown bits",
                  values->comp_mask);
  }
  uint32_t filled = 0;
  if (values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) {
    values->raw_clock.tv_sec = 0;
    values->raw_clock.tv_nsec = static_cast<long>(datapath::DeviceClockNs());
    filled |= IBV_VALUES_MASK_RAW_CLOCK;
  }
  values->comp_mask = filled;
  return 0;
}

}  // namespace softverbs::provider

using namespace softverbs::provider;
using softverbs::Log;

SV_EXPORT int ibv_query_device(ibv_context* context, ibv_device_attr* attr) {
  if (!context || !attr) {
    return Reject(EINVAL, "ibv_query_device: %s is NULL", !context ? "context" : "device_attr");
  }
  FillDeviceAttr(attr);
  return 0;
}

// The exported symbol serves binaries built before the header turned
// ibv_query_port into an inline; it fills the old, shorter layout.
SV_EXPORT int ibv_query_port(ibv_context* context, uint8_t port_num,
                             struct _compat_ibv_port_attr* attr) {
  // The old layout ends before port_cap_flags2.
  return QueryPortOp(context, port_num, reinterpret_cast<ibv_port_attr*>(attr),
                     offsetof(ibv_port_attr, port_cap_flags2));
}

SV_EXPORT int ibv_query_gid(ibv_context* context, uint8_t port_num, int index, ibv_gid* gid) {
  if (!context || !gid) {
    return RejectMinusOne(EINVAL, "ibv_query_gid: %s is NULL", !context ? "context" : "gid");
  }
  if (port_num != 1) return RejectMinusOne(EINVAL, SV_NO_SUCH_PORT, "ibv_query_gid", port_num);
  if (index < 0 || index >= softverbs::limits::kGidTableLength) {
    return RejectMinusOne(EINVAL, "ibv_query_gid: index %d is outside the GID table (0..%d)", index,
                          softverbs::limits::kGidTableLength - 1);
  }
  const auto& gids = Context::From(context)->gids;
  memset(gid, 0, sizeof(*gid));
  if (index < gids.count) memcpy(gid->raw, gids.gids[index].raw, 16);
  return 0;
}

namespace {
int FillGidEntry(const Context& ctx, uint32_t index, ibv_gid_entry* entry) {
  if (index >= static_cast<uint32_t>(ctx.gids.count)) {
    return Reject(ENODATA, "ibv_query_gid_ex: GID index %u is empty (%d GIDs in use)", index,
                  ctx.gids.count);
  }
  const auto& e = ctx.gids.gids[index];
  memset(entry, 0, sizeof(*entry));
  memcpy(entry->gid.raw, e.raw, 16);
  entry->gid_index = index;
  entry->port_num = 1;
  entry->gid_type =
      e.type == softverbs::GidType::kRoceV2 ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
  entry->ndev_ifindex = ctx.gids.ifindex;
  return 0;
}
}  // namespace

SV_EXPORT int _ibv_query_gid_ex(ibv_context* context, uint32_t port_num, uint32_t gid_index,
                                ibv_gid_entry* entry, uint32_t flags, size_t entry_size) {
  if (!context || !entry) {
    return Reject(EINVAL, "ibv_query_gid_ex: %s is NULL", !context ? "context" : "entry");
  }
  if (flags != 0) return Reject(EINVAL, "ibv_query_gid_ex: flags 0x%x must be 0", flags);
  if (entry_size < sizeof(ibv_gid_entry)) {
    return Reject(EINVAL, "ibv_query_gid_ex: entry_size %zu is below sizeof(ibv_gid_entry) %zu",
                  entry_size, sizeof(ibv_gid_entry));
  }
  if (int err = CheckPort(port_num, "ibv_query_gid_ex")) return err;
  if (gid_index >= static_cast<uint32_t>(softverbs::limits::kGidTableLength)) {
    return Reject(EINVAL, "ibv_query_gid_ex: index %u is outside the GID table (0..%d)", gid_index,
                  softverbs::limits::kGidTableLength - 1);
  }
  return FillGidEntry(*Context::From(context), gid_index, entry);
}

SV_EXPORT ssize_t _ibv_query_gid_table(ibv_context* context, ibv_gid_entry* entries,
                                       size_t max_entries, uint32_t flags, size_t entry_size) {
  if (!context) return -Reject(EINVAL, "ibv_query_gid_table: context is NULL");
  if (flags != 0) return -Reject(EINVAL, "ibv_query_gid_table: flags 0x%x must be 0", flags);
  if (entry_size < sizeof(ibv_gid_entry)) {
    return -Reject(EINVAL, "ibv_query_gid_table: entry_size %zu is below sizeof(ibv_gid_entry) %zu",
                   entry_size, sizeof(ibv_gid_entry));
  }
  const Context& ctx = *Context::From(context);
  if (max_entries < static_cast<size_t>(ctx.gids.count)) {
    return -Reject(EINVAL, "ibv_query_gid_table: max_entries %zu is below the %d GIDs in use",
                   max_entries, ctx.gids.count);
  }
  size_t n = 0;
  for (int i = 0; i < ctx.gids.count; ++i) {
    auto* e = reinterpret_cast<ibv_gid_entry*>(reinterpret_cast<char*>(entries) + n * entry_size);
    FillGidEntry(ctx, i, e);
    ++n;
  }
  return static_cast<ssize_t>(n);
}

// IBVERBS_PRIVATE_34: used by ibv_devinfo. Values of enum ibv_gid_type_sysfs.
SV_EXPORT int ibv_query_gid_type(ibv_context* context, uint8_t port_num, unsigned int index,
                                 ibv_gid_type_sysfs* type) {
  if (!context || !type) {
    return RejectMinusOne(EINVAL, "ibv_query_gid_type: %s is NULL", !context ? "context" : "type");
  }
  if (port_num != 1) {
    return RejectMinusOne(EINVAL, SV_NO_SUCH_PORT, "ibv_query_gid_type", port_num);
  }
  const Context& ctx = *Context::From(context);
  if (index >= static_cast<unsigned>(ctx.gids.count)) {
    return RejectMinusOne(ENODATA, "ibv_query_gid_type: GID index %u is empty (%d GIDs in use)",
                          index, ctx.gids.count);
  }
  *type = ctx.gids.gids[index].type == softverbs::GidType::kRoceV2 ? IBV_GID_TYPE_SYSFS_ROCE_V2
                                                                   : IBV_GID_TYPE_SYSFS_IB_ROCE_V1;
  return 0;
}

SV_EXPORT int ibv_query_pkey(ibv_context* context, uint8_t port_num, int index, __be16* pkey) {
  if (!context || !pkey) {
    return RejectMinusOne(EINVAL, "ibv_query_pkey: %s is NULL", !context ? "context" : "pkey");
  }
  if (port_num != 1) return RejectMinusOne(EINVAL, SV_NO_SUCH_PORT, "ibv_query_pkey", port_num);
  if (index < 0 || index >= softverbs::limits::kMaxPkeys) {
    return RejectMinusOne(EINVAL, "ibv_query_pkey: index %d is outside the P_Key table (0..%d)",
                          index, softverbs::limits::kMaxPkeys - 1);
  }
  *pkey = htobe16(softverbs::limits::kDefaultPkey);
  return 0;
}

// ibv_get_pkey_index(3): the index of the table entry equal to `pkey` (an
// exact match, as libibverbs compares the entries it reads), -1 with errno on
// error.
SV_EXPORT int ibv_get_pkey_index(ibv_context* context, uint8_t port_num, __be16 pkey) {
  if (!context) return RejectMinusOne(EINVAL, "ibv_get_pkey_index: context is NULL");
  if (port_num != 1) {
    return RejectMinusOne(EINVAL, SV_NO_SUCH_PORT, "ibv_get_pkey_index", port_num);
  }
  if (be16toh(pkey) == softverbs::limits::kDefaultPkey) return 0;
  return RejectMinusOne(ENOENT,
                        "ibv_get_pkey_index: P_Key 0x%04x is not in the table (only 0x%04x)",
                        be16toh(pkey), softverbs::limits::kDefaultPkey);
}
