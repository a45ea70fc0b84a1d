# tests/architecture/check_layers.cmake: fails when a header (or an impl/*.ipp file, the
# runtime's definitions) of include/typeshard/ includes a layer above its own
# (docs/architecture.md draws the layers).
#
#   cmake -DINCLUDE_DIR=<repo>/include -P check_layers.cmake
#
# A header's layer is its first folder under include/typeshard/ (core/detail/x.hpp is in core);
# typeshard.hpp, the umbrella, may include anything. Quoted includes are resolved relative to
# the including header; an angle include <typeshard/...> is checked the same way. A header may
# include its own layer and the layers listed for it below, nothing else.
cmake_minimum_required(VERSION 3.20)

if(NOT INCLUDE_DIR)
  message(FATAL_ERROR "check_layers.cmake: pass -DINCLUDE_DIR=<repo>/include")
endif()
set(_root "${INCLUDE_DIR}/typeshard")

# What each layer may include besides itself (bottom to top; kernels and backend beside).
#   core     the compile-time vocabulary: mesh, spec, extents, layout, unreduced, diagnostics,
#            errors
#   plan     compile-time plans (reshard, matmul) and their one step vocabulary
#   kernels  per-shard compute (GEMM, the elementwise functors): knows nothing of sharding
#   backend  devices and collective primitives on bytes: knows nothing of operations
#   array    host_tensor, device_mesh, sharded_array, block, and the memory of a shard
#            (array/detail/buffer.hpp)
#   ops      operations: matmul, reshard, elementwise, collectives, shard_map, the executor
#   viz      pictures (visualize), apart: arrays and below, never operations
set(_allowed_core)
set(_allowed_plan core)
set(_allowed_kernels core)
set(_allowed_backend core kernels)
set(_allowed_array core plan kernels backend)
set(_allowed_ops core plan kernels backend array)
set(_allowed_viz core plan kernels backend array)
set(_layers core plan kernels backend array ops viz)

function(_layer_of rel out)  # rel: path below include/typeshard/
  if(rel STREQUAL "typeshard.hpp")
    set(${out} umbrella PARENT_SCOPE)
    return()
  endif()
  string(REGEX MATCH "^[^/]+/" _first "${rel}")
  if(_first STREQUAL "")
    set(${out} "" PARENT_SCOPE)  # a header directly in include/typeshard/: not allowed
    return()
  endif()
  string(REGEX REPLACE "/$" "" _first "${_first}")
  set(${out} "${_first}" PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE _headers RELATIVE "${_root}" "${_root}/*.hpp" "${_root}/*.ipp")
list(SORT _headers)
set(_errors 0)
set(_checked 0)
foreach(_h IN LISTS _headers)
  _layer_of("${_h}" _layer)
  if(_layer STREQUAL "")
    message(SEND_ERROR "typeshard/${_h}: a header belongs in a layer's folder (${_layers})")
    math(EXPR _errors "${_errors} + 1")
    continue()
  endif()
  if(NOT _layer STREQUAL "umbrella" AND NOT _layer IN_LIST _layers)
    message(SEND_ERROR "typeshard/${_h}: folder '${_layer}' is no layer; known: ${_layers} "
                       "(add it here and to docs/architecture.md)")
    math(EXPR _errors "${_errors} + 1")
    continue()
  endif()
  get_filename_component(_dir "${_root}/${_h}" DIRECTORY)
  file(STRINGS "${_root}/${_h}" _lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]")
  foreach(_line IN LISTS _lines)
    if(_line MATCHES "#[ \t]*include[ \t]*\"([^\"]+)\"")
      get_filename_component(_target "${_dir}/${CMAKE_MATCH_1}" ABSOLUTE)
    elseif(_line MATCHES "#[ \t]*include[ \t]*<typeshard/([^>]+)>")
      set(_target "${_root}/${CMAKE_MATCH_1}")
    else()
      continue()  # standard library, Boost, MPI, intrinsics
    endif()
    file(RELATIVE_PATH _trel "${_root}" "${_target}")
    if(_trel MATCHES "^\\.\\./")
      message(SEND_ERROR "typeshard/${_h}: '${_line}' leaves include/typeshard/")
      math(EXPR _errors "${_errors} + 1")
      continue()
    endif()
    if(NOT EXISTS "${_target}")
      message(SEND_ERROR "typeshard/${_h}: '${_line}' names no header")
      math(EXPR _errors "${_errors} + 1")
      continue()
    endif()
    math(EXPR _checked "${_checked} + 1")
    if(_layer STREQUAL "umbrella")
      continue()
    endif()
    _layer_of("${_trel}" _tlayer)
    if(_tlayer STREQUAL _layer OR _tlayer IN_LIST _allowed_${_layer})
      continue()
    endif()
    string(JOIN ", " _may ${_layer} ${_allowed_${_layer}})
    message(SEND_ERROR "typeshard/${_h} (layer ${_layer}) includes typeshard/${_trel} "
                       "(layer ${_tlayer}): a ${_layer} header may include only ${_may}; "
                       "see docs/architecture.md")
    math(EXPR _errors "${_errors} + 1")
  endforeach()
endforeach()

list(LENGTH _headers _count)
if(_errors GREATER 0)
  message(FATAL_ERROR "check_layers: ${_errors} include(s) against the layering")
endif()
message(STATUS "check_layers: ${_count} headers, ${_checked} typeshard includes, all pointing down")
