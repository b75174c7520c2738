// A value of static storage duration that is built once and never destroyed.
//
// The drop-in libraries live in other people's processes, and a program may
// call exit() from one thread while its others still call verbs: rping's
// cm_thread exits the process on a REJECTED event while its main thread
// destroys the connection's QP and id. exit() runs the destructors of
// static objects, so a library table destroyed there is read freed by the
// thread still inside the library (a heap-use-after-free AddressSanitizer
// reported in rping's client). rdma-core's tables are plain C and never
// torn down; the libraries' tables are kept the same way: a NoDestructor
// has a trivial destructor, so nothing registers with atexit and the value
// stays valid until the process is gone (the kernel takes its memory back).
// tests/abi/check_no_exit_destructors.sh checks that no drop-in library
// registers a static destructor.
#pragma once

#include <new>
#include <utility>

namespace softverbs {

template <typename T>
class NoDestructor {
 public:
  template <typename... Args>
  explicit NoDestructor(Args&&... args) {
    new (storage_) T(std::forward<Args>(args)...);
  }
  NoDestructor(const NoDestructor&) = delete;
  NoDestructor& operator=(const NoDestructor&) = delete;
  ~NoDestructor() = default;  // trivial: T's destructor never runs

  T* get() { return std::launder(reinterpret_cast<T*>(storage_)); }
  const T* get() const { return std::launder(reinterpret_cast<const T*>(storage_)); }
  T& operator*() { return *get(); }
  const T& operator*() const { return *get(); }
  T* operator->() { return get(); }
  const T* operator->() const { return get(); }

 private:
  alignas(T) unsigned char storage_[sizeof(T)];
};

}  // namespace softverbs
