// Tag matching on an SRQ (IBV_SRQT_TM; ibv_post_srq_ops(3), ibv_create_srq_ex
// with IBV_SRQ_INIT_ATTR_TM): the tag list in the SRQ's file (layout.h
// TmListHeader / TmTag), the tag-matching header a message starts with
// (struct ibv_tmh, 16 bytes; rendezvous adds struct ibv_rvh), and the two
// sides that use the list: the owner posts and removes tags, the deliverer
// of a message matches it. What a delivered message becomes (eager data in
// the tag's buffer, a rendezvous read, an unexpected message in an ordinary
// SRQ receive) is the responder's (shm_responder.cc DeliverTagged).
#pragma once

#include <infiniband/tm_types.h>

#include <cstdint>

#include "datapath/layout.h"

namespace softverbs::datapath {

inline constexpr uint32_t kTmhBytes = 16;  // struct ibv_tmh
inline constexpr uint32_t kRvhBytes = 16;  // struct ibv_rvh, after the TMH
// The device's tag-matching capabilities (ibv_tm_caps), as a ConnectX's.
inline constexpr uint32_t kTmMaxNumTags = 63;
inline constexpr uint32_t kTmMaxOps = 32;
inline constexpr uint32_t kTmMaxSge = 1;
inline constexpr uint32_t kTmMaxRndvHdrSize = 64;

// The bytes of a tag list for num_tags tags.
inline uint64_t TmListBytes(uint32_t num_tags) {
  return sizeof(TmListHeader) + static_cast<uint64_t>(num_tags) * sizeof(TmTag);
}

// The device (daemon) writes a new tag list: its robust process-shared
// lock and its size.
void InitTagList(TmListHeader* list, uint32_t num_tags);

// A message's tag-matching header, decoded (wire order is big-endian).
struct Tmh {
  uint8_t opcode = 0;  // IBV_TMH_NO_TAG, _RNDV, _FIN, _EAGER
  uint32_t app_ctx = 0;
  uint64_t tag = 0;
};
Tmh DecodeTmh(const uint8_t bytes[kTmhBytes]);
void EncodeTmh(const Tmh& tmh, uint8_t bytes[kTmhBytes]);

// A rendezvous header: where the sender's data is.
struct Rvh {
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t len = 0;
};
Rvh DecodeRvh(const uint8_t bytes[kRvhBytes]);

// The tag list of an SRQ's file, or invalid for other receive queues.
class TagList {
 public:
  explicit TagList(RecvQueueHeader* rq);
  bool valid() const { return header_ != nullptr; }

  // Owner (ibv_post_srq_ops), each under the list's lock.
  // Adds a tag; returns 0 and its handle, or ENOMEM when the list is full.
  int Add(uint64_t recv_wr_id, uint64_t tag, uint64_t mask, const RecvSge* sge, uint32_t num_sge,
          uint32_t* handle);
  // Removes the tag of `handle`; false if it is not posted (consumed by a
  // message, removed already, or never added).
  bool Remove(uint32_t handle);
  // IBV_OPS_TM_SYNC: the number of unexpected messages software handled.
  void Sync(uint32_t unexpected_cnt);
  // Whether software's count lags the device's (IBV_WC_TM_SYNC_REQ).
  bool SyncRequired();

  // Deliverer: takes the oldest posted tag matching `tag` into *out (the
  // slot frees) and returns true; false when none matches or matching is
  // suspended until software synchronises: the message is unexpected.
  bool Match(uint64_t tag, TmTag* out);
  // An unexpected message was delivered to an ordinary receive.
  void CountUnexpected();

 private:
  class Lock;
  TmListHeader* header_ = nullptr;
  TmTag* tags_ = nullptr;
};

}  // namespace softverbs::datapath
