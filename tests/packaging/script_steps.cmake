# Helpers for the `cmake -P` scripts here: reading the command line and running one checked step.

# The arguments after `--` on the command line, as a list. Passing them there rather than through -D
# keeps values holding `;` or spaces intact.
function(arguments_after_separator out)
  set(arguments "")
  set(after_separator FALSE)
  math(EXPR last_argument "${CMAKE_ARGC} - 1")
  foreach(index RANGE ${last_argument})
    if(after_separator)
      list(APPEND arguments "${CMAKE_ARGV${index}}")
    elseif(CMAKE_ARGV${index} STREQUAL "--")
      set(after_separator TRUE)
    endif()
  endforeach()
  set(${out} "${arguments}" PARENT_SCOPE)
endfunction()

# run_step(<name> <expect_success> <command...>): runs the command and stops, showing the command and
# its output, when it fails (or, with expect_success FALSE, when it succeeds). The output is left in
# step_output.
function(run_step name expect_success)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
  set(step_output "${output}" PARENT_SCOPE)
  string(JOIN " " shown ${ARGN})
  if(expect_success AND NOT status EQUAL 0)
    message(FATAL_ERROR "${name} failed (exit status ${status}):\n${shown}\n${output}")
  endif()
  if(NOT expect_success AND status EQUAL 0)
    message(FATAL_ERROR "${name} succeeded but should have failed:\n${shown}\n${output}")
  endif()
  if(expect_success)
    message(STATUS "${name}: done")
  endif()
endfunction()
