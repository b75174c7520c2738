// Where the library's own long-lived descriptors live: above the
// application's. Each converted range (mr_backing.cc) holds a descriptor
// while it lives (in use, or idle), and so does the write hold's
// userfaultfd (write_hold.cc); an application registering many ranges would
// otherwise find its own descriptors taken (EMFILE at its soft
// RLIMIT_NOFILE) and its registrations unbacked. So such a descriptor is
// moved at or above the larger of FD_SETSIZE and the soft limit the process
// had the first time, and the soft limit - never the hard one - is raised,
// 1,024 at a time, to make room there. The application keeps every
// descriptor its own limit gave it, all below FD_SETSIZE if they were
// (select() works on them); it is handed descriptors above its old limit
// only where it would have had EMFILE instead. Where there is no room above
// the floor (the hard limit is not above it: soft and hard limits equal, as
// in some containers) a descriptor stays where the kernel put it.
#pragma once

namespace softverbs::provider {

// Raises the soft RLIMIT_NOFILE to make room above the floor. Whether it did.
bool RaiseSoftDescriptorLimit();
// Moves fd at or above the floor (closing the original). Answers the
// descriptor to use: fd itself when there is no room above the floor.
int MoveAboveApplication(int fd);
// Whether a cache of the library's may keep fd (a descriptor just made and
// moved): at or above the floor, where MoveAboveApplication puts
// descriptors when there is room - one the application could not have had
// -, or, where there is none, far below the soft limit (1,024 numbers at
// least between them: the process is not short of descriptors).
bool SpareDescriptor(int fd);

}  // namespace softverbs::provider
