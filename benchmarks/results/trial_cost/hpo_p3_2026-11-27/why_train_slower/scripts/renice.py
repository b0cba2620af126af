"""Experiment: keep every process but the Train workers (and this one) at nice N."""
import os, sys, time
n, stop = int(sys.argv[1]), sys.argv[2]
me = os.getpid()
while not os.path.exists(stop):
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) in (1, me): continue
        try:
            cmd = open(f"/proc/{p}/cmdline", "rb").read()
            if not cmd: continue
            want = 0 if cmd.startswith(b"ray::RayTrainWorker") else n
            for t in os.listdir(f"/proc/{p}/task"):
                if os.getpriority(os.PRIO_PROCESS, int(t)) != want:
                    os.setpriority(os.PRIO_PROCESS, int(t), want)
        except (FileNotFoundError, ProcessLookupError, PermissionError, OSError):
            pass
    time.sleep(0.3)
