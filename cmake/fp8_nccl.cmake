# fp8_nccl: NCCL's header and library for fp8/distributed/nccl.hpp (its tests and header check),
# found beside the CUDA toolkit, in the Python package nvidia-nccl (which PyTorch installs), or
# through FP8_NCCL_INCLUDE_DIR / FP8_NCCL_LIBRARY. Not defined where either is missing; the core
# never needs NCCL.
if(NOT TARGET fp8_nccl AND TARGET CUDA::cudart)
  set(_fp8_nccl_hints ${CUDAToolkit_INCLUDE_DIRS} ${fp8_cuda_library_dirs})
  include(${CMAKE_CURRENT_LIST_DIR}/fp8_python_package.cmake)
  fp8_append_python_package_hints(nvidia.nccl _fp8_nccl_hints)
  find_path(FP8_NCCL_INCLUDE_DIR nccl.h HINTS ${_fp8_nccl_hints})
  # The Python package ships only the versioned name; NAMES_PER_DIR keeps the hints' order (as for cuDNN).
  find_library(FP8_NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR HINTS ${_fp8_nccl_hints})
  if(FP8_NCCL_INCLUDE_DIR AND FP8_NCCL_LIBRARY)
    add_library(fp8_nccl INTERFACE)
    target_include_directories(fp8_nccl SYSTEM INTERFACE ${FP8_NCCL_INCLUDE_DIR})
    target_link_libraries(fp8_nccl INTERFACE ${FP8_NCCL_LIBRARY} CUDA::cudart)
  endif()
endif()
