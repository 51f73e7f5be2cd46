# The CMake build embeds templates/ with cmake/embed_templates.c, setup.py with
# tools/embed_templates.py: both must write the same file, byte for byte (its bundle hash is part of
# every kernel cache key, so the Python extension and libcufunc share cache entries). Run by ctest
# as test_embed_templates_agree:
#   cmake -DPYTHON=... -DSOURCE_DIR=... -DGENERATED=<the build's file> -DWORK=<dir> -P check_embed.cmake
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
execute_process(COMMAND ${PYTHON} ${SOURCE_DIR}/tools/embed_templates.py ${SOURCE_DIR}/templates
                        ${WORK}/from_python.c RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tools/embed_templates.py failed (${rc})")
endif()
file(SHA256 ${WORK}/from_python.c want)
file(SHA256 ${GENERATED} got)
if(NOT want STREQUAL got)
  message(FATAL_ERROR "${GENERATED} (cmake/embed_templates.c) differs from what "
                      "tools/embed_templates.py writes (${WORK}/from_python.c)")
endif()
message(STATUS "both embedders wrote the same file (sha256 ${got})")
