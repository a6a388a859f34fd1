"""Training and serving on one network (issue 34 point 4): the bandwidths of a network that a
training job and a serving fleet share, with a weight per workload.

The objective is unit-free, each workload's figure divided by its own optimum:

    G(bw) = w_train * T_train(bw) / T_train*  +  w_serve * F(bw) / F*,

with T_train the training step time (s; one `Problem`), F the fleet's seconds per token
(`libra_jax.studies.serving`: F = max_j A_j . T_phases) and T_train*, F* the values of each
workload's own optimum on the same network and constraints (F* under the SLOs when they are
given). A weighted sum of a maximum is the maximum of the weighted sums, so

    G(bw) = max_j (w_serve A_j / F*  ,  w_train / T_train*) . (T_phases(bw), T_train(bw)):

a `serving.ServingForm` over the phase problems plus the training problem (one more column of
T; the SLO rows C get a zero there). `serving.min_seconds_per_token` minimises it and
certifies it (one merged `Problem` when colocated without SLOs, the Kelley dual otherwise):
``lower_bound <= min G <= value``.

Each workload's slowdown on the shared design is its figure there over its own optimum (>= 1
up to the own optimum's gap); ``loss`` = slowdown - 1. The own designs are also evaluated on
the other workload (how a network built for one serves the other).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Sequence

import numpy as np

from libra_jax.model import timing
from libra_jax.model.problem import ConstraintSpec, Problem
from libra_jax.solvers import solve as solve_mod
from libra_jax.solvers.certificate import relative_gap
from libra_jax.studies import serving
from libra_jax.types import LibraInputError


def shared_form(form: serving.ServingForm, w_train: float, w_serve: float,
                train_own_s: float, serve_own_s: float) -> serving.ServingForm:
    """The `ServingForm` of G (module docstring) over the phases then the training step."""
    if not (w_train >= 0 and w_serve >= 0 and w_train + w_serve > 0):
        raise LibraInputError(f"weights ({w_train}, {w_serve}): expected >= 0, not both 0.")
    if not (train_own_s > 0 and serve_own_s > 0):
        raise LibraInputError(f"own optima ({train_own_s}, {serve_own_s}) s: expected > 0.")
    j = form.a.shape[0]
    a = np.concatenate([form.a * (w_serve / serve_own_s),
                        np.full((j, 1), w_train / train_own_s)], axis=1)
    c = np.concatenate([form.c, np.zeros((form.c.shape[0], 1))], axis=1)
    return serving.ServingForm(a, c, form.b.copy(), form.slo_names)


@dataclasses.dataclass
class OwnOptimum:
    """One workload's own optimum: design, value (s per step or s per token), certified lower
    bound of that value."""

    bandwidth_gbps: np.ndarray
    value_s: float
    lower_bound_s: float
    gap: float


@dataclasses.dataclass
class SharedDesign:
    """The shared design and what it costs each workload (module docstring)."""

    bandwidth_gbps: np.ndarray
    value: float  # G at the design (w_train + w_serve at best)
    lower_bound: float  # certified lower bound of min G
    gap: float
    certified: bool
    max_violation: float
    slo_violation: float  # <= 0 when the SLOs are met (-inf without SLOs)
    weights: tuple[float, float]  # (w_train, w_serve)
    train: OwnOptimum  # training's own optimum (no SLOs)
    serve: OwnOptimum  # serving's own optimum (under the SLOs when given)
    train_step_s: float  # at the shared design
    serve_s_per_token: float  # at the shared design
    train_slowdown: float  # train_step_s / train.value_s
    serve_slowdown: float  # serve_s_per_token / serve.value_s
    train_design_serve_slowdown: float  # serving on training's own design, over F*
    serve_design_train_slowdown: float  # training on serving's own design, over T_train*
    seconds: float

    @property
    def train_loss(self) -> float:
        return self.train_slowdown - 1.0

    @property
    def serve_loss(self) -> float:
        return self.serve_slowdown - 1.0


def training_problem(network, workload, cost_rates, spec: ConstraintSpec,
                     tm: timing.TimingModel) -> Problem:
    """The training step's `Problem` on the serving network (same constraints and rates)."""
    return timing.build_timed_problem(network, workload, cost_rates, spec, tm)


def own_training(train: Problem) -> OwnOptimum:
    """min T_train (s), certified."""
    r = solve_mod.solve(train, "perf")
    bw = np.asarray(r.bandwidth_gbps, np.float64)
    t = float(serving.phase_times_s(bw, [train])[0])
    lb = r.lower_bound / 1e9 if r.lower_bound is not None else -math.inf
    return OwnOptimum(bw, t, lb, float(relative_gap(t, lb)))


def own_serving(problems: Sequence[Problem], form: serving.ServingForm, rates,
                spec: ConstraintSpec) -> OwnOptimum:
    """min F (s per token) under the SLOs of ``form``, certified."""
    s = serving.min_seconds_per_token(problems, form, rates, spec)
    return OwnOptimum(np.asarray(s.bandwidth_gbps, np.float64), s.value, s.lower_bound, s.gap)


def solve_shared(train: Problem, problems: Sequence[Problem], form: serving.ServingForm,
                 rates, spec: ConstraintSpec, w_train: float = 1.0, w_serve: float = 1.0,
                 own: tuple[OwnOptimum, OwnOptimum] | None = None) -> SharedDesign:
    """min G(bw) s.t. the constraints of ``spec`` and the SLOs of ``form`` (module docstring).

    Args:
      train: the training step's problem, built with the same network, ``rates`` and ``spec``
        as the phase ``problems`` (`training_problem`).
      problems: the serving phases' problems (order of ``ServingPhases.workloads``).
      form: the fleet's `ServingForm` (`serving.serving_form`), SLOs included or not.
      w_train, w_serve: >= 0, not both 0.
      own: (training's, serving's) own optima when already solved; else solved here.
    """
    start = time.perf_counter()
    t_own, s_own = own if own is not None else (own_training(train),
                                                own_serving(problems, form, rates, spec))
    g = shared_form(form, w_train, w_serve, t_own.value_s, s_own.value_s)
    every = list(problems) + [train]
    s = serving.min_seconds_per_token(every, g, rates, spec)
    bw = np.asarray(s.bandwidth_gbps, np.float64)
    times = serving.phase_times_s(bw, every)
    f = float(np.max(form.a @ times[:-1]))
    f_of_train = float(np.max(form.a @ serving.phase_times_s(t_own.bandwidth_gbps, problems)))
    t_of_serve = float(serving.phase_times_s(s_own.bandwidth_gbps, [train])[0])
    return SharedDesign(
        bandwidth_gbps=bw, value=s.value, lower_bound=s.lower_bound, gap=s.gap,
        certified=s.certified, max_violation=s.max_violation, slo_violation=s.slo_violation,
        weights=(float(w_train), float(w_serve)), train=t_own, serve=s_own,
        train_step_s=float(times[-1]), serve_s_per_token=f,
        train_slowdown=float(times[-1]) / t_own.value_s, serve_slowdown=f / s_own.value_s,
        train_design_serve_slowdown=f_of_train / s_own.value_s,
        serve_design_train_slowdown=t_of_serve / t_own.value_s,
        seconds=time.perf_counter() - start)
