"""A long fuzz campaign: the generators and checks of ``tests/test_fuzz.py``
run in-process, many times, over every operator of ``opendml.ops.OPERATORS``.

    python -m benchmarks.fuzz_campaign                      # the defaults below
    python -m benchmarks.fuzz_campaign --descriptions 2000 --cli 500 --arrays 500 --jobs 2

Defaults: 100,000 descriptions across all operators (through the JSON form;
valid small ones run on the CPU, the compiled and NumPy kernels compared),
20,000 mutated example files through ``opendml.cli.main`` (run and validate),
20,000 array-API calls with random arguments. Work is split into chunks over
``--jobs`` processes (spawned, not forked). Every case has its own seed
(``SEED/kind/name/index``), so a finding replays alone: ``--replay KIND NAME
INDEX`` runs one case and shows its traceback.

Prints the counts per kind and class (valid/invalid/ran, the error classes,
exit codes) and every foreign exception (anything but a DmlError where one is
due, a traceback or a wrong exit code from the command line, a difference
between the CPU kernels, a case slower than ``--case-timeout``). Each finding
is saved with its reproducer under ``--out`` (``benchmarks/out/`` by default),
with ``summary.json``. Exit status: 0 when there are no findings, else 1.
"""
from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import os
import pathlib
import random
import signal
import sys
import tempfile
import time
import traceback

ROOT = pathlib.Path(__file__).resolve().parents[1]
KINDS = ("descriptions", "cli", "arrays")


class Hang(Exception):
    """A case ran longer than --case-timeout."""


def _alarm(signum, frame):
    raise Hang("the case ran longer than the time limit")


def _setup():
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import warnings
    warnings.simplefilter("ignore")
    from tests import test_fuzz
    return test_fuzz


def case_rng(seed: int, kind: str, name: str, index: int) -> random.Random:
    return random.Random(f"{seed}/{kind}/{name}/{index}")


def run_case(fz, kind: str, name: str, index: int, seed: int, scratch: str):
    """One case: (class, outcome, detail, finding or None)."""
    rng = case_rng(seed, kind, name, index)
    repro: dict = {"kind": kind, "name": name, "index": index, "seed": seed}
    try:
        if kind == "descriptions":
            from opendml.ops import OPERATORS
            obj = fz.random_description(rng, OPERATORS[name])
            repro["description"] = json.dumps(obj, default=str)
            outcome, detail = fz.check_description(obj)
            return name, outcome, detail, None
        if kind == "cli":
            text = fz.mutate_spec(rng, fz.EXAMPLES[int(name)])
            path = os.path.join(scratch, "spec.json")
            with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
                f.write(text)
            argv = fz.cli_argv(rng, path, scratch)
            repro.update(argv=argv, spec=text if len(text) < 20000 else text[:20000] + "...(cut)")
            rc = fz.check_cli(argv, text)
            return f"{argv[0]} {fz.EXAMPLES[int(name)].get('Name', name)}", f"exit {rc}", "", None
        fn, x, args = fz.random_array_call(rng)
        repro.update(function=fn.__name__, x=repr(x)[:2000], args=repr(args)[:2000])
        with fz.memory_limit():
            outcome, detail = fz.check_array_call(fn, x, args)
        return fn.__name__, outcome, detail, None
    except (fz.Foreign, Hang, Exception) as e:  # noqa: BLE001 - every finding is recorded
        repro["error"] = f"{type(e).__name__}: {e}"[:5000]
        repro["traceback"] = traceback.format_exc()[-5000:]
        return name, "FINDING", type(e).__name__, repro


def run_chunk(task):
    kind, name, start, count, seed, timeout = task
    fz = _setup()
    counts: collections.Counter = collections.Counter()
    findings, slowest = [], (0.0, None)
    with tempfile.TemporaryDirectory(prefix="opendml-fuzz-") as scratch:
        if hasattr(signal, "setitimer"):
            signal.signal(signal.SIGALRM, _alarm)
        for index in range(start, start + count):
            t0 = time.perf_counter()
            if hasattr(signal, "setitimer"):
                signal.setitimer(signal.ITIMER_REAL, timeout)
            try:
                cls, outcome, detail, finding = run_case(fz, kind, name, index, seed, scratch)
            finally:
                if hasattr(signal, "setitimer"):
                    signal.setitimer(signal.ITIMER_REAL, 0)
            elapsed = time.perf_counter() - t0
            if elapsed > slowest[0]:
                slowest = (elapsed, (kind, name, index))
            counts[(kind, cls, outcome, detail)] += 1
            if finding is not None:
                findings.append(finding)
    return counts, findings, slowest


def plan(args, fz) -> list[tuple]:
    from opendml.ops import OPERATORS
    chunk = args.chunk
    tasks = []

    def split(kind, names, total):
        per = [total // len(names) + (i < total % len(names)) for i in range(len(names))]
        for name, n in zip(names, per):
            for start in range(0, n, chunk):
                tasks.append((kind, name, start, min(chunk, n - start), args.seed, args.case_timeout))

    if args.descriptions:
        split("descriptions", sorted(OPERATORS), args.descriptions)
    if args.cli:
        split("cli", [str(i) for i in range(len(fz.EXAMPLES))], args.cli)
    if args.arrays:
        split("arrays", ["api"], args.arrays)
    random.Random(args.seed).shuffle(tasks)   # mix slow and fast chunks over the workers
    return tasks


def report(counts, findings, slowest, wall, args) -> dict:
    by_kind = collections.defaultdict(collections.Counter)
    for (kind, cls, outcome, detail), n in counts.items():
        by_kind[kind][(cls, outcome, detail)] += n
    lines = []
    summary = {"wall_s": round(wall, 1), "jobs": args.jobs, "seed": args.seed, "kinds": {}}
    for kind in KINDS:
        if kind not in by_kind:
            continue
        c = by_kind[kind]
        total = sum(c.values())
        lines.append(f"\n{kind}: {total} cases")
        per_class = collections.defaultdict(collections.Counter)
        for (cls, outcome, detail), n in c.items():
            per_class[cls][outcome] += n
            per_class[cls][f"{outcome}:{detail}" if detail else outcome + ":"] += 0
        k_summary = {}
        for cls in sorted(per_class):
            outcomes = {o: n for o, n in per_class[cls].items() if n and ":" not in o}
            details = collections.Counter()
            for (c2, outcome, detail), n in c.items():
                if c2 == cls and detail:
                    details[f"{outcome}/{detail}"] += n
            lines.append(f"  {cls:28s} " + ", ".join(f"{o} {n}" for o, n in sorted(outcomes.items())))
            if details:
                lines.append(f"  {'':28s}   by class: " + ", ".join(f"{d} {n}" for d, n in sorted(details.items())))
            k_summary[cls] = {"outcomes": outcomes, "details": dict(details)}
        summary["kinds"][kind] = {"cases": total, "classes": k_summary}
    lines.append(f"\nfindings (foreign exceptions, tracebacks, wrong exit codes, kernel differences, hangs): "
                 f"{len(findings)}")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for i, f in enumerate(findings):
        path = out / f"finding-{i:04d}-{f['kind']}-{f['name']}-{f['index']}.json"
        path.write_text(json.dumps(f, indent=1, default=str))
        if i < 20:
            lines.append(f"  {f['kind']} {f['name']} #{f['index']}: {f['error'].splitlines()[0][:200]}")
            lines.append(f"    reproducer: {path}  (replay: python -m benchmarks.fuzz_campaign --seed {f['seed']} "
                         f"--replay {f['kind']} {f['name']} {f['index']})")
    lines.append(f"slowest case: {slowest[0]:.2f} s {slowest[1]}")
    lines.append(f"wall time: {wall:.1f} s on {args.jobs} processes")
    summary.update(findings=len(findings), slowest_case_s=round(slowest[0], 3), slowest_case=slowest[1])
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print("\n".join(lines))
    return summary


def replay(args) -> int:
    fz = _setup()
    with tempfile.TemporaryDirectory(prefix="opendml-fuzz-") as scratch:
        kind, name, index = args.replay[0], args.replay[1], int(args.replay[2])
        cls, outcome, detail, finding = run_case(fz, kind, name, index, args.seed, scratch)
    print(f"{kind} {name} #{index}: {outcome} {detail}")
    if finding:
        for key, value in finding.items():
            print(f"--- {key}\n{value}")
        return 1
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.fuzz_campaign", description=__doc__.split("\n\n")[0])
    p.add_argument("--descriptions", type=int, default=100_000, help="descriptions across all operators (100000)")
    p.add_argument("--cli", type=int, default=20_000, help="mutated example files through the CLI (20000)")
    p.add_argument("--arrays", type=int, default=20_000, help="array-API calls with random arguments (20000)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes (default: the CPU count)")
    p.add_argument("--chunk", type=int, default=500, help="cases per task")
    p.add_argument("--seed", type=int, default=14)
    p.add_argument("--case-timeout", type=float, default=20.0, help="seconds before a case counts as a hang")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "out"), help="where findings and summary.json go")
    p.add_argument("--replay", nargs=3, metavar=("KIND", "NAME", "INDEX"), help="run one case and show it")
    args = p.parse_args(argv)
    if args.replay:
        return replay(args)
    fz = _setup()
    tasks = plan(args, fz)
    start = time.perf_counter()
    counts: collections.Counter = collections.Counter()
    findings, slowest = [], (0.0, None)
    done = 0
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(args.jobs) as pool:
        for c, f, s in pool.imap_unordered(run_chunk, tasks):
            counts.update(c)
            findings.extend(f)
            slowest = max(slowest, s, key=lambda v: v[0])
            done += 1
            if done % max(1, len(tasks) // 20) == 0:
                print(f"  {done}/{len(tasks)} chunks, {sum(counts.values())} cases, {len(findings)} findings, "
                      f"{time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    summary = report(counts, findings, slowest, time.perf_counter() - start, args)
    return 1 if summary["findings"] else 0


if __name__ == "__main__":
    sys.exit(main())
