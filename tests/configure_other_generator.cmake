# Configures and generates the whole tree as a plain `cmake -S . -B build` would,
# with the generator the presets do not use: the presets pick Ninja and
# /usr/bin/python3, a plain configure Unix Makefiles and the first python3 on
# PATH, and each once broke (gpu/CMakeLists.txt did not generate with Makefiles
# where the CUDA toolkit was found; a python3 without torch could not write the
# test models). Nothing is built.
# Inputs: SOURCE_DIR, WORK_DIR, GENERATOR, PREFIX_PATH ('|'-separated).
file(REMOVE_RECURSE "${WORK_DIR}")
string(REPLACE "|" ":" prefix_path "${PREFIX_PATH}")
set(ENV{CMAKE_PREFIX_PATH} "${prefix_path}")
execute_process(
  COMMAND ${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${WORK_DIR}" -G "${GENERATOR}" -DCMAKE_BUILD_TYPE=Release
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring with ${GENERATOR} failed (${rc}):\n${out}\n${err}")
endif()
# Where libtorch was found, the interpreter chosen for the test models imports torch.
load_cache("${WORK_DIR}" READ_WITH_PREFIX cached_ SYMPHONY_TORCH_PYTHON)
if(cached_SYMPHONY_TORCH_PYTHON)
  execute_process(COMMAND "${cached_SYMPHONY_TORCH_PYTHON}" -c "import torch" RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the test models would be written with ${cached_SYMPHONY_TORCH_PYTHON}, which cannot import torch:\n${err}")
  endif()
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
message(STATUS "the tree configures and generates with ${GENERATOR}; test models with '${cached_SYMPHONY_TORCH_PYTHON}'")
