"""A planted slowdown for end-to-end checks of the gate: not part of perfsuite.

With this folder on PYTHONPATH and PLANTED_DOUBLE set to torch.nn module class names (comma-separated, e.g.
`Conv2d` or `Conv2d,Linear`), every forward of those modules runs twice, in every Python process that starts,
worker processes included: Python imports `sitecustomize` at each interpreter start. The first result is
thrown away, so the outputs and the losses are unchanged; only the time grows.

    PYTHONPATH=tests/planted_slowdown PLANTED_DOUBLE=Conv2d pytest --benchmark-only --perf-processes 3 ...
"""

import os

_NAMES = [name.strip() for name in os.environ.get("PLANTED_DOUBLE", "").split(",") if name.strip()]

if _NAMES:
    import torch

    def _doubled(original):
        def forward(self, *args, **kwargs):
            original(self, *args, **kwargs)
            return original(self, *args, **kwargs)

        return forward

    for _name in _NAMES:
        _module_class = getattr(torch.nn, _name)
        _module_class.forward = _doubled(_module_class.forward)
