# CTest driver of a libFuzzer target: compiles the fuzzer's sources with
# clang++ -fsanitize=fuzzer,address,undefined, gathers a seed corpus (files
# from SEED_DIR, and/or what a SEEDS tool writes), and runs a bounded
# session. Skips (with a message CTest recognises) where no clang++ with
# libFuzzer is installed.
#
#   cmake -DNAME=<fuzzer> -DCLANGXX=/usr/bin/clang++-14 -DWORK_DIR=<dir>
#         -DSOURCES=<a.cc|b.cc> -DINCLUDES=<dir|dir> [-DLIBS=<-lz|...>] [-DSEED_DIR=<dir>] [-DSEEDS=<tool>]
#         -DRUNS=200000 -DSECONDS=20 [-DMAX_LEN=4096] -P RunFuzzer.cmake
if(NOT CLANGXX OR NOT EXISTS "${CLANGXX}")
  message("SKIPPED: no clang++ found (install clang-14 and libclang-rt-14-dev) - the ${NAME} fuzzer did not run")
  return()
endif()
if(NOT MAX_LEN)
  set(MAX_LEN 4096)
endif()
string(REPLACE "|" ";" _sources "${SOURCES}")
string(REPLACE "|" ";" _includes "${INCLUDES}")
string(REPLACE "|" ";" _libs "${LIBS}")
list(TRANSFORM _includes PREPEND "-I")
file(MAKE_DIRECTORY "${WORK_DIR}/corpus")
set(_fuzzer "${WORK_DIR}/${NAME}")
execute_process(
  COMMAND "${CLANGXX}" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
          ${_includes} ${_sources} ${_libs} -o "${_fuzzer}"
  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
if(NOT _rc EQUAL 0)
  if(_err MATCHES "libclang_rt.fuzzer|fsanitize=fuzzer")
    message("SKIPPED: ${CLANGXX} has no libFuzzer runtime (install libclang-rt-14-dev):\n${_err}")
    return()
  endif()
  message(FATAL_ERROR "compiling the ${NAME} fuzzer failed:\n${_out}\n${_err}")
endif()
if(SEED_DIR)
  file(GLOB _seed_files "${SEED_DIR}/*")
  file(COPY ${_seed_files} DESTINATION "${WORK_DIR}/corpus")
endif()
if(SEEDS AND EXISTS "${SEEDS}")
  execute_process(COMMAND "${SEEDS}" "${WORK_DIR}/corpus" RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "writing the seed corpus failed")
  endif()
endif()
execute_process(
  COMMAND "${_fuzzer}" -runs=${RUNS} -max_total_time=${SECONDS} -max_len=${MAX_LEN} -print_final_stats=1
          "${WORK_DIR}/corpus"
  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
string(REGEX MATCH "stat::number_of_executed_units: *[0-9]+" _execs "${_err}")
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "the ${NAME} fuzzer found a problem (exit ${_rc}):\n${_err}")
endif()
message("${NAME}: ${_execs}, no crash")
