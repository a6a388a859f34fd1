"""A training step's dependency graph: `step_graph` turns a workload and a training loop into
the node list every NPU runs (`types.StepNode`): compute nodes and collectives with their
dependencies. `step.simulate_step` times it; the same graph is exported as Chakra execution
traces (`inputs/chakra.py`). Split from `step.py`, which re-exports it.

Units: ns, bytes.
"""

from __future__ import annotations

import dataclasses

from libra_jax.types import Collective, StepNode

TRAINING_LOOPS = ("no_overlap", "dp_overlap", "full_overlap")
PHASE_TAGS = ("fwd", "ig", "wg")


def _comm_nodes(workload, l: int, p: int, deps: tuple[int, ...], start: int) -> list[StepNode]:
    """The collective(s) of layer-phase (l, p): ``issues`` collectives of size / issues,
    each waiting for the previous one (the first for ``deps``)."""
    code = int(workload.collective[l, p])
    issues = 1 if workload.issues is None else int(workload.issues[l, p])
    group = tuple(int(g) if g > 1 else 1 for g in workload.communicator[l, p])
    involved = tuple(g > 1 for g in group)
    if code == Collective.NONE or not any(involved):
        return []
    size = float(workload.size_bytes[l, p]) / issues
    name = f"{PHASE_TAGS[p]}{l}:{workload.layer_names[l]}"
    out = []
    for i in range(issues):
        out.append(StepNode(name=name if issues == 1 else f"{name}#{i}", kind="comm",
                            deps=deps if i == 0 else (start + i - 1,), collective=code,
                            size_bytes=size, involved=involved, group=group))
    return out


def step_graph(workload, training_loop: str) -> list[StepNode]:
    """The node list of one training step (every NPU runs the same list).

    Order (node ids): forward ``F{l}`` then its collective, l = 0..L-1; backward, l =
    L-1..0: ``B{l}`` (input-gradient compute) and its collective, ``W{l}`` (weight-gradient
    compute) and its collective. Dependencies by ``training_loop``:

    * ``no_overlap``: one chain, every node waits for the one before it;
    * ``dp_overlap``: as the chain, but a weight-gradient collective waits only for its
      ``W{l}`` and nothing waits for it (the step ends when every node has finished);
    * ``full_overlap``: as ``dp_overlap``, and a forward / input-gradient collective runs
      beside its own layer's compute: both wait for what the compute would wait for, and the
      next node waits for both.

    Under the overlap loops a weight-gradient all-gather also waits for the last
    weight-gradient reduce-scatter issued before it on the same group (ZeRO: a layer's
    reduce-scatter, then the all-gather of its updated shard on the next line of the
    workload). A phase issued n times (`Workload.issues`) is n collectives of size / n in
    sequence.
    Zero-time compute nodes are kept (they cost nothing).
    """
    nodes: list[StepNode] = []
    frontier: tuple[int, ...] = ()  # what the next main-chain node waits for
    last_rs: dict[tuple[int, ...], int] = {}  # group -> its last weight-gradient RS node
    L = workload.num_layers

    def add(node: StepNode) -> int:
        nodes.append(node)
        return len(nodes) - 1

    def phase(l: int, p: int, tag: str) -> None:
        nonlocal frontier
        comp = add(StepNode(name=f"{tag}{l}", kind="compute", deps=frontier,
                            duration_ns=float(workload.compute_ns[l, p])))
        if p == 2 and training_loop != "no_overlap":
            comms = _comm_nodes(workload, l, p, (comp,), len(nodes))
            if comms and comms[0].collective == Collective.ALLGATHER \
                    and comms[0].group in last_rs:
                # ZeRO: the updated shards are gathered after they were reduced
                comms[0] = dataclasses.replace(
                    comms[0], deps=comms[0].deps + (last_rs[comms[0].group],))
            for c in comms:
                add(c)
            if comms and comms[-1].collective == Collective.REDUCESCATTER:
                last_rs[comms[-1].group] = len(nodes) - 1
            frontier = (comp,)
            return
        if p < 2 and training_loop == "full_overlap":
            comms = _comm_nodes(workload, l, p, frontier, len(nodes))
            for c in comms:
                add(c)
            frontier = (comp,) + ((len(nodes) - 1,) if comms else ())
            return
        comms = _comm_nodes(workload, l, p, (comp,), len(nodes))
        for c in comms:
            add(c)
        frontier = (len(nodes) - 1,)

    for l in range(L):
        phase(l, 0, "F")
    for l in range(L - 1, -1, -1):
        phase(l, 1, "B")
        phase(l, 2, "W")
    return nodes


# ------------------------------------------------------------------------------ the replay
