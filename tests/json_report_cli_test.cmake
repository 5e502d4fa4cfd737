# `--json FILE` on every command (tools/json_report.hpp): for simulate,
# stress and partition, --json FILE writes one valid JSON document to FILE
# and the human-readable output to stdout; --json - writes the document, and
# nothing else, to stdout and the human-readable output to stderr; a bare
# --json is --json -. The deprecated -o of simulate still works, with a
# notice; partition may read --current from the file its --json replaces.
# Every command that has --json describes it in the same words. When built,
# serve (on emulated devices) and the cluster's scheduler too, with the
# scheduler's deprecated --report.
#
#   cmake -DCLI=<symphony> -DDATA=<tests/data> -DEXAMPLES=<examples> -DWORK=<dir> -P json_report_cli_test.cmake
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

# run(<name> args...): runs the CLI (at most 120 s) into <name>_rc, <name>_out, <name>_err.
function(run name)
  execute_process(COMMAND ${CLI} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name}: symphony ${ARGN}: exit status ${rc}\nstdout: ${out}\nstderr: ${err}")
  endif()
  set(${name}_out "${out}" PARENT_SCOPE)
  set(${name}_err "${err}" PARENT_SCOPE)
endfunction()

# expect_json(<what> <text>): <text> is exactly one JSON object (nothing
# before or after it but white space). Wrapped in [ ], anything else either
# fails to parse or is not an array of one element.
function(expect_json what text)
  string(JSON type ERROR_VARIABLE e TYPE "${text}")
  if(e OR NOT type STREQUAL "OBJECT")
    message(FATAL_ERROR "${what}: not a JSON object (${e}):\n${text}")
  endif()
  string(JSON n ERROR_VARIABLE e LENGTH "[${text}]")
  if(e OR NOT n EQUAL 1)
    message(FATAL_ERROR "${what}: not one JSON document alone (${e}):\n${text}")
  endif()
endfunction()

function(expect_match what text regex)
  if(NOT "${text}" MATCHES "${regex}")
    message(FATAL_ERROR "${what}: does not match '${regex}':\n${text}")
  endif()
endfunction()

# The commands, their arguments, a key of their report, and a line of their
# human-readable output.
set(simulate_args simulate ${DATA}/sim_small.yaml -q)
set(simulate_key goodput_rps)
set(simulate_text "GPU busy")
set(stress_args stress --models 4 --gpus 4 --rate 2000 --duration 0.2)
set(stress_key throughput_rps)
set(stress_text "dispatch lag")
set(partition_args partition ${EXAMPLES}/partition/models.csv -L 4 --method greedy)
set(partition_key assignment)
set(partition_text "imbalance \\(max-min\\)/avg")

foreach(cmd simulate stress partition)
  # --json FILE: the report in FILE, the table on stdout.
  run(${cmd}_file ${${cmd}_args} --json ${WORK}/${cmd}.json)
  file(READ ${WORK}/${cmd}.json report)
  expect_json("${cmd} --json FILE" "${report}")
  string(JSON value ERROR_VARIABLE e GET "${report}" ${${cmd}_key})
  if(e)
    message(FATAL_ERROR "${cmd} --json FILE: the report has no '${${cmd}_key}': ${e}")
  endif()
  expect_match("${cmd} --json FILE: stdout" "${${cmd}_file_out}" "${${cmd}_text}")
  # --json -: the report alone on stdout, the table on stderr.
  run(${cmd}_dash ${${cmd}_args} --json -)
  expect_json("${cmd} --json -: stdout" "${${cmd}_dash_out}")
  string(JSON value ERROR_VARIABLE e GET "${${cmd}_dash_out}" ${${cmd}_key})
  if(e)
    message(FATAL_ERROR "${cmd} --json -: the report has no '${${cmd}_key}': ${e}")
  endif()
  expect_match("${cmd} --json -: stderr" "${${cmd}_dash_err}" "${${cmd}_text}")
  # A bare --json, last or before another option, is --json -.
  run(${cmd}_bare ${${cmd}_args} --json)
  expect_json("${cmd} --json (bare, last): stdout" "${${cmd}_bare_out}")
  run(${cmd}_bare2 ${${cmd}_args} --json --seed 3)
  expect_json("${cmd} --json --seed 3: stdout" "${${cmd}_bare2_out}")
endforeach()

# stress offered ten times what one emulated GPU serves: drops by reason,
# overload among them, summing to `dropped`, in the report and the table.
run(stress_over stress --models 1 --gpus 1 --alpha 0.1 --beta 5 --slo 50 --rate 80000 --duration 0.3
    --json ${WORK}/stress_over.json)
file(READ ${WORK}/stress_over.json over)
string(JSON dropped GET "${over}" dropped)
string(JSON n_reasons LENGTH "${over}" dropped_by_reason)
set(sum 0)
if(n_reasons GREATER 0)
  math(EXPR last "${n_reasons} - 1")
  foreach(i RANGE ${last})
    string(JSON why MEMBER "${over}" dropped_by_reason ${i})
    string(JSON n GET "${over}" dropped_by_reason ${why})
    math(EXPR sum "${sum} + ${n}")
  endforeach()
endif()
string(JSON overload ERROR_VARIABLE e GET "${over}" dropped_by_reason overload)
if(e OR NOT sum EQUAL dropped OR dropped EQUAL 0)
  message(FATAL_ERROR "stress at 10x: dropped_by_reason (sum ${sum}) does not split dropped (${dropped}) "
                      "or has no overload:\n${over}")
endif()
expect_match("stress at 10x: stdout" "${stress_over_out}" "\n  drops +[^\n]*overload ${overload}")

# The simulator is deterministic: the file and stdout hold the same report.
file(READ ${WORK}/simulate.json report)
if(NOT report STREQUAL simulate_dash_out)
  message(FATAL_ERROR "simulate: --json FILE and --json - gave different reports")
endif()
# The old `simulate -q --json <config>`: a bare --json before the config, last, still reads the config.
run(simulate_old simulate -q --json ${DATA}/sim_small.yaml)
if(NOT simulate_old_out STREQUAL report)
  message(FATAL_ERROR "simulate --json <config>: not the report of --json -:\n${simulate_old_out}")
endif()
# With more after it CLI11 would take the config as FILE: a report is never YAML, exit 2 saying so.
execute_process(COMMAND ${CLI} simulate --json ${DATA}/sim_small.yaml -q
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
if(NOT rc EQUAL 2 OR NOT err MATCHES "--json: '.*sim_small.yaml' looks like a config, not a report \\(.*--json -\\)")
  message(FATAL_ERROR "simulate --json <config> -q: expected exit 2 and the config named, got ${rc}: ${out}${err}")
endif()

# The deprecated -o FILE: `--json -o F` writes the report to F and nothing to stdout,
# `-o F` the table; each with a one-line notice naming --json FILE.
run(o_json simulate ${DATA}/sim_small.yaml --json -q -o ${WORK}/o.json)
file(READ ${WORK}/o.json o_report)
if(NOT o_report STREQUAL report OR NOT o_json_out STREQUAL "")
  message(FATAL_ERROR "simulate --json -o F: expected the report in F and an empty stdout, got stdout:\n${o_json_out}")
endif()
expect_match("simulate -o: stderr" "${o_json_err}" "^symphony simulate: -o FILE is deprecated [^\n]*--json FILE\n$")
run(o_table simulate ${DATA}/sim_small.yaml -q -o ${WORK}/o.txt)
file(READ ${WORK}/o.txt o_table)
expect_match("simulate -o F: F" "${o_table}" "GPU busy")
execute_process(COMMAND ${CLI} simulate ${DATA}/sim_small.yaml -q -o ${WORK}/x.json --json ${WORK}/y.json
                RESULT_VARIABLE rc ERROR_VARIABLE err TIMEOUT 60)
if(NOT rc EQUAL 2 OR NOT err MATCHES "-o and --json FILE")
  message(FATAL_ERROR "simulate -o F --json G: expected exit 2 naming both, got ${rc}: ${err}")
endif()

# partition reads --current before it writes --json: the two may be one file.
run(same partition ${EXAMPLES}/partition/models.csv -L 4 --method greedy -q --current ${WORK}/partition.json
    --max-disruption 0 --json ${WORK}/partition.json)
file(READ ${WORK}/partition.json again)
expect_json("partition --current F --json F" "${again}")
string(JSON a GET "${again}" assignment)
string(JSON b GET "${partition_dash_out}" assignment)
if(NOT a STREQUAL b)
  message(FATAL_ERROR "partition --current F --json F --max-disruption 0 moved models:\n${a}\n${b}")
endif()

# An unwritable FILE: a message naming it, a failing exit status.
execute_process(COMMAND ${CLI} partition ${EXAMPLES}/partition/models.csv -L 4 --method greedy -q
                        --json ${WORK}/no_such_dir/r.json
                RESULT_VARIABLE rc ERROR_VARIABLE err TIMEOUT 60)
if(rc EQUAL 0 OR NOT err MATCHES "^symphony partition: cannot write the report to .*no_such_dir/r.json")
  message(FATAL_ERROR "partition --json <unwritable>: expected a failure naming the file, got ${rc}: ${err}")
endif()

# Every command with --json describes it in the same words.
execute_process(COMMAND ${CLI} --help OUTPUT_VARIABLE help TIMEOUT 30)
set(with_json "")
foreach(cmd simulate stress partition scheduler backend loadgen serve)
  if(help MATCHES "\n  ${cmd} ")
    list(APPEND with_json ${cmd})
  endif()
endforeach()
set(want "")
foreach(cmd ${with_json})
  execute_process(COMMAND ${CLI} ${cmd} --help OUTPUT_VARIABLE out TIMEOUT 30)
  string(REGEX MATCH "\n  --json FILE [^\n]*" line "${out}")
  string(STRIP "${line}" line)
  if(line STREQUAL "")
    message(FATAL_ERROR "${cmd} --help has no '--json FILE':\n${out}")
  endif()
  if(want STREQUAL "")
    set(want "${line}")
  elseif(NOT line STREQUAL want)
    message(FATAL_ERROR "${cmd} --help describes --json otherwise:\n  ${line}\nnot\n  ${want}")
  endif()
endforeach()
message(STATUS "--json FILE described alike by: ${with_json}")

# serve, when built, on emulated devices: --json - and --json FILE.
if("serve" IN_LIST with_json)
  file(WRITE ${WORK}/serve.yaml "devices: emulated:2\nload: {duration_s: 2, warmup_s: 0.5, seed: 3}\nmodels:\n"
                                "  - {name: fast, alpha_ms: 1, beta_ms: 4, slo_ms: 30, rate: 150}\n")
  run(serve_dash serve ${WORK}/serve.yaml --quiet --json -)
  expect_json("serve --json -: stdout" "${serve_dash_out}")
  expect_match("serve --json -: stderr" "${serve_dash_err}" "total: sent [0-9]+")
  run(serve_file serve ${WORK}/serve.yaml --quiet --json ${WORK}/serve.json)
  file(READ ${WORK}/serve.json serve_report)
  expect_json("serve --json FILE" "${serve_report}")
  expect_match("serve --json FILE: stdout" "${serve_file_out}" "total: sent [0-9]+")
endif()

# The cluster's scheduler, when built: --json - prints its report once, on
# exit; the deprecated --report FILE still writes the file.
if("scheduler" IN_LIST with_json)
  set(sched scheduler --listen 127.0.0.1:0 --config ${EXAMPLES}/cluster/cluster.yaml --duration 1)
  run(sched_dash ${sched} --json -)
  expect_json("scheduler --json -: stdout" "${sched_dash_out}")
  run(sched_report ${sched} --report ${WORK}/sched.json)
  file(READ ${WORK}/sched.json sched_report)
  expect_json("scheduler --report FILE" "${sched_report}")
  expect_match("scheduler --report: stderr" "${sched_report_err}" "--report FILE is deprecated [^\n]*--json FILE")
endif()
