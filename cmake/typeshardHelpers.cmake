# typeshardHelpers.cmake: functions shared by typeshard's own tests, examples and benchmarks.
# Not installed: consumers of the package never see these.

include_guard(GLOBAL)

# typeshard_strict_warnings(<target> [NO_WERROR])
#   Our own test/example/benchmark targets build with -Wall -Wextra -Wpedantic, plus -Werror
#   with TYPESHARD_WERROR (never the INTERFACE target: users choose their own warnings).
#   NO_WERROR keeps the warnings but not -Werror: the compile-fail targets need it, or a
#   warning turned error could become the "first error:" line the harness reads.
function(typeshard_strict_warnings target)
  set(werror "")
  if(TYPESHARD_WERROR AND NOT "NO_WERROR" IN_LIST ARGN)
    set(werror -Werror)
  endif()
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic ${werror})
  elseif(MSVC)
    if(werror)
      set(werror /WX)
    endif()
    target_compile_options(${target} PRIVATE /W4 ${werror})
  endif()
endfunction()

# typeshard_use_library(<target> [<scope>])
#   Link typeshard::typeshard, plus typeshard::blas when the build has it, plus
#   typeshard::runtime when TYPESHARD_USE_RUNTIME is on.
function(typeshard_use_library target)
  set(scope PRIVATE)
  if(ARGC GREATER 1)
    set(scope ${ARGV1})
  endif()
  target_link_libraries(${target} ${scope} typeshard::typeshard)
  if(TARGET typeshard::blas)
    target_link_libraries(${target} ${scope} typeshard::blas)
  endif()
  if(TYPESHARD_USE_RUNTIME)
    target_link_libraries(${target} ${scope} typeshard::runtime)
  endif()
endfunction()

# typeshard_test_kind_enabled(<kind> <out_var>)
#   TRUE when <kind> is in TYPESHARD_TEST_KINDS (unit static compile_fail headers example
#   package mpi).
function(typeshard_test_kind_enabled kind out_var)
  if(kind IN_LIST TYPESHARD_TEST_KINDS)
    set(${out_var} TRUE PARENT_SCOPE)
  else()
    set(${out_var} FALSE PARENT_SCOPE)
  endif()
endfunction()
