# tests/mpi/expect_abort.cmake: runs an MPI program that must fail, and checks how it fails.
#
#   cmake -DMPIEXEC=<mpiexec> -DNP=<ranks> -DPROGRAM=<exe> -DEXPECT=<regex> -P expect_abort.cmake
#
# Passes when the job exits non-zero and its output (stdout and stderr) matches EXPECT.
# A hang is a failure too: CTest's TIMEOUT stops it. (PASS_REGULAR_EXPRESSION alone would
# ignore the exit status.)
execute_process(
  COMMAND "${MPIEXEC}" --allow-run-as-root --oversubscribe -np ${NP} "${PROGRAM}"
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE out
  ERROR_VARIABLE out)
message("${out}")
if(rc EQUAL 0)
  message(FATAL_ERROR "expect_abort: ${PROGRAM} with ${NP} ranks exited with 0; it must fail")
endif()
if(NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "expect_abort: the output of ${PROGRAM} does not match: ${EXPECT}")
endif()
message(STATUS "expect_abort: failed as expected (exit status ${rc})")
