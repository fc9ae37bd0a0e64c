# The training example under mpirun against one process: one epoch on 2048 samples with 8
# devices in one process, and with 2 processes x 4 devices, must end with the same parameters
# (relative 1e-5). cmake -DMPIEXEC=... -DNP_FLAG=-n -DEXAMPLE=... -DCOMPARE=... -DWORK_DIR=... -P run_training.cmake
file(MAKE_DIRECTORY ${WORK_DIR})
set(one ${WORK_DIR}/one_process.ckpt)
set(two ${WORK_DIR}/two_processes.ckpt)
# The example resumes from an existing checkpoint: start from none.
file(REMOVE ${one} ${two})
set(args --epochs 1 --train-limit 2048 --test-limit 1000 --no-progress)

execute_process(COMMAND ${EXAMPLE} ${args} --devices 8 --checkpoint ${one}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out TIMEOUT 100)
message(STATUS "one process, 8 devices (exit status ${rc}):\n${out}")
if(NOT rc EQUAL 0 OR NOT EXISTS ${one})
  message(FATAL_ERROR "the one-process run failed")
endif()

execute_process(COMMAND ${CMAKE_COMMAND} -E env SPMD_CPU_DEVICES=4
                        ${MPIEXEC} ${NP_FLAG} 2 --allow-run-as-root --oversubscribe
                        ${EXAMPLE} ${args} --devices 4 --checkpoint ${two}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out TIMEOUT 100)
message(STATUS "2 processes x 4 devices (exit status ${rc}):\n${out}")
if(NOT rc EQUAL 0 OR NOT EXISTS ${two})
  message(FATAL_ERROR "the run under mpirun failed")
endif()
if(NOT out MATCHES "8 devices \\(2 processes\\)")
  message(FATAL_ERROR "the run under mpirun did not train on 8 devices in 2 processes")
endif()

execute_process(COMMAND ${COMPARE} ${one} ${two} 1e-5 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message(STATUS "${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the parameters differ between one process and two")
endif()
