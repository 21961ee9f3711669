#!/usr/bin/env bash
# NVIDIA's cuda-samples (github.com/NVIDIA/cuda-samples) under graft: each
# sample that builds here without OpenGL, MPI or nvJPEG runs eagerly twice (is
# its output deterministic?) and once under graft. A sample checks itself
# (against a CPU reference, mostly) and says so by its exit code and a
# PASS/FAIL line; graft must give the same exit code and the same
# PASS/FAIL/waived lines, and, where the two eager runs print the same output
# once numbers on timing lines are masked, the same output.
#
# Build here (needs nvcc and cmake; ~35 min on 2 cores), then carry SAMPLES:
#   scripts/gpu-cuda-samples.sh --build SAMPLES_SRC SAMPLES
#       SAMPLES_SRC: an extracted tree of the repository (c94ff366 was used);
#       SAMPLES gets bin.tar.xz: the stripped programs and their data folders.
#   scripts/gpu-cuda-samples.sh --pack W SAMPLES   (the last step alone: W/src the
#       patched tree, W/build its build)
#   OUT=dir scripts/gpu-cuda-samples.sh BUILD SAMPLES [NAMES]   (GPU machine)
# Build changes, none to a sample's code: CMAKE_CUDA_ARCHITECTURES 90 only
# (H100/H200); left out: 7_libNVVM, nvJPEG, nvJPEG_encoder (no libnvjpeg
# here), simpleCUFFT_callback (no static cuFFT), the NPP samples (no NPP),
# the OpenGL samples (no libOpenGL on the GPU machine). A program that does
# not start (exit 127) or waives itself (exit 2: a second GPU needed) is
# counted apart.
set -u
if [ "${1:-}" = --build ]; then
  S=$2; D=$3; mkdir -p "$D"; D=$(cd "$D" && pwd); W=$D/work; rm -rf "$W"; mkdir -p "$W"
  cp -r "$S/." "$W/src" || exit 1
  find "$W/src" -name CMakeLists.txt -exec sed -i \
    's/^\(\s*\)set(CMAKE_CUDA_ARCHITECTURES [0-9 ]*)/\1set(CMAKE_CUDA_ARCHITECTURES 90)/' {} +
  sed -i 's/^add_subdirectory(7_libNVVM)/#&/' "$W/src/Samples/CMakeLists.txt"
  for s in nvJPEG nvJPEG_encoder simpleCUFFT_callback watershedSegmentationNPP FilterBorderControlNPP \
           boxFilterNPP freeImageInteropNPP cannyEdgeDetectorNPP histEqualizationNPP; do
    sed -i "s/^add_subdirectory($s)/#&/" "$W/src/Samples/4_CUDA_Libraries/CMakeLists.txt"
  done
  cmake -S "$W/src" -B "$W/build" -G Ninja -DCMAKE_BUILD_TYPE=Release > "$W/cmake.log" 2>&1 || { tail "$W/cmake.log"; exit 1; }
  ninja -C "$W/build" -k 0 > "$W/build.log" 2>&1; echo "gpu-cuda-samples: $(grep -c FAILED "$W/build.log") failed builds"
  set -- --pack "$W" "$D"
fi
if [ "${1:-}" = --pack ]; then  # --pack W SAMPLES: W/src the patched tree, W/build its build
  W=$2; D=$3; mkdir -p "$D"; D=$(cd "$D" && pwd)
  rm -rf "$W/pack"; mkdir -p "$W/pack"
  (cd "$W/build/Samples" && find . -type f -perm -u+x ! -name '*.so' ! -path '*CMakeFiles*') | while read -r f; do
    cat=$(echo "$f" | cut -d/ -f2); name=$(basename "$f")
    # OpenGL samples: the GPU machine has no libOpenGL.
    readelf -d "$W/build/Samples/$f" | grep -q 'NEEDED.*lib\(OpenGL\|GL\|glut\|GLEW\)' && continue
    mkdir -p "$W/pack/bin/$cat/$name"; strip -o "$W/pack/bin/$cat/$name/$name" "$W/build/Samples/$f"
    chmod +x "$W/pack/bin/$cat/$name/$name"
    # Kernels the driver-API samples load (.fatbin, .ptx) sit beside the program;
    # the sample's folder (its data, its matrices, the sources NVRTC compiles)
    # where the samples' search paths find it from there.
    src=$(dirname "$f")
    find "$W/build/Samples/$src" -maxdepth 1 \( -name '*.fatbin' -o -name '*.ptx' -o -name '*.cubin' \) \
      -exec cp {} "$W/pack/bin/$cat/$name/" \;
    mkdir -p "$W/pack/Samples/$src" && cp -r "$W/src/Samples/$src/." "$W/pack/Samples/$src/"
  done
  (cd "$W/pack" && tar cf - bin Samples | xz -9e -T2 > "$D/bin.tar.xz")
  echo "gpu-cuda-samples: $(ls "$W/pack/bin"/*/ | grep -vc ':') programs, $(du -h "$D/bin.tar.xz" | cut -f1)"
  exit 0
fi
B=${1:-.gpu/build}; SAMP=${2:-.gpu/samples}; NAMES=${3:-}
BA=$(cd "$B" && pwd) || exit 2
R=/tmp/samples; rm -rf $R; mkdir -p $R/o; tar xJf "$SAMP/bin.tar.xz" -C $R || exit 2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
O=$R/o
# Lines that say how long or how fast: their numbers are masked.
TIMING='/s|/ms|time|[^a-z]sec|ms[^a-z]|msec|usec|GB/s|MB/s|Gflop|GFLOP|throughput|bandwidth|Bandwidth|Time|clock|Clock|MOPS|Mpix|speedup|per second|ns[^a-z]|cycles|Kernel execution'
run_one() {  # cat name
  local cat=$1 name=$2 dir=$R/bin/$1/$2 run rc
  for run in eager1 eager2 graft; do
    local pre=()
    [ $run = graft ] && pre=(env GRAFT_STATS=$O/$name.json GRAFT_LOG_FILE=$O/$name.glog LD_PRELOAD=$BA/src/libgraft.so)
    local t0=$(date +%s.%N)
    (cd "$dir" && timeout 120 "${pre[@]}" ./"$name" < /dev/null > $O/$name.$run.log 2>&1); rc=$?
    echo "$rc $(python3 -c "print('%.1f' % ($(date +%s.%N) - $t0))")" > $O/$name.$run.rc
    sed -E "\\%$TIMING% s/[0-9][0-9.e+-]*/#/g" $O/$name.$run.log | grep -v '^ *$' > $O/$name.$run.norm
    grep -Eio 'test passed|test failed|result *= *pass|result *= *fail|passed|failed|waived|PASS|FAIL' $O/$name.$run.log \
      | tr a-z A-Z > $O/$name.$run.verdict
  done
}
export -f run_one; export R O BA TIMING
list=$(cd $R/bin && ls -d */*/ | sed 's|/$||')
[ -n "$NAMES" ] && list=$(for n in $NAMES; do echo "$list" | grep "/$n\$"; done)
echo "$list" | tr '/' ' ' | xargs -P ${JOBS:-4} -n 2 bash -c 'run_one "$0" "$1"'
# Their inputs are drawn with srand(time(NULL)): outputs of runs in other seconds differ.
TIME_SEEDED="fp16ScalarProduct graphMemoryNodes UnifiedMemoryStreams"
rows=(); n_eq=0; n_ok=0; n_diff=0; n_bad=0; n_notrun=0
for cn in $list; do
  name=${cn#*/}
  read -r rc1 s1 < $O/$name.eager1.rc; read -r rc2 s2 < $O/$name.eager2.rc; read -r rcg sg < $O/$name.graft.rc
  if [ "$rc1" = 127 ] || { [ "$rc1" = 2 ] && [ "$rcg" = 2 ]; }; then verdict="not run (exit $rc1 eagerly, $rcg under graft)"; n_notrun=$((n_notrun+1))
  elif [[ " $TIME_SEEDED " == *" $name "* ]]; then
    if [ "$rc1" = "$rcg" ] && cmp -s $O/$name.eager1.verdict $O/$name.graft.verdict; then
      verdict="same rc/verdict (inputs seeded by the time)"; n_ok=$((n_ok+1))
    else verdict="DIFFERS (rc $rc1 → $rcg)"; n_bad=$((n_bad+1)); fi
  elif [ "$rc1" != "$rc2" ] || ! cmp -s $O/$name.eager1.verdict $O/$name.eager2.verdict; then verdict="eager unstable (rc $rc1/$rc2)"
  elif [ "$rc1" != "$rcg" ] || ! cmp -s $O/$name.eager1.verdict $O/$name.graft.verdict; then
    verdict="DIFFERS (rc $rc1 → $rcg)"; n_bad=$((n_bad+1))
  elif cmp -s $O/$name.eager1.norm $O/$name.eager2.norm; then
    if cmp -s $O/$name.eager1.norm $O/$name.graft.norm; then verdict=EQUAL; n_eq=$((n_eq+1))
    else verdict="OUTPUT DIFFERS"; n_diff=$((n_diff+1)); fi
  else verdict="same rc/verdict (output varies eagerly)"; n_ok=$((n_ok+1)); fi
  cov=$(python3 -c "
import json,sys
p=json.load(open(sys.argv[1]))['replay']
fb=sorted(p.get('fallbacks',{}).items(), key=lambda kv:-kv[1])[:2]
print('%s | %.1f %% | %s | %s' % (p['ops_total'], p['coverage_pct'], p['replays'],
      ', '.join('%s %s' % kv for kv in fb) or '-'))" $O/$name.json 2>/dev/null || echo "? | ? | ? | ?")
  rows+=("| $cn | $rc1 $(head -c 30 $O/$name.eager1.verdict | tr '\n' ' ') | $verdict | $cov | $s1 | $sg |")
  case "$verdict" in DIFFERS*|OUTPUT*)
    echo "== $cn: eager1 vs graft"; diff $O/$name.eager1.norm $O/$name.graft.norm | head -8
    tail -3 $O/$name.glog 2>/dev/null;;
  esac
done
(cd /tmp && tar czf ${OUT:-/tmp}/samples.tgz samples/o) 2>/dev/null
echo
echo "| sample | eager rc, verdict | graft vs eager | ops | through graphs | replays | top fallbacks | eager s | graft s |"
echo "|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo "samples: $n_eq equal, $n_ok same result (eager output varies), $n_diff output differs, $n_bad result differs, $n_notrun not run"
