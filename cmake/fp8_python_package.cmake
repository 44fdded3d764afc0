# fp8_append_python_package_hints(<module> <list>): appends <dir>/include and <dir>/lib of the Python
# package <module> (e.g. nvidia.cudnn, which PyTorch installs) to <list>, where the Python CMake finds
# imports it; -DPython3_EXECUTABLE=... names another Python. Appends nothing where it does not.
function(fp8_append_python_package_hints module list)
  find_package(Python3 COMPONENTS Interpreter QUIET)
  if(NOT Python3_Interpreter_FOUND)
    return()
  endif()
  execute_process(
    COMMAND ${Python3_EXECUTABLE} -c "import ${module} as m; print(list(m.__path__)[0])"
    OUTPUT_VARIABLE package OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(package)
    set(${list} ${${list}} ${package}/include ${package}/lib PARENT_SCOPE)
  endif()
endfunction()
