import json, sys
d = json.load(open(sys.argv[1]))
names, first, last = d["names"], d["first"], d["last"]
rows = []
for p in last:
    t0, c0 = first[p]; t1, c1 = last[p]
    rows.append((c1 - c0, t1 - t0, p, names.get(p, "")))
rows.sort(reverse=True)
tot = sum(r[0] for r in rows)
print(f"total cpu {tot:.1f}s over {d['series'][-1][0]-d['series'][0][0]:.1f}s wall")
for cpu, life, p, n in rows[:30]:
    print(f"{cpu:7.1f}s {life:6.1f}s {p:>7} {n[:120]}")
