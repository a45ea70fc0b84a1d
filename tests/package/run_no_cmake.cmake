# run_no_cmake.cmake: the test package.no_cmake, run by CTest in script mode. Runs every
# command of README.md's "Without CMake" block (between the `no-cmake` markers) in WORK_DIR,
# with `include` and `src` taken from TYPESHARD_SOURCE_DIR and app.cpp being the package
# consumer (tests/package/consumer/main.cpp), and runs the program each time: the README's
# commands cannot rot without this test failing.
#
# Needs: TYPESHARD_SOURCE_DIR, WORK_DIR, CXX_COMPILER.
file(READ "${TYPESHARD_SOURCE_DIR}/README.md" _readme)
string(FIND "${_readme}" "<!-- no-cmake: begin -->" _begin)
string(FIND "${_readme}" "<!-- no-cmake: end -->" _end)
if(_begin EQUAL -1 OR _end EQUAL -1)
  message(FATAL_ERROR "package.no_cmake: README.md has no no-cmake markers")
endif()
math(EXPR _len "${_end} - ${_begin}")
string(SUBSTRING "${_readme}" ${_begin} ${_len} _block)
string(REPLACE "\\\n" " " _block "${_block}")  # join continued lines
string(REPLACE "\n" ";" _lines "${_block}")

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
file(CREATE_LINK "${TYPESHARD_SOURCE_DIR}/include" "${WORK_DIR}/include" SYMBOLIC)
file(CREATE_LINK "${TYPESHARD_SOURCE_DIR}/src" "${WORK_DIR}/src" SYMBOLIC)
configure_file("${TYPESHARD_SOURCE_DIR}/tests/package/consumer/main.cpp" "${WORK_DIR}/app.cpp"
               COPYONLY)

set(_ran 0)
foreach(_line IN LISTS _lines)
  string(STRIP "${_line}" _line)
  if(NOT _line MATCHES "^g\\+\\+ ")
    continue()
  endif()
  if(_line MATCHES "openblas" AND NOT EXISTS "/usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h")
    message("==> skipped (no OpenBLAS here): ${_line}")
    continue()
  endif()
  string(REGEX REPLACE "^g\\+\\+ " "" _args "${_line}")
  separate_arguments(_args UNIX_COMMAND "${_args}")
  list(JOIN _args " " _shown)
  message("==> ${CXX_COMPILER} ${_shown}")
  execute_process(COMMAND "${CXX_COMPILER}" ${_args} WORKING_DIRECTORY "${WORK_DIR}"
                  RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "package.no_cmake: the README's command failed: ${_line}")
  endif()
  if(_line MATCHES "-o app ")
    execute_process(COMMAND "${WORK_DIR}/app" RESULT_VARIABLE _rc)
    if(NOT _rc EQUAL 0)
      message(FATAL_ERROR "package.no_cmake: the program built by `${_line}` failed")
    endif()
    math(EXPR _ran "${_ran} + 1")
  endif()
endforeach()
if(_ran LESS 2)
  message(FATAL_ERROR "package.no_cmake: only ${_ran} programs were built from README.md")
endif()
message("package.no_cmake: ${_ran} programs built from README.md's commands and run: PASS")
