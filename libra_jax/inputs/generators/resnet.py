"""The ``resnet50`` generator: ResNet-50 (He et al. 2016), data parallel."""

from __future__ import annotations

from typing import Any, Mapping

from libra_jax.inputs.generators.common import (
    Block,
    Lines,
    Npu,
    Parallel,
    group_comms,
    micro_batches,
    read_int,
)
from libra_jax.inputs.limits import as_str
from libra_jax.inputs.workload import Workload
from libra_jax.types import Collective, LibraInputError

_AR = int(Collective.ALLREDUCE)


def resnet50_layers(image: int = 224) -> list[tuple[str, int, int, int, int, int]]:
    """ResNet-50 (He et al. 2016, Table 1) convolutions and the classifier:
    (name, in channels, out channels, kernel, output height/width, groups=1), in the shipped
    file's order (a stage's first block lists its projection shortcut ``conv4`` first)."""
    out = [("conv1", 3, 64, 7, image // 2)]
    size = image // 4  # after the stride-2 conv1 and the stride-2 max pool
    cin = 64
    for width, blocks in ((64, 3), (128, 4), (256, 6), (512, 3)):
        for j in range(1, blocks + 1):
            stride = 2 if (j == 1 and width != 64) else 1
            osize = size // stride
            if j == 1:
                out.append((f"layer_{width}_{j}_conv4", cin, 4 * width, 1, osize))
            out.append((f"layer_{width}_{j}_conv1", cin, width, 1, size if stride == 1 else osize))
            out.append((f"layer_{width}_{j}_conv2", width, width, 3, osize))
            out.append((f"layer_{width}_{j}_conv3", width, 4 * width, 1, osize))
            cin, size = 4 * width, osize
    out.append(("fc1000", 2048, 1000, 1, 1))
    return [(n, ci, co, k, o, 1) for n, ci, co, k, o in out]


def resnet50_workload(model: Mapping[str, Any] | None, par: Parallel, npu: Npu, num_dims: int,
                      prefix: str = "workload") -> Workload:
    """ResNet-50, pure data parallel: per layer 2 * b * H * W * Cin * Cout * k^2 FLOPs forward,
    the same for each backward phase; one all-reduce of every weight (e bytes each; 25,502,912
    conv + fc weights, no biases or batch-norm) on conv1's weight gradient."""
    b = Block(model, f"{prefix}.model", ("name", "micro_batch", "global_batch",
                                          "bytes_per_element", "image_size"))
    name = as_str(b.get("name"), b.key("name"))
    mbatch = read_int(b.get("micro_batch"), b.key("micro_batch"))
    gbatch = read_int(b.get("global_batch"), b.key("global_batch"))
    e = read_int(b.get("bytes_per_element"), b.key("bytes_per_element"))
    image = read_int(b.get("image_size"), b.key("image_size"), 32)
    if par.tp != 1 or par.pp != 1 or par.ep != 1 or par.zero_stage > 1:
        raise LibraInputError(
            f"{prefix}.parallel: the resnet50 generator is data parallel only; got tp = "
            f"{par.tp}, pp = {par.pp}, ep = {par.ep}, zero_stage = {par.zero_stage} (use 1, 1, "
            "1, 0 or 1)."
        )
    mb = micro_batches(gbatch, mbatch, par.dp, prefix)
    ns = 1.0 / npu.flops_per_ns
    lines = Lines()
    params = 0
    for lname, ci, co, k, o, _ in resnet50_layers(image):
        fl = 2 * mbatch * o * o * ci * co * k * k * mb * ns
        lines.add(lname, (fl,) * 3)
        params += ci * co * k * k
    lines.set_phase(0, 2, _AR, params * e, "dp")
    return lines.workload(str(name), "generator resnet50", group_comms(par.placement), num_dims)
