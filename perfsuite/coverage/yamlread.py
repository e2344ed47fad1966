"""Read one torch release's native_functions.yaml with that release's own torchgen, in a process of its own.

A newer yaml may use what an older torchgen rejects (2.15.0's `_philox_randint_` fails 2.13.0's tag check), so
`perfsuite.coverage.wheelcheck` extracts the wheel's torchgen package and runs this module with it first on
PYTHONPATH. It prints one JSON object: every op of the yaml with its kernels (`support.OpKernels`'s fields) and the
name torchgen gives its MPS kernel (`wrapper`). Nothing here imports torch.

`python -m perfsuite.coverage.yamlread NATIVE_FUNCTIONS_YAML TAGS_YAML`
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict


def read_yaml(yaml_path: str, tags_path: str) -> dict[str, dict[str, object]]:
    """Every op of the yaml at `yaml_path`: its kernels and its MPS kernel's name, by yaml name."""
    from torchgen.gen import parse_native_yaml

    from perfsuite.coverage.support import read_native_functions
    from perfsuite.coverage.wheelcheck import wrapper_name

    kernels = read_native_functions(yaml_path, tags_path)
    parsed = parse_native_yaml(yaml_path, tags_path)
    wrappers = {str(function.func.name): wrapper_name(function) for function in parsed.native_functions}
    return {name: {**asdict(entry), "wrapper": wrappers[name]} for name, entry in kernels.items()}


def main(argv: list[str] | None = None) -> int:
    """Print the ops of the yaml named on the command line as JSON; 2 with a message for a bad command line."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        sys.stderr.write("usage: python -m perfsuite.coverage.yamlread NATIVE_FUNCTIONS_YAML TAGS_YAML\n")
        return 2
    json.dump(read_yaml(args[0], args[1]), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
