#!/usr/bin/env bash
# scripts/graft as a user meets it: --help prints its usage, --options the
# GRAFT_* table, an unknown option one line and exit 2, and a command runs with
# libgraft preloaded (its exit code passed through).
#   graft_script.sh SOURCE_ROOT BUILD_DIR
set -u
root=$1 build=$2
export GRAFT_BUILD_DIR=$build
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
expect() {  # description, wanted exit code, pattern, command...
  local what=$1 want=$2 pattern=$3
  shift 3
  "$@" >"$tmp/out" 2>&1
  local rc=$?
  if [ $rc -ne "$want" ]; then
    echo "FAIL: $what: exit $rc, expected $want"; sed 's/^/  | /' "$tmp/out" | head -10; fail=1
  elif [ -n "$pattern" ] && ! grep -qF -- "$pattern" "$tmp/out"; then
    echo "FAIL: $what: no line containing: $pattern"; sed 's/^/  | /' "$tmp/out" | head -10; fail=1
  else
    echo "ok: $what"
  fi
}
expect "--help prints the usage" 0 "scripts/graft [command...]" "$root/scripts/graft" --help
expect "--options prints the options table" 0 '| `GRAFT_MODE` |' "$root/scripts/graft" --options
expect "an unknown option is one line and exit 2" 2 "graft: unknown option '--fast'" "$root/scripts/graft" --fast
[ "$(wc -l <"$tmp/out")" -eq 1 ] || { echo "FAIL: more than one line for an unknown option"; fail=1; }
expect "a command runs with libgraft preloaded" 0 "$build/src/libgraft.so" \
  "$root/scripts/graft" bash -c 'echo "$LD_PRELOAD"'
expect "the command's exit code is passed through" 3 "" "$root/scripts/graft" bash -c 'exit 3'
expect "-- ends graft's options" 4 "" "$root/scripts/graft" -- bash -c 'exit 4'
expect "a missing command is one line and exit 127" 127 "graft: no-such-command-here: command not found" \
  "$root/scripts/graft" no-such-command-here
[ "$(wc -l <"$tmp/out")" -eq 1 ] || { echo "FAIL: more than one line for a missing command"; fail=1; }
# A relative GRAFT_BUILD_DIR still preloads graft in a child that changes directory.
(cd "$build/.." && GRAFT_BUILD_DIR=$(basename "$build") "$root/scripts/graft" bash -c 'cd /; echo "$LD_PRELOAD"') >"$tmp/out" 2>&1
case "$(head -1 "$tmp/out")" in
  /*libgraft.so) echo "ok: a relative build directory gives an absolute LD_PRELOAD" ;;
  *) echo "FAIL: LD_PRELOAD is not absolute with a relative GRAFT_BUILD_DIR"; sed 's/^/  | /' "$tmp/out" | head -5; fail=1 ;;
esac
exit $fail
