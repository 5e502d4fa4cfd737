# `symphony simulate` end to end: the same config and seed twice give
# byte-identical JSON (a run and a goodput search), the trace file is
# written, and a bad config fails with exit status 2 and a message naming the
# file and the key.
#
#   cmake -DCLI=<symphony> -DDATA=<tests/data> -DWORK=<dir> -P simulate_cli_test.cmake
file(MAKE_DIRECTORY ${WORK})
foreach(mode run goodput)
  set(extra "")
  if(mode STREQUAL "goodput")
    set(extra --goodput)
  endif()
  foreach(i 1 2)
    execute_process(COMMAND ${CLI} simulate ${DATA}/sim_small.yaml -q ${extra} --json ${WORK}/${mode}_${i}.json
                            --trace-out ${WORK}/${mode}_${i}.csv
                    RESULT_VARIABLE rc ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "symphony simulate (${mode}) failed: ${rc}: ${err}")
    endif()
  endforeach()
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${WORK}/${mode}_1.json ${WORK}/${mode}_2.json
                  RESULT_VARIABLE same)
  if(NOT same EQUAL 0)
    message(FATAL_ERROR "${mode}: the same config and seed gave different JSON")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${WORK}/${mode}_1.csv ${WORK}/${mode}_2.csv
                  RESULT_VARIABLE same)
  if(NOT same EQUAL 0)
    message(FATAL_ERROR "${mode}: the same config and seed gave different traces")
  endif()
  file(READ ${WORK}/${mode}_1.json report)
  foreach(key goodput_rps median_batch bad_rate gpu_busy_fraction models)
    string(FIND "${report}" "\"${key}\":" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "${mode}: the report has no key '${key}'")
    endif()
  endforeach()
endforeach()
# The config may also be given as --config, as the cluster commands take it: the same report.
execute_process(COMMAND ${CLI} simulate --config ${DATA}/sim_small.yaml -q --json ${WORK}/config_opt.json
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "symphony simulate --config failed: ${rc}: ${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${WORK}/run_1.json ${WORK}/config_opt.json RESULT_VARIABLE same)
if(NOT same EQUAL 0)
  message(FATAL_ERROR "simulate --config FILE and simulate FILE gave different JSON")
endif()
# A missing config: exit 2, the message names the command and the file.
execute_process(COMMAND ${CLI} simulate ${WORK}/no_such.yaml RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "^symphony simulate: .*no_such.yaml: cannot open")
  message(FATAL_ERROR "a missing config: expected exit 2 and 'symphony simulate: ...no_such.yaml: cannot open', got ${rc}: ${err}")
endif()
# A different seed gives a different report.
execute_process(COMMAND ${CLI} simulate ${DATA}/sim_small.yaml -q --seed 8 --json ${WORK}/seed8.json
                RESULT_VARIABLE rc)
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${WORK}/run_1.json ${WORK}/seed8.json RESULT_VARIABLE same)
if(same EQUAL 0)
  message(FATAL_ERROR "another seed gave the same JSON")
endif()
# A bad config: exit status 2, message names the file and the key.
execute_process(COMMAND ${CLI} simulate ${DATA}/sim_bad.yaml RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "a bad config should exit with 2, got ${rc}")
endif()
if(NOT err MATCHES "sim_bad.yaml:3:[0-9]+: workload.rate: must be >= 0")
  message(FATAL_ERROR "unexpected message for a bad config: ${err}")
endif()
# Bad options exit 2, with the policy language's own messages (policy.hpp),
# the same as `serve` and `stress` print.
foreach(case "--gather;foo;gather 'foo' is not one of: target_batch or sliding_window"
             "--policy;lazy;policy 'lazy' is not one of: deferred"
             "--policy;deferred:windw=1;unknown deferred option 'windw=1'"
             "--goodput;--rate=5;--goodput excludes --rate"
             "--gpus;0;--gpus")
  list(GET case 0 opt)
  list(GET case 1 val)
  list(GET case 2 want)
  execute_process(COMMAND ${CLI} simulate ${DATA}/sim_small.yaml -q ${opt} ${val}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 2)
    message(FATAL_ERROR "simulate ${opt} ${val} should exit with 2, got ${rc}: ${err}")
  endif()
  string(FIND "${out}${err}" "${want}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "simulate ${opt} ${val}: expected '${want}' in: ${out}${err}")
  endif()
endforeach()
# --help lists every key of the policy language the docs list (miss_gain too) and exits 0.
execute_process(COMMAND ${CLI} simulate --help RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "simulate --help should exit with 0, got ${rc}: ${err}")
endif()
foreach(key min_gain arrival_window miss_gain sliding_window triton max_queue_delay_us)
  string(FIND "${out}" "${key}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "simulate --help does not mention '${key}': ${out}")
  endif()
endforeach()
# Triton's dynamic batcher as a peer (issue 51): the paper's ResNet50 case
# gives the same goodput report twice, named by its policy.
set(stagger ${DATA}/../../examples/paper/stagger_resnet50.yaml)
foreach(i 1 2)
  execute_process(COMMAND ${CLI} simulate ${stagger} -q --policy triton:max_queue_delay_us=2000 --goodput
                          --json ${WORK}/triton_${i}.json
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "simulate --policy triton:max_queue_delay_us=2000 --goodput failed: ${rc}: ${err}")
  endif()
endforeach()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${WORK}/triton_1.json ${WORK}/triton_2.json
                RESULT_VARIABLE same)
if(NOT same EQUAL 0)
  message(FATAL_ERROR "triton: the same config and seed gave different goodput reports")
endif()
file(READ ${WORK}/triton_1.json report)
foreach(want "\"policy\": \"triton:max_queue_delay_us=2000\"" "\"goodput_rps\":")
  string(FIND "${report}" "${want}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "triton: the report has no ${want}")
  endif()
endforeach()
foreach(cmd stress)
  execute_process(COMMAND ${CLI} ${cmd} --policy lazy RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "policy 'lazy' is not one of: deferred")
    message(FATAL_ERROR "${cmd} --policy lazy: expected exit 2 and the language's message, got ${rc}: ${err}")
  endif()
endforeach()
