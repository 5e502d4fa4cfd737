# `symphony partition` end to end on examples/partition: the table and the
# JSON report, the same assignment twice (greedy; MILP to optimality), the
# report read back as --current with a zero disruption bound (nothing moves),
# a --current that pins one model and restricts another (as a cluster
# scheduler's epoch does), and the exit statuses: 1 with the model and constraint named for an
# infeasible problem, 2 with file:line:column for bad files and a message for
# bad options.
#
#   cmake -DCLI=<symphony> -DEXAMPLES=<examples/partition> -DWORK=<dir> -DHAVE_CBC=ON -P partition_cli_test.cmake
#
# HAVE_CBC=OFF (a build without CBC) skips the MILP runs.
file(MAKE_DIRECTORY ${WORK})
if(HAVE_CBC)
  set(methods milp greedy random)
  set(best milp)
else()
  message(STATUS "built without CBC: the MILP runs are skipped")
  set(methods greedy random)
  set(best greedy)
endif()
set(models ${EXAMPLES}/models.csv)
set(caps --memory-cap 11264 --rate-cap 2000)

function(run_cli)  # run_cli(<out-var-prefix> args...)
  list(POP_FRONT ARGN prefix)
  execute_process(COMMAND ${CLI} partition ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  TIMEOUT 60)
  set(${prefix}_rc "${rc}" PARENT_SCOPE)
  set(${prefix}_out "${out}" PARENT_SCOPE)
  set(${prefix}_err "${err}" PARENT_SCOPE)
endfunction()

function(expect_rc prefix want)
  if(NOT "${${prefix}_rc}" STREQUAL "${want}")
    message(FATAL_ERROR "${prefix}: exit status ${${prefix}_rc}, expected ${want}\nstdout: ${${prefix}_out}\n"
                        "stderr: ${${prefix}_err}")
  endif()
endfunction()

function(expect_match prefix stream regex)
  if(NOT "${${prefix}_${stream}}" MATCHES "${regex}")
    message(FATAL_ERROR "${prefix}: ${stream} does not match '${regex}':\n${${prefix}_${stream}}")
  endif()
endfunction()

# Greedy twice: the same assignment; the table has the imbalance factors.
foreach(i 1 2)
  run_cli(greedy${i} ${models} -L 4 ${caps} --method greedy --json ${WORK}/greedy${i}.json)
  expect_rc(greedy${i} 0)
  file(READ ${WORK}/greedy${i}.json report${i})
  string(JSON assignment${i} GET "${report${i}}" assignment)
endforeach()
expect_match(greedy1 out "imbalance \\(max-min\\)/avg: rate [0-9.]+, memory [0-9.]+")
expect_match(greedy1 out "assignment:\n  0: ")
if(NOT assignment1 STREQUAL assignment2)
  message(FATAL_ERROR "greedy gave two assignments:\n${assignment1}\n${assignment2}")
endif()
string(JSON n LENGTH "${assignment1}")
if(NOT n EQUAL 16)
  message(FATAL_ERROR "the report assigns ${n} models, expected 16")
endif()
foreach(key status objective imbalance loads disruption cpu_seconds)
  string(JSON value ERROR_VARIABLE missing GET "${report1}" ${key})
  if(missing)
    message(FATAL_ERROR "the report has no key '${key}': ${missing}")
  endif()
endforeach()

# The MILP proves the example's optimum.
run_cli(milp ${models} -L 4 ${caps} --method ${best} --time-limit 20 --json ${WORK}/milp.json)
expect_rc(milp 0)
file(READ ${WORK}/milp.json milp_report)
if(HAVE_CBC)
  expect_match(milp out "^milp: optimal, objective")
  string(JSON status GET "${milp_report}" status)
  string(JSON gap GET "${milp_report}" gap)
  if(NOT status STREQUAL "optimal" OR NOT gap EQUAL 0)
    message(FATAL_ERROR "milp: status ${status}, gap ${gap}")
  endif()
endif()

# The report is a valid --current: with no disruption allowed nothing moves.
foreach(method ${methods})
  run_cli(again_${method} ${models} -L 4 ${caps} --method ${method} --time-limit 1 --current ${WORK}/milp.json
          --max-disruption 0 --json ${WORK}/again_${method}.json)
  expect_rc(again_${method} 0)
  file(READ ${WORK}/again_${method}.json again)
  string(JSON moves LENGTH "${again}" disruption moves)
  string(JSON a GET "${again}" assignment)
  string(JSON b GET "${milp_report}" assignment)
  if(NOT moves EQUAL 0 OR NOT a STREQUAL b)
    message(FATAL_ERROR "${method}: ${moves} moves against its own assignment with --max-disruption 0")
  endif()
endforeach()

# A --current with a pin and a model restricted to a sub-cluster it is not in
# (the keys of a cluster scheduler's epochs[]): every method keeps the one and
# moves the other there, and its report carries both keys.
string(JSON vgg GET "${milp_report}" assignment VGG16)
string(JSON bert GET "${milp_report}" assignment "BERT#1")
math(EXPR elsewhere "(${bert} + 1) % 4")
string(JSON restricted SET "${milp_report}" pinned "[\"VGG16\"]")
string(JSON restricted SET "${restricted}" permitted "{\"BERT#1\": [${elsewhere}]}")
file(WRITE ${WORK}/restricted.json "${restricted}")
foreach(method ${methods})
  run_cli(restricted_${method} ${models} -L 4 ${caps} --method ${method} --time-limit 2
          --current ${WORK}/restricted.json --json ${WORK}/restricted_${method}.json)
  expect_rc(restricted_${method} 0)
  file(READ ${WORK}/restricted_${method}.json report)
  string(JSON got_vgg GET "${report}" assignment VGG16)
  string(JSON got_bert GET "${report}" assignment "BERT#1")
  string(JSON pin GET "${report}" pinned 0)
  string(JSON row GET "${report}" permitted "BERT#1")
  if(NOT got_vgg EQUAL vgg OR NOT got_bert EQUAL elsewhere OR NOT pin STREQUAL "VGG16")
    message(FATAL_ERROR "${method}: VGG16 in ${got_vgg} (pinned in ${vgg}), BERT#1 in ${got_bert} (may go to "
                        "${elsewhere} alone), pinned ${pin}")
  endif()
  string(JSON n LENGTH "${row}")
  string(JSON first GET "${row}" 0)
  if(NOT n EQUAL 1 OR NOT first EQUAL elsewhere)
    message(FATAL_ERROR "${method}: the report's permitted row of BERT#1 is ${row}, expected [${elsewhere}]")
  endif()
endforeach()

# The example's current assignment (one model new, one gone) within a bound.
run_cli(cur ${models} -L 4 ${caps} --method ${best} --current ${EXAMPLES}/current.json --max-disruption 1 --time-limit 5
        --json ${WORK}/cur.json)
expect_rc(cur 0)
expect_match(cur err "1 model\\(s\\) not in .*models.csv \\(they left; ignored\\), e.g. 'Xception'")
expect_match(cur out "moves [0-9]+, disruption 0?\\.[0-9]+ \\(bound 1.00\\)")

# Infeasible: exit 1, the model and the constraint named.
run_cli(infeasible ${models} -L 4 --memory-cap 4000 --method greedy)
expect_rc(infeasible 1)
expect_match(infeasible err "model 'EfficientNetB7' needs 4259.6 of memory \\(static 256 \\+ dynamic 4003.6\\), more than any sub-cluster's memory cap \\(the largest is 4000\\)")

# Bad files: exit 2, file:line:column.
file(WRITE ${WORK}/bad.csv "name,rate,static_mib,dynamic_mib\na,1,2,3\nb,fast,2,3\n")
run_cli(badcsv ${WORK}/bad.csv -L 2)
expect_rc(badcsv 2)
expect_match(badcsv err "bad.csv:3:3: rate: not a number: 'fast'")
file(WRITE ${WORK}/bad.json "{\"assignment\": {\n  \"ResNet50#0\": 9\n}}\n")
run_cli(badjson ${models} -L 4 --current ${WORK}/bad.json)
expect_rc(badjson 2)
expect_match(badjson err "bad.json:2:3: assignment: model 'ResNet50#0': sub-cluster 9 is out of range")
run_cli(nofile ${WORK}/missing.csv -L 2)
expect_rc(nofile 2)
expect_match(nofile err "missing.csv: cannot read the model table")

# Bad options: exit 2 with a message.
run_cli(method ${models} -L 4 --method simplex)
expect_rc(method 2)
expect_match(method err "--method: simplex not in")
run_cli(caps ${models} -L 2 --memory-cap 1,2,3)
expect_rc(caps 2)
expect_match(caps err "--memory-cap: give one value or one per sub-cluster \\(2\\), got 3")
run_cli(zero ${models} -L 0)
expect_rc(zero 2)
run_cli(limit ${models} -L 2 --time-limit -1)
expect_rc(limit 2)
