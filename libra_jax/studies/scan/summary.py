"""The summary of a finished scan: per-workload Pareto fronts, the top-k table, the plots.

`summarise` streams the chunk files once (memory bounded by ``top_k``, the fronts and the
plot's reservoir sample) and writes ``top_k.md``, ``pareto_front.csv`` (same columns and
precision as CSV chunks), ``pareto.png`` (matplotlib's `Figure` API: no pyplot, no global
backend) and ``pareto.html`` (`pareto_html`: plotly, its JavaScript inlined).

The front of a workload: the designs no other design of the workload beats on step time and
network cost (`pareto_front`), or, when the rows have ``network_power_w`` (a cost model with
``Energy``), on step time, network cost and network power at once (`pareto_front_3d`). A
design equal to an earlier one on every objective is dropped (the first is kept).
"""

from __future__ import annotations

import heapq
import pathlib
import zlib

import numpy as np
from matplotlib import ticker
from matplotlib.figure import Figure

from libra_jax.studies.scan.config import RankBy, ReportConfig
from libra_jax.studies.scan.files import (
    atomic_write,
    columns,
    csv_text,
    read_chunk,
    write_text,
)
from libra_jax.types import LibraInputError


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


def _dense_rank(x: np.ndarray) -> np.ndarray:
    """Ranks 0.. of the values, equal values the same rank."""
    return np.unique(x, return_inverse=True)[1].reshape(-1).astype(np.int64)


def pareto_front_3d(step_time, cost, power) -> np.ndarray:
    """Indices of the points no other point beats on all three (minimising each).

    A point is dropped when another is <= on all three and < on one, or equal on all three
    and earlier in the input (duplicates: the first is kept), the rule of `pareto_front`
    with a third objective.

    Sort by (time, cost, power, input position): a point is dropped exactly when a point
    before it in that order has cost <= and power <= (it then is <= on time too). That
    prefix query ("the least power among earlier points of cost <= mine") is answered for
    every point at once, vectorised: at level k, positions pair up into blocks of 2^k, and
    the points of each right block query the left block of their pair (its points sorted by
    cost, a running minimum of power, a binary search for the cost); every earlier point is
    in exactly one such left block, at the level of the highest bit where the positions
    differ. O(n log^2 n) numpy work in log2(n) levels, no Python loop over points: a million
    points in about a second on one core.

    Args:
      step_time, cost, power: [B] each (finite).

    Returns:
      [F] indices into the inputs, in increasing (time, cost, power).
    """
    t = np.asarray(step_time, np.float64).reshape(-1)
    c = np.asarray(cost, np.float64).reshape(-1)
    p = np.asarray(power, np.float64).reshape(-1)
    if not t.size == c.size == p.size:
        raise LibraInputError(
            f"pareto_front_3d: {t.size} times, {c.size} costs and {p.size} powers; give one "
            "of each per point.")
    n = t.size
    if n == 0:
        return np.zeros((0,), np.int64)
    order = np.lexsort((p, c, t))  # stable: equal points keep their input order
    cr, pr = _dense_rank(c[order]), _dense_rank(p[order])
    # Most points fall to a cheap test first: the earlier point that is best on a few
    # weightings of the two ranks (O(n) each). Dropping dominated points changes nothing
    # for the others (whoever dominated a dropped point dominates what it dominated).
    keep = _survive_prefix_best(cr, pr)
    order, cr, pr = order[keep], _dense_rank(cr[keep]), _dense_rank(pr[keep])
    n = order.size
    pos = np.arange(n, dtype=np.int64)
    dominated = np.zeros(n, bool)
    big = np.int64(n + 1)  # > every rank
    k = 0
    while (1 << k) < n:
        pair = pos >> (k + 1)
        right = (pos >> k) & 1  # 0: a left block's point, 1: a query of the right block
        npairs = int(pair[-1]) + 1
        # One sort of every point by (pair, cost rank, left before right): a query's prefix
        # of its pair holds exactly the left points of cost <= its cost.
        srt = np.argsort((pair * big + cr) * 2 + right)
        # Running minimum of the left points' power ranks (queries count as +inf); earlier
        # pairs get a larger offset, so a block's minimum never comes from another pair (a
        # query whose left block has no point of cost <= its own gets a value >= big).
        offset = (npairs - 1 - pair[srt]) * big
        vals = np.where(right[srt] == 1, (npairs + 1) * big, pr[srt]) + offset
        run_min = np.minimum.accumulate(vals) - offset
        q = right[srt] == 1
        hit = run_min[q] <= pr[srt][q]
        dominated[srt[q][hit]] = True
        k += 1
    return order[~dominated]


def _survive_prefix_best(cr: np.ndarray, pr: np.ndarray) -> np.ndarray:
    """[n] False where an earlier point (in the sorted order) has cost rank <= and power
    rank <= this one's, found among the earlier points best by cost, by power and by a few
    weighted sums of the ranks (a sufficient test, vectorised); True: undecided."""
    n = cr.size
    big = np.int64(n + 1)
    pos = np.arange(n, dtype=np.int64)
    alive = np.ones(n, bool)
    for wc, wp in ((1, 1), (1, 0), (0, 1), (3, 1), (1, 3)):
        score = wc * cr + wp * pr
        best = np.minimum.accumulate(score * big + pos)  # least score, then earliest
        j = np.concatenate([[-1], best[:-1] % big])  # the best strictly before each point
        has = j >= 0
        jj = np.where(has, j, 0)
        alive &= ~(has & (cr[jj] <= cr) & (pr[jj] <= pr))
    return alive


def front_indices(rows: list[dict], power: bool) -> np.ndarray:
    """The front of ``rows`` (`pareto_front`, or `pareto_front_3d` with ``power``)."""
    t = [r["step_time_ns"] for r in rows]
    c = [r["network_cost_usd"] for r in rows]
    if power:
        return pareto_front_3d(t, c, [r["network_power_w"] for r in rows])
    return pareto_front(t, c)


_FRONT_FIELDS = ("step_time_ns", "network_cost_usd")
#: Rows collected before a front is refiltered (at least the front's size): amortised
#: O(n log^2 n) over a scan, however many chunks.
_FLUSH_ROWS = 8192


def _tie_key(r: dict) -> tuple:
    """Designs that differ only in blocks of equal price (e.g. Ring vs FullyConnected, both
    N x Link per GB/s) and get the same numbers (power too, when rows have it): collapsed
    into one top-k row."""
    power = r.get("network_power_w")
    return (r["workload"], r["dims"], r["tiers"], r["mapping"], r["budget_gbps"],
            float(f"{r['step_time_ns']:.9g}"), float(f"{r['network_cost_usd']:.9g}"),
            None if power is None else float(f"{power:.9g}"))


def _point(r: dict) -> tuple:
    """A sampled design: (cost $, time ns, power W or None, budget GB/s, design id, notation,
    dims, blocks, tiers, mapping, bandwidths GB/s): what the plots draw and pareto.html's
    hover shows."""
    return (r["network_cost_usd"], r["step_time_ns"], r.get("network_power_w"),
            r["budget_gbps"], r["design_id"], r.get("notation", ""), r.get("dims", ""),
            r.get("blocks", ""), r.get("tiers", ""), r.get("mapping", ""),
            tuple(r.get("bandwidth_gbps") or ()))


class Summary:
    """Streams chunk rows once: per workload top-k, Pareto front, a reservoir sample.

    The top-k heap keeps ``top_k * max_ties`` rows, where ``max_ties`` bounds the designs of
    one tie group (the block choices of one shape), so the best ``top_k`` tie groups are
    complete when collapsed at the end.

    Fronts: per workload (``fronts``, pareto_front.csv) and per (workload, budget)
    (``budget_fronts``, pareto.html's menu); 3 objectives once a row has
    ``network_power_w`` (``power``). New rows wait in a buffer until it holds as many as the
    front (`_FLUSH_ROWS` at least), then the front is refiltered with them; reading
    ``fronts`` flushes.

    Everything depends on the rows and their order (design order) only, not on how they are
    cut into chunks, so the shards of a scan merge into the summary of the unsharded run:
    top-k ties break by design id, a front keeps the first design of equal points (the
    buffer keeps design order, after the front), and each workload's reservoir sample draws
    from its own generator.
    """

    def __init__(self, rank_by: str, top_k: int, sample: int, max_ties: int = 1,
                 seed: int = 0):
        self.rank_by, self.top_k, self.sample = rank_by, top_k, sample
        self.keep = top_k * max(max_ties, 1)
        self.heaps: dict = {}
        self._fronts: dict = {}  # key -> front rows; key: workload or (workload, budget)
        self._pending: dict = {}  # key -> rows not yet filtered into the front
        self.power = False  # rows have network_power_w: 3-objective fronts
        self.points: dict = {}
        self.seen: dict = {}
        self.status: dict = {}
        self.seed = seed
        self.rngs: dict = {}

    def _queue(self, key, rows: list[dict]) -> None:
        pending = self._pending.setdefault(key, [])
        pending += rows
        if len(pending) >= max(_FLUSH_ROWS, len(self._fronts.get(key, ()))):
            self._flush(key)

    def _flush(self, key) -> None:
        cand = self._fronts.get(key, []) + self._pending.pop(key, [])
        self._fronts[key] = [cand[i] for i in front_indices(cand, self.power)]

    def _flush_all(self) -> None:
        for key in list(self._pending):
            self._flush(key)

    @property
    def fronts(self) -> dict:
        """workload -> its front rows, in increasing time (then cost, power)."""
        self._flush_all()
        return {k: v for k, v in self._fronts.items() if not isinstance(k, tuple)}

    @property
    def budget_fronts(self) -> dict:
        """(workload, budget GB/s) -> the front of that budget's designs."""
        self._flush_all()
        return {k: v for k, v in self._fronts.items() if isinstance(k, tuple)}

    def budgets(self, wl: str) -> list[float]:
        """The budgets (GB/s) of the workload's designs, increasing."""
        return sorted(k[1] for k in set(self._fronts) | set(self._pending)
                      if isinstance(k, tuple) and k[0] == wl)

    def add(self, rows: list[dict]) -> None:
        by_wl: dict = {}
        for r in rows:
            self.status[r["status"]] = self.status.get(r["status"], 0) + 1
            if r["status"] != "ok":
                continue
            by_wl.setdefault(r["workload"], []).append(r)
            if not self.power and r.get("network_power_w") is not None:
                self.power = True
        for wl, rs in by_wl.items():
            heap = self.heaps.setdefault(wl, [])
            for r in rs:
                item = (-r[self.rank_by], -r["design_id"], r)
                if len(heap) < self.keep:
                    heapq.heappush(heap, item)
                elif item[:2] > heap[0][:2]:
                    heapq.heapreplace(heap, item)
            self._queue(wl, rs)
            by_budget: dict = {}
            for r in rs:
                by_budget.setdefault(r["budget_gbps"], []).append(r)
            for b, rb in by_budget.items():
                self._queue((wl, b), rb)
            pts = self.points.setdefault(wl, [])
            rng = self.rngs.setdefault(
                wl, np.random.default_rng([self.seed, zlib.crc32(wl.encode())]))
            for r in rs:  # reservoir sampling (Algorithm R), bounded memory
                n = self.seen.get(wl, 0)
                self.seen[wl] = n + 1
                if len(pts) < self.sample:
                    pts.append(_point(r))
                else:
                    j = int(rng.integers(0, n + 1))
                    if j < self.sample:
                        pts[j] = _point(r)

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


def _md_table(rows: list[dict], power: bool = False) -> list[str]:
    head = ["rank", "workload", "network", "ties", "tiers", "mapping", "budget (GB/s)",
            "bandwidth (GB/s)", "step time (ms)", "network cost ($M)",
            "time x cost (s x $M)", "gap"]
    if power:
        head[-1:-1] = ["network power (kW)", "energy per step (kJ)"]
    out = ["| " + " | ".join(head) + " |",
           "|---:|---|---|---:|---|---|" + "---:|" * (len(head) - 6)]
    rank = 0
    last = None
    for r in rows:
        rank = rank + 1 if r["workload"] == last else 1
        last = r["workload"]
        out.append("| " + " | ".join([
            str(rank), r["workload"], f"`{r['notation']}`", str(r.get("ties", 1)),
            r["tiers"], r["mapping"], f"{r['budget_gbps']:g}", _short_list(r["bandwidth_gbps"]),
            f"{r['step_time_ns'] / 1e6:.3f}", f"{r['network_cost_usd'] / 1e6:.3f}",
            f"{r['time_x_cost'] / 1e15:.4g}",
            *([f"{r['network_power_w'] / 1e3:.4g}", f"{r['energy_per_step_j'] / 1e3:.4g}"]
              if power else []),
            f"{r['optimality_gap']:.1e}",
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
    lines += _md_table(rows, summary.power)
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


_AXES = {  # objective -> (row key, point index, scale, axis label, panel title)
    "cost": ("network_cost_usd", 0, 1e6, "network cost (million $, log scale)",
             "step time vs network cost"),
    "power": ("network_power_w", 2, 1e3, "network power (kW, log scale)",
              "step time vs network power"),
}


def _panel(ax, summary: Summary, wl: str, objective: str, rank_by: str, labels: int) -> None:
    """One workload's panel: step time against network cost or power. Without power the
    front is the (time, cost) staircase; with it, the 3-objective front's points, with the
    staircase of those that are also 2-objective optimal on this panel's pair."""
    key, at, scale, xlabel, title = _AXES[objective]
    pts = summary.points.get(wl, [])
    px = np.array([q[at] for q in pts], np.float64) / scale
    py = np.array([q[1] for q in pts], np.float64) / 1e6
    front = sorted(summary.fronts.get(wl, []), key=lambda r: r[key])
    ax.scatter(px, py, s=3, c="0.75", lw=0,
               label=f"designs ({summary.seen.get(wl, 0):,}; {len(pts):,} drawn)")
    fx = np.array([r[key] for r in front]) / scale
    fy = np.array([r["step_time_ns"] for r in front]) / 1e6
    if summary.power:
        stair = np.sort(pareto_front(fy, fx))[::-1] if len(front) else np.zeros(0, int)
        ax.step(fx[stair], fy[stair], where="post", c="tab:red", lw=1.0)
        ax.plot(fx, fy, "o", c="tab:red", ms=3,
                label=f"Pareto front, time x cost x power ({len(front)})")
    else:
        ax.step(fx, fy, where="post", c="tab:red", lw=1.0)
        ax.plot(fx, fy, "o", c="tab:red", ms=3, label=f"Pareto front ({len(front)})")
    by_cost = sorted(front, key=lambda r: (r["network_cost_usd"], r["step_time_ns"],
                                           r.get("network_power_w") or 0.0))
    chosen = _label_points(by_cost, rank_by, labels)  # the same designs on both panels
    for i, r in enumerate(sorted(chosen, key=lambda r: r[key])):
        xy = (r[key] / scale, r["step_time_ns"] / 1e6)
        ax.plot(*xy, "o", ms=6, mfc="none", mec="black", mew=0.8)
        ax.annotate(
            f"{r['notation']} @ {r['budget_gbps']:g} GB/s", xy,
            xytext=(0.30, 0.90 - 0.09 * i), textcoords="axes fraction", fontsize=7,
            bbox=dict(boxstyle="round,pad=0.2", fc="white", ec="0.6", alpha=0.85),
            arrowprops=dict(arrowstyle="-", lw=0.5, color="0.3"),
        )
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(ticker.LogLocator(base=10.0, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.tick_params(axis="x", labelrotation=30)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("step time (ms)")
    ax.set_title(f"{wl}: {title}")
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2,
              frameon=False)


def pareto_figure(summary: Summary, workloads: list[str], rank_by: str, labels: int) -> Figure:
    """Per-workload panel: sampled designs, the Pareto front, some front points labelled;
    with network power (``summary.power``) a second row, step time vs network power.

    The legend sits below each panel (off the data); the log-scale x axes have labelled
    ticks at 1, 2 and 5 x 10^k only, so labels do not collide on a short range.
    """
    n = max(len(workloads), 1)
    objectives = ("cost", "power") if summary.power else ("cost",)
    fig = Figure(figsize=(6.5 * n, 6.0 * len(objectives)), layout="constrained")
    axes = fig.subplots(len(objectives), n, squeeze=False)
    for row, objective in zip(axes, objectives):
        for ax, wl in zip(row, workloads):
            _panel(ax, summary, wl, objective, rank_by, labels)
    return fig


def _hover(q: tuple) -> str:
    """pareto.html's hover text of a design (`_point`), units on every number."""
    cost, time_ns, power, budget, did, notation, dims, blocks, tiers, mapping, bw = q
    bws = ", ".join(f"{x:.4g}" for x in bw)
    lines = [f"design {did}: {notation}" if notation else f"design {did}",
             f"shape {dims}; blocks {blocks}" if blocks else f"shape {dims}",
             f"tiers {tiers}; mapping {mapping}",
             f"budget {budget:g} GB/s; bandwidth [{bws}] GB/s",
             f"step time {time_ns / 1e6:.6g} ms; network cost {cost / 1e6:.6g} M$"
             + ("" if power is None else f"; network power {power / 1e3:.6g} kW")]
    return "<br>".join(lines)


def _html_sample(summary: Summary, wl: str, count: int, seed: int = 0) -> list[tuple]:
    """``count`` designs of the workload's reservoir sample drawn at random (a uniform sample
    of a uniform sample; seeded: the same page for the same scan), in reservoir order."""
    pts = summary.points.get(wl, [])
    if len(pts) <= count:
        return list(pts)
    rng = np.random.default_rng([seed, zlib.crc32(wl.encode()), 1])
    return [pts[i] for i in np.sort(rng.choice(len(pts), size=max(count, 0), replace=False))]


_BUDGET_COLOURS = ("#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b",
                   "#e377c2", "#7f7f7f", "#bcbd22")


def pareto_html(summary: Summary, workloads: list[str], html_points: int = 2000) -> str:
    """pareto.html: an interactive, self-contained page (plotly, its JavaScript inlined: no
    network needed to open it). Panels: step time vs network cost, and vs network power when
    the rows have it; a menu picks the workload and the budget (or all budgets); hovering a
    point shows the design. Per workload: up to ``html_points`` sampled designs (coloured by
    budget) and the front (of all budgets, or of the budget picked).

    Deterministic (fixed div id, seeded sample): the same scan gives the same bytes, sharded
    or not.
    """
    import plotly.graph_objects as go  # noqa: PLC0415  (only the summary needs plotly)
    from plotly.subplots import make_subplots  # noqa: PLC0415

    objectives = ("cost", "power") if summary.power else ("cost",)
    fig = make_subplots(rows=1, cols=len(objectives), horizontal_spacing=0.08,
                        subplot_titles=[_AXES[o][4] for o in objectives])
    meta: list[tuple] = []  # per trace: (workload, budget or None: all budgets, front?)

    def add(points: list[tuple], wl: str, budget, name: str, front: bool, colour: str) -> None:
        text = [_hover(q) for q in points]
        for col, objective in enumerate(objectives, start=1):
            at, scale = _AXES[objective][1], _AXES[objective][2]
            # A front by this panel's x, so a 2-objective front draws as its staircase.
            idx = sorted(range(len(points)), key=lambda i: points[i][at]) if front \
                else range(len(points))
            fig.add_trace(go.Scatter(
                x=[points[i][at] / scale for i in idx],
                y=[points[i][1] / 1e6 for i in idx], text=[text[i] for i in idx],
                mode="lines+markers" if front and not summary.power else "markers",
                line=dict(shape="hv", width=1, color=colour) if front else None,
                marker=dict(size=7 if front else 4, color=colour,
                            opacity=1.0 if front else 0.5),
                name=name, legendgroup=name, showlegend=col == 1,
                hovertemplate="%{text}<extra></extra>", visible=False,
            ), row=1, col=col)
            meta.append((wl, budget, front))

    what = "time x cost x power" if summary.power else "time x cost"
    views = []  # (menu label, title, which traces show)
    for wl in workloads:
        sample = _html_sample(summary, wl, html_points)
        budgets = summary.budgets(wl)
        for i, b in enumerate(budgets):
            add([q for q in sample if q[3] == b], wl, b, f"designs at {b:g} GB/s (sample)",
                False, _BUDGET_COLOURS[i % len(_BUDGET_COLOURS)])
            add([_point(r) for r in summary.budget_fronts.get((wl, b), [])], wl, b,
                f"Pareto front at {b:g} GB/s", True, "#d62728")
        add([_point(r) for r in summary.fronts.get(wl, [])], wl, None,
            "Pareto front, all budgets", True, "#d62728")
        drawn = f"{summary.seen.get(wl, 0):,} designs, {len(sample):,} drawn"
        # All budgets: every budget's sample and the workload's front; a budget: its own.
        views.append((f"{wl}: all budgets", f"{wl}, all budgets ({drawn}); Pareto front of "
                      f"{what}", lambda m, wl=wl: m[0] == wl and (m[1] is None or not m[2])))
        views += [(f"{wl}: {b:g} GB/s", f"{wl}, budget {b:g} GB/s per NPU ({drawn}); Pareto "
                   f"front of {what}", lambda m, wl=wl, b=b: m[:2] == (wl, b))
                  for b in budgets]
    menu = [dict(label=label, method="update",
                 args=[{"visible": [bool(show(m)) for m in meta]}, {"title": title}])
            for label, title, show in views]
    if menu:
        for trace, v in zip(fig.data, menu[0]["args"][0]["visible"]):
            trace.visible = v
    for col, objective in enumerate(objectives, start=1):
        fig.update_xaxes(type="log", title_text=_AXES[objective][3].replace(", log scale", ""),
                         row=1, col=col)
        fig.update_yaxes(title_text="step time (ms)", row=1, col=col)
    fig.update_layout(
        title=dict(text=menu[0]["args"][1]["title"] if menu else "no designs", x=0.01,
                   xanchor="left", y=0.98, yanchor="top"),
        template="plotly_white", height=700, hovermode="closest",
        legend=dict(orientation="h", yanchor="top", y=-0.15, x=0),
        updatemenus=[dict(buttons=menu, direction="down", showactive=True, x=0.0,
                          xanchor="left", y=1.12, yanchor="bottom")] if menu else [],
        annotations=list(fig.layout.annotations) + [dict(
            text="hover a point for its design; the menu picks the workload and budget",
            x=1.0, xanchor="right", y=1.12, yanchor="bottom", xref="paper", yref="paper",
            showarrow=False, font=dict(size=11, color="#555"))],
        margin=dict(t=150),
    )
    return fig.to_html(include_plotlyjs=True, full_html=True, div_id="pareto",
                       config={"displaylogo": False})


def check_html() -> None:
    """Raises unless pareto.html can be written (plotly installed), before a scan starts."""
    try:
        import plotly  # noqa: F401, PLC0415
    except ImportError:
        raise LibraInputError(
            "the scan's summary writes pareto.html with plotly, which is not installed: "
            "pip install plotly (a dependency of libra_jax).") from None


def summarise(output_dir: pathlib.Path, chunk_files: list[pathlib.Path], workloads: list[str],
              report: ReportConfig, max_ties: int = 1) -> tuple[Summary, str]:
    """Reads every chunk once; writes top_k.md, pareto_front.csv, pareto.png, pareto.html."""
    output_dir = pathlib.Path(output_dir)
    rank_by = RankBy(report.rank_by).value
    s = Summary(rank_by, report.top_k, report.plot_points, max_ties)
    for path in chunk_files:
        s.add(read_chunk(path))
    md = top_k_markdown(s, workloads)
    write_text(output_dir / "top_k.md", md)
    write_text(output_dir / "pareto_front.csv",
               csv_text([r for wl in workloads for r in s.fronts.get(wl, [])],
                        columns(s.power)))
    fig = pareto_figure(s, workloads, rank_by, report.plot_labels)
    atomic_write(output_dir / "pareto.png", lambda tmp: fig.savefig(tmp, format="png", dpi=120))
    write_text(output_dir / "pareto.html", pareto_html(s, workloads, report.html_points))
    return s, md
