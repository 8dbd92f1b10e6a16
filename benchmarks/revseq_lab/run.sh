#!/usr/bin/env bash
# The lab's device call, from the repository root with PYTHONPATH set (src and the root):
# the timings (lab.json, lab.log), then Nsight Compute's counters on the production
# kernels, the lab's replica of the axis-0 kernel and the best candidate of each axis
# (ncu.csv: one row a kernel, the raw page). Everything lands in $OUT. ONLY: a regular
# expression choosing lab.py's rows; PICK: the labels ncu profiles (';' between).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/lab.log"
timeout ${LAB_S:-150} python3 benchmarks/revseq_lab/lab.py --out "$OUT" --reps ${REPS:-9} --only "${ONLY:-}" 2>&1 | grep -v -i warn | tee -a "$OUT/lab.log"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU" | tee -a "$OUT/lab.log"
[ -n "$NCU" ] && [ -f "$OUT/lab.json" ] || exit 0
PICK=${PICK:-$(python3 - "$OUT/lab.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
pick = ["prod0", "prod2", "a0_single", "copy16 (contiguous 16-byte copy)", "a0_single_copy (staged, not reversed)",
        "a0_walk_copy (same lines, no staging)"]
for ax in (0, 2):
    ok = [r for r in rows if r["axis"] == ax and r.get("equal") and r["kernel"].startswith("cand_") and "copy" not in r["kernel"]]
    best = min(ok, key=lambda r: r["ms"])["label"] if ok else None
    if best and best not in pick:
        pick.append(best)
print(";".join(pick))
PY
)}
echo "profiled: $PICK" | tee -a "$OUT/lab.log"
timeout ${NCU_S:-120} "$NCU" --clock-control none -k 'regex:ix_reverse|cand_|^w_' -c 9 \
    --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,sm__warps_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,launch__registers_per_thread,launch__occupancy_limit_shared_mem,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum \
    --page raw --csv python3 benchmarks/revseq_lab/lab.py --profile "$PICK" > "$OUT/ncu.csv" 2> "$OUT/ncu.err"
echo "ncu rc=$?" | tee -a "$OUT/lab.log"
tail -5 "$OUT/ncu.err" | tee -a "$OUT/lab.log"
python3 - "$OUT/ncu.csv" <<'PY' 2>&1 | tee -a "$OUT/lab.log"
import csv, sys
rows = list(csv.reader(l for l in open(sys.argv[1]) if l.startswith('"')))
if not rows: sys.exit("no ncu rows")
head, units, data = rows[0], rows[1], rows[2:]
want = ["Kernel Name", "gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed", "lts__t_sector_hit_rate.pct",
        "sm__warps_active.avg.pct_of_peak_sustained_active", "launch__registers_per_thread",
        "launch__occupancy_limit_shared_mem", "lts__t_sectors_srcunit_tex_op_read.sum", "lts__t_sectors_srcunit_tex_op_write.sum"]
stall = [h for h in head if "issue_stalled" in h and "not_issued" not in h]
def num(v):
    try:
        return float(v.replace(',', ''))
    except ValueError:
        return -1.0
for r in data:
    d = dict(zip(head, r))
    print(" | ".join(f"{k.split('__')[-1] if '__' in k else k}={d.get(k, '?')[:40]}" for k in want))
    top = sorted(((num(d[h]), h) for h in stall if d.get(h)), reverse=True)[:8]
    print("   stalls: " + ", ".join(f"{h.split('stalled_')[1]} {v:.2f}" for v, h in top))
PY
