"""`perfsuite compare [A] [B]`: how far result set A is from result set B, case by case.

A and B are each a baseline file or folder, a file of published figures (baselines/reference/), or the
JSON of a perfsuite run. With no B, B is the committed CUDA baselines (baselines/cuda/): where that folder holds
the files of several machines (one a card), the one recorded last, and the header names the others. With no A, A is
the newest run pytest-benchmark saved under .benchmarks/ (--benchmark-save / --benchmark-autosave), or
failing that this machine's baselines; when that set holds CPU cases and one accelerator, the accelerator
is kept. Only the profiles both sides hold are compared: a smoke run meets the smoke cases of the baselines.
A case meets only the same compile mode on the other side (eager, inductor, reduce-overhead, cuda-graph;
results and baselines recorded without one are eager).
The table goes to the terminal; markdown, CSV and a PNG chart go to the output folder.
Exit status: 0 when compared, 2 when the input cannot be compared (the message says why).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from perfsuite.analyse.compare import (
    CompareError,
    Comparison,
    ResultSet,
    compare_result_sets,
    find_newest_run,
    merge_result_sets,
    preferred_device,
    read_result_set,
    select_device,
)
from perfsuite.errors import BadFileError
from perfsuite.render.comparison import (
    PlottingUnavailable,
    plot_ratio_chart,
    render_csv,
    render_markdown,
    render_terminal,
)
from perfsuite.render.escape import terminal_text
from perfsuite.store.baselines import baseline_path, load_baseline, machine_slug

DEFAULT_RUNS_DIR = ".benchmarks"
DEFAULT_BASELINES_DIR = "baselines"
DEFAULT_OUTPUT_DIR = "out/compare"
REFERENCE_FOLDER = "reference"
OUTPUT_STEM = "comparison"
EXIT_CANNOT_COMPARE = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add `perfsuite compare`'s arguments to `parser`."""
    parser.add_argument(
        "a", nargs="?", metavar="A",
        help="the result set to judge: a baseline file or folder, a published reference file, or a run's "
        "--benchmark-json file (default: the newest run under --runs-dir, else this machine's baselines)",
    )
    parser.add_argument(
        "b", nargs="?", metavar="B",
        help="the result set to judge A against (default: the CUDA baselines, <baselines-dir>/cuda/)",
    )
    parser.add_argument(
        "--runs-dir", default=DEFAULT_RUNS_DIR,
        help="where pytest-benchmark saves runs, as for --benchmark-storage (default: %(default)s)",
    )
    parser.add_argument(
        "--baselines-dir", default=DEFAULT_BASELINES_DIR,
        help="the committed baselines, <device>/<machine>.json (default: %(default)s)",
    )
    parser.add_argument("--device-a", help="keep only A's cases of this device (e.g. mps) when A holds several")
    parser.add_argument("--device-b", help="keep only B's cases of this device when B holds several")
    parser.add_argument(
        "--output-dir", default=DEFAULT_OUTPUT_DIR,
        help=f"where {OUTPUT_STEM}.md, .csv and .png are written (default: %(default)s)",
    )
    parser.add_argument("--no-chart", action="store_true", help="skip the PNG chart")
    parser.add_argument(
        "--allow-same-machine", action="store_true",
        help="compare two result sets of one machine and device (e.g. two torch versions)",
    )


def run(args: argparse.Namespace) -> int:
    """Compare the result sets `args` name; print the table, write the files; return the exit status."""
    try:
        comparison = _compare(args)
    except CompareError as error:
        print(f"perfsuite compare: error: {terminal_text(error)}", file=sys.stderr)
        return EXIT_CANNOT_COMPARE
    print(render_terminal(comparison), end="")
    try:
        written = _write_outputs(comparison, Path(args.output_dir), chart=not args.no_chart)
    except OSError as error:
        print(
            f"perfsuite compare: error: cannot write to {args.output_dir} ({error.strerror}); "
            "pick another folder with --output-dir",
            file=sys.stderr,
        )
        return EXIT_CANNOT_COMPARE
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


def _compare(args: argparse.Namespace) -> Comparison:
    baselines_dir = Path(args.baselines_dir)
    device_a = args.device_a
    if args.a is not None:
        a = read_result_set(Path(args.a))
    else:
        a = _default_a(Path(_storage_path(args.runs_dir)), baselines_dir)
        device_a = device_a or preferred_device(a)
    b = read_result_set(Path(args.b)) if args.b is not None else _default_b(baselines_dir)
    if device_a:
        a = select_device(a, device_a, "A")
    if args.device_b:
        b = select_device(b, args.device_b, "B")
    return compare_result_sets(a, b, allow_same_machine=args.allow_same_machine)


def _storage_path(runs_dir: str) -> str:
    # Accept pytest-benchmark's own --benchmark-storage spelling, file://PATH.
    return runs_dir.removeprefix("file://")


def _default_a(runs_dir: Path, baselines_dir: Path) -> ResultSet:
    newest = find_newest_run(runs_dir)
    if newest is not None:
        return read_result_set(newest)
    own = _this_machines_baselines(baselines_dir)
    if own:
        return merge_result_sets([read_result_set(p) for p in own], name=f"this machine's baselines in {baselines_dir}")
    raise CompareError(
        f"nothing to compare: no saved run under {runs_dir}/ (run the benchmarks with --benchmark-autosave, or "
        f"point --runs-dir at your --benchmark-storage) and no baselines of this machine in {baselines_dir}/; "
        "or name A, e.g. a --benchmark-json file"
    )


def _default_b(baselines_dir: Path) -> ResultSet:
    cuda = baselines_dir / "cuda"
    if not cuda.is_dir() or not any(cuda.glob("*.json")):
        article = baselines_dir / REFERENCE_FOLDER / "article-rtx4060-cuda.json"
        example = (
            f"{article} for the article's published figures" if article.is_file()
            else "another machine's baseline folder or file, or a --benchmark-json file"
        )
        raise CompareError(
            f"B defaults to the committed CUDA baselines in {cuda}/, but there are none; name B, e.g. {example}"
        )
    files = sorted(p for p in cuda.glob("*.json") if not p.is_dir())
    if len(files) == 1:
        return read_result_set(cuda)
    # One file a machine: a folder of several would hold each case once per card, which one side cannot.
    newest = max(files, key=_last_recorded_at)
    others = ", ".join(p.name for p in files if p != newest)
    chosen = read_result_set(newest)
    return replace(chosen, description=(
        f"{chosen.description} [the CUDA machine file recorded last in {cuda}/; also there: {others}; "
        "name one as B to compare with it]"
    ))


def _last_recorded_at(path: Path) -> str:
    """When the baseline file at `path` last recorded a run (UTC, ISO 8601, so text order is time order)."""
    try:
        baseline = load_baseline(path)
    except BadFileError as error:
        raise CompareError(str(error)) from None
    runs = [] if baseline is None else [r.recorded_at for e in baseline.entries.values() for r in e.runs]
    return max(runs, default="")


def _this_machines_baselines(baselines_dir: Path) -> list[Path]:
    """This machine's file in each device folder of the store, `<device>/<machine-slug>.json`."""
    # Imported here: the fingerprint needs torch and is only wanted when no saved run exists.
    from perfsuite.run.devices import machine_fingerprint

    fingerprint = machine_fingerprint()
    device_dirs = sorted(d for d in baselines_dir.glob("*") if d.is_dir() and d.name != REFERENCE_FOLDER)
    paths = [baseline_path(baselines_dir, d.name, machine_slug(fingerprint, d.name)) for d in device_dirs]
    return [p for p in paths if p.is_file()]


def _write_outputs(comparison: Comparison, output_dir: Path, chart: bool) -> list[Path]:
    output_dir.mkdir(parents=True, exist_ok=True)
    markdown, csv = output_dir / f"{OUTPUT_STEM}.md", output_dir / f"{OUTPUT_STEM}.csv"
    markdown.write_text(render_markdown(comparison), encoding="utf-8")
    # A name from undecodable bytes (a lone surrogate) cannot be UTF-8: it is kept as its `\\udcXX` escape.
    csv.write_text(render_csv(comparison), encoding="utf-8", errors="backslashreplace")
    written = [markdown, csv]
    if chart:
        try:
            written.append(plot_ratio_chart(comparison, output_dir / f"{OUTPUT_STEM}.png"))
        except PlottingUnavailable as missing:
            print(f"perfsuite compare: note: no chart: {missing}", file=sys.stderr)
    return written
