"""Sample per-process CPU time (utime+stime) every 0.5 s until the stop file appears."""
import os, sys, time, json
tck = os.sysconf("SC_CLK_TCK")
out, stop = sys.argv[1], sys.argv[2]
first, last, names, series = {}, {}, {}, []
me = os.getpid()
while not os.path.exists(stop):
    now = time.time()
    snap = {}
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) == me: continue
        try:
            with open(f"/proc/{p}/stat") as f: s = f.read()
            rest = s.rsplit(")", 1)[1].split()
            cpu = (int(rest[11]) + int(rest[12])) / tck
            if True:
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    names[p] = f.read().replace(b"\0", b" ").decode(errors="replace")[:160]
            first.setdefault(p, (now, cpu)); last[p] = (now, cpu); snap[p] = cpu
        except (FileNotFoundError, ProcessLookupError, IndexError):
            pass
    series.append((now, snap))
    time.sleep(0.5)
json.dump({"names": names, "first": first, "last": last, "series": series}, open(out, "w"))
