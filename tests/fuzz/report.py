"""The fuzz suite's reports and reproducers: the table of outcomes by family, the distinct
failure causes, a failing case written as a small reproducer (JSON plus its input file), and
the reproducer corpus (``tests/fixtures/fuzz/``) read back as cases.
"""

from __future__ import annotations

import collections
import json
import os
import pathlib
import random
import re

from .common import KINDS, OK_OUTCOMES, base_args


def signature(res: dict) -> str:
    """A failure's cause: outcome, exception type, loader and stage, and the message's head
    with paths, numbers and quoted values blurred."""
    msg = str(res.get("message") or "")
    msg = re.sub(r"/[^\s:,'\"]+", "<path>", msg)
    msg = re.sub(r"'[^']{0,200}'|\"[^\"]{0,200}\"", "<v>", msg)
    msg = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", msg)
    msg = re.sub(r"\s+", " ", msg)[:70]
    return f"{res['outcome']} | {res.get('loader')} | {res.get('stage', '-')} | {msg}"


def summarize(results: list[dict], title: str) -> str:
    """A table of outcome counts by family (rows) and outcome (columns), then the distinct
    failure causes with a count and one example each."""
    outcomes = sorted({r["outcome"] for r in results},
                      key=lambda o: (o not in OK_OUTCOMES, o != "accepted", o))
    fams = sorted({r["family"] for r in results})
    count = collections.Counter((r["family"], r["outcome"]) for r in results)
    w = max([len(f) for f in fams] + [6])
    cols = [max(len(o), 5) for o in outcomes]
    lines = [title, f"{'family':<{w}} " + " ".join(f"{o:>{c}}" for o, c in zip(outcomes, cols))
             + "  total"]
    for f in fams:
        row = [count[(f, o)] for o in outcomes]
        lines.append(f"{f:<{w}} " + " ".join(f"{n or '.':>{c}}" for n, c in zip(row, cols))
                     + f"  {sum(row):>5}")
    tot = [sum(count[(f, o)] for f in fams) for o in outcomes]
    lines.append(f"{'total':<{w}} " + " ".join(f"{n:>{c}}" for n, c in zip(tot, cols))
                 + f"  {sum(tot):>5}")
    causes = failure_causes(results)
    lines.append(f"\n{len(causes)} distinct failure causes "
                 f"({sum(c['count'] for c in causes)} failing cases):")
    for c in causes:
        ex = c["example"]
        lines.append(f"  [{c['count']:>4}] {c['signature']}")
        lines.append(f"         e.g. {ex['id']} {ex['kind']}/{ex['family']}: "
                     f"{ex.get('detail', '')[:60]} -> {ex.get('exc_type') or ''} "
                     f"{str(ex.get('message'))[:110]!r}")
    return "\n".join(lines)


def failure_causes(results: list[dict]) -> list[dict]:
    groups: dict[str, list[dict]] = collections.defaultdict(list)
    for r in results:
        if r["outcome"] not in OK_OUTCOMES:
            groups[signature(r)].append(r)
    return sorted(({"signature": s, "count": len(rs), "example": rs[0]}
                   for s, rs in groups.items()), key=lambda c: -c["count"])


def write_reproducer(case: dict, result: dict, out_dir: pathlib.Path) -> pathlib.Path:
    """``out_dir/<id>.json`` (the case's kind, loader, family, arguments, expectation and
    outcome) and, for a file case, ``out_dir/<id><suffix>`` (the input itself; a generated
    multi-MB input keeps only its recipe, ``generate``)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    meta = {k: case[k] for k in ("id", "kind", "family", "loader", "detail", "expect",
                                 "seed", "index", "seed_input") if k in case}
    for k in ("args", "generate", "overrides"):
        if k in case:
            meta[k] = case[k]
    if "suffix" in case and "generate" not in case:
        name = f"{case['id']}{case['suffix']}"
        data = case["data"]
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogatepass")
        (out_dir / name).write_bytes(data)
        meta["file"] = name
        meta["suffix"] = case["suffix"]
    elif "suffix" in case:
        meta["suffix"] = case["suffix"]
    for name, data in case.get("files", {}).items():
        fname = f"{case['id']}-{name}"
        (out_dir / fname).write_bytes(data if isinstance(data, bytes)
                                      else data.encode("utf-8", "surrogatepass"))
        meta.setdefault("cli_files", {})[name] = fname
    meta["outcome"] = {k: result.get(k) for k in ("outcome", "stage", "exc_type", "message",
                                                  "seconds", "peak_mb", "exit_code",
                                                  "error_line")}
    path = out_dir / f"{case['id']}.json"
    path.write_text(json.dumps(meta, indent=1, default=repr) + "\n")
    return path


def load_reproducer(path: str | os.PathLike) -> dict:
    """The case of a reproducer JSON (its input file read from next to it)."""
    path = pathlib.Path(path)
    meta = json.loads(path.read_text())
    case = {k: v for k, v in meta.items() if k not in ("outcome", "file", "cli_files")}
    case.setdefault("loader", KINDS[case["kind"]][0] if case["kind"] in KINDS else "")
    case.setdefault("expect", None)
    case.setdefault("detail", "")
    if "file" in meta:
        case["data"] = (path.parent / meta["file"]).read_bytes()
        case["suffix"] = meta.get("suffix") or pathlib.Path(meta["file"]).suffix
    if "cli_files" in meta:
        case["files"] = {n: (path.parent / f).read_bytes()
                         for n, f in meta["cli_files"].items()}
    return case


def load_corpus(directory: str | os.PathLike) -> list[dict]:
    """The cases of a reproducer corpus: the entries of ``corpus.json`` (each ``name``,
    ``kind``, ``family``, ``cause``, optional ``expect``, and ``file`` (an input next to
    it), ``args`` (tagged JSON) or ``generate`` (a :func:`big_input` recipe)), then every
    other ``*.json`` there (a reproducer written by :func:`write_reproducer`)."""
    directory = pathlib.Path(directory)
    cases = []
    manifest = directory / "corpus.json"
    if manifest.exists():
        for e in json.loads(manifest.read_text())["reproducers"]:
            case = {"id": e["name"], "kind": e["kind"], "family": e.get("family", "corpus"),
                    "loader": KINDS[e["kind"]][0], "detail": e.get("cause", ""),
                    "expect": e.get("expect")}
            if "file" in e:
                case["data"] = (directory / e["file"]).read_bytes()
                case["suffix"] = pathlib.Path(e["file"]).suffix
            if "args" in e:
                case["args"] = e["args"]
            if "generate" in e:
                case["generate"] = e["generate"]
                if KINDS[e["kind"]][1] is not None:
                    case["suffix"] = KINDS[e["kind"]][1]
                else:
                    case.setdefault("args", base_args(e["kind"], random.Random(0)))
            cases.append(case)
    for path in sorted(directory.glob("*.json")):
        if path.name != "corpus.json":
            cases.append(load_reproducer(path))
    return cases
