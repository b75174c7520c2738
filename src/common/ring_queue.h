// A first-in first-out queue on one growing circular array: push at the
// back, pop at the front, index from the front. Unlike std::deque it
// allocates only when it grows past its largest size so far, never per
// element (std::deque allocates a node per element once elements exceed
// 512 bytes), and a steady queue costs no allocation at all. Elements stay
// where they are until popped or the array grows; indices, not pointers,
// name them.
#pragma once

#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>

namespace softverbs {

template <typename T>
class RingQueue {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return slots_[(head_ + i) & mask_]; }
  const T& operator[](size_t i) const { return slots_[(head_ + i) & mask_]; }
  T& front() { return (*this)[0]; }
  const T& front() const { return (*this)[0]; }

  void push_back(const T& v) {
    if (size_ == capacity_) Grow();
    slots_[(head_ + size_) & mask_] = v;
    size_++;
  }
  // Appends the slot at the back as it is - an element popped earlier, or a
  // default one - for the caller to fill in place (no copy of a whole T).
  T& push_back_slot() {
    if (size_ == capacity_) Grow();
    return slots_[(head_ + size_++) & mask_];
  }
  void pop_front() {
    // Drops what the element holds (nothing to drop for plain data).
    if constexpr (!std::is_trivially_destructible_v<T>) slots_[head_] = T{};
    head_ = (head_ + 1) & mask_;
    size_--;
  }

  template <typename F>
  void ForEach(F&& f) {
    for (size_t i = 0; i < size_; ++i) f((*this)[i]);
  }

 private:
  void Grow() {
    const size_t capacity = capacity_ ? capacity_ * 2 : 16;
    auto slots = std::make_unique<T[]>(capacity);
    for (size_t i = 0; i < size_; ++i) slots[i] = std::move((*this)[i]);
    slots_ = std::move(slots);
    capacity_ = capacity;
    mask_ = capacity - 1;
    head_ = 0;
  }

  std::unique_ptr<T[]> slots_;
  size_t capacity_ = 0;
  size_t mask_ = 0;
  size_t head_ = 0;
  size_t size_ = 0;
};

}  // namespace softverbs
