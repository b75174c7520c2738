// Memfds made ahead of registrations (issue 16). A first registration of a
// small range spends much of its time on the memfd, not on the range:
// memfd_create, its size and seals, the offer of it to the device (a
// message with a descriptor) and fstat for its name - five system calls,
// about 5 of the 15 us a 4 KiB registration took on the bench's VM. None of
// them touches the application's memory or its memory map, so they can be
// made before the registration, in another thread, without the cost that
// made session 31's backings made ahead a loss (that maker mapped and
// populated pages in the process: TLB shootdowns into the registering CPU,
// the memory-map lock).
//
// So each context keeps a few memfds ready for its registrations of ranges
// of up to kReadyBackingBytes: made, sized kReadyBackingBytes (a shorter
// range uses the start of one: the device and peers check the range against
// the memfd's size, never the other way), sealed, and offered to the
// context's device, which keeps them for the context's connection as it
// keeps any offered memfd. A registration that takes one names it through
// the call page as it names an offered one. The context's watch thread
// (device_fatal.cc) makes them: when the context allocates a PD (its
// registrations are to come), the first time a registration finds none,
// and whenever a take leaves kReadyBackingsLow. A range over
// kReadyBackingBytes, a context without a watch thread, or an empty stock
// makes its memfd inline as before.
#pragma once

#include <cstddef>
#include <cstdint>

#include "protocol/messages.h"

namespace softverbs::provider {

inline constexpr uint64_t kReadyBackingBytes = 64 << 10;
// Per context; made and offered in one message (at most kMaxFdsPerMessage
// descriptors) when a take leaves kReadyBackingsLow.
inline constexpr size_t kReadyBackingsKept = 16;
inline constexpr size_t kReadyBackingsLow = 8;

struct ReadyBacking {
  int fd = -1;                   // sized kReadyBackingBytes, sealed, offered
  protocol::BackingName name{};  // (st_dev, st_ino)
};

// A new memfd for registration backings: `size` bytes, sealed against
// shrinking and growing (peers and the device map it; the device refuses a
// memfd without F_SEAL_SHRINK), moved above the application's descriptors.
// -1 with errno on failure.
int MakeSealedMemfd(uint64_t size);

// Takes a ready memfd of context `keeper` (the caller owns fd from now on).
// *wake: the context's maker should run (the stock is low or was empty).
bool TakeReadyBacking(uint64_t keeper, ReadyBacking* out, bool* wake);

// Context `keeper` is about to register memory (it allocated a PD): true if
// its maker should run now, so that its first registrations find memfds
// ready rather than race the maker for the CPUs (the second registration of
// a program waited 110-200 us for it on the bench's 2-CPU VM).
bool AskForReadyBackings(uint64_t keeper);

// Makes memfds for context `keeper` until it has kReadyBackingsKept,
// offering them to its device with offer(context, fds, count) (true: they
// went), at most kMaxFdsPerMessage at a time. Called by the context's
// watch thread only.
void MakeReadyBackings(uint64_t keeper, bool (*offer)(void* context, const int* fds, size_t count),
                       void* context);

// Context `keeper` closed (its device forgot what it kept for it): its
// ready memfds are closed.
void DropReadyBackings(uint64_t keeper);

// Fork (mr_backing.cc's handlers, after its own lock): the stock is locked
// across the fork; in the child its memfds, offered for the parent's
// contexts, are closed.
void LockReadyBackingsForFork();
void UnlockReadyBackingsInParent();
void DropReadyBackingsInChild();

}  // namespace softverbs::provider
