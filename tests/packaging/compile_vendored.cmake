# Vendoring, as a user does it: copy include/ into a project, compile with nothing but -I, run.
#
#   cmake -DINCLUDE_DIR=<fp8 include/> -DBINARY_DIR=<dir> -DSOURCE=<consumer file>
#         -P compile_vendored.cmake -- <compiler> <flags...>
#
# The script adds `-I<copy of include/> <source> -o <program>` to the compiler and flags.

include("${CMAKE_CURRENT_LIST_DIR}/script_steps.cmake")
foreach(required INCLUDE_DIR BINARY_DIR SOURCE)
  if(NOT ${required})
    message(FATAL_ERROR "compile_vendored.cmake: pass -D${required}=...")
  endif()
endforeach()
arguments_after_separator(compiler_and_flags)
if(NOT compiler_and_flags)
  message(FATAL_ERROR "compile_vendored.cmake: give the compiler and its flags after `--`")
endif()

# A fresh copy each run: the headers as they are now, away from the source tree.
set(vendored_dir "${BINARY_DIR}/third_party")
file(REMOVE_RECURSE "${BINARY_DIR}")
file(COPY "${INCLUDE_DIR}/" DESTINATION "${vendored_dir}")
set(program "${BINARY_DIR}/consumer")

run_step(compile TRUE ${compiler_and_flags} "-I${vendored_dir}" "${SOURCE}" -o "${program}")
run_step(run TRUE "${program}")
message("${step_output}")
