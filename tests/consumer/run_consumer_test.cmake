# Installs Symphony into a scratch prefix, then builds and runs a consumer
# project that finds it with find_package(symphony).
# Inputs: SOURCE_DIR, WORK_DIR, GENERATOR, CXX, and where the outer build
# found its dependencies: PREFIX_PATH ('|'-separated), MOODYCAMEL_INCLUDE.
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
endfunction()

string(REPLACE "|" ";" prefix_path "${PREFIX_PATH}")
step("configuring symphony" ${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${WORK_DIR}/symphony" -G "${GENERATOR}"
  "-DCMAKE_PREFIX_PATH=${prefix_path}" "-DSYMPHONY_MOODYCAMEL_INCLUDE=${MOODYCAMEL_INCLUDE}" -DSYMPHONY_WITH_CUDA=OFF
  -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_INSTALL_PREFIX=${prefix} -DCMAKE_BUILD_TYPE=Release
  -DSYMPHONY_BUILD_TESTS=OFF -DSYMPHONY_BUILD_BENCH=OFF -DSYMPHONY_BUILD_TOOLS=OFF
  -DSYMPHONY_BUILD_SERVER=OFF -DSYMPHONY_BUILD_PYTHON=OFF)
step("installing symphony" ${CMAKE_COMMAND} --install "${WORK_DIR}/symphony")
step("configuring the consumer" ${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/consumer" -B "${WORK_DIR}/consumer"
  -G "${GENERATOR}" -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_PREFIX_PATH=${prefix})
step("building the consumer" ${CMAKE_COMMAND} --build "${WORK_DIR}/consumer")
step("running the consumer" "${WORK_DIR}/consumer/consumer")
message(STATUS "find_package(symphony) consumer built and ran against ${prefix}")
