"""The summary of a finished scan: per-workload Pareto fronts, the top-k table, the plot.

`summarise` streams the chunk files once (memory bounded by ``top_k``, the fronts and the
plot's reservoir sample) and writes ``top_k.md``, ``pareto_front.csv`` (same columns and
precision as CSV chunks) and ``pareto.png`` (matplotlib's `Figure` API: no pyplot, no global
backend).
"""

from __future__ import annotations

import heapq
import pathlib
import zlib

import numpy as np
from matplotlib import ticker
from matplotlib.figure import Figure

from libra_jax.studies.scan.config import RankBy, ReportConfig
from libra_jax.studies.scan.files import atomic_write, csv_text, read_chunk, write_text


def pareto_front(step_time, cost) -> np.ndarray:
    """Indices of the points no other point beats on both (minimising both), by time.

    A point is kept when its cost is below the cost of every point with a smaller time (ties
    in time: the cheaper one first), so weakly dominated points and duplicates are dropped.

    Args:
      step_time: [B] times; cost: [B] costs.

    Returns:
      [F] indices into the inputs, in increasing time (and decreasing cost).
    """
    t = np.asarray(step_time, np.float64)
    c = np.asarray(cost, np.float64)
    if t.size == 0:
        return np.zeros((0,), np.int64)
    order = np.lexsort((c, t))
    cs = c[order]
    best_before = np.concatenate([[np.inf], np.minimum.accumulate(cs)[:-1]])
    return order[cs < best_before]


_FRONT_FIELDS = ("step_time_ns", "network_cost_usd")


def _tie_key(r: dict) -> tuple:
    """Designs that differ only in blocks of equal price (e.g. Ring vs FullyConnected, both
    N x Link per GB/s) and get the same numbers: collapsed into one top-k row."""
    return (r["workload"], r["dims"], r["tiers"], r["mapping"], r["budget_gbps"],
            float(f"{r['step_time_ns']:.9g}"), float(f"{r['network_cost_usd']:.9g}"))


class Summary:
    """Streams chunk rows once: per workload top-k, Pareto front, a reservoir sample.

    The top-k heap keeps ``top_k * max_ties`` rows, where ``max_ties`` bounds the designs of
    one tie group (the block choices of one shape), so the best ``top_k`` tie groups are
    complete when collapsed at the end.

    Everything depends on the rows and their order (design order) only, not on how they are
    cut into chunks, so the shards of a scan merge into the summary of the unsharded run:
    top-k ties break by design id, a front keeps the first design of equal points, and each
    workload's reservoir sample draws from its own generator.
    """

    def __init__(self, rank_by: str, top_k: int, sample: int, max_ties: int = 1,
                 seed: int = 0):
        self.rank_by, self.top_k, self.sample = rank_by, top_k, sample
        self.keep = top_k * max(max_ties, 1)
        self.heaps: dict = {}
        self.fronts: dict = {}
        self.points: dict = {}
        self.seen: dict = {}
        self.status: dict = {}
        self.seed = seed
        self.rngs: dict = {}

    def add(self, rows: list[dict]) -> None:
        by_wl: dict = {}
        for r in rows:
            self.status[r["status"]] = self.status.get(r["status"], 0) + 1
            if r["status"] != "ok":
                continue
            by_wl.setdefault(r["workload"], []).append(r)
        for wl, rs in by_wl.items():
            heap = self.heaps.setdefault(wl, [])
            for r in rs:
                item = (-r[self.rank_by], -r["design_id"], r)
                if len(heap) < self.keep:
                    heapq.heappush(heap, item)
                elif item[:2] > heap[0][:2]:
                    heapq.heapreplace(heap, item)
            cand = self.fronts.get(wl, []) + rs
            keep = pareto_front([r["step_time_ns"] for r in cand],
                                [r["network_cost_usd"] for r in cand])
            self.fronts[wl] = [cand[i] for i in keep]
            pts = self.points.setdefault(wl, [])
            rng = self.rngs.setdefault(
                wl, np.random.default_rng([self.seed, zlib.crc32(wl.encode())]))
            for r in rs:  # reservoir sampling (Algorithm R), bounded memory
                n = self.seen.get(wl, 0)
                self.seen[wl] = n + 1
                p = (r["network_cost_usd"], r["step_time_ns"])
                if len(pts) < self.sample:
                    pts.append(p)
                else:
                    j = int(rng.integers(0, n + 1))
                    if j < self.sample:
                        pts[j] = p

    def top(self, wl: str) -> list[dict]:
        """Best ``top_k`` tie groups: first design of each, with ``ties`` = group size."""
        rows = [r for _, _, r in sorted(self.heaps.get(wl, []), key=lambda x: (-x[0], -x[1]))]
        groups: dict = {}
        for r in rows:
            k = _tie_key(r)
            if k in groups:
                groups[k]["ties"] += 1
            else:
                groups[k] = dict(r, ties=1)
        return list(groups.values())[: self.top_k]


def _short_list(xs) -> str:
    """A list for the table, 6 significant digits (the files keep full precision)."""
    return "[" + ", ".join(f"{float(x):.6g}" for x in xs) + "]"


def _md_table(rows: list[dict]) -> list[str]:
    head = ["rank", "workload", "network", "ties", "tiers", "mapping", "budget (GB/s)",
            "bandwidth (GB/s)", "step time (ms)", "network cost ($M)",
            "time x cost (s x $M)", "gap"]
    out = ["| " + " | ".join(head) + " |", "|---:|---|---|---:|---|---|" + "---:|" * 6]
    rank = 0
    last = None
    for r in rows:
        rank = rank + 1 if r["workload"] == last else 1
        last = r["workload"]
        out.append("| " + " | ".join([
            str(rank), r["workload"], f"`{r['notation']}`", str(r.get("ties", 1)),
            r["tiers"], r["mapping"], f"{r['budget_gbps']:g}", _short_list(r["bandwidth_gbps"]),
            f"{r['step_time_ns'] / 1e6:.3f}", f"{r['network_cost_usd'] / 1e6:.3f}",
            f"{r['time_x_cost'] / 1e15:.4g}", f"{r['optimality_gap']:.1e}",
        ]) + " |")
    return out


def top_k_markdown(summary: Summary, workloads: list[str]) -> str:
    """The top-k table (Markdown), per workload best first."""
    lines = [
        f"Top {summary.top_k} designs per workload by {summary.rank_by} (lower is better); "
        "ties = designs with the same numbers that differ only in equally priced blocks "
        "(Ring and FullyConnected both cost N x Link per GB/s), the first one shown.",
        "",
    ]
    rows = [r for wl in workloads for r in summary.top(wl)]
    lines += _md_table(rows)
    return "\n".join(lines) + "\n"


def _label_points(front: list[dict], rank_by: str, n: int) -> list[dict]:
    """Up to n front points to label: best by rank_by, fastest, cheapest, then spread out."""
    if not front or n <= 0:
        return []
    picks = [min(range(len(front)), key=lambda i: front[i][rank_by]), 0, len(front) - 1]
    picks += [int(round(x)) for x in np.linspace(0, len(front) - 1, n + 2)[1:-1]]
    out: list[int] = []
    for i in picks:
        if i not in out:
            out.append(i)
    return [front[i] for i in sorted(out[:n])]  # front order (callers sort by cost)


def pareto_figure(summary: Summary, workloads: list[str], rank_by: str, labels: int) -> Figure:
    """Per-workload panel: sampled designs, the Pareto front, some front points labelled.

    The legend sits below each panel (off the data); the log-scale cost axis has labelled
    ticks at 1, 2 and 5 x 10^k only, so labels do not collide on a short range.
    """
    n = max(len(workloads), 1)
    fig = Figure(figsize=(6.5 * n, 6.0), layout="constrained")
    axes = fig.subplots(1, n, squeeze=False)[0]
    for ax, wl in zip(axes, workloads):
        pts = np.asarray(summary.points.get(wl, []), np.float64).reshape(-1, 2)
        front = sorted(summary.fronts.get(wl, []), key=lambda r: r["network_cost_usd"])
        ax.scatter(pts[:, 0] / 1e6, pts[:, 1] / 1e6, s=3, c="0.75", lw=0,
                   label=f"designs ({summary.seen.get(wl, 0):,}; {len(pts):,} drawn)")
        fx = np.array([r["network_cost_usd"] for r in front]) / 1e6
        fy = np.array([r["step_time_ns"] for r in front]) / 1e6
        ax.step(fx, fy, where="post", c="tab:red", lw=1.0)
        ax.plot(fx, fy, "o", c="tab:red", ms=3, label=f"Pareto front ({len(front)})")
        chosen = _label_points(front, rank_by, labels)
        for i, r in enumerate(chosen):
            ax.plot(r["network_cost_usd"] / 1e6, r["step_time_ns"] / 1e6, "o", ms=6,
                    mfc="none", mec="black", mew=0.8)
            ax.annotate(
                f"{r['notation']} @ {r['budget_gbps']:g} GB/s",
                (r["network_cost_usd"] / 1e6, r["step_time_ns"] / 1e6),
                xytext=(0.30, 0.90 - 0.09 * i), textcoords="axes fraction", fontsize=7,
                bbox=dict(boxstyle="round,pad=0.2", fc="white", ec="0.6", alpha=0.85),
                arrowprops=dict(arrowstyle="-", lw=0.5, color="0.3"),
            )
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(ticker.LogLocator(base=10.0, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        ax.tick_params(axis="x", labelrotation=30)
        ax.set_xlabel("network cost (million $, log scale)")
        ax.set_ylabel("step time (ms)")
        ax.set_title(f"{wl}: step time vs network cost")
        ax.grid(True, which="both", lw=0.3, alpha=0.5)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2,
                  frameon=False)
    return fig


def summarise(output_dir: pathlib.Path, chunk_files: list[pathlib.Path], workloads: list[str],
              report: ReportConfig, max_ties: int = 1) -> tuple[Summary, str]:
    """Reads every chunk once; writes top_k.md, pareto_front.csv, pareto.png."""
    output_dir = pathlib.Path(output_dir)
    rank_by = RankBy(report.rank_by).value
    s = Summary(rank_by, report.top_k, report.plot_points, max_ties)
    for path in chunk_files:
        s.add(read_chunk(path))
    md = top_k_markdown(s, workloads)
    write_text(output_dir / "top_k.md", md)
    write_text(output_dir / "pareto_front.csv",
               csv_text([r for wl in workloads for r in s.fronts.get(wl, [])]))
    fig = pareto_figure(s, workloads, rank_by, report.plot_labels)
    atomic_write(output_dir / "pareto.png", lambda tmp: fig.savefig(tmp, format="png", dpi=120))
    return s, md
