# The training example under mpirun against one process: one epoch on 2048 samples with 8
# devices in one process, and with 2 processes x 4 devices, must end with bit-identical
# parameters and optimiser state (the cross-process collectives sum device after device in
# global order, as one process does); then both resume from their checkpoints for a second epoch
# and must agree again. EXTRA: more options for every run (--sharded-update). PER_PROCESS:
# devices per process (default 4; the one process has twice as many): with 1, the processes'
# large collectives read each other's buffers directly (Transport's direct reads).
# cmake -DMPIEXEC=... -DNP_FLAG=-n -DEXAMPLE=... -DCOMPARE=... -DWORK_DIR=... [-DEXTRA=...]
#       [-DPER_PROCESS=...] -P run_training.cmake
# NP: processes (default 2). HOSTS: scripts/mpirun-hosts.sh, to run them one per test host
# (HOSTS_PREFIX, HOSTS_NET name the hosts) over TCP instead of on this host.
file(MAKE_DIRECTORY ${WORK_DIR})
if(NOT DEFINED PER_PROCESS)
  set(PER_PROCESS 4)
endif()
if(NOT DEFINED NP)
  set(NP 2)
endif()
math(EXPR total "${NP} * ${PER_PROCESS}")
if(DEFINED HOSTS)
  set(launch ${HOSTS} ${NP} ${HOSTS_PREFIX} ${HOSTS_NET} --)
else()
  set(launch ${MPIEXEC} ${NP_FLAG} ${NP} --allow-run-as-root --oversubscribe)
endif()
set(one ${WORK_DIR}/one_process.ckpt)
set(two ${WORK_DIR}/two_processes.ckpt)
# The example resumes from an existing checkpoint: start from none.
file(REMOVE ${one} ${two})
separate_arguments(extra UNIX_COMMAND "${EXTRA}")

foreach(epochs 1 2)
  set(args --epochs ${epochs} --train-limit 2048 --test-limit 1000 --no-progress ${extra})
  execute_process(COMMAND ${EXAMPLE} ${args} --devices ${total} --checkpoint ${one}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out TIMEOUT 100)
  message(STATUS "one process, ${total} devices, to epoch ${epochs} (exit status ${rc}):\n${out}")
  if(NOT rc EQUAL 0 OR NOT EXISTS ${one})
    message(FATAL_ERROR "the one-process run failed")
  endif()

  if(NOT DEFINED ASYNC)
    set(ASYNC "")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} -E env SPMD_CPU_DEVICES=${PER_PROCESS} ${ASYNC}
                          ${launch} ${EXAMPLE} ${args} --devices ${PER_PROCESS} --checkpoint ${two}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out TIMEOUT 100)
  message(STATUS "${NP} processes x ${PER_PROCESS} devices, to epoch ${epochs} (exit status ${rc}):\n${out}")
  if(NOT rc EQUAL 0 OR NOT EXISTS ${two})
    message(FATAL_ERROR "the run under mpirun failed")
  endif()
  if(epochs EQUAL 1 AND NOT out MATCHES "${total} devices? \\(${NP} processes\\)")
    message(FATAL_ERROR "the run under mpirun did not train on ${total} devices in ${NP} processes")
  endif()
  if(epochs EQUAL 2 AND NOT out MATCHES "resumed from [^\n]* after epoch 1")
    message(FATAL_ERROR "the run under mpirun did not resume from its checkpoint")
  endif()

  execute_process(COMMAND ${COMPARE} ${one} ${two} 0 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  message(STATUS "${out}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the checkpoints differ between one process and ${NP} after epoch ${epochs}")
  endif()
endforeach()
