# The move_padr setting with the best worst-row fraction of copy in a --variants sweep (gpu-h200.json).
import json, sys, collections
d = json.load(open(sys.argv[1]))
by = collections.defaultdict(list)
for r in d["rows"]:
    if r.get("variant", {}).get("FUSE_PAD") == "padr":
        by[tuple(r["variant"]["PAD_ROWS"])].append(r["kernel_fraction"])
    elif "variant" not in r and r["op"].startswith("pad"):
        by[tuple(d["meta"]["defaults"]["PAD_ROWS"])].append(r["kernel_fraction"])
for k, v in sorted(by.items(), key=lambda kv: -min(kv[1])):
    print(k, "min %.3f mean %.3f" % (min(v), sum(v) / len(v)), file=sys.stderr)
best = max(by.items(), key=lambda kv: min(kv[1]))[0]
print(",".join(map(str, best)))
