import re, glob, json, statistics, datetime
rows = []
for arm in ("c1", "c2"):
    for i in (1, 2, 3):
        try:
            s = open(f"/tmp/ab/{arm}-{i}.out").read()
        except FileNotFoundError:
            continue
        m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\d+):([\d.]+)", s)
        if not m: continue
        wall = int(m.group(1)) * 60 + float(m.group(2))
        ts = lambda pat: datetime.datetime.strptime(re.search(r"^(\S+ \S+),\d+ INFO " + pat, s, re.M).group(1), "%Y-%m-%d %H:%M:%S")
        sweep = (ts(r"ftplat.tune.test_score") - ts(r"ftplat.tune.sweep: Sweep")).total_seconds()
        score = (ts(r"ftplat.tune.sweep: Checkpoint retention") - ts(r"ftplat.tune.test_score")).total_seconds()
        val = re.search(r"eval_accuracy\[last\]=([\d.]+), best", s).group(1)
        test = re.search(r"test_accuracy=([\d.]+)", s).group(1)
        rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", s).group(1))
        cost = re.search(r"cost: (.*)", s).group(1)
        rows.append(dict(arm=arm, i=i, wall=wall, sweep=sweep, score=score, val=val, test=test, rss_gib=round(rss/2**20,2), cost=cost))
for r in rows: print(r)
for arm in ("c1","c2"):
    w=[r["wall"] for r in rows if r["arm"]==arm]; sw=[r["sweep"] for r in rows if r["arm"]==arm]
    if w: print(arm, "wall median", statistics.median(w), min(w), max(w), "sweep median", statistics.median(sw), min(sw), max(sw))
