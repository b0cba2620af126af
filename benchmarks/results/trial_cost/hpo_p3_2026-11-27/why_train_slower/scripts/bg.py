import os, sys, time
n, stop = int(sys.argv[1]), sys.argv[2]
for i in range(n - 1):
    if os.fork() == 0: break
while not os.path.exists(stop):
    t = time.perf_counter()
    while time.perf_counter() - t < 0.0002: pass
    time.sleep(0.02)
