"""One line per case of pytest-benchmark JSON files written with --perf-compile: median, samples/s, GPU busy
fraction, compile time, graphs, graph breaks and the check against eager.

    python3 tools/h200/compile/table.py FILE.json...
"""

import json
import sys
from pathlib import Path
from typing import Any


def case_line(benchmark: dict[str, Any]) -> str:
    """`benchmark`'s row: its case id, then its figures as perfsuite recorded them in extra_info."""
    extra = benchmark["extra_info"]
    return (f'{benchmark["name"][11:-1]:48s} med {benchmark["stats"]["median"] * 1e3:8.3f} ms '
            f'sps {extra.get("samples_per_s") or 0:9.1f} busy {extra.get("gpu_busy_fraction")} '
            f'first {extra.get("compile_first_call_s")} graphs {extra.get("compile_graphs")} '
            f'breaks {extra.get("compile_graph_breaks")} diff {extra.get("compile_check_largest_difference")}')


def main(paths: list[str]) -> None:
    for path in paths:
        try:
            document = json.loads(Path(path).read_text())
        except (OSError, ValueError) as error:
            print("no json", path, error)
            continue
        for benchmark in document["benchmarks"]:
            print(case_line(benchmark))


if __name__ == "__main__":
    main(sys.argv[1:])
