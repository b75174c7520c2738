#include "datapath/tag_matching.h"

#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include <atomic>

namespace softverbs::datapath {

Tmh DecodeTmh(const uint8_t bytes[kTmhBytes]) {
  Tmh t;
  uint32_t app_ctx;
  uint64_t tag;
  t.opcode = bytes[0];
  memcpy(&app_ctx, bytes + 4, 4);
  memcpy(&tag, bytes + 8, 8);
  t.app_ctx = be32toh(app_ctx);
  t.tag = be64toh(tag);
  return t;
}

void EncodeTmh(const Tmh& tmh, uint8_t bytes[kTmhBytes]) {
  memset(bytes, 0, kTmhBytes);
  bytes[0] = tmh.opcode;
  const uint32_t app_ctx = htobe32(tmh.app_ctx);
  const uint64_t tag = htobe64(tmh.tag);
  memcpy(bytes + 4, &app_ctx, 4);
  memcpy(bytes + 8, &tag, 8);
}

Rvh DecodeRvh(const uint8_t bytes[kRvhBytes]) {
  uint64_t va;
  uint32_t rkey, len;
  memcpy(&va, bytes, 8);
  memcpy(&rkey, bytes + 8, 4);
  memcpy(&len, bytes + 12, 4);
  return {be64toh(va), be32toh(rkey), be32toh(len)};
}

// The list's lock, robust: a holder that died leaves it to the next taker.
class TagList::Lock {
 public:
  explicit Lock(TmListHeader* h) : mutex_(&h->lock) {
    if (pthread_mutex_lock(mutex_) == EOWNERDEAD) pthread_mutex_consistent(mutex_);
  }
  ~Lock() { pthread_mutex_unlock(mutex_); }

 private:
  pthread_mutex_t* mutex_;
};

void InitTagList(TmListHeader* list, uint32_t num_tags) {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&list->lock, &attr);
  pthread_mutexattr_destroy(&attr);
  list->num_tags = num_tags;
}

TagList::TagList(RecvQueueHeader* rq) {
  if (!rq || rq->tm_tags == 0) return;
  auto* base = reinterpret_cast<uint8_t*>(rq);
  header_ = reinterpret_cast<TmListHeader*>(base + rq->tm_offset);
  tags_ = reinterpret_cast<TmTag*>(header_ + 1);
}

namespace {
// A handle names a slot and the slot's generation when the tag was added.
uint32_t HandleOf(uint32_t index, uint16_t generation) {
  return index | static_cast<uint32_t>(generation) << 16;
}
}  // namespace

int TagList::Add(uint64_t recv_wr_id, uint64_t tag, uint64_t mask, const RecvSge* sge,
                 uint32_t num_sge, uint32_t* handle) {
  Lock lock(header_);
  for (uint32_t i = 0; i < header_->num_tags; ++i) {
    TmTag& t = tags_[i];
    if (t.state != kTmTagFree) continue;
    t.recv_wr_id = recv_wr_id;
    t.tag = tag;
    t.mask = mask;
    t.num_sge = static_cast<uint16_t>(num_sge);
    t.sge = num_sge ? sge[0] : RecvSge{};
    t.seq = header_->next_seq++;
    t.state = kTmTagPosted;
    *handle = HandleOf(i, t.generation);
    return 0;
  }
  return ENOMEM;
}

bool TagList::Remove(uint32_t handle) {
  Lock lock(header_);
  const uint32_t index = handle & 0xffff;
  if (index >= header_->num_tags) return false;
  TmTag& t = tags_[index];
  if (t.state != kTmTagPosted || t.generation != (handle >> 16)) return false;
  t.state = kTmTagFree;
  t.generation++;
  return true;
}

void TagList::Sync(uint32_t unexpected_cnt) {
  Lock lock(header_);
  header_->sw_unexpected = unexpected_cnt;
}

bool TagList::SyncRequired() {
  Lock lock(header_);
  return header_->sw_unexpected != header_->hw_unexpected;
}

bool TagList::Match(uint64_t tag, TmTag* out) {
  Lock lock(header_);
  if (header_->sw_unexpected != header_->hw_unexpected) return false;
  TmTag* best = nullptr;
  for (uint32_t i = 0; i < header_->num_tags; ++i) {
    TmTag& t = tags_[i];
    if (t.state != kTmTagPosted || (tag & t.mask) != (t.tag & t.mask)) continue;
    if (!best || t.seq < best->seq) best = &t;
  }
  if (!best) return false;
  *out = *best;
  best->state = kTmTagFree;
  best->generation++;
  return true;
}

void TagList::CountUnexpected() {
  Lock lock(header_);
  header_->hw_unexpected++;
}

}  // namespace softverbs::datapath
