"""A CUDA GPU's conditions through NVML (nvidia-ml-py, the optional extra `perfsuite[cuda]`; torch's own
torch.cuda.clock_rate, temperature and power_draw read the same library): the SM clock against its maximum, the
temperature, the power drawn against the enforced limit, and the clocks-event (throttle) reasons set, by name.
Read-only: nothing here changes a setting of the card.

The reasons' bits are nvidia-ml-py's (pynvml.py of nvidia-ml-py 13.615.71, `nvmlClocksEventReason*`, the same
values as the deprecated `nvmlClocksThrottleReason*`, which add BoardLimit 0x200 and Reliability 0x400); their names
are those `nvidia-smi -q -d PERFORMANCE` prints. `nvmlDeviceGetCurrentClocksEventReasons` is asked first and the
deprecated `nvmlDeviceGetCurrentClocksThrottleReasons` where a driver's NVML lacks it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from perfsuite.records import GPU_SLOWDOWN_EVENTS

NOT_INSTALLED = "nvidia-ml-py not installed (pip install 'perfsuite[cuda]' reads the GPU's clocks, heat and power)"
# pynvml.py's nvmlClocksEventReason* and nvmlClocksThrottleReason* bits, lowest first.
CLOCK_EVENT_BITS: tuple[tuple[int, str], ...] = (
    (0x1, "GPU idle"),
    (0x2, "applications clocks setting"),
    (0x4, "SW power cap"),
    (0x8, GPU_SLOWDOWN_EVENTS[0]),  # HW slowdown
    (0x10, "sync boost"),
    (0x20, GPU_SLOWDOWN_EVENTS[1]),  # SW thermal slowdown
    (0x40, GPU_SLOWDOWN_EVENTS[2]),  # HW thermal slowdown
    (0x80, GPU_SLOWDOWN_EVENTS[3]),  # HW power brake slowdown
    (0x100, "display clock setting"),
    (0x200, "board limit"),
    (0x400, "reliability"),
)


def clock_event_names(mask: int) -> tuple[str, ...]:
    """The names of the clocks-event reasons set in `mask`, lowest bit first; a bit nvidia-ml-py does not name reads
    `reason bit 0x...`."""
    known = dict(CLOCK_EVENT_BITS)
    return tuple(known.get(1 << bit, f"reason bit {1 << bit:#x}") for bit in range(mask.bit_length())
                 if mask >> bit & 1)


@dataclass(frozen=True)
class GpuReading:
    """What NVML said of one GPU: each figure, None where NVML does not support it on this GPU; `unsupported`
    names those figures, and `error` says why nothing could be read (nvidia-ml-py missing, no driver, no such GPU)."""

    sm_clock_mhz: int | None = None
    max_sm_clock_mhz: int | None = None
    temperature_c: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    clock_events: tuple[str, ...] | None = None
    unsupported: tuple[str, ...] = ()
    error: str | None = None


@cache
def _nvml() -> Any:
    """nvidia-ml-py, initialised once per process; raises ImportError where it is not installed."""
    import pynvml

    pynvml.nvmlInit()
    return pynvml


def read_gpu(uuid: str) -> GpuReading:
    """The conditions of the GPU whose UUID torch gives (`torch.cuda.get_device_properties(i).uuid`, which NVML
    spells with a `GPU-` prefix), as NVML reports them now."""
    try:
        pynvml = _nvml()
    except ImportError:
        return GpuReading(error=NOT_INSTALLED)
    except Exception as error:  # pynvml.NVMLError: no driver, or a driver NVML cannot talk to
        return GpuReading(error=f"NVML could not start: {error}")
    try:
        handle = pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
    except pynvml.NVMLError as error:
        return GpuReading(error=f"NVML has no GPU of torch's UUID {uuid}: {error}")
    unsupported: list[str] = []

    def ask(what: str, *calls: Any) -> Any:
        for call in calls:
            try:
                return call()
            except pynvml.NVMLError_FunctionNotFound:
                continue
            except pynvml.NVMLError as error:
                unsupported.append(f"{what} ({error})")
                return None
        unsupported.append(f"{what} (not in this driver's NVML)")
        return None

    power_mw = ask("power", lambda: pynvml.nvmlDeviceGetPowerUsage(handle))
    limit_mw = ask("power limit", lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(handle))
    events = ask("clocks-event reasons", lambda: pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle),
                 lambda: pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle))
    return GpuReading(
        sm_clock_mhz=ask("SM clock", lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)),
        max_sm_clock_mhz=ask("max SM clock", lambda: pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)),
        temperature_c=ask("temperature",
                          lambda: pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)),
        power_w=None if power_mw is None else power_mw / 1000,
        power_limit_w=None if limit_mw is None else limit_mw / 1000,
        clock_events=None if events is None else clock_event_names(int(events)),
        unsupported=tuple(unsupported),
    )
