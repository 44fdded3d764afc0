// fp8::span: a pointer and an element count, for the size-checked overloads of the quantize API
// (C++17 has no std::span). It converts implicitly from any contiguous container with data() and
// size() (std::vector, std::array, a C array), so a buffer's size travels with it.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

namespace fp8 {

template <class T>
class span {
 public:
  using element_type = T;

  constexpr span() noexcept = default;
  constexpr span(T* data, std::size_t size) noexcept : data_(data), size_(size) {}
  template <std::size_t N>
  constexpr span(T (&array)[N]) noexcept : data_(array), size_(N) {}  // NOLINT: implicit by design
  // A container whose data() converts to T* (so span<const float> views a std::vector<float>).
  template <class Container,
            class = std::enable_if_t<
                std::is_convertible_v<decltype(std::declval<Container&>().data()), T*> &&
                std::is_convertible_v<decltype(std::declval<Container&>().size()), std::size_t>>>
  constexpr span(Container& container) noexcept  // NOLINT: implicit by design
      : data_(container.data()), size_(container.size()) {}

  // span<const T> from span<T>.
  template <class U,
            class = std::enable_if_t<!std::is_same_v<U, T> && std::is_convertible_v<U (*)[], T (*)[]>>>
  constexpr span(const span<U>& other) noexcept : data_(other.data()), size_(other.size()) {}  // NOLINT

  constexpr T* data() const noexcept { return data_; }
  constexpr std::size_t size() const noexcept { return size_; }
  constexpr T* begin() const noexcept { return data_; }
  constexpr T* end() const noexcept { return data_ + size_; }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

template <class T>
span(T*, std::size_t) -> span<T>;
template <class T, std::size_t N>
span(T (&)[N]) -> span<T>;
template <class Container>
span(Container&) -> span<std::remove_pointer_t<decltype(std::declval<Container&>().data())>>;

}  // namespace fp8
