# fp8_cudnn_frontend: cuDNN (header and library) with its C++ frontend (header-only), for the example
# trainer's fused attention on the GPU. cuDNN is looked for beside the CUDA toolkit, under
# FP8_CUDNN_ROOT, or in the Python package nvidia-cudnn (which PyTorch installs); the frontend's
# headers under .deps/cudnn-frontend/include (scripts/setup.sh puts them there, from PyPI's
# nvidia-cudnn-frontend) or FP8_CUDNN_FRONTEND_INCLUDE_DIR. Not defined where any part is missing:
# the trainer then builds with its materialised attention only. The fp8 library never needs cuDNN.
if(NOT TARGET fp8_cudnn_frontend AND TARGET CUDA::cudart)
  # find_path and find_library keep what they found in the cache and do not look again. Those results
  # belong to the FP8_CUDNN_ROOT they were found under: when a later configure names another root (or
  # none), they are dropped and found again. (A path given with -D beside a new root is dropped too:
  # give it in a configure of its own.)
  if(DEFINED _FP8_CUDNN_ROOT_SEARCHED AND NOT "${FP8_CUDNN_ROOT}" STREQUAL "${_FP8_CUDNN_ROOT_SEARCHED}")
    message(STATUS "FP8_CUDNN_ROOT changed (\"${_FP8_CUDNN_ROOT_SEARCHED}\" -> \"${FP8_CUDNN_ROOT}\"): "
                   "looking for cuDNN again")
    unset(FP8_CUDNN_INCLUDE_DIR CACHE)
    unset(FP8_CUDNN_LIBRARY CACHE)
  endif()
  set(_FP8_CUDNN_ROOT_SEARCHED "${FP8_CUDNN_ROOT}" CACHE INTERNAL "the root of the cached cuDNN paths")
  set(_fp8_cudnn_hints ${CUDAToolkit_INCLUDE_DIRS} ${fp8_cuda_library_dirs})
  if(FP8_CUDNN_ROOT)
    list(PREPEND _fp8_cudnn_hints ${FP8_CUDNN_ROOT}/include ${FP8_CUDNN_ROOT}/lib ${FP8_CUDNN_ROOT}/lib64)
  endif()
  include(${CMAKE_CURRENT_LIST_DIR}/fp8_python_package.cmake)
  fp8_append_python_package_hints(nvidia.cudnn _fp8_cudnn_hints)
  find_path(FP8_CUDNN_INCLUDE_DIR cudnn.h HINTS ${_fp8_cudnn_hints})
  # The Python package ships only the versioned name. NAMES_PER_DIR: both names in each directory, in
  # the hints' order, so that a libcudnn.so further down (the toolkit's, the system's) does not win over
  # a directory with only libcudnn.so.9 (FP8_CUDNN_ROOT, the Python package) whose cudnn.h find_path took.
  find_library(FP8_CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 NAMES_PER_DIR HINTS ${_fp8_cudnn_hints})
  find_path(FP8_CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h
            HINTS ${PROJECT_SOURCE_DIR}/.deps/cudnn-frontend/include NO_DEFAULT_PATH)
  # The build check below is cached too, for the paths it ran with: other paths (a new root, or one
  # set by hand) run it again.
  set(_fp8_cudnn_checked "${FP8_CUDNN_FRONTEND_INCLUDE_DIR};${FP8_CUDNN_INCLUDE_DIR};${FP8_CUDNN_LIBRARY}")
  if(NOT "${_fp8_cudnn_checked}" STREQUAL "${_FP8_CUDNN_FRONTEND_CHECKED}")
    unset(FP8_CUDNN_FRONTEND_BUILDS CACHE)
    set(_FP8_CUDNN_FRONTEND_CHECKED "${_fp8_cudnn_checked}"
        CACHE INTERNAL "the paths FP8_CUDNN_FRONTEND_BUILDS was checked with")
  endif()
  if(FP8_CUDNN_INCLUDE_DIR AND FP8_CUDNN_LIBRARY AND FP8_CUDNN_FRONTEND_INCLUDE_DIR)
    # The frontend's headers must build and link against the cuDNN found (an older cuDNN beside the
    # toolkit can lack what the pinned frontend uses): a failure here leaves the trainer its
    # materialised attention instead of failing the whole build.
    include(CheckCXXSourceCompiles)
    set(CMAKE_REQUIRED_INCLUDES ${FP8_CUDNN_FRONTEND_INCLUDE_DIR} ${FP8_CUDNN_INCLUDE_DIR} ${CUDAToolkit_INCLUDE_DIRS})
    set(CMAKE_REQUIRED_DEFINITIONS -DCUDNN_FRONTEND_SKIP_JSON_LIB)
    set(CMAKE_REQUIRED_LIBRARIES ${FP8_CUDNN_LIBRARY} CUDA::nvrtc CUDA::cudart)
    set(CMAKE_REQUIRED_QUIET ON)
    check_cxx_source_compiles(
      "#include <cudnn_frontend.h>\nint main() { return cudnn_frontend::detail::get_backend_version() > 0 ? 0 : 1; }"
      FP8_CUDNN_FRONTEND_BUILDS)
    unset(CMAKE_REQUIRED_INCLUDES)
    unset(CMAKE_REQUIRED_DEFINITIONS)
    unset(CMAKE_REQUIRED_LIBRARIES)
    unset(CMAKE_REQUIRED_QUIET)
    if(NOT FP8_CUDNN_FRONTEND_BUILDS)
      message(WARNING "the cuDNN frontend at ${FP8_CUDNN_FRONTEND_INCLUDE_DIR} does not build against the cuDNN at "
                      "${FP8_CUDNN_INCLUDE_DIR} (see CMakeFiles/CMakeConfigureLog.yaml)")
    endif()
  endif()
  if(FP8_CUDNN_FRONTEND_BUILDS)
    add_library(fp8_cudnn_frontend INTERFACE)
    target_include_directories(fp8_cudnn_frontend SYSTEM INTERFACE ${FP8_CUDNN_FRONTEND_INCLUDE_DIR}
                                                                    ${FP8_CUDNN_INCLUDE_DIR})
    # The frontend's JSON serialisation of graphs is not used.
    target_compile_definitions(fp8_cudnn_frontend INTERFACE CUDNN_FRONTEND_SKIP_JSON_LIB)
    # The frontend compiles some of its engines at run time (NVRTC).
    target_link_libraries(fp8_cudnn_frontend INTERFACE ${FP8_CUDNN_LIBRARY} CUDA::nvrtc CUDA::cudart)
  endif()
endif()
