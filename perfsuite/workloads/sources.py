"""Where another process finds a workload: the modules that define its functions (a user's conftest.py, say)."""

from __future__ import annotations

import contextlib
import os
import sys
from types import ModuleType

from perfsuite.records import WorkloadSource
from perfsuite.workloads import Workload, registered_workloads, registering_module


def workload_sources(workload: Workload) -> list[WorkloadSource]:
    """The modules defining the workload's functions, then the module that registered it (a conftest.py registering
    a model defined in another module), by name and file: a worker imports them until the workload is registered or
    found among a module's globals."""
    names: list[object] = []
    for function in (workload.build_module, workload.make_inputs, workload.make_target, workload.loss):
        target: object = function
        while hasattr(target, "func"):  # functools.partial
            target = target.func
        names.append(getattr(target, "__module__", None))
    if registered_workloads().get(workload.name) is workload:
        names.append(registering_module(workload.name))
    sources: list[WorkloadSource] = []
    for name in names:
        module = sys.modules.get(name) if isinstance(name, str) and name else None
        if not isinstance(name, str) or module is None:
            continue
        source = WorkloadSource(module=name, file=getattr(module, "__file__", None))
        if source not in sources:
            sources.append(source)
    return sources


def find_workload(name: str, sources: list[WorkloadSource]) -> Workload:
    """The workload called `name` in a worker process: registered already, or after importing `sources` in
    order (registered on import, or a `Workload` among a module's globals). Raises LookupError if none is."""
    registered = registered_workloads()
    if name in registered:
        return registered[name]
    for index, source in enumerate(sources):
        module = _import_source(source, index)
        registered = registered_workloads()
        if name in registered:
            return registered[name]
        for value in vars(module).values():
            if isinstance(value, Workload) and value.name == name:
                return value
    shown = ", ".join(str(s["file"] or s["module"]) for s in sources) or "(none found)"
    raise LookupError(
        f"workload {name!r} was not found in a worker process after importing the modules that define its "
        f"functions ({shown}); register it or assign it at the top level of one of them"
    )


def _import_source(source: WorkloadSource, index: int) -> ModuleType:
    import importlib
    import importlib.util

    name, file = source["module"], source["file"]
    # By name when that name finds the same file (keeps package-relative imports working), else by path
    # under a private name, so that a script's `if __name__ == "__main__":` block does not run again.
    if name and name != "__main__":
        with contextlib.suppress(ImportError, ValueError):
            spec = importlib.util.find_spec(name)
            if spec is not None and (file is None or _same_file(spec.origin, file)):
                return importlib.import_module(name)
    if file is None:
        raise LookupError(f"module {name!r} cannot be imported in a worker process and has no file")
    spec = importlib.util.spec_from_file_location(f"_perfsuite_workload_source_{index}", file)
    if spec is None or spec.loader is None:
        raise LookupError(f"{file} (module {name!r}) cannot be loaded as a module; define the workload in a .py file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _same_file(a: str | None, b: str) -> bool:
    try:
        return a is not None and os.path.samefile(a, b)
    except OSError:
        return False


