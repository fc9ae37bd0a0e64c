# Run by the ctest test install_outside_project:
#   cmake -DSOURCE_DIR=<repo> -DBUILD_DIR=<build> -DWORK_DIR=<scratch> -P check.cmake
# Installs the built library into WORK_DIR/prefix, configures and builds tests/install_project
# against that prefix only (find_package(spmd CONFIG REQUIRED)), and runs the program. Any failing
# step stops with FATAL_ERROR and its output.
foreach(var SOURCE_DIR BUILD_DIR WORK_DIR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "check.cmake: expected -D${var}=<path>, got nothing")
  endif()
endforeach()

set(prefix ${WORK_DIR}/prefix)
set(app_build ${WORK_DIR}/build)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

function(run_step name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install check: ${name} failed (exit status ${rc}):\n${out}")
  endif()
  message(STATUS "install check: ${name}: ok")
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

run_step("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

# Only the prefix may provide spmd: not the build tree's package registry, nor the environment.
run_step("configure the outside project"
         ${CMAKE_COMMAND} -E env --unset=spmd_DIR --unset=CMAKE_PREFIX_PATH
         ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install_project -B ${app_build}
         -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release
         -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)

file(STRINGS ${app_build}/CMakeCache.txt spmd_dir_line REGEX "^spmd_DIR:")
string(REGEX REPLACE "^spmd_DIR:[A-Z]+=" "" spmd_dir "${spmd_dir_line}")
file(REAL_PATH "${spmd_dir}" spmd_dir)
file(REAL_PATH "${prefix}" real_prefix)
string(FIND "${spmd_dir}" "${real_prefix}/" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "install check: expected spmd to be found in ${real_prefix}, got '${spmd_dir}'")
endif()

run_step("build the outside project" ${CMAKE_COMMAND} --build ${app_build})

# The program finds libspmd.so in the prefix through the build tree's RPATH; a stale
# LD_LIBRARY_PATH must not stand in for it.
run_step("run the outside project" ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH ${app_build}/app)
message(STATUS "install check: program output:\n${step_output}")
