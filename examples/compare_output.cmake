# examples/compare_output.cmake: runs an example on the thread backend and its MPI copy
# under mpiexec, and fails unless both exit 0 and rank 0 printed exactly what the thread
# backend printed.
#   cmake -DMPIEXEC=... -DNP=N -DTHREADS=example_x -DMPI=example_mpi_x -DWORKDIR=dir -P this
# Both runs get the test's environment (examples/CMakeLists.txt sets what both must share,
# e.g. TYPESHARD_TUTORIAL_TIMED_SIZE). Lines with measured times ("ms", "GFLOP/s", "us")
# differ run to run: both sides drop them, and numbers below 1e-4 in scientific notation
# (rounding) are masked.
# Open MPI hands each rank a pseudo-terminal: NO_COLOR keeps visualize's boxes plain, as
# they are when the thread backend's output goes to a pipe.
set(ENV{NO_COLOR} 1)
file(REMOVE_RECURSE "${WORKDIR}")
file(MAKE_DIRECTORY "${WORKDIR}")
execute_process(COMMAND "${THREADS}" OUTPUT_VARIABLE threads_out RESULT_VARIABLE threads_rc)
if(NOT threads_rc EQUAL 0)
  message(FATAL_ERROR "thread backend run failed (${threads_rc}):\n${threads_out}")
endif()
# --output-filename: each rank's stdout in its own file (WORKDIR/1/rank.R/stdout).
execute_process(COMMAND "${MPIEXEC}" --allow-run-as-root --oversubscribe -np ${NP}
                        --output-filename "${WORKDIR}" -x NO_COLOR "${MPI}"
                RESULT_VARIABLE mpi_rc OUTPUT_QUIET)
if(NOT mpi_rc EQUAL 0)
  # Each rank's stderr went to its file: show them, as a plain mpiexec run would.
  file(GLOB_RECURSE rank_errors "${WORKDIR}/*/stderr")
  foreach(rank_error IN LISTS rank_errors)
    file(READ "${rank_error}" text)
    if(text)
      message("${rank_error}:\n${text}")
    endif()
  endforeach()
  message(FATAL_ERROR "mpiexec run failed (${mpi_rc})")
endif()
file(GLOB_RECURSE rank0 "${WORKDIR}/*/rank.0/stdout")
if(NOT rank0)
  message(FATAL_ERROR "no rank 0 output under ${WORKDIR}")
endif()
list(GET rank0 0 rank0)
file(READ "${rank0}" mpi_out)
function(drop_timings var)
  string(REGEX REPLACE "[^\n]*([0-9] ?ms|GFLOP/s|[0-9] ?us)[^\n]*\n" "" text "${${var}}")
  # Rounding-level numbers (reported differences from a serial run, like 1.7e-08) depend on
  # the order of a reduction, which differs between MPI and the thread pool.
  string(REGEX REPLACE "[0-9](\\.[0-9]+)?e-(0[5-9]|[1-9][0-9])" "(rounding)" text "${text}")
  set(${var} "${text}" PARENT_SCOPE)
endfunction()
drop_timings(threads_out)
drop_timings(mpi_out)
if(NOT threads_out STREQUAL mpi_out)
  file(WRITE "${WORKDIR}/threads.txt" "${threads_out}")
  file(WRITE "${WORKDIR}/mpi_rank0.txt" "${mpi_out}")
  execute_process(COMMAND diff -u "${WORKDIR}/threads.txt" "${WORKDIR}/mpi_rank0.txt")
  message(FATAL_ERROR "rank 0's output under mpiexec differs from the thread backend's")
endif()
message(STATUS "rank 0's output under mpiexec equals the thread backend's")
