import os, sys, time, collections, ray
ray.init(num_cpus=8, include_dashboard=False, logging_level="ERROR")
@ray.remote(num_cpus=0)
class A:
    def pid(self): return os.getpid()
actors = [A.remote() for _ in range(8)]
pids = ray.get([a.pid.remote() for a in actors])
time.sleep(5)
def snap():
    out = {}
    for p in pids:
        for t in os.listdir(f"/proc/{p}/task"):
            s = open(f"/proc/{p}/task/{t}/stat").read()
            comm = s[s.index("(")+1:s.rindex(")")]
            r = s.rsplit(")", 1)[1].split()
            out[(p, t)] = (comm, int(r[11]) + int(r[12]))
    return out
a = snap(); time.sleep(20); b = snap()
by = collections.Counter()
for k, (comm, c) in b.items():
    if k in a: by[comm] += c - a[k][1]
tot = sum(by.values())
print(f"{os.environ.get('TAG','')}: per actor {tot/len(pids)/20:.2f}% of a core;", dict(by.most_common(8)))
ray.shutdown()
