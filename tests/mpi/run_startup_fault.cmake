# A start-up that fails in one process only (an invalid SPMD_SHARED_HEAP in process 1's
# environment): process 1 reports its setting, process 0 stops with "process 1 failed during
# start-up" and that reason instead of waiting in MPI, and the run ends within 30 s
# (SPMD_COLLECTIVE_TIMEOUT is 60: the notice, not the timeout, ends it).
# cmake -DMPIEXEC=... -DNP_FLAG=-n -DPROGRAM=... -P run_startup_fault.cmake
string(TIMESTAMP start "%s")
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env SPMD_CPU_DEVICES=2 SPMD_COLLECTIVE_TIMEOUT=60
          ${MPIEXEC} --allow-run-as-root --oversubscribe ${NP_FLAG} 1 ${PROGRAM} finished
          : ${NP_FLAG} 1 -x SPMD_SHARED_HEAP=banana ${PROGRAM} finished
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 50)
string(TIMESTAMP end "%s")
math(EXPR seconds "${end} - ${start}")
set(all "${out}\n${err}")
message(STATUS "mpirun exit status: ${rc}, ${seconds} s; output:\n${all}")
if(rc EQUAL 0 OR rc MATCHES "timeout")
  message(FATAL_ERROR "expected a failed run, got exit status ${rc}")
endif()
if(NOT all MATCHES "SPMD_SHARED_HEAP: expected [^\n]*got 'banana'")
  message(FATAL_ERROR "process 1 did not name its bad setting")
endif()
if(NOT all MATCHES "process 1 failed during start-up \\(SPMD_SHARED_HEAP")
  message(FATAL_ERROR "process 0 did not report process 1's start-up failure")
endif()
if(seconds GREATER 30)
  message(FATAL_ERROR "the run took ${seconds} s; the failure notice must end it at once")
endif()
