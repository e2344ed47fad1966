"""The facts about MPS support that native_functions.yaml does not show, kept in `mps_facts.json`.

Three kinds, each entry valid for a range of torch releases:
- ops registered to the CPU fallback in aten/src/ATen/mps/MPSFallback.mm, which fall back even where a
  kernel exists and even without PYTORCH_ENABLE_MPS_FALLBACK;
- ops given an MPS kernel from Python in torch/backends/mps/__init__.py;
- composite kernels that pick a different op per device inside C++ (convolution), with what they run on MPS.
Plus reviewed suggestions for known fallback ops. `load_mps_facts` reads and checks the file;
`facts_for_torch` keeps the entries that hold for one torch version.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from perfsuite.errors import BadFileError
from perfsuite.store.jsonfile import read_json_file

FACTS_PATH = Path(__file__).with_name("mps_facts.json")
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class AlwaysFallback:
    """An op whose MPS registration is the CPU fallback itself (MPSFallback.mm).

    `traced_as` names the ops a CPU trace shows instead, for a CompositeImplicitAutograd op that MPS
    intercepts before it decomposes (linalg_svd is seen as _linalg_svd on the CPU).
    """

    op: str
    torch_versions: str
    source: str
    traced_as: tuple[str, ...] = ()


@dataclass(frozen=True)
class PythonMpsKernel:
    """An op given an MPS kernel from Python: it runs on MPS as a decomposition into other ops."""

    op: str
    torch_versions: str
    implementation: str
    source: str


@dataclass(frozen=True)
class MpsChoiceInsideComposite:
    """A composite kernel that calls a device-specific op: `runs_on_mps` are the ops it calls on MPS."""

    op: str
    torch_versions: str
    runs_on_mps: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class MpsFacts:
    """Every fact of the file, or those for one torch version after `facts_for_torch`."""

    checked_torch_versions: tuple[str, ...]
    always_cpu_fallback: tuple[AlwaysFallback, ...] = ()
    python_mps_kernels: tuple[PythonMpsKernel, ...] = ()
    mps_choice_inside_composite: tuple[MpsChoiceInsideComposite, ...] = ()
    suggestions: dict[str, str] = field(default_factory=dict)


class FactsError(ValueError):
    """The facts file is malformed: the message names the file, the entry and what to fix."""


def load_mps_facts(path: Path = FACTS_PATH) -> MpsFacts:
    """Read and check the facts file; a FactsError names the bad entry."""
    try:
        data = read_json_file(path, "Restore the MPS facts file from version control.")
    except BadFileError as error:
        raise FactsError(str(error)) from None
    return parse_mps_facts(data, where=str(path))


def parse_mps_facts(data: dict, where: str = "MPS facts") -> MpsFacts:
    """Build MpsFacts from the file's JSON object, checking every entry's fields and version range."""
    if data.get("schema_version") != SCHEMA_VERSION:
        raise FactsError(f"{where}: schema_version must be {SCHEMA_VERSION}, found {data.get('schema_version')!r}")

    def entries(key: str, required: tuple[str, ...]) -> list[dict]:
        found = data.get(key, [])
        for index, entry in enumerate(found):
            missing = [name for name in required if not entry.get(name)]
            if missing:
                raise FactsError(f"{where}: {key}[{index}] ({entry.get('op', '?')}) lacks {', '.join(missing)}")
            try:
                SpecifierSet(entry["torch_versions"])
            except InvalidSpecifier as error:
                raise FactsError(
                    f"{where}: {key}[{index}] ({entry['op']}) has a bad torch_versions "
                    f"{entry['torch_versions']!r}; write a PEP 440 specifier such as '>=2.4,<2.8'"
                ) from error
        return found

    common = ("op", "torch_versions", "source")
    return MpsFacts(
        checked_torch_versions=tuple(data.get("checked_torch_versions", ())),
        always_cpu_fallback=tuple(
            AlwaysFallback(e["op"], e["torch_versions"], e["source"], tuple(e.get("traced_as", ())))
            for e in entries("always_cpu_fallback", common)
        ),
        python_mps_kernels=tuple(
            PythonMpsKernel(e["op"], e["torch_versions"], e["implementation"], e["source"])
            for e in entries("python_mps_kernels", (*common, "implementation"))
        ),
        mps_choice_inside_composite=tuple(
            MpsChoiceInsideComposite(e["op"], e["torch_versions"], tuple(e["runs_on_mps"]), e["source"])
            for e in entries("mps_choice_inside_composite", (*common, "runs_on_mps"))
        ),
        suggestions=dict(data.get("suggestions", {})),
    )


def release_of(torch_version: str) -> Version:
    """The release a torch version string belongs to: '2.13.0+cpu' and '2.14.0.dev20260101' count as
    2.13.0 and 2.14.0, since the facts are per release."""
    try:
        return Version(Version(torch_version).base_version)
    except InvalidVersion as error:
        raise FactsError(f"cannot read torch version {torch_version!r}") from error


def holds_for(torch_versions: str, torch_version: str) -> bool:
    """Whether a fact valid for the specifier `torch_versions` holds for `torch_version`."""
    return SpecifierSet(torch_versions).contains(release_of(torch_version), prereleases=True)


def facts_for_torch(facts: MpsFacts, torch_version: str) -> MpsFacts:
    """The entries of `facts` that hold for `torch_version`."""
    return replace(
        facts,
        always_cpu_fallback=tuple(f for f in facts.always_cpu_fallback if holds_for(f.torch_versions, torch_version)),
        python_mps_kernels=tuple(f for f in facts.python_mps_kernels if holds_for(f.torch_versions, torch_version)),
        mps_choice_inside_composite=tuple(
            f for f in facts.mps_choice_inside_composite if holds_for(f.torch_versions, torch_version)
        ),
    )


def coverage_note(facts: MpsFacts, torch_version: str) -> str | None:
    """None for a torch version within the checked releases; for a newer one, 'unchecked for torch X' naming the
    release whose facts are assumed and how to check; for an older one, a warning that facts may be missing."""
    checked = sorted(release_of(v) for v in facts.checked_torch_versions)
    release = release_of(torch_version)
    if not checked or checked[0] <= release <= checked[-1]:
        return None
    if release > checked[-1]:
        return (
            f"MPS fallback facts unchecked for torch {release}: the ops that always fall back to the CPU and the "
            f"kernels registered from Python are assumed as in torch {checked[-1]}, the newest release read; check "
            f"this release with `python -m perfsuite.coverage.wheelcheck --torch {release}` and update "
            "perfsuite/coverage/mps_facts.json"
        )
    return (
        f"torch {torch_version} is older than the oldest release whose MPS facts were read ({checked[0]}): facts "
        "without a lower bound are applied, others may be missing: check aten/src/ATen/mps/MPSFallback.mm and "
        "torch/backends/mps/__init__.py of this release and update perfsuite/coverage/mps_facts.json"
    )
