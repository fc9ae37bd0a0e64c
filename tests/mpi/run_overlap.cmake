# Runs mpi_overlap on 2 processes x 1 device with the all-reduces asynchronous and a timeline,
# and checks in each process's trace that the psum ran on the device's communication track
# while the device was computing: some of the psum's span is not covered by the device waiting
# for it (its "collective wait" spans).
# cmake -DMPIEXEC=... -DNP_FLAG=-n -DPROGRAM=... -DPYTHON=... -DWORK_DIR=... -P run_overlap.cmake
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env SPMD_CPU_DEVICES=1 SPMD_COLLECTIVE_TIMEOUT=30
          SPMD_ASYNC_COLLECTIVES=1 SPMD_TRACE=${WORK_DIR}/trace.json
          ${MPIEXEC} ${NP_FLAG} 2 --allow-run-as-root --oversubscribe ${PROGRAM}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 100)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mpirun exited with status ${rc}:\n${out}\n${err}")
endif()
set(check [=[
import json, sys
for path in sys.argv[1:]:
    events = [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X"]
    comm = [e for e in events if e["name"] == "collective" and e["tid"] >= 1000]
    waits = [e for e in events if e["name"] == "collective wait" and 0 <= e["tid"] < 1000]
    if not comm:
        sys.exit(path + ": no collective on a communication track")
    # Time of the psums not covered by the device waiting for them: the overlap.
    overlap = 0.0
    for c in comm:
        s, e = c["ts"], c["ts"] + c["dur"]
        covered = sum(max(0, min(e, w["ts"] + w["dur"]) - max(s, w["ts"])) for w in waits)
        overlap += c["dur"] - covered
    total = sum(c["dur"] for c in comm)
    print("%s: %d psums on the communication track, %.0f us of %.0f us overlapped" %
          (path, len(comm), overlap, total))
    if overlap < 0.2 * total:
        sys.exit(path + ": the psums hardly overlapped the device's work")
]=])
execute_process(COMMAND ${PYTHON} -c "${check}" ${WORK_DIR}/trace.p0.json ${WORK_DIR}/trace.p1.json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${out}${err}")
endif()
