# typeshardCBLAS.cmake: find a CBLAS (OpenBLAS) for typeshard's per-shard GEMM.
#
# Used twice: by typeshard's own CMakeLists.txt and, installed next to typeshardConfig.cmake,
# by find_package(typeshard) on the consumer's side (so no absolute library path is baked
# into the exported targets).
#
#   typeshard_find_cblas(<found_var> [GLOBAL])
#
# On success sets <found_var> to TRUE and creates the imported target TypeshardCBLAS::CBLAS
# (library + cblas.h include dir, and the compile definitions TYPESHARD_HAVE_OPENBLAS=1 /
# TYPESHARD_OPENBLAS_SERIAL=1 when they apply). typeshard::blas links it and adds
# TYPESHARD_HAVE_CBLAS=1.
#
# Which OpenBLAS: every device of the mesh runs its own GEMM on its own thread, so the BLAS
# must be single-threaded inside. TYPESHARD_OPENBLAS_FLAVOR chooses:
#   auto     (default) the pthread build (run single-threaded), else the serial one;
#   serial   only the serial build;
#   pthread  only the pthread build (or whatever plain -lopenblas resolves to).
# auto avoids Debian's serial build on purpose: it is compiled without USE_LOCKING, so
# concurrent cblas_sgemm calls from several device threads silently corrupt results now and
# then (OpenBLAS issue #2126; seen here in examples/seed002 in about a third of the runs).
# The pthread build locks its buffers and is run with openblas_set_num_threads(1).
# Debian: the serial runtime is libopenblas0-serial (/usr/lib/<arch>/openblas-serial/
# libopenblas.so.0, no dev symlink, no headers); libopenblas-dev brings the pthread headers and
# library. cblas.h is the same API for both flavours, so the serial library is linked by its
# full path with whichever OpenBLAS cblas.h is installed. Since both flavours share the SONAME
# libopenblas.so.0 and the system default (update-alternatives) is the pthread one, the serial
# directory goes into the executables' RPATH (CMake adds it for libraries linked by full path
# outside the implicit link directories), which the loader searches before ld.so.cache.
# With the pthread flavour the code must call openblas_set_num_threads(1)
# (TYPESHARD_HAVE_OPENBLAS tells it that the function exists; harmless on the serial one).
#
# To use another CBLAS, set TYPESHARD_CBLAS_LIBRARY and TYPESHARD_CBLAS_INCLUDE_DIR.

include_guard(GLOBAL)

set(TYPESHARD_OPENBLAS_FLAVOR "auto" CACHE STRING
    "Which OpenBLAS build typeshard::blas links: auto (pthread, run single-threaded), serial, pthread")
set_property(CACHE TYPESHARD_OPENBLAS_FLAVOR PROPERTY STRINGS auto serial pthread)

function(typeshard_find_cblas found_var)
  set(global "")
  if("GLOBAL" IN_LIST ARGN)
    set(global GLOBAL)
  endif()
  set(${found_var} FALSE PARENT_SCOPE)

  if(TARGET TypeshardCBLAS::CBLAS)
    set(${found_var} TRUE PARENT_SCOPE)
    return()
  endif()

  set(arch "${CMAKE_LIBRARY_ARCHITECTURE}")
  set(lib_roots /usr/lib /usr/local/lib /usr/lib64)
  set(inc_roots /usr/include /usr/local/include)

  set(serial_lib_dirs "")
  set(pthread_lib_dirs "")
  set(serial_inc_dirs "")
  set(pthread_inc_dirs "")
  foreach(root IN LISTS lib_roots)
    if(arch)
      list(APPEND serial_lib_dirs "${root}/${arch}/openblas-serial")
      list(APPEND pthread_lib_dirs "${root}/${arch}/openblas-pthread")
    endif()
    list(APPEND serial_lib_dirs "${root}/openblas-serial")
    list(APPEND pthread_lib_dirs "${root}/openblas-pthread")
  endforeach()
  foreach(root IN LISTS inc_roots)
    if(arch)
      list(APPEND serial_inc_dirs "${root}/${arch}/openblas-serial")
      list(APPEND pthread_inc_dirs "${root}/${arch}/openblas-pthread")
    endif()
    list(APPEND serial_inc_dirs "${root}/openblas-serial")
    list(APPEND pthread_inc_dirs "${root}/openblas-pthread" "${root}/openblas")
  endforeach()

  set(flavor "${TYPESHARD_OPENBLAS_FLAVOR}")
  if(NOT flavor MATCHES "^(auto|serial|pthread)$")
    message(FATAL_ERROR "typeshard: TYPESHARD_OPENBLAS_FLAVOR must be auto, serial or pthread, "
                        "not '${flavor}'")
  endif()

  # --- the library -------------------------------------------------------------------------
  # A build tree configured when auto still preferred the serial build keeps that library in
  # its cache: auto and pthread look again rather than keep Debian's serial build.
  if(TYPESHARD_CBLAS_LIBRARY MATCHES "openblas-serial" AND NOT flavor STREQUAL "serial")
    message(STATUS "typeshard: not keeping the cached serial OpenBLAS "
                   "(${TYPESHARD_CBLAS_LIBRARY}): TYPESHARD_OPENBLAS_FLAVOR is ${flavor}")
    unset(TYPESHARD_CBLAS_LIBRARY CACHE)
    unset(TYPESHARD_CBLAS_INCLUDE_DIR CACHE)
  endif()
  if(NOT TYPESHARD_CBLAS_LIBRARY)
    if(flavor STREQUAL "auto" OR flavor STREQUAL "pthread")
      find_library(TYPESHARD_CBLAS_LIBRARY NAMES openblas openblasp
                   PATHS ${pthread_lib_dirs} NO_DEFAULT_PATH NO_CACHE)
      if(NOT TYPESHARD_CBLAS_LIBRARY)
        find_library(TYPESHARD_CBLAS_LIBRARY NAMES openblas NO_CACHE)
      endif()
    endif()
    if(NOT TYPESHARD_CBLAS_LIBRARY AND (flavor STREQUAL "auto" OR flavor STREQUAL "serial"))
      # Debian ships the serial runtime without the libopenblas.so dev symlink: accept .so.0.
      find_library(TYPESHARD_CBLAS_LIBRARY NAMES openblas libopenblas.so.0
                   PATHS ${serial_lib_dirs} NO_DEFAULT_PATH NO_CACHE)
    endif()
    if(TYPESHARD_CBLAS_LIBRARY)
      set(TYPESHARD_CBLAS_LIBRARY "${TYPESHARD_CBLAS_LIBRARY}" CACHE FILEPATH
          "CBLAS library typeshard::blas links (found by typeshardCBLAS.cmake)")
    endif()
  endif()
  if(NOT TYPESHARD_CBLAS_LIBRARY)
    return()
  endif()

  # --- the header --------------------------------------------------------------------------
  if(NOT TYPESHARD_CBLAS_INCLUDE_DIR)
    find_path(TYPESHARD_CBLAS_INCLUDE_DIR NAMES cblas.h
              PATHS ${serial_inc_dirs} ${pthread_inc_dirs} NO_DEFAULT_PATH NO_CACHE)
    if(NOT TYPESHARD_CBLAS_INCLUDE_DIR)
      find_path(TYPESHARD_CBLAS_INCLUDE_DIR NAMES cblas.h NO_CACHE)
    endif()
    if(TYPESHARD_CBLAS_INCLUDE_DIR)
      set(TYPESHARD_CBLAS_INCLUDE_DIR "${TYPESHARD_CBLAS_INCLUDE_DIR}" CACHE PATH
          "Directory of the cblas.h typeshard::blas uses (found by typeshardCBLAS.cmake)")
    endif()
  endif()
  if(NOT TYPESHARD_CBLAS_INCLUDE_DIR)
    return()
  endif()

  set(defs "")
  file(STRINGS "${TYPESHARD_CBLAS_INCLUDE_DIR}/cblas.h" has_openblas_api
       REGEX "openblas_set_num_threads" LIMIT_COUNT 1)
  if(has_openblas_api)
    list(APPEND defs TYPESHARD_HAVE_OPENBLAS=1)
  endif()
  if(TYPESHARD_CBLAS_LIBRARY MATCHES "openblas-serial")
    list(APPEND defs TYPESHARD_OPENBLAS_SERIAL=1)
    message(WARNING "typeshard: linking the serial OpenBLAS (${TYPESHARD_CBLAS_LIBRARY}). "
                    "Debian's is built without USE_LOCKING: GEMMs that devices run at the same "
                    "time can give wrong results. Install libopenblas0-pthread and configure "
                    "with -DTYPESHARD_OPENBLAS_FLAVOR=auto.")
  endif()

  add_library(TypeshardCBLAS::CBLAS UNKNOWN IMPORTED ${global})
  set_target_properties(TypeshardCBLAS::CBLAS PROPERTIES
    IMPORTED_LOCATION "${TYPESHARD_CBLAS_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${TYPESHARD_CBLAS_INCLUDE_DIR}"
    INTERFACE_COMPILE_DEFINITIONS "${defs}")
  set(${found_var} TRUE PARENT_SCOPE)
endfunction()
