# run_package_test.cmake: the steps of the package tests, run by CTest in script mode.
#
#   MODE=install           rm -rf PREFIX; cmake --install PARENT_BUILD_DIR --prefix PREFIX
#   MODE=find_package      configure CONSUMER_SOURCE_DIR in WORK_DIR with CMAKE_PREFIX_PATH=PREFIX,
#                          check that typeshard came from PREFIX, build, run the consumer
#   MODE=add_subdirectory  same with -DTYPESHARD_SOURCE_DIR=<typeshard source tree>
#
# EXPECT_RUNTIME / EXPECT_CUDA: the parent build has typeshard::runtime / typeshard::cuda, so
# the find_package consumer must find them (typeshard::cuda: where it was not built, the
# consumer asking for COMPONENTS cuda must fail to configure, saying why).
# Also: CONFIG, GENERATOR, MAKE_PROGRAM, CXX_COMPILER, CXX_FLAGS, CXX_FLAGS_CONFIG (the parent
# build's).

function(run_step what)
  string(REPLACE ";" " " _shown "${ARGN}")
  message("==> ${what}: ${_shown}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "package test (${MODE}): ${what} failed (${_rc})")
  endif()
endfunction()

set(_config_args "")
if(DEFINED CONFIG AND NOT "${CONFIG}" STREQUAL "")
  set(_config_args --config "${CONFIG}")
endif()

if(MODE STREQUAL "install")
  file(REMOVE_RECURSE "${PREFIX}")
  run_step("install" "${CMAKE_COMMAND}" --install "${PARENT_BUILD_DIR}" --prefix "${PREFIX}"
           ${_config_args})
  foreach(_f lib/cmake/typeshard/typeshardConfig.cmake
             lib/cmake/typeshard/typeshardConfigVersion.cmake
             lib/cmake/typeshard/typeshardTargets.cmake)
    if(NOT EXISTS "${PREFIX}/${_f}")
      message(FATAL_ERROR "package test (install): ${PREFIX}/${_f} was not installed")
    endif()
  endforeach()
  if(EXISTS "${TYPESHARD_SOURCE_DIR}/include/typeshard/typeshard.hpp"
     AND NOT EXISTS "${PREFIX}/include/typeshard/typeshard.hpp")
    message(FATAL_ERROR "package test (install): include/typeshard/typeshard.hpp was not installed")
  endif()
  message("package test (install): installed into ${PREFIX}")
  return()
endif()

if(NOT MODE MATCHES "^(find_package|add_subdirectory)$")
  message(FATAL_ERROR "run_package_test.cmake: unknown MODE '${MODE}'")
endif()

# A fresh consumer build every time: the test checks configuring from scratch.
file(REMOVE_RECURSE "${WORK_DIR}")
set(_configure
  "${CMAKE_COMMAND}" -S "${CONSUMER_SOURCE_DIR}" -B "${WORK_DIR}"
  -G "${GENERATOR}"
  "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}"
  "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}"
  -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON)
if(MAKE_PROGRAM)
  list(APPEND _configure "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
if(DEFINED CONFIG AND NOT "${CONFIG}" STREQUAL "")
  list(APPEND _configure "-DCMAKE_BUILD_TYPE=${CONFIG}")
  if(DEFINED CXX_FLAGS_CONFIG)
    string(TOUPPER "${CONFIG}" _config_upper)
    list(APPEND _configure "-DCMAKE_CXX_FLAGS_${_config_upper}=${CXX_FLAGS_CONFIG}")
  endif()
endif()
if(MODE STREQUAL "find_package")
  list(APPEND _configure "-DCMAKE_PREFIX_PATH=${PREFIX}")
else()
  list(APPEND _configure "-DTYPESHARD_SOURCE_DIR=${TYPESHARD_SOURCE_DIR}")
endif()

run_step("configure" ${_configure})

if(MODE STREQUAL "find_package" AND NOT EXPECT_CUDA)
  message("==> configure with REQUIRE_CUDA=ON (must fail: no typeshard::cuda here)")
  execute_process(COMMAND ${_configure} -B "${WORK_DIR}-require-cuda" -DREQUIRE_CUDA=ON
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
  file(REMOVE_RECURSE "${WORK_DIR}-require-cuda")
  if(_rc EQUAL 0 OR NOT _out MATCHES "typeshard::cuda unavailable: ")
    message(FATAL_ERROR "package test: find_package(typeshard COMPONENTS cuda) should fail "
                        "saying why where typeshard::cuda was not built (exit ${_rc}):\n${_out}")
  endif()
endif()

if(MODE STREQUAL "find_package")
  # The package must be the one just installed, not one found elsewhere on the machine.
  file(STRINGS "${WORK_DIR}/CMakeCache.txt" _dir_line REGEX "^typeshard_DIR:")
  string(REGEX REPLACE "^typeshard_DIR:[A-Z]+=" "" _dir "${_dir_line}")
  file(REAL_PATH "${PREFIX}" _prefix_real)
  file(REAL_PATH "${_dir}" _dir_real)
  string(FIND "${_dir_real}" "${_prefix_real}/" _pos)
  if(NOT _pos EQUAL 0)
    message(FATAL_ERROR "package test: typeshard was found in '${_dir}', not under ${PREFIX}")
  endif()
endif()

run_step("build" "${CMAKE_COMMAND}" --build "${WORK_DIR}" ${_config_args})

# The header-only consumer always; the ones linking typeshard::runtime and typeshard::cuda
# whenever the package (or source tree) provides that target.
foreach(_name typeshard_consumer typeshard_consumer_runtime typeshard_consumer_cuda)
  set(_exe "${WORK_DIR}/${_name}${CMAKE_EXECUTABLE_SUFFIX}")
  if(NOT EXISTS "${_exe}" AND DEFINED CONFIG
     AND EXISTS "${WORK_DIR}/${CONFIG}/${_name}${CMAKE_EXECUTABLE_SUFFIX}")
    set(_exe "${WORK_DIR}/${CONFIG}/${_name}${CMAKE_EXECUTABLE_SUFFIX}")
  endif()
  if(_name STREQUAL "typeshard_consumer_runtime" AND NOT EXISTS "${_exe}")
    if(EXPECT_RUNTIME)
      message(FATAL_ERROR "package test (${MODE}): typeshard::runtime was built here but the "
                          "consumer found no such target")
    endif()
    continue()
  endif()
  if(_name STREQUAL "typeshard_consumer_cuda" AND NOT EXISTS "${_exe}")
    if(EXPECT_CUDA AND MODE STREQUAL "find_package")
      message(FATAL_ERROR "package test (${MODE}): typeshard::cuda was built here but the "
                          "consumer found no such target")
    endif()
    continue()
  endif()
  run_step("run" "${_exe}")
endforeach()
message("package test (${MODE}): PASS")
