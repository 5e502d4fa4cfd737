# `symphony simulate` with a `subclusters:` section end to end: the example
# config twice gives byte-identical JSON with the epochs, the per-sub-cluster
# advice and the series; the table names the sub-clusters; a bad section
# exits 2 naming the file and the key.
#
#   cmake -DCLI=<symphony> -DEXAMPLE=<examples/subclusters/small.yaml> -DWORK=<dir> -P simulate_subcluster_cli_test.cmake
file(MAKE_DIRECTORY ${WORK})
foreach(i 1 2)
  execute_process(COMMAND ${CLI} simulate ${EXAMPLE} -q --json ${WORK}/run_${i}.json
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "symphony simulate ${EXAMPLE} failed: ${rc}: ${err}")
  endif()
endforeach()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${WORK}/run_1.json ${WORK}/run_2.json RESULT_VARIABLE same)
if(NOT same EQUAL 0)
  message(FATAL_ERROR "the same config gave different JSON")
endif()
file(READ ${WORK}/run_1.json report)
foreach(key subclusters epochs per_subcluster drained_s series autoscale advice)
  string(FIND "${report}" "\"${key}\":" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the report has no key '${key}'")
  endif()
endforeach()
execute_process(COMMAND ${CLI} simulate ${EXAMPLE} -q RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0 OR NOT out MATCHES "4 sub-clusters \\(greedy\\), 6 epochs")
  message(FATAL_ERROR "unexpected table (${rc}): ${out}")
endif()
file(READ ${EXAMPLE} text)
string(REPLACE "count: 4" "count: 40" text "${text}")
file(WRITE ${WORK}/bad.yaml "${text}")
execute_process(COMMAND ${CLI} simulate ${WORK}/bad.yaml RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "bad.yaml:[0-9]+:[0-9]+: subclusters.count: 40 sub-clusters need at least as many GPUs")
  message(FATAL_ERROR "a bad section should exit 2 naming the key, got ${rc}: ${err}")
endif()
