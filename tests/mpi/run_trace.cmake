# Runs mpi_trace on 2 processes x 2 devices with SPMD_TRACE=<dir>/trace.json and checks that each
# process wrote its own timeline (trace.p0.json, trace.p1.json) with its process index as pid,
# its devices under their global ids, and the waits for the other process's messages.
# cmake -DMPIEXEC=... -DNP_FLAG=-n -DPROGRAM=... -DWORK_DIR=... -P run_trace.cmake
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env SPMD_CPU_DEVICES=2 SPMD_COLLECTIVE_TIMEOUT=30
          SPMD_TRACE=${WORK_DIR}/trace.json
          ${MPIEXEC} ${NP_FLAG} 2 --allow-run-as-root --oversubscribe ${PROGRAM}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 100)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mpirun exited with status ${rc}:\n${out}\n${err}")
endif()
if(EXISTS ${WORK_DIR}/trace.json)
  message(FATAL_ERROR "trace.json was written: the processes would overwrite each other's")
endif()
foreach(p 0 1)
  set(path ${WORK_DIR}/trace.p${p}.json)
  if(NOT EXISTS ${path})
    message(FATAL_ERROR "process ${p} wrote no ${path}")
  endif()
  file(READ ${path} json)
  foreach(what "\"name\":\"compute\",\"ph\":\"X\",\"pid\":${p}," "\"name\":\"exchange wait\""
          "\"displayTimeUnit\"")
    string(FIND "${json}" "${what}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "${path} has no ${what}:\n${json}")
    endif()
  endforeach()
  math(EXPR first "2 * ${p}")
  math(EXPR second "2 * ${p} + 1")
  foreach(id ${first} ${second})
    string(FIND "${json}" "\"name\":\"CpuDevice(id=${id})\"" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "${path} names no track CpuDevice(id=${id})")
    endif()
  endforeach()
endforeach()
