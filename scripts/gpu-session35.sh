#!/usr/bin/env bash
# Thirty-fifth session: traps_r13 (listed, then the unlisted timing scenarios
# eager against graft), then check_losses.py over the fifth PyTorch round.
#   OUT=dir [CASES=a,b] scripts/gpu-session35.sh
export PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8
B=$PWD/.gpu/build
python3 tests/gpu/check_traps.py --traps $B/tests/gpu/traps_r13 --libgraft $B/src/libgraft.so --out /tmp/r13b --timeout 150 > /tmp/r13b.txt 2>&1; echo "traps_r13 rc=$?"
for s in idle_record_query stream_pool_pick mapped_flag_deadline gridid_sequence helper_polls_held; do
  $B/tests/gpu/traps_r13 $s > /tmp/u_e_$s.txt 2>/dev/null; LD_PRELOAD=$B/src/libgraft.so GRAFT_LOG_LEVEL=warn $B/tests/gpu/traps_r13 $s > /tmp/u_g_$s.txt 2>/dev/null
  echo "unlisted $s: $(cmp -s /tmp/u_e_$s.txt /tmp/u_g_$s.txt && echo EQUAL || echo DIFFERS) | eager: $(head -1 /tmp/u_e_$s.txt) | graft: $(head -1 /tmp/u_g_$s.txt)"
done
timeout 420 python3 tests/gpu/check_losses.py --libgraft $B/src/libgraft.so --cases ${CASES:-bncma,qat,ampfused,profwin,dyncompile,ipcactor} --steps 300 --out /tmp/l13 --timeout 200 > /tmp/l13.txt 2>&1; echo "check_losses rc=$?"
tar czf $OUT/g13.tgz -C /tmp r13b r13b.txt l13.txt l13 2>/dev/null
sed -n '/=== RESULT ===/,$p' /tmp/r13b.txt
sed -n '/=== RESULT ===/,$p' /tmp/l13.txt; tail -5 /tmp/l13.txt
