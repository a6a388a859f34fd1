"""What the command line says to a user who gets something wrong (issue 11, "Typos are errors"
and "Messages"): misspelt keys, bad choices, no arguments, unquoted strings, a directory for a
file, unreadable sensitivities. In-process through Hydra's compose API where the behaviour is
the config's; a few subprocesses check that the ``cli()`` entry points are wired to it."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import types

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import ConfigCompositionException
from test_config import _compose

from libra_jax.cli import config, report
from libra_jax.inputs import LIBRA_INPUTS_DIR
from libra_jax.types import LibraInputError

REPO = pathlib.Path(__file__).resolve().parents[1]


def _cli(module: str, *args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, HYDRA_FULL_ERROR="0", PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def _command_line_error(capsys, *argv: str) -> str:
    """The ``error:`` paragraph check_command_line prints; fails unless it exits with 2."""
    with pytest.raises(SystemExit) as info:
        config.check_command_line("libra_jax.train", "conf=turing_nlg", list(argv))
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    return err


# --------------------------------------------------------------------------------------------
# Keys that are not in the schema


@pytest.mark.parametrize(
    "overrides, key, closest",
    [
        (["+constraints.total_bw_gpbs=400"], "constraints.total_bw_gpbs=400",
         "constraints.total_bw_gbps"),
        (["+objectiv=perf_per_cost"], "objectiv='perf_per_cost'", "objective"),
        (["++solver.methd=optax"], "solver.methd='optax'", "solver.method"),
        (["+total_bw_gbps=400"], "total_bw_gbps=400", "constraints.total_bw_gbps"),
    ],
    ids=["nested", "top", "force-add", "misplaced"],
)
def test_added_key_not_in_schema_is_rejected(overrides, key, closest):
    cfg = _compose("conf=turing_nlg", *overrides)
    with pytest.raises(LibraInputError) as info:
        config.to_inputs(cfg)
    message = str(info.value)
    assert message.startswith(f"{key}: not a config key")
    assert f"did you mean {closest}?" in message


def test_unknown_key_without_a_close_one_lists_the_keys_there():
    cfg = _compose("conf=turing_nlg", "+cost_model.zzzzzzzz=1")
    with pytest.raises(LibraInputError, match=r"cost_model\.zzzzzzzz=1: .*keys there are file"):
        config.to_inputs(cfg)


def test_unknown_key_in_a_workloads_entry_names_its_index():
    cfg = _compose("conf=multi_llm", "+workloads.1.nmae=x")
    with pytest.raises(LibraInputError, match=r"workloads\[1\]\.nmae='x'.*workloads\[1\]\.name\?"):
        config.to_multi_inputs(cfg)


def test_generator_blocks_take_any_key():
    # workload.model / .parallel / .npu are free-form (the generators check their keys).
    cfg = _compose("conf=turing_nlg", "+workload.model.anything=1")
    config.reject_unknown_keys(cfg)


def test_typo_fails_the_train_and_evaluate_commands(tmp_path):
    for module, extra in (("libra_jax.train", []),
                          ("libra_jax.evaluate", ["bandwidth_gbps=[100,100,300]"])):
        proc = _cli(module, "conf=turing_nlg", "+constraints.total_bw_gpbs=400", *extra,
                    cwd=tmp_path)
        assert proc.returncode != 0, (module, proc.stdout)
        assert "error: constraints.total_bw_gpbs=400: not a config key; did you mean " \
               "constraints.total_bw_gbps?" in proc.stderr, (module, proc.stderr)


# --------------------------------------------------------------------------------------------
# Choice fields are enums


CHOICES = {
    "objective": ("perf", "perf_per_cost"),
    "multi_objective": ("sum_time", "sum_time_x_cost", "worst_slowdown"),
    "model": ("libra", "pipelined"),
    "schedule": ("pipelined", "sequential", "balanced"),
    "training_loop": ("no_overlap", "dp_overlap", "full_overlap"),
    "solver.method": ("ipm", "optax"),
    "constraints.total_bw_mode": ("eq", "le"),
    "workload.generator": ("transformer", "moe", "resnet50", "dlrm"),
}


@pytest.mark.parametrize("key", sorted(CHOICES))
def test_bad_choice_is_rejected_when_hydra_composes(key):
    with pytest.raises(ConfigCompositionException) as info:
        _compose("conf=turing_nlg", f"{key}=fastest")
    cause = str(info.value.__cause__)
    assert "Invalid value 'fastest'" in cause
    assert all(choice in cause for choice in CHOICES[key])


@pytest.mark.parametrize("key", sorted(CHOICES))
def test_every_choice_composes(key):
    for choice in CHOICES[key]:
        cfg = _compose("conf=turing_nlg", f"{key}={choice}")
        head, _, leaf = key.rpartition(".")
        value = (cfg[head] if head else cfg)[leaf]
        assert value == choice and f"{value}" == choice and str(value) == choice
        assert repr(value) == repr(choice) and json.dumps(value) == json.dumps(choice)


def test_choices_reach_the_model_as_plain_strings():
    cfg = _compose("conf=turing_nlg", "constraints.total_bw_mode=le", "model=pipelined")
    _, _, _, spec = config.to_inputs(cfg)
    tm, _ = config.to_timing(cfg, 3)
    for value, expected in ((spec.total_bw_mode, "le"), (tm.model, "pipelined"),
                            (tm.schedule, "pipelined"), (tm.training_loop, "no_overlap")):
        assert type(value) is str and value == expected


def test_python_config_object_gets_the_same_check():
    cfg = config.LibraConfig(objective="fastest")
    with pytest.raises(LibraInputError, match="objective: Invalid value 'fastest'"):
        config.to_inputs(cfg)


# --------------------------------------------------------------------------------------------
# --help and the config groups


def test_help_lists_only_what_applies(tmp_path):
    proc = _cli("libra_jax.train", "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    groups = proc.stdout.split("== Config ==")[0]
    assert "conf: " in groups and "constraints: multiple_constraints, none, total_bw_500gbps" \
        in groups
    assert "base_constraints" not in proc.stdout
    assert "experiment" not in groups
    assert "objective: perf\n" in proc.stdout  # the enum default prints as its value


def test_experiment_configs_live_with_the_experiments():
    assert not (config.CONF_DIR / "experiment").exists()
    assert sorted(p.stem for p in (REPO / "experiments" / "conf").glob("*.yaml")) == [
        "claims", "dims_3d_vs_4d", "latency_aware", "multi_workload", "pareto",
        "perf_per_cost", "speedup"]


# --------------------------------------------------------------------------------------------
# No arguments


def test_no_arguments_says_how_to_pick_a_preset(capsys):
    err = _command_line_error(capsys)
    assert "pick a preset: conf=<name>, one of: dlrm, dlrm_4d, gpt3," in err
    assert "python -m libra_jax.train conf=turing_nlg" in err
    assert config.presets() == sorted(p.stem for p in (config.CONF_DIR / "conf").glob("*.yaml"))


@pytest.mark.parametrize("argv", [["conf=turing_nlg"], ["--help"], ["--cfg", "job"],
                                  ["-m", "conf=turing_nlg,gpt3"],
                                  ['network.notation="RI(4)_FC(8)"'],
                                  ['constraints.linear=["bw[0] >= bw[1]", "bw[1] >= 2"]']])
def test_sensible_command_lines_pass(argv):
    config.check_command_line("libra_jax.train", "conf=turing_nlg", argv)


def test_no_arguments_fails_train_and_evaluate(tmp_path):
    for module, example in (("libra_jax.train", "conf=turing_nlg"),
                            ("libra_jax.evaluate", "conf=gpt3_4d bandwidth_gbps=")):
        proc = _cli(module, cwd=tmp_path)
        assert proc.returncode == 2, (module, proc.stdout)
        assert "pick a preset: conf=<name>" in proc.stderr and example in proc.stderr
    assert not (tmp_path / "outputs").exists()  # nothing ran


def test_null_workload_lists_the_presets():
    with pytest.raises(LibraInputError, match="workload.file is null.*one of: dlrm, dlrm_4d"):
        config.to_inputs(_compose("conf=turing_nlg", "workload.file=null"))


# --------------------------------------------------------------------------------------------
# Strings Hydra's grammar cannot parse


def _parses(override: str) -> bool:
    for parsed in OverridesParser.create().parse_overrides([override]):
        parsed.value()
    return True


@pytest.mark.parametrize(
    "argv, hint",
    [
        (["network.notation=RI(4)_FC(8)"], """'network.notation="RI(4)_FC(8)"'"""),
        (["network.notation=SW(8)"], """'network.notation="SW(8)"'"""),
        (["constraints.linear=[bw[0]>=bw[1],bw[1]>=bw[2]]"],
         """'constraints.linear=["bw[0]>=bw[1]", "bw[1]>=bw[2]"]'"""),
        # The shell split an unquoted override at its spaces: the pieces are joined back.
        (["conf=gpt3_4d", "constraints.linear=[bw[2]", "+", "bw[3]", "==", "200]"],
         """'constraints.linear=["bw[2] + bw[3] == 200"]'"""),
    ],
    ids=["notation", "notation-function", "linear", "linear-split"],
)
def test_unparsable_override_gets_a_quoting_hint(capsys, argv, hint):
    err = _command_line_error(capsys, *argv)
    assert err.rstrip().endswith(f"quote the value: {hint}")
    assert _parses(hint[1:-1])  # the suggestion itself is what Hydra reads as the string
    if len(argv) > 2:
        assert "the shell also split this one" in err


def test_unparsable_override_fails_evaluate(tmp_path):
    proc = _cli("libra_jax.evaluate", "conf=gpt3_4d", "network.file=null",
                "network.notation=RI(4)_FC(8)", cwd=tmp_path)
    assert proc.returncode == 2
    assert "mismatched input '_FC'" in proc.stderr
    assert """quote the value: 'network.notation="RI(4)_FC(8)"'""" in proc.stderr


# --------------------------------------------------------------------------------------------
# A directory where a file is needed


def test_directory_for_a_file_says_so(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = _compose("conf=turing_nlg", "workload.file=workload")
    with pytest.raises(LibraInputError) as info:
        config.to_inputs(cfg)
    message = str(info.value)
    assert message.startswith("workload.file: 'workload' is a directory (")
    assert str(LIBRA_INPUTS_DIR / "workload") in message and "not found" not in message
    assert "e.g. workload.file=workload/DLRM.txt" in message and "Turing_NLG.txt" in message
    (tmp_path / "empty").mkdir()
    with pytest.raises(LibraInputError, match="is a directory .*it holds no files"):
        config.to_inputs(_compose("conf=turing_nlg", f"workload.file={tmp_path / 'empty'}"))


# --------------------------------------------------------------------------------------------
# Sensitivities in readable units


REFERENCE_MODEL = types.SimpleNamespace(is_reference=True)


def _sensitivity_lines(objective: str, total: float, gift: list) -> list[str]:
    prefix = "d_step_ns_d_" if objective == "perf" else "d_time_x_cost_d_"
    sens = {"status": "ok", "objective": objective, prefix + "total_bw_gbps": total,
            prefix + "gift_gbps": gift}
    return report.format_extras(REFERENCE_MODEL, None, None, None, sens)


def test_perf_per_cost_sensitivities_are_scaled_to_seconds():
    lines = _sensitivity_lines("perf_per_cost", 5_535_683_009_136.1, [-3.2e5, None, -7.39e13])
    assert "marginal value of the total budget: 5,535.683 s*$ per GB/s" in lines
    assert ("marginal value of one more GB/s on a dimension alone (per GB/s): "
            "-320.000 us*$, -, -73,900.000 s*$") in lines


@pytest.mark.parametrize("value, text", [(-412.5, "-412.500 ns"), (-41_250.0, "-41.250 us"),
                                         (-4.125e7, "-41.250 ms"), (2.5e9, "2.500 s"),
                                         (0.0, "0.000 ns"), (None, "-")])
def test_time_text_picks_the_largest_unit_that_reads_at_least_one(value, text):
    assert report.time_text(value) == text
    lines = _sensitivity_lines("perf", value, [value])
    if value is not None:
        assert f"marginal value of the total budget: {text} per GB/s" in lines
    assert f"marginal value of one more GB/s on a dimension alone (per GB/s): {text}" in lines
