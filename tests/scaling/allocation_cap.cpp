// A global operator new that refuses any single allocation above a cap, for the tests of loaders that
// must size nothing by an untrusted field: an allocation sized by a lying file fails fast here with
// std::bad_alloc (which the loader must not let escape) instead of taking gigabytes from the machine.
#include <cstddef>
#include <cstdlib>
#include <new>

#include "allocation_cap.hpp"

namespace fp8_test {
std::size_t largest_allocation = 0;
}

void* operator new(std::size_t size) {
  if (size > fp8_test::allocation_cap) throw std::bad_alloc();
  if (size > fp8_test::largest_allocation) fp8_test::largest_allocation = size;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return ::operator new(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
