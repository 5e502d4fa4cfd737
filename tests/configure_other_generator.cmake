# Configures and generates the whole tree with a second generator: the presets
# use Ninja, while a plain `cmake -S . -B build` uses Unix Makefiles, and the two
# do not accept the same things (gpu/CMakeLists.txt once failed to generate with
# Makefiles wherever the CUDA toolkit was found). Nothing is built.
# Inputs: SOURCE_DIR, WORK_DIR, GENERATOR, PYTHON, PREFIX_PATH ('|'-separated).
file(REMOVE_RECURSE "${WORK_DIR}")
string(REPLACE "|" ":" prefix_path "${PREFIX_PATH}")
set(ENV{CMAKE_PREFIX_PATH} "${prefix_path}")
set(python_arg "")
if(PYTHON)
  set(python_arg "-DPython_EXECUTABLE=${PYTHON}")
endif()
execute_process(
  COMMAND ${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${WORK_DIR}" -G "${GENERATOR}" -DCMAKE_BUILD_TYPE=Release ${python_arg}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring with ${GENERATOR} failed (${rc}):\n${out}\n${err}")
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
message(STATUS "the tree configures and generates with ${GENERATOR}")
