# fp8_nccl: NCCL's header and library for fp8/distributed/nccl.hpp (its tests and header check),
# found beside the CUDA toolkit (or through FP8_NCCL_INCLUDE_DIR / FP8_NCCL_LIBRARY). Not defined
# where either is missing; the core never needs NCCL.
if(NOT TARGET fp8_nccl AND TARGET CUDA::cudart)
  find_path(FP8_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(FP8_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  if(FP8_NCCL_INCLUDE_DIR AND FP8_NCCL_LIBRARY)
    add_library(fp8_nccl INTERFACE)
    target_include_directories(fp8_nccl SYSTEM INTERFACE ${FP8_NCCL_INCLUDE_DIR})
    target_link_libraries(fp8_nccl INTERFACE ${FP8_NCCL_LIBRARY} CUDA::cudart)
  endif()
endif()
