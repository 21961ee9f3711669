#!/usr/bin/env python3
"""Per-op footprint of graft from a lackey memory trace (see scripts/footprint).

  footprint.py TRACE OUT SKIP
TRACE: valgrind --tool=lackey --trace-mem=yes log; OUT: op_cost --mark output
(its /proc/self/maps lines and the marker address); SKIP: ops to drop first.
Each op is the window between two reads of the marker. Prints distinct data
and code lines and pages per op, by mapping, then graft's data lines by the
function that touched them first and graft's code lines by function."""
import sys, collections, subprocess
trace, out = sys.argv[1], sys.argv[2]
skip = int(sys.argv[3])
maps = []
marker = None
for l in open(out, errors='replace'):
    if l.startswith('map '):
        parts = l[4:].split()
        lo, hi = [int(x, 16) for x in parts[0].split('-')]
        maps.append((lo, hi, parts[1], int(parts[2], 16), parts[5] if len(parts) > 5 else '[anon]'))
    if l.startswith('marker='): marker = int(l.split('=')[1], 16)
def where(a):
    for lo, hi, perm, off, name in maps:
        if lo <= a < hi: return name.split('/')[-1] + ':' + perm, lo, off
    return '?', 0, 0
ops = []; cur = None
lastI = None
with open(trace) as f:
    for line in f:
        if len(line) < 4: continue
        t = line[:2].strip()
        if t not in ('I','L','S','M'): continue
        try: a = int(line[3:].split(',')[0], 16)
        except ValueError: continue
        if t != 'I' and a == marker:
            if cur is not None: ops.append(cur)
            cur = [dict(), set()]
            continue
        if cur is None: continue
        if t == 'I':
            cur[1].add(a >> 6); lastI = a
        else:
            cur[0].setdefault(a >> 6, lastI)
ops = ops[skip:]
n = len(ops)
dl = collections.Counter(); cl = collections.Counter(); byregion = collections.Counter(); dpages = collections.Counter(); cpages=collections.Counter()
instr_of_line = {}
for d, c in ops:
    for ln, ia in d.items():
        dl[ln] += 1; instr_of_line.setdefault(ln, ia)
    for pg in {ln >> 6 for ln in d}: dpages[pg] += 1
    for ln in c: cl[ln] += 1
    for pg in {ln >> 6 for ln in c}: cpages[pg] += 1
print(f"ops {n}: data lines {sum(dl.values())/n:.1f}, data pages {sum(dpages.values())/n:.1f}, code lines {sum(cl.values())/n:.1f}, code pages {sum(cpages.values())/n:.1f}")
reg = collections.Counter(); regp = collections.Counter()
for ln, k in dl.items(): reg[where(ln << 6)[0]] += k / n
for pg, k in dpages.items(): regp[where(pg << 12)[0]] += k / n
print("data lines/pages per op by region:")
for r, v in reg.most_common(): print(f"  {v:6.1f} lines {regp[r]:5.1f} pages  {r}")
reg = collections.Counter(); regp = collections.Counter()
for ln, k in cl.items(): reg[where(ln << 6)[0]] += k / n
for pg, k in cpages.items(): regp[where(pg << 12)[0]] += k / n
print("code lines/pages per op by region:")
for r, v in reg.most_common(): print(f"  {v:6.1f} lines {regp[r]:5.1f} pages  {r}")
# data lines attributed to the graft function that first touched them
lib = [m for m in maps if 'libgraft' in m[4] and 'x' in m[2]][0]
addrs = []
for ln, k in dl.items():
    ia = instr_of_line[ln]
    if ia and lib[0] <= ia < lib[1]: addrs.append((ln, k, ia - lib[0] + lib[3]))
syms = {}
if addrs:
    res = subprocess.run(['addr2line', '-f', '-C', '-e', lib[4]] + [hex(a[2]) for a in addrs], capture_output=True, text=True).stdout.split('\n')
    for i, a in enumerate(addrs): syms[a[0]] = res[2*i][:90]
fn = collections.Counter()
regfn = collections.Counter()
for ln, k, _ in addrs: fn[syms[ln]] += k / n; regfn[(where(ln<<6)[0], syms[ln])] += k/n
other = sum(dl.values())/n - sum(fn.values())
print(f"data lines per op by first-touching graft function (+{other:.1f} by other code):")
for f_, v in fn.most_common(40): print(f"  {v:5.1f}  {f_}")

print("by region and function:")
for (r,f_),v in regfn.most_common(40): print(f"  {v:5.1f} {r:22s} {f_}")
# code lines by graft function
cf = collections.Counter()
caddrs = [(ln,k) for ln,k in cl.items() if lib[0] <= (ln<<6) < lib[1]]
res = subprocess.run(['addr2line', '-f', '-C', '-e', lib[4]] + [hex((ln<<6) - lib[0] + lib[3]) for ln,_ in caddrs], capture_output=True, text=True).stdout.split('\n')
for i,(ln,k) in enumerate(caddrs): cf[res[2*i][:90]] += k/n
print("graft code lines per op by function:")
for f_,v in cf.most_common(25): print(f"  {v:5.1f} {f_}")
