// A bounded least-recently-used cache: the cuBLASLt handle keeps its plans (descriptors and chosen
// algorithms) in one, so that a program that sees many shapes (variable sequence lengths, expert
// token counts) holds at most `capacity` of them. Needs no CUDA.
#pragma once

#include <cstddef>
#include <functional>
#include <list>
#include <tuple>
#include <unordered_map>
#include <utility>

namespace fp8::cublaslt {

// Values are built in place (the plans own descriptors and can be neither copied nor moved) and
// never move while cached: references stay valid until the entry is evicted or erased.
template <class Key, class Value, class Hash = std::hash<Key>>
class lru_cache {
 public:
  explicit lru_cache(std::size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

  // The cached value of `key`, now the most recently used; nullptr when absent.
  Value* find(const Key& key) {
    const auto found = index_.find(key);
    if (found == index_.end()) return nullptr;
    entries_.splice(entries_.begin(), entries_, found->second);
    return &found->second->second;
  }

  // Inserts a default-built value for `key` (absent), evicting the least recently used entry when
  // full, and returns it for the caller to fill. Erase it again if filling it fails.
  Value& insert(const Key& key) {
    if (entries_.size() >= capacity_) {
      index_.erase(entries_.back().first);
      entries_.pop_back();
    }
    entries_.emplace_front(std::piecewise_construct, std::forward_as_tuple(key), std::forward_as_tuple());
    index_.emplace(key, entries_.begin());
    return entries_.front().second;
  }

  void erase(const Key& key) {
    const auto found = index_.find(key);
    if (found == index_.end()) return;
    entries_.erase(found->second);
    index_.erase(found);
  }

  void clear() {
    index_.clear();
    entries_.clear();
  }
  // Shrinks (evicting the least recently used) or grows the bound.
  void set_capacity(std::size_t capacity) {
    capacity_ = capacity == 0 ? 1 : capacity;
    while (entries_.size() > capacity_) {
      index_.erase(entries_.back().first);
      entries_.pop_back();
    }
  }
  std::size_t size() const noexcept { return entries_.size(); }
  std::size_t capacity() const noexcept { return capacity_; }
  bool contains(const Key& key) const { return index_.count(key) != 0; }

 private:
  using entry_list = std::list<std::pair<const Key, Value>>;
  std::size_t capacity_;
  entry_list entries_;  // most recently used first
  std::unordered_map<Key, typename entry_list::iterator, Hash> index_;
};

}  // namespace fp8::cublaslt
