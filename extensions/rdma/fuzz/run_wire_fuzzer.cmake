# CTest driver of the wire-protocol fuzzer: compiles wire_fuzzer.cc and
# wire.cc with clang++ -fsanitize=fuzzer,address,undefined, writes a small
# seed corpus of valid messages (made by the wire_seeds tool), and runs a
# bounded fuzzing session. Skips (with a message CTest recognises) where no
# clang++ with libFuzzer is installed.
#
#   cmake -DCLANGXX=/usr/bin/clang++-14 -DSOURCE_DIR=<repo> -DWORK_DIR=<dir>
#         -DSEEDS=<wire_seeds binary> -DRUNS=200000 -DSECONDS=20 -P run_wire_fuzzer.cmake
if(NOT CLANGXX OR NOT EXISTS "${CLANGXX}")
  message("SKIPPED: no clang++ found (install clang-14 and libclang-rt-14-dev) - the wire fuzzer did not run")
  return()
endif()
file(MAKE_DIRECTORY "${WORK_DIR}/corpus")
set(_fuzzer "${WORK_DIR}/wire_fuzzer")
execute_process(
  COMMAND "${CLANGXX}" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
          -I${SOURCE_DIR}/extensions/rdma/include -I${SOURCE_DIR}/include
          ${SOURCE_DIR}/extensions/rdma/fuzz/wire_fuzzer.cc ${SOURCE_DIR}/extensions/rdma/src/wire.cc
          -o "${_fuzzer}"
  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
if(NOT _rc EQUAL 0)
  if(_err MATCHES "libclang_rt.fuzzer|fsanitize=fuzzer")
    message("SKIPPED: ${CLANGXX} has no libFuzzer runtime (install libclang-rt-14-dev):\n${_err}")
    return()
  endif()
  message(FATAL_ERROR "compiling the wire fuzzer failed:\n${_out}\n${_err}")
endif()
if(SEEDS AND EXISTS "${SEEDS}")
  execute_process(COMMAND "${SEEDS}" "${WORK_DIR}/corpus" RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "writing the seed corpus failed")
  endif()
endif()
execute_process(
  COMMAND "${_fuzzer}" -runs=${RUNS} -max_total_time=${SECONDS} -max_len=4096 -print_final_stats=1
          "${WORK_DIR}/corpus"
  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
string(REGEX MATCH "stat::number_of_executed_units: *[0-9]+" _execs "${_err}")
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "the wire fuzzer found a problem (exit ${_rc}):\n${_err}")
endif()
message("wire fuzzer: ${_execs}, no crash")
