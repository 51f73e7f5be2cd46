# test_install_consumer (ctest): libcufunc as a C user gets it.
#   1. configure and build cufunc with Python hidden: CMAKE_DISABLE_FIND_PACKAGE_Python3/Python and
#      a `python3`/`python` first on PATH that fails loudly, so that any use of Python by the
#      build fails this test (tests, benchmarks and examples configured; the libraries and the
#      examples built);
#   2. install into a temporary prefix and check what is there (and that what internal/ declares
#      is not: neither its headers, nor a declaration in the installed ones, nor an export);
#   3. build tests/install_consumer against the installed package with find_package (shared and
#      static) and with pkg-config, examples/ with find_package, and docs/C_API.md's first
#      program, as written, with pkg-config;
#   4. run the consumers and the ahead-of-time example: they compile kernels with NVRTC and need
#      no GPU (with one they also launch).
# Arguments: SOURCE_DIR, WORK (wiped), GENERATOR, C_COMPILER, PKG_CONFIG, CUDA_INCLUDE_DIR,
# CUDA_NVRTC_INCLUDE_DIR, NM (optional: the exports checked).
cmake_minimum_required(VERSION 3.18)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/nopython ${WORK}/tmp)
set(prefix ${WORK}/prefix)

foreach(py python3 python)
  file(WRITE ${WORK}/tmp/${py} "#!/bin/sh\necho \"the build ran ${py} $*: libcufunc must build without Python\" >&2\nexit 97\n")
  file(COPY ${WORK}/tmp/${py} DESTINATION ${WORK}/nopython
       FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
endforeach()
set(no_python_env ${CMAKE_COMMAND} -E env "PATH=${WORK}/nopython:$ENV{PATH}")

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(step_output "${out}${err}" PARENT_SCOPE)
  message(STATUS "${what}: ok")
endfunction()

# A program's run: exit 0 and its last line "<name>: ok".
function(run_program name)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env CUFUNC_CACHE_DIR=${WORK}/cache ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "${name}: ok")
    message(FATAL_ERROR "${ARGN}: exit ${rc}\n${out}\n${err}")
  endif()
  message(STATUS "ran ${name}:\n${out}")
endfunction()

set(gen -G "${GENERATOR}")
step("configure with Python hidden" ${no_python_env} ${CMAKE_COMMAND} -S ${SOURCE_DIR}
     -B ${WORK}/build ${gen} -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=${C_COMPILER}
     -DCMAKE_INSTALL_PREFIX=${prefix} -DCMAKE_DISABLE_FIND_PACKAGE_Python3=ON
     -DCMAKE_DISABLE_FIND_PACKAGE_Python=ON -DCUDA_INCLUDE_DIR=${CUDA_INCLUDE_DIR}
     -DCUDA_NVRTC_INCLUDE_DIR=${CUDA_NVRTC_INCLUDE_DIR}
     -DCUFUNC_BUILD_TESTS=ON -DCUFUNC_BUILD_BENCH=ON -DCUFUNC_BUILD_EXAMPLES=ON)
file(STRINGS ${WORK}/build/CMakeCache.txt py_entries REGEX "^Python[0-9]*_EXECUTABLE:.*python")
if(py_entries)
  message(FATAL_ERROR "the cache names a Python interpreter: ${py_entries}")
endif()
# Everything is configured (tests, benchmarks, examples); the libraries and the examples are built
# (the tests and benchmarks are plain C programs: the main build compiles them).
file(GLOB example_sources RELATIVE ${SOURCE_DIR}/examples ${SOURCE_DIR}/examples/*.c)
set(targets cufunc cufunc_static)
foreach(ex ${example_sources})
  string(REGEX REPLACE "\\.c$" "" ex ${ex})
  list(APPEND targets example_${ex})
endforeach()
step("build with Python hidden" ${no_python_env} ${CMAKE_COMMAND} --build ${WORK}/build -j 2
     --target ${targets})
step("install" ${CMAKE_COMMAND} --install ${WORK}/build)

# the library folder is the build's CMAKE_INSTALL_LIBDIR (lib, lib64, ...): find it
file(GLOB_RECURSE found ${prefix}/libcufunc.so)
if(NOT found)
  message(FATAL_ERROR "not installed: libcufunc.so under ${prefix}")
endif()
list(GET found 0 found)
get_filename_component(lib ${found} DIRECTORY)
foreach(f ${lib}/libcufunc.so ${lib}/libcufunc.a include/cufunc/cufunc.h include/cufunc/ufunc.h
          include/cufunc/runtime.cuh ${lib}/cmake/cufunc/cufuncConfig.cmake
          ${lib}/cmake/cufunc/cufuncConfigVersion.cmake ${lib}/cmake/cufunc/cufuncTargets.cmake
          ${lib}/pkgconfig/cufunc.pc)
  if(NOT IS_ABSOLUTE ${f})
    set(f ${prefix}/${f})
  endif()
  if(NOT EXISTS ${f})
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()
# What the core offers only the binding and the tests (internal/, marked CF_INTERNAL): no
# installed header declares it, the installed library exports none of it.
file(GLOB internal_headers ${SOURCE_DIR}/internal/*.h)
set(internal_names)
foreach(h ${internal_headers})
  get_filename_component(hname ${h} NAME)
  if(EXISTS ${prefix}/include/cufunc/${hname})
    message(FATAL_ERROR "internal/${hname} was installed as public API")
  endif()
  file(STRINGS ${h} decls REGEX "^CF_INTERNAL ")
  foreach(d ${decls})
    if(d MATCHES "(cf_[a-z0-9_]+)\\(")
      list(APPEND internal_names ${CMAKE_MATCH_1})
    endif()
  endforeach()
endforeach()
if(NOT internal_names)
  message(FATAL_ERROR "no CF_INTERNAL declaration found in ${SOURCE_DIR}/internal")
endif()
file(GLOB installed_headers ${prefix}/include/cufunc/*.h)
foreach(h ${installed_headers})
  file(READ ${h} text)
  foreach(n ${internal_names})
    if(text MATCHES "[^a-z0-9_]${n} *\\(")
      message(FATAL_ERROR "${h} declares ${n}, which internal/ declares for the binding and the tests")
    endif()
  endforeach()
endforeach()
if(NM)
  step("list the library's exports" ${NM} -D --defined-only ${lib}/libcufunc.so)
  if(NOT step_output MATCHES "[ \n]cf_init\n") # the listing is what it should be
    message(FATAL_ERROR "libcufunc.so's exports as nm lists them lack cf_init:\n${step_output}")
  endif()
  foreach(n ${internal_names})
    if(step_output MATCHES "[ \n]${n}\n")
      message(FATAL_ERROR "libcufunc.so exports ${n}, which internal/ declares (CF_INTERNAL)")
    endif()
  endforeach()
  list(LENGTH internal_names n_internal)
  message(STATUS "${n_internal} internal functions: not declared by the installed headers, not exported")
endif()

# find_package: the consumer (shared and static), and the examples as an outside project.
step("configure the consumer (find_package)" ${CMAKE_COMMAND}
     -S ${SOURCE_DIR}/tests/install_consumer -B ${WORK}/consumer ${gen}
     -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_PREFIX_PATH=${prefix})
step("build the consumer" ${CMAKE_COMMAND} --build ${WORK}/consumer -j 2)
step("configure the examples against the install" ${CMAKE_COMMAND}
     -S ${SOURCE_DIR}/examples -B ${WORK}/examples ${gen}
     -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_PREFIX_PATH=${prefix})
step("build the examples" ${CMAKE_COMMAND} --build ${WORK}/examples -j 2)

# pkg-config
if(PKG_CONFIG)
  set(pc_env ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${lib}/pkgconfig)
  step("pkg-config --modversion" ${pc_env} ${PKG_CONFIG} --modversion cufunc)
  step("pkg-config --cflags --libs" ${pc_env} ${PKG_CONFIG} --cflags --libs cufunc)
  separate_arguments(pc_flags UNIX_COMMAND "${step_output}")
  step("build the consumer with pkg-config's flags" ${C_COMPILER}
       ${SOURCE_DIR}/tests/install_consumer/consumer.c ${pc_flags} -Wl,-rpath,${lib}
       -o ${WORK}/consumer_pkgconfig)
  # docs/C_API.md's first program builds as written
  file(READ ${SOURCE_DIR}/docs/C_API.md doc)
  string(FIND "${doc}" "## A first program" at)
  string(SUBSTRING "${doc}" ${at} -1 doc)
  string(FIND "${doc}" "```c\n" begin)
  string(FIND "${doc}" "\n```\n" end)
  math(EXPR begin "${begin} + 5")
  math(EXPR len "${end} - ${begin} + 1")
  string(SUBSTRING "${doc}" ${begin} ${len} first_program)
  file(WRITE ${WORK}/first_program.c "${first_program}")
  step("build docs/C_API.md's first program" ${C_COMPILER} -Wall -Werror ${WORK}/first_program.c
       ${pc_flags} -Wl,-rpath,${lib} -o ${WORK}/first_program)
else()
  message(WARNING "pkg-config not found: cufunc.pc not checked")
endif()

run_program(consumer ${WORK}/consumer/consumer)
if(EXISTS ${WORK}/consumer/consumer_static)
  run_program(consumer ${WORK}/consumer/consumer_static)
else()
  message(FATAL_ERROR "cufunc::cufunc_static was not built from the installed package")
endif()
if(PKG_CONFIG)
  run_program(consumer ${WORK}/consumer_pkgconfig)
endif()
run_program(aot_compile ${WORK}/examples/example_aot_compile)
