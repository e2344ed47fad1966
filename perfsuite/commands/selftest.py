"""`perfsuite selftest`: measure the measurer, or render its report.

`perfsuite selftest --device cpu|cuda --out DIR` measures timing accuracy, harness overhead, and the
gate's false-alarm and detection rates on this machine (see perfsuite/selftest/measure.py) and writes
DIR/selftest-<device>.json. `perfsuite selftest --report FILE...` renders docs/measurement-quality.md
from such files, so CPU and GPU figures land in one report. `perfsuite selftest --analyse FILE...`
recomputes a file's analysis from its raw records (e.g. the part a time budget cut short).
Exit status: 0 when done, 2 on bad input (the message says why).
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from pathlib import Path
from typing import Any

from perfsuite.errors import BadFileError
from perfsuite.store.jsonfile import read_json_file

DEFAULT_OUT_DIR = "docs/records/selftest"
DEFAULT_REPORT = "docs/measurement-quality.md"
EXIT_BAD_INPUT = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add `perfsuite selftest`'s arguments to `parser`."""
    parser.add_argument("--device", choices=("cpu", "cuda"),
                        help="the device to measure (default: cuda when available, else cpu)")
    parser.add_argument("--out", default=DEFAULT_OUT_DIR,
                        help="folder for selftest-<device>.json (default: %(default)s)")
    parser.add_argument("--processes", type=int,
                        help="K, the separate processes that each time every case (default: 16 on cpu, 12 on cuda)")
    parser.add_argument("--max-time-s", type=float,
                        help="pytest-benchmark's --benchmark-max-time per case (default: 0.5 on cpu, 0.25 on cuda)")
    parser.add_argument("--budget-s", type=float,
                        help="start no process that would end the run later (default: 660 on cpu, 520 on cuda)")
    parser.add_argument("--threads", type=int,
                        help="torch.set_num_threads in every process (default: torch's, as the suite runs); "
                        "adds -threads<N> to the file name")
    parser.add_argument("--contention", type=int,
                        help="start N bursty busy processes beside the measurement, a busy machine made on purpose "
                        "(CPU; adds -contended<N> to the file name)")
    parser.add_argument("--cases", help="comma-separated case names to keep, e.g. matmul-chain,matmul-chain+3 "
                        "(default: all)")
    parser.add_argument("--ab", action="store_true",
                        help="measure the A/B decision instead: whole A/B jobs on --model in --modes, A/A and with "
                        "planted slowdowns (--factors), --repeats times each; writes selftest-ab-<device>.json")
    parser.add_argument("--model", default="resnet18", help="with --ab: the built-in model (default: %(default)s)")
    parser.add_argument("--modes", default="infer,train", help="with --ab: modes (default: %(default)s)")
    parser.add_argument("--batch-size", type=int, default=4, help="with --ab: batch size (default: %(default)s)")
    parser.add_argument("--profile", default="smoke", help="with --ab: profile (default: %(default)s)")
    parser.add_argument("--dtype", default="fp32", help="with --ab: dtype (default: %(default)s)")
    parser.add_argument("--factors", default="1.0,1.05,1.1",
                        help="with --ab: planted slowdowns, 1.0 for A/A (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=10, help="with --ab: jobs per factor (default: %(default)s)")
    parser.add_argument("--pairs", type=int, default=2,
                        help="with --ab: warm processes per job, each case's least blocks (default: %(default)s)")
    parser.add_argument("--report", nargs="+", metavar="FILE",
                        help="render the report from these selftest files instead of measuring")
    parser.add_argument("--output", default=DEFAULT_REPORT, help="where --report writes (default: %(default)s)")
    parser.add_argument("--analyse", nargs="+", metavar="FILE",
                        help="recompute these files' analysis from their raw records, in place")


def run(args: argparse.Namespace) -> int:
    """Measure, render or re-analyse, as `args` ask; return the exit status."""
    try:
        if args.report:
            return _render(args.report, Path(args.output))
        if args.analyse:
            return _reanalyse(args.analyse)
        if args.ab:
            return _measure_ab(args)
        return _measure(args)
    except _BadInput as error:
        print(f"perfsuite selftest: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT


class _BadInput(Exception):
    """Input the command cannot use; the message says what and how to fix it."""


def _measure_ab(args: argparse.Namespace) -> int:
    from perfsuite.selftest.ab import AbSelftestPlan, run_ab_selftest, write_record

    try:
        factors = tuple(float(text) for text in args.factors.split(","))
    except ValueError:
        raise _BadInput(f"--factors {args.factors!r}: give numbers >= 1.0 separated by commas, e.g. 1.0,1.3") from None
    if any(not math.isfinite(f) or f < 1.0 for f in factors) or args.repeats < 1 or args.pairs < 2:
        raise _BadInput("--factors must be >= 1.0, --repeats >= 1 and --pairs >= 2")
    device = args.device or "cpu"
    plan = AbSelftestPlan(
        device, args.model, tuple(m.strip() for m in args.modes.split(",") if m.strip()), args.batch_size,
        args.profile, args.dtype, factors, args.repeats, args.pairs, args.max_time_s or 1.0,
        threads=args.threads or 1, budget_s=args.budget_s or 300.0,
    )
    record = run_ab_selftest(plan)
    path = Path(args.out) / f"selftest-ab-{device}.json"
    write_record(record, path)
    print(json.dumps(record["summary"], indent=1))
    print(f"perfsuite selftest: wrote {path}")
    return 0


def _measure(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from perfsuite.run.devices import backend
    from perfsuite.selftest import measure as selftest
    from perfsuite.selftest.analysis import BASELINE_RUNS
    from perfsuite.selftest.plan import default_plan, worker_cases

    device = args.device or ("cuda" if backend("cuda").availability().available else "cpu")
    usable = backend(device).availability()
    if not usable.available:
        raise _BadInput(f"--device {device}: {usable.reason}")
    plan = default_plan(device)
    overrides: dict[str, Any] = {
        "processes": args.processes, "max_time_s": args.max_time_s, "budget_s": args.budget_s,
        "threads": args.threads, "contention": args.contention,
    }
    if args.cases:
        overrides["cases"] = tuple(name.strip() for name in args.cases.split(",") if name.strip())
    plan = replace(plan, **{key: value for key, value in overrides.items() if value is not None})
    for option, value, lowest in (("--max-time-s", plan.max_time_s, 0.0), ("--budget-s", plan.budget_s, 0.0)):
        if not (math.isfinite(value) and value > lowest):
            raise _BadInput(f"{option} {value}: give a number of seconds > 0")
    if plan.threads is not None and plan.threads < 1:
        raise _BadInput(f"--threads {plan.threads}: give 1 or more (or leave it out for torch's default)")
    if plan.contention < 0:
        raise _BadInput(f"--contention {plan.contention}: give 0 or more busy processes")
    if plan.cases is not None and not plan.cases:
        raise _BadInput(f"--cases {args.cases!r}: names no case; give e.g. matmul-chain,matmul-chain+3")
    if plan.processes < BASELINE_RUNS + 1:
        raise _BadInput(
            f"--processes {plan.processes}: at least {BASELINE_RUNS + 1} are needed, {BASELINE_RUNS} for the baseline "
            "history and one to judge against it"
        )
    known = {case.name for case in worker_cases(replace(plan, cases=None))}
    unknown = sorted(set(plan.cases or ()) - known)
    if unknown:
        raise _BadInput(f"--cases: unknown {', '.join(unknown)}; valid: {', '.join(sorted(known))}")
    document = selftest.run_selftest(plan, progress=lambda line: print(line, flush=True))
    document["command"] = _command_line(args, device)
    path = Path(args.out) / plan.file_name
    try:
        selftest.write_document(document, path)
    except OSError as error:
        raise _BadInput(f"cannot write {path} ({error.strerror}); pick another folder with --out") from None
    print(f"wrote {path}")
    return 0


def _command_line(args: argparse.Namespace, device: str) -> str:
    parts = ["perfsuite", "selftest", "--device", device, "--out", args.out]
    for option in ("processes", "max_time_s", "budget_s", "threads", "contention", "cases"):
        value = getattr(args, option)
        if value is not None:
            parts += [f"--{option.replace('_', '-')}", str(value)]
    return shlex.join(parts)


def _read(path_text: str) -> dict[str, Any]:
    from perfsuite.selftest import measure as selftest

    path = Path(path_text)
    remedy = "Measure again with `perfsuite selftest --device cpu` (or cuda)."
    try:
        document = read_json_file(path, remedy)
    except BadFileError as error:
        raise _BadInput(str(error)) from None
    if not isinstance(document, dict) or document.get("schema") != selftest.SCHEMA:
        raise _BadInput(f"{path}: not a perfsuite selftest file (its \"schema\" is not {selftest.SCHEMA!r})")
    if document.get("schema_version") != selftest.SCHEMA_VERSION:
        raise _BadInput(
            f"{path}: schema_version {document.get('schema_version')!r}; this perfsuite reads "
            f"{selftest.SCHEMA_VERSION}: measure again with `perfsuite selftest`"
        )
    missing = [
        f"{key!r} ({kind.__name__})" for key, kind in (("device", str), ("plan", dict), ("workers", list))
        if not isinstance(document.get(key), kind)
    ]
    if missing:
        raise _BadInput(f"{path}: a selftest file without {', '.join(missing)}; {remedy}")
    document["source_file"] = str(path)
    return document


def _render(paths: list[str], output: Path) -> int:
    from perfsuite.selftest.report import render_report

    documents = [_read(p) for p in paths]
    for document in documents:
        if not isinstance(document.get("analysis"), dict):
            raise _BadInput(
                f"{document['source_file']}: has no analysis; compute it with `perfsuite selftest --analyse "
                f"{document['source_file']}`"
            )
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(render_report(documents), encoding="utf-8")
    print(f"wrote {output}")
    return 0


def _reanalyse(paths: list[str]) -> int:
    from perfsuite.selftest import measure as selftest
    for path_text in paths:
        document = _read(path_text)
        source = document.pop("source_file")
        try:
            analysed = selftest.reanalyse(document)
        except (KeyError, TypeError, ValueError) as error:
            raise _BadInput(
                f"{source}: its plan or runs cannot be read back ({type(error).__name__}: {error}); measure again "
                "with `perfsuite selftest`"
            ) from None
        selftest.write_document(analysed, Path(source))
        print(f"re-analysed {source}")
    return 0
