# Test and example dependencies: doctest and Eigen, from Debian packages (doctest-dev, libeigen3-dev).
# Where no package is installed (e.g. a GPU machine without apt), point FP8_DOCTEST_INCLUDE_DIR or
# FP8_EIGEN_INCLUDE_DIR at a copy of the headers (the directory holding doctest/doctest.h or
# Eigen/Core).
set(FP8_DOCTEST_INCLUDE_DIR "" CACHE PATH "Directory that contains doctest/doctest.h, if no package is found")
set(FP8_EIGEN_INCLUDE_DIR "" CACHE PATH "Directory that contains Eigen/Core, if no package is found")

find_package(Threads REQUIRED)

if(FP8_DOCTEST_INCLUDE_DIR)
  add_library(fp8_doctest INTERFACE)
  target_include_directories(fp8_doctest SYSTEM INTERFACE ${FP8_DOCTEST_INCLUDE_DIR})
  add_library(doctest::doctest ALIAS fp8_doctest)
else()
  find_package(doctest CONFIG QUIET)
  if(NOT doctest_FOUND AND FP8_BUILD_TESTS)
    message(FATAL_ERROR "doctest not found: install it (apt-get install doctest-dev) or set "
                        "FP8_DOCTEST_INCLUDE_DIR to a directory holding doctest/doctest.h")
  endif()
endif()

if(FP8_EIGEN_INCLUDE_DIR)
  add_library(fp8_eigen INTERFACE)
  target_include_directories(fp8_eigen SYSTEM INTERFACE ${FP8_EIGEN_INCLUDE_DIR})
  add_library(Eigen3::Eigen ALIAS fp8_eigen)
else()
  find_package(Eigen3 3.4 CONFIG QUIET NO_MODULE)
  if(NOT Eigen3_FOUND)
    message(FATAL_ERROR "Eigen 3.4 not found: install it (apt-get install libeigen3-dev) or set "
                        "FP8_EIGEN_INCLUDE_DIR to a directory holding Eigen/Core")
  endif()
endif()

# The examples' command lines: CLI11 (Debian's libcli11-dev, header-only), or FP8_CLI11_INCLUDE_DIR
# pointing at a copy of its headers (the directory holding CLI/CLI.hpp). The examples that need it
# are skipped with a warning where neither is found.
set(FP8_CLI11_INCLUDE_DIR "" CACHE PATH "Directory that contains CLI/CLI.hpp, if no package is found")
if(FP8_CLI11_INCLUDE_DIR)
  add_library(fp8_cli11 INTERFACE)
  target_include_directories(fp8_cli11 SYSTEM INTERFACE ${FP8_CLI11_INCLUDE_DIR})
  add_library(CLI11::CLI11 ALIAS fp8_cli11)
else()
  find_package(CLI11 CONFIG QUIET)
endif()
