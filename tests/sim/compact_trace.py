#!/usr/bin/env python3
"""Compacts graft's trace log (its `token` lines) into a sim_trace_replay trace.

Token hashes, streams and events are renamed to small numbers in order of first
use (stream 0x1, the legacy stream, and 0x2, the per-thread one, stay), kernel
and copy descriptions shrink to their first word. Prints the trace's length and
a loop window for sim_trace_replay: the longest tail that is whole periods of
the shortest period the tail repeats with (checked over the last two periods);
without one, from a quarter of the trace to its end.

  compact_trace.py LOG[.gz] OUT[.gz] [--first N]   (--first: keep the first N ops)
"""
import argparse
import gzip
import re
import sys


def open_text(path, mode="rt"):
    return gzip.open(path, mode) if path.endswith(".gz") else open(path, mode[0])


def compact(lines):
    tokens, streams, events = {}, {"0x1": "0x1", "0x2": "0x2"}, {}

    def rename(value, table, base):
        if value not in table:
            table[value] = hex(base + len(table))
        return table[value]

    out = []
    for line in lines:
        m = re.search(r"token (0x[0-9a-f]+) (.*)", line)
        if not m:
            continue
        tok, rest = rename(m.group(1), tokens, 0x10), m.group(2).rstrip()
        if rest.startswith("barrier"):
            out.append(f"token {tok} barrier")
            continue
        m2 = re.match(r"op stream (0x[0-9a-f]+) (.*)", rest)
        if not m2:
            continue
        stream, desc = rename(m2.group(1), streams, 0x100), m2.group(2)
        boundary = " (boundary)" if desc.endswith("(boundary)") else ""
        for kind in ("event record", "stream wait on event"):
            if desc.startswith(kind + " event "):
                event = desc[len(kind) + 7:].split()[0]
                out.append(f"token {tok} op stream {stream} {kind} event {rename(event, events, 0x1000)}{boundary}")
                break
        else:
            out.append(f"token {tok} op stream {stream} {desc.split()[0]}{boundary}")
    return out


def loop_window(out):
    """Whole periods at the trace's end, before its last step (which may end
    differently) and the program's exit (barriers)."""
    keys = [line.split(" event ")[0] for line in out]  # shapes, not event names
    n = len(keys)
    while n and (keys[n - 1].endswith("barrier") or keys[n - 1].endswith("(boundary)")):
        n -= 1
    for end in range(n, max(n - 2000, 0), -1):
        for p in range(8, end // 3 + 1):
            if keys[end - 2 * p:end - p] == keys[end - p:end]:
                start = end - p
                while start - p >= 0 and keys[start - p:start] == keys[start:start + p]:
                    start -= p
                return start, end, p
    return n // 4, n, 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log")
    ap.add_argument("out")
    ap.add_argument("--first", type=int, default=0)
    a = ap.parse_args()
    with open_text(a.log) as f:
        out = compact(f)
    if a.first:
        out = out[:a.first]
    with open_text(a.out, "wt") as f:
        f.write("\n".join(out) + "\n")
    first, end, period = loop_window(out)
    print(f"{a.out}: {len(out)} ops; --loop {first}:{end} (period {period or 'none found'})")


if __name__ == "__main__":
    sys.exit(main())
