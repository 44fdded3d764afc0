# Warnings as errors for everything this project builds itself (never for consumers of fp8::fp8).
add_library(fp8_warnings INTERFACE)
# FP8_WARNINGS_AS_ERRORS=OFF keeps the warnings but lets the build go on: the GPU check uses it, so
# that a newer host compiler's new warning cannot cost a rare GPU run; it then fails a step of its
# own that lists the warnings (bench/gpu_check.sh).
option(FP8_WARNINGS_AS_ERRORS "Treat compiler warnings as errors" ON)
if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  target_compile_options(fp8_warnings INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
  if(FP8_WARNINGS_AS_ERRORS)
    target_compile_options(fp8_warnings INTERFACE
      $<$<COMPILE_LANGUAGE:CXX>:-Werror>
      $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings -Xcompiler=-Werror>)
  endif()
  # A kernel of ours that spills registers or keeps arrays in local memory has lost much of its
  # bandwidth: ptxas warns, and the warning is an error, so it is caught when compiled, not when
  # profiled. FP8_PTXAS_STRICT=OFF lets a new architecture's build through while its kernels are tuned.
  option(FP8_PTXAS_STRICT "Fail the build when a kernel spills registers or uses local memory" ON)
  if(FP8_PTXAS_STRICT)
    target_compile_options(fp8_warnings INTERFACE
      $<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=-warn-spills,-warn-lmem-usage>)
  endif()
endif()
