#!/usr/bin/env bash
# Everything GPU-related, in one command, on a bare GPU machine:
#
#   scripts/gpu-check.sh OUTDIR            # on the GPU machine, from the project root
#
# with .gpu-bundle.txz or .gpu-bundle/ (scripts/gpu-bundle.sh) beside it.
# Builds against the bundle and torch's libtorch, runs every `gpu` test, benchmarks the
# busy-kernel executor (dispatch overhead, GPU idle gaps, the runtime over it),
# exports ResNet-50 and ResNet-18 with torchvision, profiles them on cuda:0,
# serves them together on cuda:0 under deferred and eager with SLOs that give
# batches >= 8, then deferred with overlap off, CUDA graphs off and TorchScript's
# simple executor, simulates the same configurations from the measured
# profiles, runs the runtime stress with 14 shards (and 1, its baseline),
# bench_runtime's shard sweep and the runtime's capacity by shards (no GPU
# needed), then the dispatch-ahead run and the busy-kernel executor with the
# models' linear fits (measured before: last), and writes
# OUTDIR/gpu.json, OUTDIR/gpu.md, OUTDIR/gpu-check.log and OUTDIR/build.log.
# Finishes in under 10 minutes (GPU_CHECK_BUDGET_S, default 570 s): every step
# has a time limit cut to what is left, a failed or skipped step is recorded
# and the others go on. Progress goes to stdout. Exit status: 0 when every
# step ran and passed, 1 otherwise (the files are written either way).
#
# The `device` tool's invocation is in bench/results/gpu.md.
#
#   scripts/gpu-check.sh --selftest OUTDIR
# builds everything but libtorch against the bundle and runs the whole test
# suite, for scripts/gpu-bundle-selftest.sh, which runs it in a chroot that
# has only the compiler, CMake, ninja and python3 (and /usr/local/cuda).
#
# Environment: GPU_BUNDLE (default .gpu-bundle), GPU_CHECK_BUILD (default
# build/gpu-check), GPU_CHECK_BUDGET_S, GPU_CHECK_SERVE_S (seconds of load per
# serve run, default 12), GPU_CHECK_JOBS (default: all cores). For trying the
# script's plumbing on a machine without a GPU (the figures then mean
# nothing): GPU_CHECK_DEVICE (default cuda:0), GPU_CHECK_WITH_CUDA (default
# ON), GPU_CHECK_SIZE (image side, default 224), GPU_CHECK_MAX_BATCH (32),
# GPU_CHECK_SKIP (steps not to run, e.g. "stress-1,stress-14"), GPU_CHECK_PYTHON
# (a python3 with torch and torchvision; default: the first python3 on PATH).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

SELFTEST=0
if [[ ${1:-} == --selftest ]]; then
  SELFTEST=1
  shift
fi
if [[ $# -ne 1 ]]; then
  echo "usage: scripts/gpu-check.sh [--selftest] OUTDIR" >&2
  exit 2
fi
OUT=$1
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# The bundle travels compressed (.gpu-bundle.txz); unpacked here once.
if [[ -z ${GPU_BUNDLE:-} && ! -d .gpu-bundle/root && -f .gpu-bundle.txz ]]; then
  mkdir -p .gpu-bundle
  tar -C .gpu-bundle -xJf .gpu-bundle.txz 2>/dev/null ||
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .gpu-bundle.txz .gpu-bundle
fi
BUNDLE=$(cd "${GPU_BUNDLE:-.gpu-bundle}" 2>/dev/null && pwd) || BUNDLE=""
BUILD=${GPU_CHECK_BUILD:-build/gpu-check}
mkdir -p "$BUILD"
BUILD=$(cd "$BUILD" && pwd)
WORK=$BUILD/check
BUDGET=${GPU_CHECK_BUDGET_S:-570}
SERVE_S=${GPU_CHECK_SERVE_S:-12}
JOBS=${GPU_CHECK_JOBS:-$(nproc)}
DEVICE=${GPU_CHECK_DEVICE:-cuda:0}
WITH_CUDA=${GPU_CHECK_WITH_CUDA:-ON}
SIZE=${GPU_CHECK_SIZE:-224}
MAXB=${GPU_CHECK_MAX_BATCH:-32}
PY=${GPU_CHECK_PYTHON:-$(command -v python3)}
T0=$(date +%s)
LOG=$OUT/gpu-check.log
BLOG=$OUT/build.log
: >"$BLOG"

rm -rf "$WORK"
mkdir -p "$WORK"
STEPS=$WORK/steps.tsv
: >"$STEPS"
FAILED=0

elapsed() { echo $(($(date +%s) - T0)); }
say() { printf '[gpu-check %4ss] %s\n' "$(elapsed)" "$*"; }

# step NAME MAX_SECONDS COMMAND...: runs COMMAND with a time limit of
# MAX_SECONDS, cut to the budget left (30 s are kept for the report), and
# records name, exit status and seconds in steps.tsv. Skipped (status
# "skipped") when under 10 s are left.
step() {
  local name=$1 max=$2
  shift 2
  if [[ ,${GPU_CHECK_SKIP:-}, == *,"$name",* ]]; then
    skip "$name" "GPU_CHECK_SKIP"
    return 1
  fi
  local left=$((BUDGET - 30 - $(elapsed)))
  if ((left < 10)); then
    say "SKIP $name: the time budget is spent"
    printf '%s\tskipped\t0\n' "$name" >>"$STEPS"
    FAILED=1
    return 1
  fi
  local limit=$((max < left ? max : left))
  say "==> $name (limit ${limit}s)"
  local t=$(date +%s)
  # bash -c: COMMAND may be one of the functions below (exported); timeout
  # signals its whole process group.
  timeout --kill-after=5 "$limit" bash -c '"$@"' "$name" "$@"
  local rc=$?
  local secs=$(($(date +%s) - t))
  if ((rc == 0)); then
    say "ok  $name (${secs}s)"
  elif ((rc == 124 || rc == 137)); then
    say "TIMEOUT $name after ${secs}s"
  else
    say "FAIL $name (exit $rc, ${secs}s)"
  fi
  printf '%s\t%s\t%s\n' "$name" "$rc" "$secs" >>"$STEPS"
  ((rc == 0)) || FAILED=1
  return $rc
}

# Skips a step that cannot run, recording why.
skip() {
  say "SKIP $1: $2"
  printf '%s\tskipped\t0\t%s\n' "$1" "$2" >>"$STEPS"
  FAILED=1
}

# Long output (CMake, ninja) goes to build.log; a heartbeat shows progress.
logged() {
  local what=$1
  shift
  echo "==== $what: $*" >>"$BLOG"
  "$@" >>"$BLOG" 2>&1 &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 15
    kill -0 "$pid" 2>/dev/null && say "... $what: $(tail -n 1 "$BLOG" | cut -c1-110)"
  done
  wait "$pid"
}

# bench_cuda, failing when a benchmark reported an error (Google Benchmark exits 0).
run_bench_cuda() {
  "$BUILD/bench/bench_cuda" --benchmark_out="$WORK/bench-cuda.json" --benchmark_out_format=json || return
  ! grep -q '"error_occurred": true' "$WORK/bench-cuda.json"
}

# A GoogleTest binary, failing when a test was skipped (here a skip means the
# GPU was not seen).
run_gtest() {
  local bin=$1 json=$2
  shift 2
  "$bin" --gtest_brief=1 --gtest_output="json:$json" "$@" || return
  if grep -q '"result": "SKIPPED"' "$json"; then
    say "some tests were skipped (no GPU seen?)"
    return 3
  fi
}

# Python (torch) without the bundle's libraries on its path: they are for what this script builds.
py() { env -u LD_LIBRARY_PATH "$PY" "$@"; }

export ROOT OUT BUNDLE BUILD WORK BLOG T0 PY WITH_CUDA
export -f say elapsed logged run_bench_cuda run_gtest py

main() {
# ---- the machine -----------------------------------------------------------------
say "symphony GPU check in $ROOT -> $OUT (budget ${BUDGET}s, $JOBS jobs)"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "kernel: $(uname -sr)"
  echo "cpus: $(nproc)"
  echo "os: $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
  echo "glibc: $(ldd --version 2>/dev/null | head -n 1)"
  echo "cxx: $(c++ --version 2>/dev/null | head -n 1)"
  echo "cmake: $(cmake --version 2>/dev/null | head -n 1)"
  echo "ninja: $(ninja --version 2>/dev/null)"
  echo "nvcc: $( (command -v nvcc >/dev/null && nvcc --version || /usr/local/cuda/bin/nvcc --version) 2>/dev/null | tail -n 2 | head -n 1)"
  echo "python: $($PY --version 2>&1) ($PY)"
  echo "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null | head -n 1)"
} | tee "$WORK/machine.txt"

TORCH_PREFIX=""
if ((SELFTEST == 0)); then
  TORCH_PREFIX=$(py -c 'import torch, sys; print(torch.utils.cmake_prefix_path); print(torch.__version__, torch.version.cuda, torch.cuda.is_available(), file=sys.stderr)' 2>"$WORK/torch.txt")
  say "torch: $(cat "$WORK/torch.txt") at $TORCH_PREFIX"
fi

if [[ -z $BUNDLE || ! -d $BUNDLE/root/usr ]]; then
  say "no .gpu-bundle/root/usr beside the project: run scripts/gpu-bundle.sh on a Debian machine and carry it"
  skip configure "no .gpu-bundle"
  py scripts/gpu_report.py report "$WORK" "$OUT"
  return 1
fi
# The bundle's shared libraries (gRPC, protobuf, yaml-cpp, ...) are not on the
# machine: the linker (for the libraries they need in turn) and what is built
# here find them on LD_LIBRARY_PATH.
export LD_LIBRARY_PATH="$BUNDLE/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# ---- configure and build -----------------------------------------------------------
configure() {
  local torch=$1
  local prefix="$BUNDLE/root/usr"
  local args=(-S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE="$PY"
    -DPKG_CONFIG_EXECUTABLE="$BUNDLE/bin/pkg-config" -DSYMPHONY_BUILD_PYTHON=OFF -DSYMPHONY_CCACHE=OFF
    -DCMAKE_POLICY_VERSION_MINIMUM=3.5)  # CMake 4 refuses the bundle's older package files without it
  if [[ $torch == with-torch ]]; then
    prefix="$prefix;$TORCH_PREFIX"
    # The front is asked for: `serve` is built only with it.
    args+=(-DSYMPHONY_WITH_TORCH=ON -DSYMPHONY_WITH_CUDA="$WITH_CUDA" -DSYMPHONY_WITH_FRONT=ON)
  else
    args+=(-DSYMPHONY_WITH_TORCH=OFF -DSYMPHONY_WITH_FRONT=AUTO)
  fi
  logged "configure ($torch)" cmake "${args[@]}" -DCMAKE_PREFIX_PATH="$prefix"
}

export TORCH_PREFIX
export -f configure

# Every package the build found must come from the bundle, not the system.
check_bundle_use() {
  local bad=0 line
  for v in yaml-cpp_DIR GTest_DIR benchmark_DIR CLI11_DIR nlohmann_json_DIR ConcurrentQueue_INCLUDE_DIR \
    SYMPHONY_RWQUEUE_INCLUDE PKG_CONFIG_EXECUTABLE pkgcfg_lib_SYMPHONY_HTTPLIB_cpp-httplib Protobuf_INCLUDE_DIR \
    Protobuf_LIBRARY_RELEASE Protobuf_PROTOC_EXECUTABLE gRPC_DIR absl_DIR SYMPHONY_GRPC_CPP_PLUGIN Boost_DIR; do
    line=$(grep -E "^$v:" "$BUILD/CMakeCache.txt" | cut -d= -f2-)
    if [[ $line != "$BUNDLE"/* ]]; then
      say "NOT FROM THE BUNDLE: $v = ${line:-<unset>}"
      bad=1
    else
      say "from the bundle: $v = ${line#"$BUNDLE"/}"
    fi
  done
  return $bad
}

export -f check_bundle_use

HAVE_TORCH=0
if ((SELFTEST == 1)); then
  step configure 180 configure without-torch || { py scripts/gpu_report.py report "$WORK" "$OUT"; return 1; }
elif step configure 150 configure with-torch; then
  HAVE_TORCH=1
else
  say "configuring with libtorch failed (see build.log); going on without it: the busy-kernel executor and the runtime"
  step configure-without-torch 120 configure without-torch || { py scripts/gpu_report.py report "$WORK" "$OUT"; return 1; }
fi
step bundle-use 10 check_bundle_use
grep -E "^-- symphony:" "$BLOG" | tail -n 5

if ((SELFTEST == 1)); then
  step build 1800 logged build cmake --build "$BUILD" -j "$JOBS"
  step ctest 1800 ctest --test-dir "$BUILD" -j "$JOBS" --output-on-failure --timeout 900
  py scripts/gpu_report.py report "$WORK" "$OUT" --selftest
  say "selftest done: $([[ $FAILED == 0 ]] && echo PASSED || echo FAILED) (steps in $STEPS)"
  return $FAILED
fi

# (grep -q under pipefail would fail on ninja's SIGPIPE: the listing is read whole.)
has_target() { ninja -C "$BUILD" -t targets all 2>/dev/null | grep -c "^$1:" >/dev/null; }

# First what needs no libtorch: the busy-kernel executor's tests and benchmark.
# Outputs of an earlier run are removed first, so that a failed build leaves
# no stale binary behind to be measured; -k 0 builds what can be built.
if has_target cuda_kernel_executor_test; then
  rm -f "$BUILD/tests/cuda_kernel_executor_test" "$BUILD/bench/bench_cuda"
  step build-kernel 180 logged build-kernel cmake --build "$BUILD" -j "$JOBS" --target cuda_kernel_executor_test \
    bench_cuda -- -k 0
  step test-kernel 90 run_gtest "$BUILD/tests/cuda_kernel_executor_test" "$WORK/gtest-kernel.json"
  step bench-cuda 120 run_bench_cuda
else
  skip build-kernel "the CUDA toolkit was not found at configure time (see build.log)"
fi

# The shared memory extensions through the protocol (scripts/shm_check.py): the linear test
# model served on $DEVICE over HTTP, its input read from and its output written into a system
# and a CUDA shared memory region (a torch tensor's IPC handle), against a plain request.
run_shm_check() {
  local dir=$WORK/shm rc=1 pid
  mkdir -p "$dir"
  printf 'devices: %s\nmodels:\n  - {name: linear, path: %s, input: "float32[4]", slo_ms: 200, max_batch: 8, profile: %s}\n' \
    "$DEVICE" "$BUILD/tests/models/linear.pt" "$dir/linear.profile.yaml" >"$dir/serve.yaml"
  "$CLI" serve "$dir/serve.yaml" --no-load --http 127.0.0.1:0 --port-file "$dir/ports.json" --allow-client-shm \
    --quiet >"$dir/serve.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 120); do [[ -f $dir/ports.json ]] && break; sleep 0.5; done
  if [[ -f $dir/ports.json ]]; then
    py scripts/shm_check.py "http://$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["http"])' \
      "$dir/ports.json")" linear --json "$WORK/shm-check.json" --require-cuda
    rc=$?
  else
    cat "$dir/serve.log"
  fi
  kill -TERM "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  return $rc
}

export -f run_shm_check
export DEVICE

targets=(symphony_cli bench_runtime)
((HAVE_TORCH)) && targets+=(server_test torch_model_test symphony_test_models)
rm -f "$BUILD/symphony" "$BUILD/tests/server_test" "$BUILD/tests/torch_model_test"
step build 330 logged build cmake --build "$BUILD" -j "$JOBS" --target "${targets[@]}" -- -k 0
CLI=$BUILD/symphony
export CLI

if ((HAVE_TORCH)); then
  step test-server-gpu 150 run_gtest "$BUILD/tests/server_test" "$WORK/gtest-server.json" \
    --gtest_filter='ServerGpuTest.*'
  # Every other test labelled gpu (none today; any added later).
  step ctest-gpu 150 ctest --test-dir "$BUILD" -L gpu -E '^(server_gpu_test|cuda_kernel_executor_gpu_test)$' \
    --no-tests=ignore --output-on-failure --timeout 140 --output-junit "$WORK/ctest-gpu.xml"
  step shm-check 90 run_shm_check
fi

if ((HAVE_TORCH)); then
  step export 150 py scripts/export_demo_models.py "$WORK/models" --size "$SIZE" --models resnet50 resnet18
  for m in resnet50 resnet18; do
    step "profile-$m" 120 "$CLI" profile "$WORK/models/$m.pt" --device "$DEVICE" --input "float32[3,$SIZE,$SIZE]" \
      --max-batch "$MAXB" --repeats 10 -o "$WORK/$m.cuda0.profile.yaml"
  done
  if step configs 30 "$PY" scripts/gpu_report.py configs "$WORK" --serve-s "$SERVE_S" --device "$DEVICE" \
    --size "$SIZE" --max-batch "$MAXB"; then
    for p in deferred eager; do
      step "serve-$p" $((SERVE_S + 75)) "$CLI" serve "$WORK/serve.yaml" --policy "$p" --quiet \
        --json "$WORK/serve-$p.json"
      step "simulate-$p" 60 "$CLI" simulate "$WORK/sim.yaml" --policy "$p" --quiet --json "$WORK/sim-$p.json"
    done
    # Deferred without overlap (serve's default on CUDA is on): what dispatching ahead by the
    # learned staging and launch cost buys (issue 53 item 3).
    step serve-no-overlap $((SERVE_S + 75)) "$CLI" serve "$WORK/serve.yaml" --policy deferred --overlap off \
      --quiet --json "$WORK/serve-no-overlap.json"
    # Deferred without CUDA graphs (serve's default, auto, replays them where the load measured
    # them faster): what the graphs are worth.
    step serve-no-graphs $((SERVE_S + 75)) "$CLI" serve "$WORK/serve-no-graphs.yaml" --policy deferred \
      --quiet --json "$WORK/serve-no-graphs.json"
    # Deferred with TorchScript's simple executor (serve's default on CUDA devices is the
    # profiling one): the A/B of jit_executor.
    step serve-simple-jit $((SERVE_S + 75)) "$CLI" serve "$WORK/serve-simple-jit.yaml" --policy deferred \
      --quiet --json "$WORK/serve-simple-jit.json"
  fi
else
  skip export "no libtorch with CUDA was configured (see build.log)"
fi

# The runtime alone on emulated GPUs (no GPU): 14 shards on the 16 cores, and
# 1 shard as the baseline; then the shard sweep.
step stress-1 60 "$CLI" stress --models 64 --gpus 64 --shards 1 --clients 1 \
  --rate 1000000 --requests 2000000 --duration 5 --json "$WORK/stress-1.json"
step stress-14 60 "$CLI" stress --models 64 --gpus 64 --shards 14 --clients 14 \
  --rate 8000000 --requests 16000000 --duration 5 --json "$WORK/stress-14.json"
# The bar's own benchmark: emulated GPUs cheap enough (l(b) = 2 us b + 100 us)
# not to be the bottleneck, 1 M req/s per shard, shards 1..14 (the stress
# above offers more than its GPUs can serve).
step runtime-shards 90 "$BUILD/bench/bench_runtime" --benchmark_filter='RuntimeThroughput/shards:[0-9]+/models:64/gpus:64/' \
  --benchmark_out="$WORK/bench-runtime.json" --benchmark_out_format=json

# The runtime's capacity by shards (issue 54): S shards and S generators (the generators on
# cores of their own up to S = 7 on 16 cores), GPUs that are not the bottleneck, offered 2 M
# and 4 M r/s per shard; each run reports its generators' CPU apart from the runtime's.
run_stress_scaling() {
  local s r
  for s in 1 2 4 7; do
    for r in 2000000 4000000; do
      "$CLI" stress --models 64 --gpus 64 --shards "$s" --clients "$s" --rate $((s * r)) --duration 2 \
        --alpha 0.002 --beta 0.1 --slo 5 --json "$WORK/scaling-$s-$r.json" | grep -E '^ *(submitted|goodput|cpu)' || return
    done
  done
}
export -f run_stress_scaling
step stress-scaling 100 run_stress_scaling

# Last, what earlier runs measured already (2026-11-28): the dispatch-ahead run with the measured
# overhead as delays, and the busy kernels.
if ((HAVE_TORCH)) && [[ -f $WORK/serve.yaml ]]; then
  # Deferred again, each batch dispatched ahead of its GPU by the overhead just measured
  # (delays d_ctrl, d_data), so that its CPU work overlaps the batch before.
  if step delayed-configs 10 py scripts/gpu_report.py delayed "$WORK"; then
    step serve-delayed $((SERVE_S + 75)) "$CLI" serve "$WORK/serve-delayed.yaml" --policy deferred --quiet \
      --json "$WORK/serve-delayed.json"
    step simulate-delayed 60 "$CLI" simulate "$WORK/sim-delayed.yaml" --policy deferred --quiet \
      --json "$WORK/sim-delayed.json"
  fi
  # The same models as busy kernels of their linear fits: the scheduler on a real GPU with no model code.
  step serve-kernel $((SERVE_S + 45)) "$CLI" serve "$WORK/serve-kernel.yaml" --policy deferred --quiet \
    --json "$WORK/serve-kernel.json"
  step simulate-kernel 60 "$CLI" simulate "$WORK/sim-kernel.yaml" --policy deferred --quiet \
    --json "$WORK/sim-kernel.json"
fi

say "==> report"
py scripts/gpu_report.py report "$WORK" "$OUT" || FAILED=1
say "done in $(elapsed)s: $([[ $FAILED == 0 ]] && echo "every step passed" || echo "some steps failed or were skipped") \
(OUTDIR: gpu.json gpu.md gpu-check.log build.log)"
return $FAILED
}

# Everything to stdout and to gpu-check.log.
main 2>&1 | tee "$LOG"
exit "${PIPESTATUS[0]}"
