#!/usr/bin/env bash
# Rodinia's CUDA programs (github.com/yuhc/gpu-rodinia, cuda/) under graft: per
# program, eager twice (is the program deterministic?), then graft; the
# program's output must be equal: its stdout with the timing lines taken out,
# the files it writes, and a "graft-check NAME BYTES HASH" line per result
# array (a 64-bit hash of the array's bytes, added here, so that float
# results are compared bit for bit, not as printed).
#
# Build here (needs only nvcc), then carry RODINIA:
#   scripts/gpu-rodinia.sh --build RODINIA_SRC RODINIA   (RODINIA_SRC: the
#       repository's root, a checkout, a bare git directory or an extracted
#       tree that holds cuda/; 9c10d3e was used)
#   OUT=dir scripts/gpu-rodinia.sh BUILD RODINIA [NAMES]  (on the GPU machine;
#       NAMES: a space-separated subset of the programs below)
# The build also writes RODINIA/source-changes.diff (the changes it made).
# Programs (host loops of launches, inputs made by the program or here):
#   gaussian (Fan1/Fan2 per column, a device sync after each), lud (3 kernels
#   per 16-column step), nw (one launch per anti-diagonal of 16x16 tiles),
#   pathfinder (a launch and a device sync per pyramid step), srad_v2 (per
#   iteration: host ROI statistics, H2D copy, 2 kernels, D2H copy), hotspot
#   (a launch per pyramid step; input files made here), bfs (per level: H2D
#   flag, 2 kernels, D2H flag; a long grid graph made here), particlefilter
#   (float version, 4 kernels per frame; one block of 512 particles, see below),
#   streamcluster (per pgain call, ~3400 of them: cudaMalloc, copies,
#   memsets, events, a kernel, a sync, copies, cudaFree). Sizes (CONFIGS) were
#   chosen without a GPU at hand: from a few to ~20 thousand launches each, a
#   few seconds each expected on an H100.
# Source changes (none touches a kernel or the order of the CUDA calls):
#   all: a graft-check line per result array, before the program frees it;
#   cudaThreadSynchronize -> cudaDeviceSynchronize (gaussian, srad_v2,
#   particlefilter, streamcluster); gaussian: cudaDeviceProp's clockRate and
#   deviceOverlap (gone in CUDA 13) read with cudaDeviceGetAttribute;
#   particlefilter: the seeds time(0)*i -> 1700000000*i, and the video and its
#   dilated copy calloc'ed (the program reads the malloc'ed bytes it does not
#   set; large mallocs are fresh zero pages in practice, but an interposer's
#   own heap use could change that).
# Determinism: no program uses atomics; bfs's racing writes all store the
# same level; particlefilter's normalize_weights_kernel races across blocks
# (block 0 builds the CDF from weights other blocks are still normalizing), so
# it runs with 512 particles = one block. srad's kernels read one image row
# before and one after J_cuda (outside the allocation; eagerly harmless, the
# values are overwritten) and so may fault where allocations are laid out
# differently: that would be the program's bug.
set -u
PROGS="gaussian lud nw pathfinder srad_v2 hotspot bfs particlefilter streamcluster"
if [ "${1:-}" = --build ]; then
  S=$2; D=$3; mkdir -p "$D"; D=$(cd "$D" && pwd); W=$(mktemp -d)
  dirs="cuda/gaussian cuda/lud cuda/nw cuda/pathfinder cuda/srad/srad_v2 cuda/hotspot cuda/bfs cuda/particlefilter cuda/streamcluster"
  # git archive of the needed folders only: the repository holds a few blobs a
  # snapshot may lack (cuda/hotspot3D/output.out, cuda/lavaMD/result.txt).
  if git -C "$S" rev-parse --git-dir >/dev/null 2>&1; then
    git -C "$S" archive HEAD $dirs 2>/dev/null | tar x -C "$W"; [ "${PIPESTATUS[*]}" = "0 0" ] || exit 1
  else
    (cd "$S" && tar c $dirs) | tar x -C "$W" || exit 1
  fi
  mkdir -p "$W/orig" && cp -r "$W/cuda" "$W/orig/"
  python3 - "$W/cuda" <<'PY' || exit 1
import sys
w = sys.argv[1]
def patch(path, old, new, count=1):  # keeps the file's line ends (some have CRLF)
    p = w + "/" + path; s = open(p, newline="").read()
    if s.count(old) != count: old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
    assert s.count(old) == count, (path, old, s.count(old))
    open(p, "w", newline="").write(s.replace(old, new))
def include(path):
    p = w + "/" + path; s = open(p, newline="").read()
    open(p, "w", newline="").write('#include "graft_check.h"' + ("\r\n" if "\r\n" in s else "\n") + s)
check = r'''#ifndef GRAFT_CHECK_H
#define GRAFT_CHECK_H
/* Added for graft's tests: a 64-bit hash of a result array's bytes. */
#include <stdio.h>
#include <string.h>
#include <stdint.h>
static void graft_check(const char *name, const void *p, size_t n) {
  const unsigned char *b = (const unsigned char *)p;
  uint64_t h = 1469598103934665603ULL, v;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) { memcpy(&v, b + i, 8); h = (h ^ v) * 1099511628211ULL; h ^= h >> 32; }
  for (; i < n; i++) { h = (h ^ b[i]) * 1099511628211ULL; h ^= h >> 32; }
  printf("graft-check %s %zu %016llx\n", name, n, (unsigned long long)h);
  fflush(stdout);
}
#endif
'''
for d in ["gaussian", "lud/cuda", "nw", "pathfinder", "srad/srad_v2", "hotspot", "bfs",
          "particlefilter", "streamcluster"]:
    open(w + "/" + d + "/graft_check.h", "w").write(check)

# gaussian
g = "gaussian/gaussian.cu"
include(g)
patch(g, "cudaThreadSynchronize()", "cudaDeviceSynchronize()", 2)
patch(g, "deviceProp.clockRate );",
      "[&]{ int v_ = 0; cudaDeviceGetAttribute(&v_, cudaDevAttrClockRate, nDeviceIdx); return v_; }() );")
patch(g, "deviceProp. deviceOverlap?",
      "[&]{ int v_ = 0; cudaDeviceGetAttribute(&v_, cudaDevAttrGpuOverlap, nDeviceIdx); return v_; }()?")
patch(g, "    BackSub();\n",
      "    BackSub();\n    graft_check(\"m\", m, Size * Size * sizeof(float));\n"
      "    graft_check(\"a\", a, Size * Size * sizeof(float));\n"
      "    graft_check(\"b\", b, Size * sizeof(float));\n"
      "    graft_check(\"x\", finalVec, Size * sizeof(float));\n")

# lud
l = "lud/cuda/lud.cu"
include(l)
patch(l, "  cudaFree(d_m);\n",
      "  cudaFree(d_m);\n  graft_check(\"lu\", m, (size_t)matrix_dim * matrix_dim * sizeof(float));\n")

# nw
n = "nw/needle.cu"
include(n)
patch(n, "	cudaFree(referrence_cuda);\n",
      "	graft_check(\"score\", output_itemsets, (size_t)size * sizeof(int));\n"
      "	cudaFree(referrence_cuda);\n")

# pathfinder
p = "pathfinder/pathfinder.cu"
include(p)
patch(p, "    cudaFree(gpuWall);\n",
      "    graft_check(\"result\", result, (size_t)cols * sizeof(int));\n    cudaFree(gpuWall);\n")

# srad_v2
s = "srad/srad_v2/srad.cu"
include(s)
patch(s, "cudaThreadSynchronize()", "cudaDeviceSynchronize()")
patch(s, '	printf("Computation Done\\n");\n',
      '	graft_check("J", J, (size_t)size_I * sizeof(float));\n	printf("Computation Done\\n");\n')

# hotspot
h = "hotspot/hotspot.cu"
include(h)
patch(h, "    writeoutput(MatrixOut,grid_rows, grid_cols, ofile);\n",
      "    graft_check(\"temp\", MatrixOut, (size_t)size * sizeof(float));\n"
      "    writeoutput(MatrixOut,grid_rows, grid_cols, ofile);\n")

# bfs
b = "bfs/bfs.cu"
include(b)
patch(b, "	//Store the result into a file\n",
      "	graft_check(\"cost\", h_cost, (size_t)no_of_nodes * sizeof(int));\n	//Store the result into a file\n")

# particlefilter (float)
f = "particlefilter/ex_particle_CUDA_float_seq.cu"
include(f)
patch(f, "cudaThreadSynchronize()", "cudaDeviceSynchronize()")
patch(f, "seed[i] = time(0) * i;", "seed[i] = 1700000000L * i;")
patch(f, "unsigned char * I = (unsigned char *) malloc(sizeof (unsigned char) *IszX * IszY * Nfr);",
      "unsigned char * I = (unsigned char *) calloc(1, sizeof (unsigned char) *IszX * IszY * Nfr);")
patch(f, "unsigned char * newMatrix = (unsigned char *) malloc(sizeof (unsigned char) * IszX * IszY * Nfr);",
      "unsigned char * newMatrix = (unsigned char *) calloc(1, sizeof (unsigned char) * IszX * IszY * Nfr);")
patch(f, '    printf("XE: %lf\\n", xe);\n',
      '    graft_check("arrayX", arrayX, sizeof (double) *Nparticles);\n'
      '    graft_check("arrayY", arrayY, sizeof (double) *Nparticles);\n'
      '    graft_check("weights", weights, sizeof (double) *Nparticles);\n'
      '    printf("XE: %lf\\n", xe);\n')

# streamcluster
c = "streamcluster/streamcluster_cuda.cu"
patch(c, "cudaThreadSynchronize()", "cudaDeviceSynchronize()")
c = "streamcluster/streamcluster_cuda_cpu.cpp"
include(c)
patch(c, "  int* is_a_median = (int*)calloc( sizeof(int), centers->num );\n",
      "  int* is_a_median = (int*)calloc( sizeof(int), centers->num );\n"
      "  for( int i = 0; i < centers->num; i++ ) {\n"
      "    graft_check(\"center\", centers->p[i].coord, centers->dim * sizeof(float));\n"
      "    graft_check(\"weight\", &centers->p[i].weight, sizeof(float));\n"
      "    graft_check(\"assign\", &centers->p[i].assign, sizeof(long));\n"
      "  }\n")
PY
  (cd "$W" && { diff -ruN -x graft_check.h orig/cuda cuda; diff -uN /dev/null cuda/bfs/graft_check.h; } > "$D/source-changes.diff"; true)
  F="-O2 -arch=sm_90"; C="$W/cuda"; mkdir -p $D/{gaussian,lud,nw,pathfinder,srad_v2,hotspot,bfs,particlefilter,streamcluster}
  set -e
  (cd $C/gaussian && nvcc $F gaussian.cu -o $D/gaussian/gaussian)
  (cd $C/lud/cuda && nvcc $F -I../common lud.cu lud_kernel.cu ../common/common.c -o $D/lud/lud_cuda)
  (cd $C/nw && nvcc $F needle.cu -o $D/nw/needle)
  (cd $C/pathfinder && nvcc $F pathfinder.cu -o $D/pathfinder/pathfinder)
  (cd $C/srad/srad_v2 && nvcc $F srad.cu -o $D/srad_v2/srad)
  (cd $C/hotspot && nvcc $F hotspot.cu -o $D/hotspot/hotspot)
  (cd $C/bfs && nvcc $F bfs.cu -o $D/bfs/bfs)
  (cd $C/particlefilter && nvcc $F ex_particle_CUDA_float_seq.cu -o $D/particlefilter/particlefilter_float)
  (cd $C/streamcluster && nvcc $F streamcluster_cuda_cpu.cpp streamcluster_cuda.cu streamcluster_header.cu -o $D/streamcluster/sc_gpu)
  set +e
  python3 - "$D" <<'PY' || exit 1
import random, sys
d = sys.argv[1]
# hotspot: 512x512 initial temperatures (K) and power, one value a line, as
# Rodinia's data/hotspot/temp_512 and power_512 (not in the repository).
r = random.Random(512)
with open(d + "/hotspot/temp_512", "w") as f:
    f.write("".join("%.3f\n" % (320 + 20 * r.random()) for _ in range(512 * 512)))
with open(d + "/hotspot/power_512", "w") as f:
    f.write("".join("%.6f\n" % (0.001 * r.random() ** 3) for _ in range(512 * 512)))
# bfs: a W x L grid (4-neighbour, both directions) with some random extra
# edges between nodes at most 3 columns apart: about L BFS levels.
W, L = 8, 12000
r = random.Random(8)
node = lambda x, y: y * W + x
adj = [[] for _ in range(W * L)]
def edge(a, b):
    if a != b and b not in adj[a]: adj[a].append(b); adj[b].append(a)
for y in range(L):
    for x in range(W):
        if x + 1 < W: edge(node(x, y), node(x + 1, y))
        if y + 1 < L: edge(node(x, y), node(x, y + 1))
        if r.random() < 0.1:
            edge(node(x, y), node(r.randrange(W), min(L - 1, y + r.randrange(4))))
out, start = ["%d\n" % (W * L)], 0
for a in adj:
    out.append("%d %d\n" % (start, len(a))); start += len(a)
out.append("\n0\n\n%d\n" % start)
for a in adj:
    out.extend("%d %d\n" % (b, 1 + r.randrange(9)) for b in a)
open(d + "/bfs/graph.txt", "w").write("".join(out))
PY
  rm -rf "$W"; du -sh "$D"; echo "gpu-rodinia: built $D"; exit 0
fi

B=${1:-.gpu/build}; R=${2:-.gpu/rodinia}; NAMES=${3:-$PROGS}
BA=$(cd "$B" && pwd); RA=$(cd "$R" && pwd); O=${OUT:-/tmp}/rodinia; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
# name;binary;arguments (@: the program's folder);stdout lines left out (timing, an ERE);files it writes
CONFIGS="gaussian;gaussian;-s 3072;^Time ;
lud;lud_cuda;-s 16384;^Time consumed;
nw;needle;16384 10;;
pathfinder;pathfinder;8192 10001 2;;
srad_v2;srad;512 512 0 127 0 127 0.5 2000;;
hotspot;hotspot;512 2 40000 @/temp_512 @/power_512 output.out;;output.out
bfs;bfs;@/graph.txt;;result.txt
particlefilter;particlefilter_float;-x 64 -y 64 -z 3000 -np 512;(TIME|TOOK|GPU Execution|SEND .* BACK);
streamcluster;sc_gpu;10 20 16 16384 8192 1000 none output.txt 1;^time;output.txt"
now() { date +%s.%N; }
rows=()
while IFS=';' read -r name bin args drop files; do
  case " $NAMES " in *" $name "*) ;; *) continue ;; esac
  shown=$args; args=${args//@/$RA/$name}; rcs=""; secs=""
  for run in eager1 eager2 graft; do
    mkdir -p $O/$name.$run; cd $O/$name.$run
    pre=(); [ $run = graft ] && pre=(env GRAFT_STATS=$O/$name.graft.json GRAFT_LOG_FILE=$O/$name.graft.glog LD_PRELOAD=$BA/src/libgraft.so)
    t0=$(now)
    "${pre[@]}" timeout 120 $RA/$name/$bin $args < /dev/null > $O/$name.$run.log 2> $O/$name.$run.err; rc=$?
    rcs="$rcs${rcs:+/}$rc"; secs="$secs${secs:+ | }$(python3 -c "print('%.2f' % ($(now) - $t0))")"
    { if [ -n "$drop" ]; then grep -Ev "$drop" $O/$name.$run.log; else cat $O/$name.$run.log; fi
      for f in $files; do echo "file $f $([ -f $f ] && sha256sum < $f | cut -c1-64 || echo missing)"; done
    } > $O/$name.$run.result
    cd - >/dev/null
  done
  n=$(grep -c '^graft-check' $O/$name.eager1.result)
  if [ "$rcs" != 0/0/0 ] || [ "$n" -eq 0 ]; then verdict="ERROR (rc $rcs, $n checks)"
  elif ! cmp -s $O/$name.eager1.result $O/$name.eager2.result; then verdict=EAGER-NONDET
  elif cmp -s $O/$name.eager1.result $O/$name.graft.result; then verdict=EQUAL
  else verdict=DIFFERS; diff $O/$name.eager1.result $O/$name.graft.result | head -6; fi
  cov=$(python3 -c "
import json,sys
p=json.load(open(sys.argv[1]))['replay']
fb=sorted(p.get('fallbacks',{}).items(), key=lambda kv:-kv[1])[:3]
print('%s | %.1f %% | %s | %s' % (p['ops_total'], p['coverage_pct'], p['replays'],
      ', '.join('%s %s' % kv for kv in fb) or '-'))" $O/$name.graft.json 2>/dev/null || echo "? | ? | ? | ?")
  rows+=("| $name | $shown | $verdict | $n | $cov | $secs |")
done <<< "$CONFIGS"
echo
echo "| program | arguments | output vs eager | checks | ops | through graphs | replays | top fallbacks | eager s | eager s (2nd) | graft s |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
