import json, sys
d = json.load(open(sys.argv[1])); wpid = sys.argv[2]; lo, hi = float(sys.argv[3]), float(sys.argv[4])
series = d["series"]; names = d["names"]
ts = [t for t, s in series if wpid in s]
t0, t1 = ts[0] + lo, ts[0] + hi
a = min(series, key=lambda x: abs(x[0]-t0)); b = min(series, key=lambda x: abs(x[0]-t1))
dt = b[0]-a[0]
rows = sorted(((b[1][p]-a[1][p], p) for p in b[1] if p in a[1]), reverse=True)
print(f"window {dt:.1f}s; total {sum(r[0] for r in rows)/dt:.2f} cores")
for c, p in rows[:15]:
    print(f"{c/dt*100:6.1f}% {p:>7} {names.get(p,'')[:110]}")
