# Warnings as errors for everything this project builds itself (never for consumers of fp8::fp8).
add_library(fp8_warnings INTERFACE)
if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  target_compile_options(fp8_warnings INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Werror>
    $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings -Xcompiler=-Wall,-Wextra,-Werror>)
  # A kernel of ours that spills registers or keeps arrays in local memory has lost much of its
  # bandwidth: ptxas warns, and the warning is an error, so it is caught when compiled, not when
  # profiled. FP8_PTXAS_STRICT=OFF lets a new architecture's build through while its kernels are tuned.
  option(FP8_PTXAS_STRICT "Fail the build when a kernel spills registers or uses local memory" ON)
  if(FP8_PTXAS_STRICT)
    target_compile_options(fp8_warnings INTERFACE
      $<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=-warn-spills,-warn-lmem-usage>)
  endif()
endif()
