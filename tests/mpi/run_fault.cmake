# Runs mpi_fault under mpirun and checks that the run fails fast with the right message in every
# surviving process. cmake -DMPIEXEC=... -DNP_FLAG=-n -DPROGRAM=... -DMODE=exit|stuck|mismatch|shapes -P run_fault.cmake
#   exit:     3 processes; process 1 calls std::exit(3) mid-run. Processes 0 and 2 must each print
#             an spmd::Error naming process 1, and mpirun must exit non-zero.
#   stuck:    the same, but process 1 stops answering instead: reported after the timeout.
#   exit_direct, stuck_direct: the same with a device per process and psums large enough to be
#             made by direct reads of the other processes' buffers.
#   mismatch: 3 processes; process 0 runs psum, 1 and 2 all_gather. Every process must print
#             "processes reached different collectives" instead of deadlocking.
#   shapes:   3 processes; process 0 runs psum of 1024 floats per device, 1 and 2 of 512: the same.
#   reductions, minmax, permutations, layouts: 3 processes; process 0 runs psum (pmax, ppermute
#             by +1, all_to_all splitting axis 0), 1 and 2 pmax (pmin, ppermute by -1, all_to_all
#             splitting axis 1) of the same buffers: the same, and each message names both.
#   groups:   3 processes; process 0 runs psum over adjacent pairs (axis_index_groups), 1 and 2
#             over the even and the odd devices: the same, naming both groupings.
#   finished: 3 processes; process 0's loop makes one psum, 1 and 2 two: every process must print
#             a "collective mismatch" (0 finished the program while 1 and 2 go on) within 15 s.
#   diverged: process 0 goes on to an all_gather where 1 and 2 make a second psum; elsewhere:
#             process 0 makes the same psum at another place in its program: the same as mismatch.
#   while:    2 processes of 1 device; a pmapped while_loop with trip count axis_index + 1 and a
#             psum per iteration: both print a "collective mismatch" within 15 s.
# SPMD_COLLECTIVE_TIMEOUT is 10 s; the whole run must end within 60 s.
set(np 3)
set(devices 2)
if(MODE STREQUAL "while")  # one device per process: only the processes can tell the mismatch
  set(np 2)
  set(devices 1)
endif()
set(fault ${MODE})
if(MODE MATCHES "_direct$")
  set(devices 1)
  string(REGEX REPLACE "_direct$" "" fault ${MODE})
endif()
string(TIMESTAMP start "%s")
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env SPMD_CPU_DEVICES=${devices} SPMD_COLLECTIVE_TIMEOUT=10
          ${MPIEXEC} ${NP_FLAG} ${np} --allow-run-as-root --oversubscribe ${PROGRAM} ${MODE}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
string(TIMESTAMP end "%s")
math(EXPR seconds "${end} - ${start}")
set(all "${out}\n${err}")
message(STATUS "mpirun (${MODE}) exit status: ${rc}, ${seconds} s; output:\n${all}")

if(rc MATCHES "timeout")
  message(FATAL_ERROR "the run did not end within 60 s (SPMD_COLLECTIVE_TIMEOUT=10): a hang")
endif()
if(rc EQUAL 0)
  message(FATAL_ERROR "mpirun exited with status 0; expected a failure")
endif()
if(all MATCHES "no error")
  message(FATAL_ERROR "a process finished without an error")
endif()
if(fault STREQUAL "exit" OR fault STREQUAL "stuck")
  if(NOT all MATCHES "process 1: (leaving|stuck)")
    message(FATAL_ERROR "process 1 did not reach its exit (the run failed before the fault)")
  endif()
  # An exit is announced, so the others report it at once ("lost process 1"); a process that
  # stops answering is reported when the collective timeout runs out ("process(es) 1").
  if(fault STREQUAL "exit")
    set(naming "lost process 1[^0-9]")
  else()
    set(naming "timed out after 10 s[^\n]* waiting for process\\(es\\) 1[^0-9]")
  endif()
  foreach(p 0 2)
    if(NOT all MATCHES "process ${p}: error: [^\n]*${naming}")
      message(FATAL_ERROR "process ${p} did not print an error naming process 1 (expected /${naming}/)")
    endif()
  endforeach()
elseif(MODE STREQUAL "while")
  # Device 0 (process 0) leaves the loop after one psum; device 1 (process 1) waits in its second.
  # Each process reports it, from what it saw or from the other's failure notice (timing).
  set(mismatch "(process 1 waits in psum\\([^\n]*call 2 of this run[^\n]* while process 0 finished the program|process 0 finished the program while process 1 waits in psum\\()")
  foreach(p 0 1)
    if(NOT all MATCHES "process ${p}: error: [^\n]*${mismatch}")
      message(FATAL_ERROR "process ${p} did not report process 1 waiting in its second psum after process 0 finished")
    endif()
  endforeach()
  if(seconds GREATER_EQUAL 15)
    message(FATAL_ERROR "the run took ${seconds} s; the mismatch must be found before the timeout (10 s)")
  endif()
elseif(MODE STREQUAL "finished")
  # Every process reports the mismatch: process 0 finished the program while the others go on to
  # a second psum (not a lost process, not a timeout: process 0 is still alive, sleeping 20 s
  # after its pmap). The programs make a fixed number of collectives, so the first psum's
  # headers already say so (each tells how many collectives follow it). A process reports it
  # from what it saw itself or relays the failure notice of the process that saw it first
  # ("process 2 failed (collective mismatch: ...)"): which process detects it first is timing.
  set(mismatch "process 0 finished the program after psum\\([^\n]* while process [12] goes on to 1 more collective")
  foreach(p 0 1 2)
    if(NOT all MATCHES "process ${p}: error: [^\n]*${mismatch}")
      message(FATAL_ERROR "process ${p} did not report that process 0 finished the program while the others go on")
    endif()
  endforeach()
  if(NOT all MATCHES "call 2 of this run")
    message(FATAL_ERROR "no process named the second psum (call 2) as the one the others go on to")
  endif()
  if(seconds GREATER_EQUAL 15)
    message(FATAL_ERROR "the run took ${seconds} s; the mismatch must be found before the timeout (10 s)")
  endif()
elseif(MODE MATCHES "^(mismatch|shapes|reductions|minmax|permutations|layouts|groups|diverged|elsewhere)$")
  foreach(p 0 1 2)
    if(NOT all MATCHES "process ${p}: error: [^\n]*processes reached different collectives")
      message(FATAL_ERROR "process ${p} did not report that the processes reached different collectives")
    endif()
  endforeach()
  # What each message must name: both collectives as the processes called them.
  if(MODE STREQUAL "reductions")
    set(names "psum\\(" "pmax\\(")
  elseif(MODE STREQUAL "minmax")
    set(names "pmax\\(" "pmin\\(")
  elseif(MODE STREQUAL "permutations")
    set(names "perm=\\(\\(0, 1\\)" "perm=\\(\\(0, 5\\)")
  elseif(MODE STREQUAL "groups")
    set(names "axis_index_groups={{0, 1}, {2, 3}, {4, 5}}" "axis_index_groups={{0, 2, 4}, {1, 3, 5}}")
  elseif(MODE STREQUAL "diverged")
    set(names "all_gather\\(" "psum\\(")
  elseif(MODE STREQUAL "elsewhere")
    set(names "psum\\([^\n]*at another place in the program than process")
  elseif(MODE STREQUAL "layouts")
    set(names "split_axis=0" "split_axis=1")
  else()
    set(names "")
  endif()
  foreach(p 0 1 2)
    foreach(name ${names})
      if(NOT all MATCHES "process ${p}: error: [^\n]*${name}")
        message(FATAL_ERROR "process ${p}'s error does not name /${name}/")
      endif()
    endforeach()
  endforeach()
else()
  message(FATAL_ERROR "unknown MODE '${MODE}'")
endif()
if(seconds GREATER_EQUAL 60)
  message(FATAL_ERROR "the run took ${seconds} s; expected well under 60 s")
endif()
