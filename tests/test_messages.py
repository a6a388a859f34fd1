"""What the command line says to a user who gets something wrong (issue 11, "Typos are errors"
and "Messages"): misspelt keys, bad choices, no arguments, unquoted strings, a directory for a
file, unreadable sensitivities. In-process through Hydra's compose API where the behaviour is
the config's; a few subprocesses check that the ``cli()`` entry points are wired to it."""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import subprocess
import re
import sys
import types

import numpy as np
import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import ConfigCompositionException
from test_config import _compose

from libra_jax.cli import config, tables
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
    assert "pick a preset: conf=<name>, one of: dlrm, dlrm_4d, gb200_nvl72, gpt3," in err
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
    return tables.format_extras(REFERENCE_MODEL, None, None, None, sens)


def test_perf_per_cost_sensitivities_are_scaled_to_seconds():
    lines = _sensitivity_lines("perf_per_cost", 5_535_683_009_136.1, [-3.2e5, None, -7.39e13])
    assert "marginal value of the total budget: 5,535.683 s*$ per GB/s" in lines
    assert ("marginal value of one more GB/s on a dimension alone (per GB/s): "
            "-320.000 us*$, -, -73,900.000 s*$") in lines


@pytest.mark.parametrize("value, text", [(-412.5, "-412.500 ns"), (-41_250.0, "-41.250 us"),
                                         (-4.125e7, "-41.250 ms"), (2.5e9, "2.500 s"),
                                         (0.0, "0.000 ns"), (None, "-")])
def test_time_text_picks_the_largest_unit_that_reads_at_least_one(value, text):
    assert tables.time_text(value) == text
    lines = _sensitivity_lines("perf", value, [value])
    if value is not None:
        assert f"marginal value of the total budget: {text} per GB/s" in lines
    assert f"marginal value of one more GB/s on a dimension alone (per GB/s): {text}" in lines


# --------------------------------------------------------------------------------------------
# Messages a careless user meets (issue 17)


def test_misspelt_key_without_plus_gets_did_you_mean(capsys):
    # Hydra's own message was "To append to your config use +objectiv=...", no hint.
    err = _command_line_error(capsys, "conf=turing_nlg", "objectiv=perf_per_cost")
    assert err == ("error: objectiv='perf_per_cost': not a config key; did you mean "
                   "objective? (--help lists every key)\n")
    err = _command_line_error(capsys, "constraints.total_bw_gpbs=400")
    assert "did you mean constraints.total_bw_gbps?" in err
    err = _command_line_error(capsys, "~objectiv")
    assert err.startswith("error: ~objectiv: not a config key; did you mean objective?")


def test_list_split_by_the_shell_is_quoted_whole(capsys):
    # bandwidth_gbps=[100, 200, 200] unquoted: the shell passes 3 arguments.
    err = _command_line_error(capsys, "conf=turing_nlg", "bandwidth_gbps=[100,", "200,", "200]")
    assert err == ("error: the shell split the override 'bandwidth_gbps=[100, 200, 200]' at "
                   "its spaces into 3 arguments, which Hydra reads one by one; quote it whole: "
                   "'bandwidth_gbps=[100, 200, 200]'\n")
    (parsed,) = OverridesParser.create().parse_overrides(["bandwidth_gbps=[100, 200, 200]"])
    assert parsed.value() == [100, 200, 200]


def test_npus_without_topology_names_the_missing_key():
    cfg = _compose("conf=turing_nlg", "network.file=null", "network.npus=[16,8,32]")
    with pytest.raises(LibraInputError) as info:
        config.to_inputs(cfg)
    assert str(info.value).startswith(
        "network.npus=[16, 8, 32] needs network.topology (the block of each dimension, e.g. "
        "network.topology=[Ring,FullyConnected,Switch]), which is null;")
    with pytest.raises(LibraInputError, match=r"none is set \(network.file, network.notation "
                                              r"and network.topology are all null\)"):
        config.to_inputs(_compose("conf=turing_nlg", "network.file=null"))


def _scan_command_line_error(capsys, *argv: str) -> str:
    from libra_jax.studies.scan import ScanConfig
    with pytest.raises(SystemExit) as info:
        config.check_command_line("libra_jax.scan", None, list(argv), schema=ScanConfig,
                                  groups=())
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    return err


def test_scan_refuses_the_train_groups_before_hydra(capsys):
    for group, value in (("conf", "gpt3"), ("constraints", "none"), ("dnn", "gpt3_175b")):
        err = _scan_command_line_error(capsys, f"{group}={value}")
        assert err.startswith(f"error: {group}='{value}': libra_jax.scan has no config group "
                              f"{group} (conf, constraints, dnn are groups of libra_jax.train")
        assert "its keys are space, workloads, scan, report, compilation_cache_dir" in err
    assert "did you mean space.npus?" in _scan_command_line_error(capsys, "space.npu=3")
    from libra_jax.studies.scan import ScanConfig
    config.check_command_line("libra_jax.scan", None, [
        "-m", "scan.num_shards=3", "scan.shard_index=range(0,3)", "hydra/launcher=libra_joblib",
        "space.npus=64", "workloads.0.tp=4"], schema=ScanConfig, groups=())


def test_scan_help_lists_no_groups(tmp_path):
    proc = _cli("libra_jax.scan", "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "== Configuration groups ==" not in proc.stdout
    for group in ("conf: ", "constraints: ", "dnn: "):
        assert group not in proc.stdout
    assert "The scan has no config groups" in proc.stdout
    assert "space:\n  npus: 4096" in proc.stdout  # the config is still listed


def test_design_line_has_full_precision_and_evaluate_explains_rounding():
    from libra_jax.cli import evaluate
    optimum = [468.864469123, 27.350427456, 3.785103421]  # sums to 500 (within 1e-12)
    line = tables.design_override(optimum)
    assert line == "'bandwidth_gbps=[468.864469123,27.350427456,3.785103421]'"
    (parsed,) = OverridesParser.create().parse_overrides([line[1:-1]])
    assert parsed.value() == optimum  # what Hydra reads back is the optimum, bit for bit
    assert tables.design_override([1.0, float("nan")]) is None
    _, _, _, spec = config.to_inputs(_compose("conf=turing_nlg"))  # sum(bw) == 500
    assert evaluate.constraint_report(spec, np.array(optimum), None)["satisfied"]
    # The table's 3 decimals: 468.864 + 27.350 + 3.785 = 499.999.
    c = evaluate.constraint_report(spec, np.array([468.864, 27.350, 3.785]), None)
    assert c["violated"] == [
        "constraints.total_bw_gbps: sum(bw) = 499.999 but must be == 500 (off by 0.001, "
        "within the rounding of the digits given: up to 0.006; evaluate the full-precision "
        "'bandwidth_gbps=[...]' line libra-train prints)"]
    np.testing.assert_allclose(evaluate.rounding_gbps(np.array([468.864, 27.35, 500.0, 1e-5])),
                               [5e-4, 5e-3, 0.0, 5e-6])
    # A real violation says nothing of rounding.
    c = evaluate.constraint_report(spec, np.array([468.8, 27.3, 3.7]), None)
    assert c["violated"] == ["constraints.total_bw_gbps: sum(bw) = 499.8 but must be == 500"]
    spec = dataclasses.replace(spec, linear=["bw[0] == 468.864469123"], lower_gbps=[0, 0, 3.7852])
    c = evaluate.constraint_report(spec, np.array([468.864, 27.350, 3.785]), None)
    assert len(c["violated"]) == 3 and all("within the rounding" in v for v in c["violated"])


# --------------------------------------------------------------------------------------------
# Bad values on the command line: an error: paragraph, no traceback (issue 17)


BIG = "1" * 5000


@pytest.mark.parametrize("argv, message", [
    (["constraints.total_bw_gbps=abc"],
     "constraints.total_bw_gbps='abc': expected a number or null."),
    (["constraints.total_bw_gbps=true"],
     "constraints.total_bw_gbps=true: expected a number or null."),
    (['network.npus=[4,"x"]'],
     "network.npus=[4, 'x']: expected a list of integers or null ([1]: Value 'x' of type "
     "'str' could not be converted to Integer)."),
    (["constraints.linear=5"], "constraints.linear=5: expected a list of strings."),
    ([f"constraints.total_bw_gbps={BIG}"],
     "constraints.total_bw_gbps: the override 'constraints.total_bw_gbps=11111111111..."
     "11111111111111111111111111111111111111' holds an integer of 5,000 digits, more than "
     "Python reads (4,300 digits at most); no input of libra_jax needs a number that large."),
    ([f"network.npus=[1,{BIG}]"], "holds an integer of 5,000 digits"),
    (["constraints.total_bw_gbps=1" + "0" * 400],
     "constraints.total_bw_gbps=<an integer of about 401 digits>: expected a number or null "
     "(int too large to convert to float)."),
    (["objective=fastest"],
     "objective='fastest': expected one of perf, perf_per_cost, perf_per_watt, serving_throughput."),
    (["objective=null"], "objective=null: expected one of perf, perf_per_cost, perf_per_watt, serving_throughput."),
    (["workload.model=5"], "workload.model=5: expected a mapping {key: value, ...}."),
    (["workloads=[{fil: a}]"], "(Key 'fil' not in 'WorkloadEntryConfig')."),
    (["-m", "constraints.total_bw_gbps=400,abc"],
     "constraints.total_bw_gbps='abc': expected a number or null."),
    (["conf=turing_nlgg"], "conf='turing_nlgg': conf has no option 'turing_nlgg'; the "
                           "options are dlrm, dlrm_4d,"),
    (["-m", "constraints=none,total_bw_5000gbps"], "constraints has no option "
                                                   "'total_bw_5000gbps'"),
    (["a" * 5000 + "=1"], "'aaaaaaaa"),
], ids=["str-for-float", "bool-for-float", "str-in-int-list", "int-for-list", "5000-digits",
        "5000-digits-in-list", "float-overflow", "bad-choice", "null-choice", "int-for-dict",
        "bad-key-in-list", "sweep", "bad-preset", "bad-group-option-in-sweep", "huge-key"])
def test_bad_value_on_the_command_line_is_an_error_paragraph(capsys, argv, message):
    err = _command_line_error(capsys, *argv)
    assert message in err and err.count("\n") == 1 and len(err) < 1000


@pytest.mark.parametrize("argv", [
    ["space.npus=abc"], ["space.npus=true"], ['space.budgets_gbps=[4,"x"]'], ["space.blocks=5"],
    [f"space.npus={BIG}"], ["scan.format=parqet"]])
def test_bad_value_on_the_scan_command_line_is_an_error_paragraph(capsys, argv):
    err = _scan_command_line_error(capsys, *argv)
    assert argv[0].split("=")[0] in err and len(err) < 1000


@pytest.mark.parametrize("argv", [
    ["conf=turing_nlg", "hydra.run.dir=/x", "hydra/launcher=libra_joblib",
     "hydra.job.chdir=false"],
    ["conf=turing_nlg", "workload.model.d_model=5", "+workload.npu.memory_gb=80"],
    ["conf=turing_nlg", "network.npus.0=4", "constraints.upper_gbps=[1,null,inf]"],
    ["conf=turing_nlg", "constraints.total_bw_gbps=${oc.env:TOTAL,500}"],
    ["-m", "conf=turing_nlg,gpt3", "constraints.total_bw_gbps=range(100,500,100)"],
    ["-m", "hydra/sweeper=optuna", "constraints.total_bw_gbps=choice(400,600,-5)"],
    ["dnn=null", "conf=turing_nlg", "system.chunks=[1,4]", "weights=[1,2]"],
])
def test_good_command_lines_still_pass(argv):
    config.check_command_line("libra_jax.train", "conf=turing_nlg", argv)


def test_run_dir_under_a_file_is_refused_before_hydra(capsys, tmp_path):
    tmp_path = tmp_path / ("long_folder_name_" * 8)  # a long path is named whole, not elided
    tmp_path.mkdir()
    (tmp_path / "a_file").write_text("x")
    err = _command_line_error(capsys, "conf=turing_nlg", f"hydra.run.dir={tmp_path}/a_file/run")
    assert f"'{tmp_path}/a_file' is a file, so the run directory cannot be made there" in err
    config.check_command_line("libra_jax.train", None, [f"hydra.run.dir={tmp_path}/new/run"])
    assert not (tmp_path / "new").exists()  # checked, not made


@pytest.mark.parametrize("module, key", [("libra_jax.train", "hydra.run.dir"),
                                         ("libra_jax.scan", "hydra.run.dir"),
                                         ("libra_jax.train", "hydra.sweep.dir")])
def test_run_dir_where_mkdir_fails_is_refused_before_hydra(tmp_path, module, key):
    """/proc passes a permission check (as root, os.access says writable) but mkdir fails
    there: the command exits 2 with the message, before Hydra (no traceback)."""
    args = (["conf=turing_nlg"] if module == "libra_jax.train" else []) + [f"{key}=/proc/x"]
    if key == "hydra.sweep.dir":
        args.insert(0, "-m")
    proc = _cli(module, *args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(
        f"error: {key}='/proc/x': cannot make the run directory: making a directory in "
        "'/proc' fails ("), proc.stderr
    assert "Traceback" not in proc.stderr and not proc.stdout


def test_the_run_dir_probe_leaves_nothing(tmp_path):
    config.check_command_line("libra_jax.train", None, [f"hydra.run.dir={tmp_path}/a/b"])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("overrides, message", [
    (["constraints.total_bw_gbps=inf"], "constraints.total_bw_gbps = inf"),
    (["constraints.total_bw_gbps=nan"], "constraints.total_bw_gbps = nan"),
    (["constraints.max_cost_usd=nan"], "constraints.max_cost_usd = nan"),
])
def test_non_finite_numbers_are_input_errors(overrides, message):
    with pytest.raises(LibraInputError, match=re.escape(message)):
        config.to_inputs(_compose("conf=turing_nlg", *overrides))


def test_interpolation_of_the_wrong_type_is_an_input_error():
    from libra_jax.cli import runtime
    cfg = _compose("conf=turing_nlg", "constraints.total_bw_gbps=${oc.env:HOME}")
    with pytest.raises(LibraInputError, match=r"^constraints\.total_bw_gbps: While "
                                              r"dereferencing interpolation"):
        runtime.typed_config(cfg)


def test_evaluate_refuses_bounds_of_another_length():
    from libra_jax.cli import evaluate
    c = config._as_config(_compose("conf=turing_nlg", "bandwidth_gbps=[400,50,50]",
                                   "constraints.lower_gbps=[1,2,3,4]"))
    with pytest.raises(LibraInputError, match=r"constraints.lower_gbps = \[1.0, 2.0, 3.0, "
                                              r"4.0\]: has 4 entries but the network has 3"):
        evaluate.run(c, pathlib.Path("unused"))


@pytest.mark.parametrize("module, args, code, words", [
    ("libra_jax.train", ["conf=turing_nlg", f"constraints.total_bw_gbps={BIG}"], 2,
     "holds an integer of 5,000 digits"),
    ("libra_jax.evaluate", ["conf=turing_nlg", "bandwidth_gbps=[400,50,50]",
                            "constraints.total_bw_gbps=nan"], 1,
     "constraints.total_bw_gbps = nan"),
    ("libra_jax.scan", ["scan.output_dir=/proc/no/such/dir"], 1,
     "cannot use '/proc/no"),
], ids=["train", "evaluate", "scan"])
def test_commands_report_bad_input_without_a_traceback(tmp_path, module, args, code, words):
    proc = _cli(module, *args, f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and words in errors[0], proc.stderr


def test_evaluate_says_a_violation_is_rounding(tmp_path, capsys, caplog):
    from libra_jax.cli import evaluate
    c = config._as_config(_compose("conf=turing_nlg", "bandwidth_gbps=[468.864,27.350,3.785]"))
    with caplog.at_level("INFO", logger="libra_jax.cli.evaluate"):
        evaluate.run(c, tmp_path)
    out = capsys.readouterr().out
    assert ("VIOLATED: constraints.total_bw_gbps: sum(bw) = 499.999 but must be == 500 (off by "
            "0.001, within the rounding of the digits given") in out
    assert "constraints VIOLATED (within the rounding of the digits given)" in caplog.text
    data = json.loads((tmp_path / "result.json").read_text())
    assert data["constraints"]["satisfied"] is False


@pytest.mark.parametrize("preset", ["h100_dgx", "serving_llama3_70b"])
def test_perf_per_cost_without_a_floor_is_an_error(preset):
    """The H100 preset caps network power (<=) with a linear cost and no budget: time x cost
    only falls as every bandwidth goes to 0, so perf_per_cost has no optimum (the search used
    to end 'not converged' at ~0 GB/s); an error naming the keys that bound it, before the
    solve. The serving job says the same with its SLO keys."""
    from libra_jax.studies.job.serving import run_serving
    from libra_jax.studies.job.train import run_single

    c = config._as_config(_compose(f"conf={preset}", "objective=perf_per_cost"))
    run = run_serving if preset.startswith("serving") else run_single
    keys = "constraints.max_tpot_ms" if preset.startswith("serving") else \
        "constraints.total_bw_gbps"
    with pytest.raises(LibraInputError, match="objective=perf_per_cost has no optimum here") \
            as info:
        run(c)
    assert keys in str(info.value) and "constraints.lower_gbps" in str(info.value)
    # a floor on the bandwidths makes it well posed
    if not preset.startswith("serving"):
        ok = config._as_config(_compose(f"conf={preset}", "objective=perf_per_cost",
                                        "constraints.lower_gbps=[10,1]"))
        assert run(ok).result.status == "ok"
