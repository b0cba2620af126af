import sys, collections
f = sys.argv[1]; anchor = sys.argv[2] if len(sys.argv) > 2 else "Trainer._run_epoch"; depth = int(sys.argv[3]) if len(sys.argv) > 3 else 2
b = collections.Counter()
for line in open(f):
    stack, n = line.rstrip().rsplit(" ", 1); n = int(n)
    names = [fr.split(" (")[0] for fr in stack.split(";")[1:]]
    if anchor not in names: continue
    i = names.index(anchor)
    b[" > ".join(names[i+1:i+1+depth]) or "(itself)"] += n
s = sum(b.values()); print(f"{s/20:7.1f}s in {anchor}")
for k, n in b.most_common(16): print(f"{n/20:7.1f}s {k}")
