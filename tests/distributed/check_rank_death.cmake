# Runs mpi_rank_death_worker under mpirun with 2 ranks and checks that a rank dying mid-step ends the
# job within a bounded time with a clear message, instead of leaving the other rank hanging.
# cmake "-DMPIRUN=mpirun;-np;2;..." -DWORKER=<program> -DBOUND=<seconds> -P check_rank_death.cmake
string(TIMESTAMP start "%s" UTC)
# The hard limit kills a hung job (then the check fails): twice the bound.
math(EXPR hard_limit "${BOUND} * 2")
execute_process(COMMAND ${MPIRUN} ${WORKER}
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE out TIMEOUT ${hard_limit})
string(TIMESTAMP end "%s" UTC)
math(EXPR seconds "${end} - ${start}")
message("${out}")
message("mpirun exit status: ${status}, after ${seconds} s (bound ${BOUND} s)")
if(status EQUAL 0 OR NOT status MATCHES "^[0-9]+$")
  message(FATAL_ERROR "the job did not fail with an exit status after a rank died (status: ${status})")
endif()
if(seconds GREATER ${BOUND})
  message(FATAL_ERROR "the job took ${seconds} s to end after a rank died (bound ${BOUND} s)")
endif()
if(NOT out MATCHES "rank 1: dying in step 2")
  message(FATAL_ERROR "the worker did not reach the step in which rank 1 dies")
endif()
if(out MATCHES "rank 0: step 2 done")
  message(FATAL_ERROR "rank 0 finished a step that rank 1 never joined")
endif()
# Either the launcher reports the dead rank (Open MPI: "... exited on signal 9"), or rank 0's
# reducer reports its deadline; both name what happened.
if(NOT out MATCHES "rank 1 with PID [0-9]+ on node [^ ]+ exited on signal 9|timed out on rank 0 after 20 s")
  message(FATAL_ERROR "no message saying that rank 1 died or that rank 0 timed out")
endif()
