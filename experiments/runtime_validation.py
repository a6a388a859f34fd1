"""libra_jax's runtime model (issue 33) against ASTRA-sim's own runs: every case of a set
drawn by `astrasim_runtime.py` predicted as ``libra-evaluate`` computes it
(`astrasim_workload.predict_ns`) and compared with the simulator's step time, per backend,
per inter-dimension policy, per algorithm and per intra-dimension policy.

    python experiments/runtime_validation.py experiments/results/astrasim_runtime/single \\
        experiments/results/astrasim_runtime/single_s15 \\
        experiments/results/astrasim_runtime/single_s19 \\
        experiments/results/astrasim_runtime/step experiments/results/astrasim_runtime/step_s17 \\
        --out experiments/results/runtime_validation.md

``--summary`` prints instead the per-backend, per-policy table of docs/runtime.md (between its
``validation-summary`` markers) over sets given as ``label=folder``; ``--summary-out F
--summary-sets label=folder ...`` writes it beside the full report from the same predictions
(the sets given as ``label=folder`` there too, the held-out ones only in the table):

    python experiments/runtime_validation.py --summary \
        "tuning single=experiments/results/astrasim_runtime/single" ...

Cases ASTRA-sim did not finish (deadlock, timeout, abort) are listed, not counted; cases whose
algorithm libra_jax does not model (``astrasim_workload.NOT_MODELLED``) are counted apart.
"""

from __future__ import annotations

import argparse
import collections
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import astrasim_workload as aw  # noqa: E402

from libra_jax.types import LibraInputError  # noqa: E402

BARS = (0.02, 0.05, 0.10)


def evaluate(folder: pathlib.Path, via: str = "config"):
    """[(case, astra_ns or None, predicted ns or None, note)] of a set: ``via="config"`` the
    case's workload as a config (`astrasim_workload.predict_ns`), ``"ets"`` the per-NPU
    Chakra ETs of the case imported as a trace set (`astrasim_workload.simulate_case`, as
    ``libra-evaluate workload.chakra_et=...``)."""
    out = []
    for case, res in aw.load(folder):
        ref = res.get("astra_max_ns")
        if not ref or str(res.get("rc", "0")) not in ("0",):
            out.append((case, None, None, res.get("error") or f"rc {res.get('rc')}"))
            continue
        if not aw.modelled(case):
            out.append((case, float(ref), None, "not modelled"))
            continue
        try:
            out.append((case, float(ref), aw.predict_ns(case) if via == "config"
                        else aw.simulate_case(case).time_ns, ""))
        except LibraInputError as e:  # a case libra_jax refuses: counted apart, with why
            out.append((case, float(ref), None, f"refused: {e}"))
    return out


def _row(name, errs):
    n = len(errs)
    if not n:
        return f"| {name} | 0 | | | | |"
    within = [sum(abs(e) <= b for e in errs) / n for b in BARS]
    worst = max(errs, key=abs)
    return (f"| {name} | {n} | {within[0]:.1%} | {within[1]:.1%} | {within[2]:.1%} | "
            f"{worst:+.2%} |")


def table(rows, key) -> list[str]:
    groups = collections.defaultdict(list)
    for case, ref, pred, _ in rows:
        if pred is not None:
            groups[(case["backend"], key(case))].append((pred - ref) / ref)
    lines = ["| backend / value | runs | within 2% | within 5% | within 10% | worst |",
             "|---|---|---|---|---|---|"]
    for k in sorted(groups):
        lines.append(_row(f"{k[0]} / {k[1]}", groups[k]))
    for backend in sorted({k[0] for k in groups}):
        lines.append(_row(f"**{backend}, all**",
                          [e for k, v in groups.items() if k[0] == backend for e in v]))
    return lines


def summary(sets, via: str = "config", evaluated: dict | None = None) -> list[str]:
    """docs/runtime.md's table: every ``label=folder`` set per backend and policy
    (``evaluated``: folder -> `evaluate`'s rows, where already computed)."""
    lines = ["| set | backend / value | runs | within 2% | within 5% | within 10% | worst |",
             "|---|---|---|---|---|---|---|"]
    for spec in sets:
        label, _, folder = str(spec).rpartition("=")
        rows = (evaluated or {}).get(folder) or evaluate(pathlib.Path(folder), via)
        body = table(rows, lambda c: c["inter_dim_scheduling"])[2:]
        lines += [f"| {label or folder} {row[1:]}" for row in body]
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sets", nargs="+", type=str)
    ap.add_argument("--out", type=pathlib.Path, default=None)
    ap.add_argument("--via", choices=("config", "ets"), default="config",
                    help="predict from the case as a config (default) or from its imported ETs")
    ap.add_argument("--summary", action="store_true",
                    help="one table per backend and inter-dimension policy over label=folder sets")
    ap.add_argument("--summary-out", type=pathlib.Path, default=None,
                    help="with the full report: write that table too, from the same predictions")
    ap.add_argument("--summary-sets", nargs="*", default=[],
                    help="label=folder sets in that table only (the held-out sets)")
    args = ap.parse_args(argv)
    if args.summary:
        print("\n".join(summary(args.sets, args.via)))
        return 0
    lines = ["# libra_jax's runtime model against ASTRA-sim", ""]
    evaluated = {}
    for folder in (pathlib.Path(str(spec).rpartition("=")[2]) for spec in args.sets):
        t0 = time.perf_counter()
        rows = evaluated[str(folder)] = evaluate(folder, args.via)
        seconds = time.perf_counter() - t0
        failed = [(c, note) for c, ref, _, note in rows if ref is None]
        apart = [c for c, ref, pred, note in rows if ref is not None and pred is None
                 and note == "not modelled"]
        refused = [(c, note) for c, ref, pred, note in rows
                   if ref is not None and pred is None and note != "not modelled"]
        lines += [f"## `{folder}`", "",
                  f"{len(rows)} runs: {len(rows) - len(failed) - len(apart) - len(refused)} "
                  f"compared, {len(apart)} with an algorithm libra_jax does not model "
                  f"({', '.join(aw.NOT_MODELLED)}), {len(refused)} refused by libra_jax, "
                  f"{len(failed)} that ASTRA-sim did not finish. Predicted in "
                  f"{seconds:.1f} s.", ""]
        if refused:
            lines += ["Refused: " + "; ".join(f"{c['case_id']} ({str(n)[9:100]})"
                                              for c, n in refused[:12]), ""]
        for title, key in (("inter-dimension scheduling", lambda c: c["inter_dim_scheduling"]),
                           ("algorithm family", lambda c: c.get("algorithm_family", "ring")),
                           ("collective optimization", lambda c: c["collective_optimization"]),
                           ("intra-dimension scheduling", lambda c: c["intra_dim_scheduling"]),
                           ("active chunks per dimension",
                            lambda c: str(c["active_chunks_per_dim"]))):
            lines += [f"### By {title}", ""] + table(rows, key) + [""]
        worst = sorted((abs((p - r) / r), c["case_id"], (p - r) / r) for c, r, p, _ in rows
                       if p is not None)[-8:]
        lines += ["### Largest errors", "", "| case | error |", "|---|---|"]
        lines += [f"| {cid} | {e:+.2%} |" for _, cid, e in reversed(worst)]
        if failed:
            lines += ["", "### Not finished by ASTRA-sim (listed, not counted)", "",
                      "| case | inter | algorithms | NPUs | what |", "|---|---|---|---|---|"]
            lines += [f"| {c['case_id']} | {c['inter_dim_scheduling']} | "
                      f"{'/'.join(c.get('impl_per_dim') or ['ring'])} | {c['npus']} | "
                      f"{str(note)[:80]} |" for c, note in failed]
        lines.append("")
    text = "\n".join(lines)
    if args.out:
        args.out.write_text(text)
    if args.summary_out:
        args.summary_out.write_text("\n".join(summary(args.sets + args.summary_sets, args.via,
                                                       evaluated)) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
