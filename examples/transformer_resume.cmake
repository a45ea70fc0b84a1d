# examples/transformer_resume.cmake: the transformer example's checkpoints resume training
# exactly (issue 40). Runs examples/transformer.cpp four times:
#   1. STEPS steps on the 2 x 4 mesh uninterrupted, every loss written exactly (--losses);
#   2. STEPS/2 steps on 2 x 4 that save a checkpoint (parameters, Adam's moments, the step,
#      the data generator's state) at STEPS/4 and at the end (--save, --save-every);
#   3. resumed from it to STEPS on 2 x 4: every loss bitwise equal to run 1's;
#   4. resumed from it to STEPS on the 2 x 2 mesh: every loss within 1e-5 relative of run 1's.
# Not bitwise across meshes: on 2 x 2 each device's GEMMs have other extents (another blocking)
# and the all-reduces over "model" add 2 partial sums instead of 4, so float rounding differs
# from the first step on (a whole 2 x 2 run is ~7e-7 from the 2 x 4 run after 20 steps, a
# resumed one ~2e-7 after 10): 1e-5 is rounding grown by training, while a state restored
# wrong (a moment, the step count, the batches) changes the losses from the second decimal.
#   cmake -DEXAMPLE=example_transformer -DSTEPS=20 -DWORKDIR=dir -P this
# With -DMPIEXEC=mpiexec -DMPI=example_mpi_transformer, across backends: run 2 saves on 8 MPI
# ranks, run 3 resumes on the thread pool and run 4 on 4 MPI ranks (2 x 2), both within 1e-5
# (MPI's all-reduces sum in another order than the thread pool's: not bitwise either).
file(REMOVE_RECURSE "${WORKDIR}")
file(MAKE_DIRECTORY "${WORKDIR}")
math(EXPR half "${STEPS} / 2")
math(EXPR quarter "${STEPS} / 4")
set(threads "${EXAMPLE}")
set(same_mesh_tolerance 0)
if(MPIEXEC)
  set(launch "${MPIEXEC}" --allow-run-as-root --oversubscribe)
  set(saver ${launch} -np 8 "${MPI}")
  set(resumer_2x2 ${launch} -np 4 "${MPI}")
  set(same_mesh_tolerance 1e-5)
else()
  set(saver "${EXAMPLE}")
  set(resumer_2x2 "${EXAMPLE}")
endif()
function(run what)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY "${WORKDIR}"
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  string(REGEX MATCH "losses of steps [^\n]*" compared "${out}")
  message(STATUS "${what}: ok ${compared}")
endfunction()
run("uninterrupted run" ${threads} --steps ${STEPS} --losses full.txt)
run("run saving at ${quarter} and ${half}" ${saver} --steps ${half} --save ckpt
    --save-every ${quarter})
if(NOT EXISTS "${WORKDIR}/ckpt/${quarter}/index.json" OR
   NOT EXISTS "${WORKDIR}/ckpt/${half}/index.json")
  message(FATAL_ERROR "no checkpoints at steps ${quarter} and ${half} under ${WORKDIR}/ckpt")
endif()
run("resumed on 2x4" ${threads} --resume ckpt --steps ${STEPS} --check-losses full.txt
    --tolerance ${same_mesh_tolerance})
run("resumed on 2x2" ${resumer_2x2} --resume ckpt --steps ${STEPS} --mesh 2x2
    --check-losses full.txt --tolerance 1e-5)
