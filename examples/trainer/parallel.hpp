// Loop parallelism for the trainer: OpenMP where the build found it, a plain loop otherwise.
// Every parallel loop writes disjoint outputs, so results do not depend on the thread count.
#pragma once

#if defined(_OPENMP)
#include <omp.h>
// Put before a `for` whose iterations are independent.
#define FP8_TRAINER_PARALLEL_FOR _Pragma("omp parallel for schedule(static)")
#else
#define FP8_TRAINER_PARALLEL_FOR
#endif

namespace trainer {

// Sets the number of threads of OpenMP loops and of Eigen's GEMMs (0 keeps the default).
inline void set_thread_count(int threads) {
#if defined(_OPENMP)
  if (threads > 0) omp_set_num_threads(threads);
#else
  (void)threads;
#endif
}

inline int thread_count() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

}  // namespace trainer
