"""The launchers' cluster fit (`libra_jax.cli.launchers`) without a cluster: Ray requests
against given node totals, SLURM requests against captured `sinfo` output, the callback's
refusal (one `error:` paragraph, exit status 2), and an address where no Ray cluster answers.
The same checks against running clusters: tests/test_scan_ray.py, tests/test_scan_slurm.py."""

from __future__ import annotations

import socket

import pytest
from omegaconf import OmegaConf

from libra_jax.cli import launchers
from libra_jax.cli.launchers import check_slurm, fit_ray_request, parse_sinfo
from libra_jax.types import LibraInputError

GiB = 2**30
TWO_CPUS = [{"CPU": 2.0, "memory": 15.0 * GiB, "object_store_memory": 7.0 * GiB,
             "node:127.0.0.1": 1.0, "node:__internal_head__": 1.0}]
MIXED = [{"CPU": 32.0, "memory": 100.0 * GiB}, {"CPU": 32.0, "memory": 100.0 * GiB},
         {"CPU": 4.0, "GPU": 1.0, "memory": 30.0 * GiB, "accelerator_type:A100": 1.0}]


@pytest.mark.parametrize("remote, nodes, cpus", [
    ({"num_cpus": "auto", "num_gpus": 0}, TWO_CPUS, 2),  # the shipped default, a small node
    ({"num_cpus": "auto", "num_gpus": 0}, MIXED, 8),  # capped at SHARD_CPUS
    ({"num_cpus": "auto", "num_gpus": 1}, MIXED, 4),  # the largest node with a GPU
    ({"num_cpus": 2, "num_gpus": 0}, TWO_CPUS, 2),  # a number that fits: as is
    ({"num_cpus": 0.5}, TWO_CPUS, 0.5),
    ({}, TWO_CPUS, 1),  # Ray's default for a task
    ({"num_cpus": 4, "accelerator_type": "A100", "memory": 20 * GiB}, MIXED, 4),
])
def test_ray_requests_that_a_node_holds(remote, nodes, cpus):
    assert fit_ray_request(remote, nodes) == cpus


@pytest.mark.parametrize("remote, nodes, message", [
    ({"num_cpus": 64, "num_gpus": 0}, TWO_CPUS,
     "hydra.launcher.ray.remote.num_cpus = 64: no node of the Ray cluster at H:1 has 64 CPUs; "
     "its live nodes: 2 CPUs, 0 GPUs (1 node). Ask for what a node has (num_cpus=auto: the "
     "largest node's CPUs, up to 8)."),
    ({"num_cpus": "auto", "num_gpus": 1}, TWO_CPUS,
     "hydra.launcher.ray.remote.num_gpus = 1: no node of the Ray cluster at H:1 has 1 GPU; its "
     "live nodes: 2 CPUs, 0 GPUs (1 node). Ask for what a node has."),
    ({"num_cpus": 8, "num_gpus": 1}, MIXED,  # each alone fits a node, not both on one
     "hydra.launcher.ray.remote.num_cpus = 8 and num_gpus = 1: no node of the Ray cluster at "
     "H:1 has 8 CPUs and 1 GPU together; its live nodes: 32 CPUs, 0 GPUs (2 nodes); 4 CPUs, "
     "1 GPU (1 node). Ask for what a node has (num_cpus=auto: the largest node's CPUs, up to "
     "8)."),
    ({"num_cpus": 1, "memory": 40 * GiB, "resources": {"tpu": 4}}, TWO_CPUS,
     "hydra.launcher.ray.remote.memory = 42949672960 and resources.tpu = 4: no node of the Ray "
     "cluster at H:1 has 40 GiB of memory, nor 4 'tpu' resources; its live nodes: 2 CPUs, "
     "0 GPUs, 15 GiB of memory, 0 'tpu' resources (1 node). Ask for what a node has."),
    ({"num_cpus": 1, "accelerator_type": "H100"}, MIXED,
     "hydra.launcher.ray.remote.accelerator_type = H100: no node of the Ray cluster at H:1 has "
     "an accelerator of type H100; its live nodes: 32 CPUs, 0 GPUs, no accelerator of type "
     "H100 (2 nodes); 4 CPUs, 1 GPU, no accelerator of type H100 (1 node). Ask for what a node "
     "has."),
    ({"num_cpus": "auto"}, [{"CPU": 0.0}],
     "hydra.launcher.ray.remote.num_cpus = auto: no node of the Ray cluster at H:1 that has the "
     "task's other resources has a CPU; its live nodes: 0 CPUs, 0 GPUs (1 node)."),
    ({"num_cpus": "8"}, TWO_CPUS,
     "hydra.launcher.ray.remote.num_cpus = '8': must be a number >= 0 or auto."),
    ({"num_gpus": -1}, TWO_CPUS,
     "hydra.launcher.ray.remote.num_gpus = -1: must be a number >= 0."),
    ({}, [], "the Ray cluster at H:1 has no live node."),
])
def test_ray_requests_that_no_node_holds_are_refused(remote, nodes, message):
    with pytest.raises(LibraInputError) as e:
        fit_ray_request(remote, nodes, "the Ray cluster at H:1")
    assert str(e.value) == message


# `sinfo -h -N -o "%N|%P|%c|%m|%G"` of a cluster with a default CPU partition and a GPU one
# (node c2 in both), and of the local one-node cluster of experiments/slurm_local/setup.sh.
SINFO = """\
c1|cpu*|32|128000|(null)
c2|cpu*|16|64000|(null)
c2|gpu|16|64000|gpu:a100:2(S:0-1)
g1|gpu|8|512000|gpu:a100:4(S:0-1),gpu:v100:2
"""
SINFO_LOCAL = "vm|local*|2|21694|(null)\n"


def test_sinfo_is_read_per_node_and_partition():
    assert parse_sinfo(SINFO)[2:] == [
        {"node": "c2", "partition": "gpu", "default": False, "cpus": 16, "mem_mb": 64000,
         "gpus": 2},
        {"node": "g1", "partition": "gpu", "default": False, "cpus": 8, "mem_mb": 512000,
         "gpus": 6}]
    assert parse_sinfo(SINFO)[0]["default"] and parse_sinfo(SINFO)[0]["partition"] == "cpu"


def _slurm(**overrides):
    """The shipped libra_slurm values (the keys the check reads), with ``overrides``."""
    return {"partition": None, "cpus_per_task": 8, "tasks_per_node": 1, "mem_gb": 32,
            "gpus_per_node": 0, "nodes": 1, **overrides}


@pytest.mark.parametrize("config", [
    _slurm(), _slurm(partition="cpu", cpus_per_task=32, mem_gb=120),
    _slurm(partition="gpu", gpus_per_node=4, cpus_per_task=8),
    _slurm(partition="gpu", gpus_per_node=2, nodes=2), _slurm(partition="cpu,gpu", mem_gb=490),
    _slurm(cpus_per_task=None, mem_gb=None, gpus_per_node=None),  # SLURM's defaults
])
def test_slurm_requests_that_enough_nodes_hold(config):
    check_slurm(config, parse_sinfo(SINFO))


@pytest.mark.parametrize("sinfo, config, message", [
    (SINFO_LOCAL, _slurm(partition="local"),  # the shipped values on the local cluster
     "hydra.launcher.cpus_per_task = 8 and mem_gb = 32: no node of partition local has 8 CPUs, "
     "nor 32 GB of memory; its nodes: 2 CPUs, 21.2 GB memory, 0 GPUs (1 node). Ask for what a "
     "node has."),
    (SINFO, _slurm(gpus_per_node=1),
     "hydra.launcher.gpus_per_node = 1: no node of the default partition cpu has 1 GPU; its "
     "nodes: 32 CPUs, 125 GB memory, 0 GPUs (1 node); 16 CPUs, 62.5 GB memory, 0 GPUs "
     "(1 node). Ask for what a node has."),
    (SINFO, _slurm(partition="gpu", cpus_per_task=16, gpus_per_node=4, mem_gb=60),
     "hydra.launcher.cpus_per_task = 16 and mem_gb = 60 and gpus_per_node = 4: no node of "
     "partition gpu has 16 CPUs and 60 GB of memory and 4 GPUs together; its nodes: 16 CPUs, "
     "62.5 GB memory, 2 GPUs (1 node); 8 CPUs, 500 GB memory, 6 GPUs (1 node). Ask for what a "
     "node has."),
    (SINFO, _slurm(partition="gpu", gpus_per_node=4, nodes=2),
     "hydra.launcher.gpus_per_node = 4: fewer than 2 nodes of partition gpu have 4 GPUs; its "
     "nodes: 16 CPUs, 62.5 GB memory, 2 GPUs (1 node); 8 CPUs, 500 GB memory, 6 GPUs "
     "(1 node). Ask for what a node has."),
    (SINFO, _slurm(partition="cpu", cpus_per_task=8, tasks_per_node=8),
     "hydra.launcher.cpus_per_task = 8 x tasks_per_node = 8: no node of partition cpu has "
     "64 CPUs; its nodes: 32 CPUs, 125 GB memory, 0 GPUs (1 node); 16 CPUs, 62.5 GB memory, "
     "0 GPUs (1 node). Ask for what a node has."),
    (SINFO, _slurm(partition="cpu", nodes=3),
     "hydra.launcher.nodes = 3: partition cpu has 2 nodes."),
    (SINFO, _slurm(partition="gpus"),
     "hydra.launcher.partition = gpus: the SLURM cluster has no partition gpus; it has cpu, "
     "gpu."),
    (SINFO.replace("*", ""), _slurm(),
     "hydra.launcher.partition = null: the SLURM cluster has no default partition; name one "
     "of cpu, gpu."),
])
def test_slurm_requests_that_no_node_holds_are_refused(sinfo, config, message):
    with pytest.raises(LibraInputError) as e:
        check_slurm(config, parse_sinfo(sinfo))
    assert str(e.value) == message


def test_the_callback_refuses_with_one_error_paragraph_and_status_2(monkeypatch, capsys):
    monkeypatch.setattr(launchers, "sinfo_nodes", lambda: parse_sinfo(SINFO_LOCAL))
    config = OmegaConf.create({"hydra": {"launcher": {
        "_target_": launchers.SLURM_LAUNCHER, **_slurm(partition="local")}}})
    with pytest.raises(SystemExit) as e:
        launchers.ClusterFit().on_multirun_start(config)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: hydra.launcher.cpus_per_task = 8 and mem_gb = 32: ")
    assert err.count("\n") == 1
    # Other launchers (joblib, the basic one) are not checked.
    config.hydra.launcher._target_ = "hydra_plugins.hydra_joblib_launcher.JoblibLauncher"
    launchers.ClusterFit().on_multirun_start(config)


def test_a_ray_address_where_nothing_answers_is_refused_at_once(monkeypatch):
    pytest.importorskip("ray")
    import ray._private.ray_constants as ray_constants

    monkeypatch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", ray_constants.ENABLE_RAY_CLUSTER)
    with socket.socket() as s:  # a port of 127.0.0.1 where nothing listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(LibraInputError) as e:
        launchers._connect_ray(None, {"address": f"127.0.0.1:{port}"})
    assert str(e.value) == (
        f"hydra.launcher.ray.init.address = '127.0.0.1:{port}': no Ray cluster answers at "
        f"127.0.0.1:{port} (Connection refused); start its head first (ray start --head, "
        "docs/launchers.md) or fix the address.")
    assert ray_constants.ENABLE_RAY_CLUSTER is False  # a loopback address is used as given
