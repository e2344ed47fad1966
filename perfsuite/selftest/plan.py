"""What the selftest measures: its plan, a matmul chain with a known amount of extra work, and its cases."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from perfsuite.records import Case
from perfsuite.run.devices import backend
from perfsuite.workloads import Workload, register_workload

CHAIN_BASE_BLOCKS = 20
SLOWDOWN_EXTRA_BLOCKS = (1, 2, 3, 5, 10)
CHAIN_NAME = "matmul-chain"


@dataclass(frozen=True)
class SelftestPlan:
    """What one selftest run measures and within which limits.

    `processes` is K, the separate processes that each time every case; `max_time_s` is
    pytest-benchmark's --benchmark-max-time for every case (its default is 1.0); `budget_s` bounds the
    whole run: no further process is started when it would not finish in time. `threads` sets
    torch.set_num_threads in every process (None: torch's default, as the suite runs); `cases` keeps
    only the named cases (None: all of them). `contention` starts
    that many bursty busy processes beside the measurement, a busy machine made on purpose.
    """

    device: str
    processes: int
    max_time_s: float
    budget_s: float
    chain_side: int
    warmup_steps: int = 3
    splits: int = 300
    seed: int = 0
    threads: int | None = None
    cases: tuple[str, ...] | None = None
    contention: int = 0

    @property
    def file_name(self) -> str:
        """`selftest-<device>.json`, with `-threads<N>` when the thread count was set and `-contended<N>`
        with busy processes added."""
        suffix = "" if self.threads is None else f"-threads{self.threads}"
        suffix += f"-contended{self.contention}" if self.contention else ""
        return f"selftest-{self.device}{suffix}.json"

    def keeps(self, name: str) -> bool:
        """Whether the plan measures the case called `name`."""
        return self.cases is None or name in self.cases


def plan_from_dict(values: Mapping[str, Any]) -> SelftestPlan:
    """The plan stored in a selftest document (JSON lists back to tuples)."""
    cases = values.get("cases")
    return SelftestPlan(**{
        **values, "cases": None if cases is None else tuple(cases),
    })


# The plan `perfsuite selftest --device DEVICE` runs on each device it measures: up to 16 processes within 11 minutes
# on the CPU; 12 processes and 0.25 s of rounds per case on CUDA, to finish within 9 minutes on one GPU. The chain's
# side makes its 20 blocks about 1 ms (50 µs a block) on each device (CPU: one thread).
DEFAULT_PLANS = {
    "cpu": SelftestPlan("cpu", processes=16, max_time_s=0.5, budget_s=660.0, chain_side=128),
    "cuda": SelftestPlan("cuda", processes=12, max_time_s=0.25, budget_s=520.0, chain_side=1024),
}


def default_plan(device: str) -> SelftestPlan:
    """The plan `perfsuite selftest --device DEVICE` runs (`DEFAULT_PLANS`); ValueError for a device it does not
    measure."""
    if device not in DEFAULT_PLANS:
        raise ValueError(f"perfsuite selftest measures {' or '.join(DEFAULT_PLANS)}, not {device!r}")
    return DEFAULT_PLANS[device]


# --- the workloads: a matmul chain with a known amount of extra work ---------------------------------


class MatmulChain(torch.nn.Module):
    """`blocks` identical blocks `x = x @ weight`, `weight` a fixed orthogonal side x side matrix.

    Each block is the same work (2 * rows * side**2 FLOPs), so 20 + k blocks take (20 + k) / 20 as long as
    20 blocks: a slowdown of known size. The orthogonal weight keeps the values' norm constant, so no
    block slows down on overflow or denormals.
    """

    def __init__(self, side: int, blocks: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(_orthogonal(side).clone(), requires_grad=False)
        self.blocks = blocks

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.blocks):
            x = x @ self.weight
        return x


@functools.cache
def _orthogonal(side: int) -> torch.Tensor:
    # One QR per process and side: a 1024x1024 QR costs a noticeable part of a second on the host.
    orthogonal, _ = torch.linalg.qr(torch.randn(side, side, generator=torch.Generator().manual_seed(0)))
    return orthogonal


_CHAIN_WORKLOADS: dict[tuple[int, int], Workload] = {}


def chain_workload(blocks: int, side: int) -> Workload:
    """The registered workload `selftest-chain<blocks>x<side>`: one infer step is `blocks` matmul blocks on
    inputs of `side` rows (its batch size)."""
    key = (blocks, side)
    if key not in _CHAIN_WORKLOADS:
        _CHAIN_WORKLOADS[key] = register_workload(Workload(
            name=f"selftest-chain{blocks}x{side}",
            build_module=lambda profile: MatmulChain(side, blocks),
            make_inputs=lambda profile, batch_size: torch.randn(
                batch_size, side, generator=torch.Generator().manual_seed(1)
            ),
            batch_sizes={"smoke": (side,), "standard": (side,)},
            description=f"{blocks} blocks of a {side}x{side} matmul (perfsuite selftest)",
        ))
    return _CHAIN_WORKLOADS[key]


@dataclass(frozen=True)
class SelftestCase:
    """One case the selftest times: `name` is how the report calls it; `extra_blocks` > 0 marks the chain
    slowed by that many blocks, judged against the plain chain as if a change had made it slower."""

    name: str
    case: Case
    extra_blocks: int = 0

    @property
    def nominal_slowdown(self) -> float:
        """The extra work as a fraction of the plain chain's: 3 extra blocks on 20 are 0.15."""
        return self.extra_blocks / CHAIN_BASE_BLOCKS


def chain_case(device: str, side: int, extra_blocks: int = 0) -> SelftestCase:
    """The plain matmul chain (`extra_blocks` = 0) or the chain slowed by `extra_blocks` blocks."""
    blocks = CHAIN_BASE_BLOCKS + extra_blocks
    name = CHAIN_NAME if extra_blocks == 0 else f"{CHAIN_NAME}+{extra_blocks}"
    workload = chain_workload(blocks, side)
    return SelftestCase(name, Case(device, "fp32", workload.name, side, "infer", "smoke"), extra_blocks)


def model_case(device: str, mode: str, batch_size: int = 4, profile: str = "smoke") -> SelftestCase:
    """ResNet18 from perfsuite.workloads in `mode`, e.g. `resnet18-infer-smoke`."""
    suffix = "" if profile == "standard" else f"-{profile}"
    return SelftestCase(f"resnet18-{mode}-bs{batch_size}{suffix}", Case(device, "fp32", "resnet18", batch_size, mode,
                                                                         profile))


def worker_cases(plan: SelftestPlan) -> tuple[SelftestCase, ...]:
    """What every process times: the unchanged cheap cases, then the slowed chains (those the plan keeps)."""
    device, side = plan.device, plan.chain_side
    cases: tuple[SelftestCase, ...]
    cases = (chain_case(device, side), model_case(device, "infer"), model_case(device, "train"))
    cases += tuple(chain_case(device, side, k) for k in SLOWDOWN_EXTRA_BLOCKS)
    return tuple(c for c in cases if plan.keeps(c.name))


def accuracy_cases(plan: SelftestPlan) -> tuple[SelftestCase, ...]:
    """The cases whose timing is checked against a reference (those the plan keeps); on an accelerator also a
    standard-size ResNet18, which keeps it busy where the smoke sizes wait on kernel launches."""
    device, side = plan.device, plan.chain_side
    cases: tuple[SelftestCase, ...]
    cases = (chain_case(device, side), model_case(device, "infer"), model_case(device, "train"))
    if backend(device).is_accelerator:
        cases += (model_case(device, "infer", 32, "standard"),)
    return tuple(c for c in cases if plan.keeps(c.name))
