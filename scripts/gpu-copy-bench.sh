#!/usr/bin/env bash
# Device copies and memsets on the GPU: eager, a runtime-captured graph (memcpy
# and memset nodes) and graft (graft's copy kernels), per size, ROUNDS rounds
# interleaved; prints microseconds per step, the median of the rounds.
# OFFSET (default 0): copy_bench --offset (sources K bytes into their buffers).
# LIB (environment): another library under BUILD/src than libgraft.so.
#   scripts/gpu-copy-bench.sh BUILD [ROUNDS] [SIZES] [OFFSET]
B=${1:-.gpu/build}; ROUNDS=${2:-3}; SIZES=${3:-"4096 1048576 16777216 134217728"}; OFF=${4:-0}
X=$B/bench/copy_bench; L=$PWD/$B/src/${LIB:-libgraft.so}; O=$(mktemp -d)
for r in $(seq $ROUNDS); do
  for n in $SIZES; do
    $X --bytes $n --mode eager --offset $OFF >> $O/eager.$n
    $X --bytes $n --mode graph --offset $OFF >> $O/graph.$n
    LD_PRELOAD=$L GRAFT_LOG_LEVEL=warn $X --bytes $n --mode eager --offset $OFF >> $O/graft.$n
  done
done
echo "offset $OFF, ${LIB:-libgraft.so}"
printf "%12s %10s %10s %10s %14s\n" bytes eager_us graph_us graft_us graft/graph
for n in $SIZES; do
  med() { awk '{print $3}' $O/$1.$n | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
  e=$(med eager); g=$(med graph); f=$(med graft)
  printf "%12s %10s %10s %10s %14s\n" $n $e $g $f $(awk -v f=$f -v g=$g 'BEGIN {printf "%.3f", f/g}')
done
