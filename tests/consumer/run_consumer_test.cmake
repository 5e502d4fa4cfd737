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

# Through the environment (':'-separated): a ';' list would not survive step()'s ARGN.
string(REPLACE "|" ":" prefix_path "${PREFIX_PATH}")
set(ENV{CMAKE_PREFIX_PATH} "${prefix_path}")
step("configuring symphony" ${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${WORK_DIR}/symphony" -G "${GENERATOR}"
  "-DConcurrentQueue_INCLUDE_DIR=${MOODYCAMEL_INCLUDE}" -DSYMPHONY_WITH_CUDA=OFF
  -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_INSTALL_PREFIX=${prefix} -DCMAKE_BUILD_TYPE=Release
  -DSYMPHONY_BUILD_TESTS=OFF -DSYMPHONY_BUILD_BENCH=OFF -DSYMPHONY_BUILD_TOOLS=OFF
  -DSYMPHONY_BUILD_SERVER=OFF -DSYMPHONY_BUILD_PYTHON=OFF)
step("installing symphony" ${CMAKE_COMMAND} --install "${WORK_DIR}/symphony")
# The core alone: moodycamel's queues must not be needed (the Find module is
# disabled for this consumer).
step("configuring the core consumer" ${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/consumer" -B "${WORK_DIR}/consumer"
  -G "${GENERATOR}" -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_PREFIX_PATH=${prefix}
  -DCMAKE_DISABLE_FIND_PACKAGE_ConcurrentQueue=ON)
step("building the core consumer" ${CMAKE_COMMAND} --build "${WORK_DIR}/consumer")
step("running the core consumer" "${WORK_DIR}/consumer/consumer")
# The runtime component: find_package finds moodycamel for the consumer.
step("configuring the runtime consumer" ${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/consumer"
  -B "${WORK_DIR}/runtime_consumer" -G "${GENERATOR}" -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_PREFIX_PATH=${prefix}
  -DWITH_RUNTIME=ON)
step("building the runtime consumer" ${CMAKE_COMMAND} --build "${WORK_DIR}/runtime_consumer")
step("running the runtime consumer" "${WORK_DIR}/runtime_consumer/consumer")
message(STATUS "find_package(symphony) consumers (core; COMPONENTS runtime) built and ran against ${prefix}")
