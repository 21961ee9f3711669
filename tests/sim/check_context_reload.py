#!/usr/bin/env python3
"""Runs sim_context_reload under graft (env from meson, GRAFT_LOG_LEVEL=info)
and checks that graft dropped each context's graphs at its destroy (its log
says so twice, and no graph is live at exit), and that graphs were built and
replayed in both contexts.

  check_context_reload.py EXE
"""
import json
import os
import subprocess
import sys
import tempfile

exe = sys.argv[1]
with tempfile.TemporaryDirectory() as d:
    stats = os.path.join(d, "stats.json")
    env = dict(os.environ, GRAFT_STATS=stats)
    p = subprocess.run([exe], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    print(p.stdout.strip())
    if p.returncode != 0:
        print("check_context_reload: the program failed (exit %d)" % p.returncode)
        sys.exit(1)
    r = json.load(open(stats))["replay"]
    built, live, replays = r["graphs_built"], r["segments"], r["replays"]
    drops = p.stdout.count("the program unloaded code")
    print("check_context_reload: graphs built %d, live at exit %d, replays %d, drops logged %d"
          % (built, live, replays, drops))
    if built < 2 or live != 0 or replays < 4 or drops != 2:
        print("check_context_reload: FAIL: expected graphs built and replayed in both contexts, and "
              "dropped at each destroy")
        sys.exit(1)
print("check_context_reload: PASS")
