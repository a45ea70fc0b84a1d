# check_compile_fail.cmake: the compile-fail harness, run by CTest in script mode:
#
#   cmake -DBUILD_DIR=<build tree> -DTARGET=cf_<stem> -DSOURCE=<file.cpp>
#         [-DOBJECT=<object file>] [-DCONFIG=<config>] [-DMAX_ERRORS=1]
#         [-DCOMPILE_COMMANDS=<compile_commands.json>] -P check_compile_fail.cmake
#
# Builds TARGET (SOURCE compiled with -DTYPESHARD_COMPILE_FAIL=1) and succeeds only if
#   1. the build fails,
#   2. the first output line containing "error:" matches the regex on SOURCE's first line,
#      `// expect: <regex>`, and
#   3. at most MAX_ERRORS lines contain "error:" (1: one mistake = one error, never a
#      cascade, as docs/rules.md promises).
# It prints the first error line whatever the verdict, and the whole output when it fails.

foreach(_var BUILD_DIR TARGET SOURCE)
  if(NOT DEFINED ${_var} OR "${${_var}}" STREQUAL "")
    message(FATAL_ERROR "check_compile_fail.cmake: -D${_var}=... is required")
  endif()
endforeach()
if(NOT DEFINED MAX_ERRORS)
  set(MAX_ERRORS 1)
endif()
get_filename_component(_name "${SOURCE}" NAME)

# --- the expectation ------------------------------------------------------------------------
file(STRINGS "${SOURCE}" _first LIMIT_COUNT 1)
if(NOT _first MATCHES "^// expect: (.+)$")
  message(FATAL_ERROR "${_name}: the first line must be `// expect: <regex>`, found: ${_first}")
endif()
set(_expect "${CMAKE_MATCH_1}")
string(STRIP "${_expect}" _expect)

# --- build ----------------------------------------------------------------------------------
# Remove a stale object so every run really compiles and shows its diagnostics.
if(DEFINED OBJECT AND NOT "${OBJECT}" STREQUAL "" AND EXISTS "${OBJECT}")
  file(REMOVE "${OBJECT}")
endif()
# With COMPILE_COMMANDS (the build tree's compile_commands.json), the compiler is run
# directly, with the command the build system would run for TARGET: no build tool runs in the
# build tree, so these tests need no lock and run in parallel. Otherwise the target is built
# with `cmake --build` (and the test holds the build tree's lock).
set(_command "")
if(DEFINED COMPILE_COMMANDS AND EXISTS "${COMPILE_COMMANDS}")
  file(READ "${COMPILE_COMMANDS}" _db)
  # Every string(JSON) call parses the whole file (hundreds of entries): find the entry's
  # index by text first (entries are objects whose first key is "directory"), check it with
  # one parse, and scan entry by entry only if that guess is wrong.
  set(_guess -1)
  string(FIND "${_db}" "/${TARGET}.dir/" _pos)
  if(_pos GREATER -1)
    string(SUBSTRING "${_db}" 0 ${_pos} _before)
    string(REGEX MATCHALL "\"directory\"" _keys "${_before}")
    list(LENGTH _keys _guess)
    math(EXPR _guess "${_guess} - 1")
  endif()
  macro(_ts_cf_try_entry _i)
    string(JSON _cmd GET "${_db}" ${_i} command)
    if(_cmd MATCHES "/${TARGET}\\.dir/")
      string(JSON _dir GET "${_db}" ${_i} directory)
      separate_arguments(_command UNIX_COMMAND "${_cmd}")
    endif()
  endmacro()
  if(_guess GREATER -1)
    _ts_cf_try_entry(${_guess})
  endif()
  if(_command STREQUAL "")
    string(JSON _n LENGTH "${_db}")
    math(EXPR _last "${_n} - 1")
    foreach(_i RANGE ${_last})
      _ts_cf_try_entry(${_i})
      if(NOT _command STREQUAL "")
        break()
      endif()
    endforeach()
  endif()
  if(_command STREQUAL "")
    message(FATAL_ERROR "${_name}: no compile command for ${TARGET} in ${COMPILE_COMMANDS}")
  endif()
  execute_process(COMMAND ${_command} WORKING_DIRECTORY "${_dir}"
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
else()
  set(_config_args "")
  if(DEFINED CONFIG AND NOT "${CONFIG}" STREQUAL "")
    set(_config_args --config "${CONFIG}")
  endif()
  execute_process(
    COMMAND "${CMAKE_COMMAND}" --build "${BUILD_DIR}" --target "${TARGET}" ${_config_args}
    RESULT_VARIABLE _rc
    OUTPUT_VARIABLE _out
    ERROR_VARIABLE _out)
endif()

# --- read the diagnostics -------------------------------------------------------------------
string(ASCII 27 _esc)
string(REGEX REPLACE "${_esc}\\[[0-9;]*[A-Za-z]" "" _out "${_out}")
# Split into lines without CMake's list pitfalls: ';' separates elements and unbalanced '['
# or ']' (as in "[with T = int]") would glue lines together, so hide all three first.
string(REPLACE ";" "<ts-semi>" _safe "${_out}")
string(REPLACE "[" "<ts-lbr>" _safe "${_safe}")
string(REPLACE "]" "<ts-rbr>" _safe "${_safe}")
string(REPLACE "\n" ";" _lines "${_safe}")
set(_count 0)
set(_first_error "")
foreach(_line IN LISTS _lines)
  if(_line MATCHES "error:")
    math(EXPR _count "${_count} + 1")
    if(_count EQUAL 1)
      set(_first_error "${_line}")
    endif()
  endif()
endforeach()
string(REPLACE "<ts-semi>" ";" _first_error "${_first_error}")
string(REPLACE "<ts-lbr>" "[" _first_error "${_first_error}")
string(REPLACE "<ts-rbr>" "]" _first_error "${_first_error}")
string(STRIP "${_first_error}" _first_error)

message("${_name}: expect:      ${_expect}")
if(_first_error STREQUAL "")
  message("${_name}: first error: (none)")
else()
  message("${_name}: first error: ${_first_error}")
endif()
message("${_name}: lines with error: ${_count} (at most ${MAX_ERRORS})")

# --- verdict --------------------------------------------------------------------------------
set(_why "")
if(_rc EQUAL 0)
  set(_why "the code COMPILED (build of ${TARGET} succeeded); it must fail to compile")
elseif(_count EQUAL 0)
  set(_why "the build failed (${_rc}) but no line contains \"error:\"")
elseif(NOT _first_error MATCHES "${_expect}")
  set(_why "the first error does not match the expected regex")
elseif(_count GREATER MAX_ERRORS)
  set(_why "${_count} lines contain \"error:\": a cascade, at most ${MAX_ERRORS} allowed")
endif()

if(NOT _why STREQUAL "")
  message("---- build output ----\n${_out}\n----------------------")
  message(FATAL_ERROR "${_name}: FAIL: ${_why}")
endif()
message("${_name}: PASS: fails to compile with the expected error")
