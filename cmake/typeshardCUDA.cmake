# typeshard::cuda: the CUDA backend's compiled library (src/cuda/), optional.
# TYPESHARD_WITH_CUDA: AUTO (default: when the CUDA toolkit, a CUDA compiler and NCCL are
# found), ON (required: configure fails naming what is missing) or OFF. Included at the top
# level, so that enable_language(CUDA) covers every directory that links the library.
# AUTO is OFF where typeshard is a subproject (its consumer opts in) and in sanitizer builds
# (nvcc takes no -fsanitize): finding CUDA costs ~5 s of every configure.
set(TYPESHARD_WITH_CUDA AUTO CACHE STRING "Provide typeshard::cuda: AUTO, ON or OFF")
set_property(CACHE TYPESHARD_WITH_CUDA PROPERTY STRINGS AUTO ON OFF)
set(TYPESHARD_HAVE_CUDA FALSE)
set(_ts_cuda_wanted TRUE)
if(TYPESHARD_WITH_CUDA STREQUAL "OFF")
  set(_ts_cuda_wanted FALSE)
elseif(TYPESHARD_WITH_CUDA STREQUAL "AUTO" AND (NOT PROJECT_IS_TOP_LEVEL OR TYPESHARD_SANITIZE))
  set(_ts_cuda_wanted FALSE)
  message(STATUS "typeshard: no typeshard::cuda (TYPESHARD_WITH_CUDA=AUTO: not looked for in a "
                 "subproject or a sanitizer build; set it ON)")
elseif(TYPESHARD_WITH_CUDA STREQUAL "ON" AND TYPESHARD_SANITIZE)
  message(FATAL_ERROR "typeshard: TYPESHARD_WITH_CUDA=ON cannot be combined with TYPESHARD_SANITIZE")
endif()
if(_ts_cuda_wanted)
  include(CheckLanguage)
  find_package(CUDAToolkit QUIET)
  check_language(CUDA)
  find_path(TYPESHARD_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(TYPESHARD_NCCL_LIBRARY NAMES nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  set(_ts_cuda_missing "")
  if(NOT CUDAToolkit_FOUND)
    list(APPEND _ts_cuda_missing "the CUDA toolkit (find_package(CUDAToolkit))")
  endif()
  if(NOT CMAKE_CUDA_COMPILER)
    list(APPEND _ts_cuda_missing "a CUDA compiler (nvcc on PATH or CMAKE_CUDA_COMPILER)")
  endif()
  if(NOT TYPESHARD_NCCL_INCLUDE_DIR OR NOT TYPESHARD_NCCL_LIBRARY)
    list(APPEND _ts_cuda_missing "NCCL (nccl.h and libnccl: set TYPESHARD_NCCL_INCLUDE_DIR and TYPESHARD_NCCL_LIBRARY)")
  endif()
  if(_ts_cuda_missing)
    if(TYPESHARD_WITH_CUDA STREQUAL "ON")
      message(FATAL_ERROR "typeshard: TYPESHARD_WITH_CUDA is ON but these were not found: ${_ts_cuda_missing}")
    endif()
    message(STATUS "typeshard: no typeshard::cuda (not found: ${_ts_cuda_missing})")
  else()
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # Hopper (H100/H200: the GPU checks' machines) as code and PTX; set it for other GPUs.
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    enable_language(CUDA)
    # NCCL as an imported target: the installed package defines the same name from the
    # library it finds on the consumer's machine (typeshardConfig.cmake).
    add_library(typeshard::nccl UNKNOWN IMPORTED)
    set_target_properties(typeshard::nccl PROPERTIES
      IMPORTED_LOCATION "${TYPESHARD_NCCL_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${TYPESHARD_NCCL_INCLUDE_DIR}")
    set(TYPESHARD_HAVE_CUDA TRUE)
    message(STATUS "typeshard: typeshard::cuda available (CUDA ${CUDAToolkit_VERSION}, "
                   "NCCL ${TYPESHARD_NCCL_LIBRARY}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
  endif()
endif()
