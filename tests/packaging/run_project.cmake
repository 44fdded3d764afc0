# Configures, builds and (optionally) installs or runs a CMake project from scratch, as a user would.
# With EXPECT_ERROR, the configure step must fail instead, with output matching that regex.
#
#   cmake -DSOURCE_DIR=<dir> -DBINARY_DIR=<dir> [-DINSTALL_PREFIX=<dir>] [-DRUN=<program>]
#         [-DEXPECT_ERROR=<regex>] -P run_project.cmake [-- <configure arguments...>]

include("${CMAKE_CURRENT_LIST_DIR}/script_steps.cmake")
foreach(required SOURCE_DIR BINARY_DIR)
  if(NOT ${required})
    message(FATAL_ERROR "run_project.cmake: pass -D${required}=<dir>")
  endif()
endforeach()
arguments_after_separator(configure_arguments)

# Start from nothing, so that a cache left by an earlier run cannot hide a problem.
file(REMOVE_RECURSE "${BINARY_DIR}")
set(configure_command ${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${BINARY_DIR}" ${configure_arguments})

if(DEFINED EXPECT_ERROR)
  run_step(configure FALSE ${configure_command})
  # CMake wraps its messages at any space: match against the text with each run of blanks made one.
  string(REGEX REPLACE "[ \t\r\n]+" " " one_line "${step_output}")
  if(NOT one_line MATCHES "${EXPECT_ERROR}")
    message(FATAL_ERROR "configure failed, but its output does not match '${EXPECT_ERROR}':\n${step_output}")
  endif()
  message(STATUS "configure failed as expected, with a message matching '${EXPECT_ERROR}'")
  return()
endif()

run_step(configure TRUE ${configure_command})
run_step(build TRUE ${CMAKE_COMMAND} --build "${BINARY_DIR}")
if(INSTALL_PREFIX)
  file(REMOVE_RECURSE "${INSTALL_PREFIX}")
  run_step(install TRUE ${CMAKE_COMMAND} --install "${BINARY_DIR}" --prefix "${INSTALL_PREFIX}")
endif()
if(RUN)
  run_step("${RUN}" TRUE "${BINARY_DIR}/${RUN}")
  message("${step_output}")
endif()
