"""What `perfsuite.coverage.wheelcheck` reads from the arm64 code of a torch wheel's libtorch_cpu.dylib: the ops
MPSFallback.mm sends to the CPU, and whether MPS events are stamped by the GPU.

MPSFallback.mm registers its ops in one `TORCH_LIBRARY_IMPL(aten, MPS, m)` block: `m.impl("linalg_svd",
torch::CppFunction::makeFromBoxedFunction<&mps_fallback>())` and so on. The block compiles to a local function named
`at::TORCH_LIBRARY_IMPL_init_aten_MPS_<n>` whose code builds a CppFunction from the address of
`make_boxed_function<&mps_fallback>` and calls `torch::Library::_impl` with the op's name, a C string. So the
block is the function of that name that computes that address, and each op it registers is the string in x1 at a
call of `_impl`; the kernel is the fallback when the CppFunction built last was built from a boxed kernel.

MPS events: `MPSEvent::recordLocked` hands its command buffer a block that keeps the event's completion time. In
2.15.0 that block reads `[commandBuffer GPUEndTime]` (a call of the `_objc_msgSend$GPUEndTime` stub); in 2.13.0 to
2.14.1 it reads the host's clock (`clock_gettime_nsec_np`) instead.

Only what that needs is decoded: the Mach-O load commands (segments, the symbol table), and four arm64 instructions
(ADRP, ADD immediate, ORR as a register move, BL). Pure functions of the binary's bytes, tested on hand-made code.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

MACH_O_64_MAGIC = 0xFEEDFACF
LC_SEGMENT_64 = 0x19
LC_SYMTAB = 0x2
N_STAB = 0xE0
N_TYPE = 0x0E
N_SECT = 0x0E
# Itanium-mangled names of what the block calls and builds from (libtorch_cpu.dylib of 2.1.2 to 2.15.0).
BLOCK_PREFIX = "__ZN2atL"
BLOCK_MARK = "TORCH_LIBRARY_IMPL_init_aten_MPS_"
BOXED_FALLBACK_MARK = "make_boxed_functionIXadL_ZN2atL12mps_fallbackE"
LIBRARY_IMPL = "__ZNR5torch7Library5_implEPKcONS_11CppFunctionENS_17_RegisterOrVerifyE"
CPP_FUNCTION_CONSTRUCTOR = "__ZN5torch11CppFunctionC"
EVENT_RECORD_BLOCK = "____ZN2at3mps8MPSEvent12recordLockedEb_block_invoke"
GPU_END_TIME_STUB = "_objc_msgSend$GPUEndTime"
BOXED_CPP_FUNCTION_CONSTRUCTORS = (
    "__ZN5torch11CppFunctionC1EN3c1014KernelFunctionE", "__ZN5torch11CppFunctionC2EN3c1014KernelFunctionE",
)


class BinaryReadError(ValueError):
    """The binary is not what the reader expects (not a 64-bit Mach-O, or without the symbols it needs)."""


@dataclass(frozen=True)
class Segment:
    """A Mach-O segment: where it lies in memory and in the file."""

    address: int
    size: int
    file_offset: int
    file_size: int


@dataclass(frozen=True)
class MachO:
    """What the reader uses of a Mach-O image: its segments, and every defined symbol's address by name."""

    data: bytes
    segments: tuple[Segment, ...]
    symbols: Mapping[str, int]

    def bytes_at(self, address: int, size: int) -> bytes:
        """`size` bytes at virtual `address`; BinaryReadError outside the file's segments."""
        for segment in self.segments:
            if segment.address <= address and address + size <= segment.address + segment.file_size:
                offset = segment.file_offset + address - segment.address
                return self.data[offset:offset + size]
        raise BinaryReadError(f"address {address:#x} lies in no segment of the file")

    def c_string_at(self, address: int) -> str:
        """The NUL-terminated string at virtual `address`."""
        for segment in self.segments:
            if segment.address <= address < segment.address + segment.file_size:
                offset = segment.file_offset + address - segment.address
                end = self.data.index(b"\0", offset)
                return self.data[offset:end].decode("utf-8", errors="replace")
        raise BinaryReadError(f"address {address:#x} lies in no segment of the file")


def read_macho(data: bytes) -> MachO:
    """The segments and defined symbols of a 64-bit little-endian Mach-O image (a thin arm64 dylib)."""
    if len(data) < 32 or struct.unpack_from("<I", data, 0)[0] != MACH_O_64_MAGIC:
        raise BinaryReadError("not a 64-bit Mach-O image (a thin arm64 libtorch_cpu.dylib is expected)")
    (command_count,) = struct.unpack_from("<I", data, 16)
    offset = 32
    segments: list[Segment] = []
    symbols: dict[str, int] = {}
    for _ in range(command_count):
        command, size = struct.unpack_from("<II", data, offset)
        if command == LC_SEGMENT_64:
            address, memory_size, file_offset, file_size = struct.unpack_from("<QQQQ", data, offset + 24)
            segments.append(Segment(address, memory_size, file_offset, file_size))
        elif command == LC_SYMTAB:
            symbols = _defined_symbols(data, *struct.unpack_from("<IIII", data, offset + 8))
        offset += size
    return MachO(data, tuple(segments), symbols)


def _defined_symbols(data: bytes, table_offset: int, count: int, strings_offset: int, strings_size: int
                     ) -> dict[str, int]:
    symbols: dict[str, int] = {}
    for name_offset, kind, _section, _description, value in struct.iter_unpack(
        "<IBBHQ", data[table_offset:table_offset + 16 * count]
    ):
        if kind & N_STAB or kind & N_TYPE != N_SECT or name_offset >= strings_size:
            continue
        start = strings_offset + name_offset
        name = data[start:data.index(b"\0", start)].decode("utf-8", errors="replace")
        symbols.setdefault(name, value)
    return symbols


@dataclass(frozen=True)
class Registration:
    """One `m.impl(name, kernel)` of the block: whether its kernel is the CPU fallback."""

    op: str
    to_fallback: bool


def instructions(code: bytes, address: int) -> Iterator[tuple[int, int]]:
    """(address, 32-bit word) of each arm64 instruction in `code`, which starts at `address`."""
    for index, (word,) in enumerate(struct.iter_unpack("<I", code[:len(code) - len(code) % 4])):
        yield address + 4 * index, word


def registrations(
    code: bytes, address: int, impl_address: int, constructors: Mapping[int, bool], string_at: Callable[[int], str]
) -> list[Registration]:
    """Each `_impl` call in the function `code` at `address`: the op name in x1 and whether the CppFunction built
    last came from a boxed kernel (`constructors`: address of each CppFunction constructor -> built from a boxed
    kernel). Registers are followed through ADRP, ADD immediate and register moves only."""
    registers: dict[int, int] = {}
    last_boxed: bool | None = None
    found = []
    for pc, word in instructions(code, address):
        if word & 0x9F000000 == 0x90000000:  # ADRP Xd, page
            immediate = ((word >> 5) & 0x7FFFF) << 2 | (word >> 29) & 0x3
            registers[word & 0x1F] = (pc & ~0xFFF) + (_signed(immediate, 21) << 12)
        elif word & 0xFF800000 in (0x91000000, 0x91400000):  # ADD Xd, Xn, #imm{, LSL #12}
            source = (word >> 5) & 0x1F
            if source in registers:
                shift = 12 if word & 0x00400000 else 0
                registers[word & 0x1F] = registers[source] + (((word >> 10) & 0xFFF) << shift)
        elif word & 0xFFE0FFE0 == 0xAA0003E0:  # MOV Xd, Xm (ORR Xd, XZR, Xm)
            source = (word >> 16) & 0x1F
            if source in registers:
                registers[word & 0x1F] = registers[source]
            else:
                registers.pop(word & 0x1F, None)
        elif word & 0xFC000000 == 0x94000000:  # BL target
            target = pc + (_signed(word & 0x3FFFFFF, 26) << 2)
            if target in constructors:
                last_boxed = constructors[target]
            elif target == impl_address and 1 in registers:
                found.append(Registration(string_at(registers[1]), bool(last_boxed)))
                last_boxed = None
    return found


def called(code: bytes, address: int) -> set[int]:
    """The targets of the BL instructions in the function `code` at `address`."""
    return {pc + (_signed(word & 0x3FFFFFF, 26) << 2) for pc, word in instructions(code, address)
            if word & 0xFC000000 == 0x94000000}


def references(code: bytes, address: int, wanted: int) -> bool:
    """Whether the function `code` at `address` computes `wanted` with an ADRP and an ADD."""
    pages: dict[int, int] = {}
    for pc, word in instructions(code, address):
        if word & 0x9F000000 == 0x90000000:
            immediate = ((word >> 5) & 0x7FFFF) << 2 | (word >> 29) & 0x3
            pages[word & 0x1F] = (pc & ~0xFFF) + (_signed(immediate, 21) << 12)
        elif word & 0xFF800000 == 0x91000000 and (word >> 5) & 0x1F in pages:
            if pages[(word >> 5) & 0x1F] + ((word >> 10) & 0xFFF) == wanted:
                return True
    return False


def _signed(value: int, bits: int) -> int:
    return value - (1 << bits) if value & (1 << (bits - 1)) else value


def mps_fallback_block(image: MachO) -> list[Registration]:
    """Every registration of MPSFallback.mm's `TORCH_LIBRARY_IMPL(aten, MPS)` block; BinaryReadError naming what is
    missing where the symbols it is found by are absent (a stripped or rebuilt binary)."""
    symbols = image.symbols
    boxed = [address for name, address in symbols.items() if BOXED_FALLBACK_MARK in name]
    impl_address = symbols.get(LIBRARY_IMPL)
    if not boxed or impl_address is None:
        missing = "make_boxed_function<&mps_fallback>" if not boxed else "torch::Library::_impl"
        raise BinaryReadError(f"no symbol for {missing}: the MPSFallback.mm block cannot be found")
    constructors = {address: name.startswith(BOXED_CPP_FUNCTION_CONSTRUCTORS) for name, address in symbols.items()
                    if name.startswith(CPP_FUNCTION_CONSTRUCTOR)}
    starts = sorted(set(symbols.values()))
    blocks = sorted(
        ((address, name) for name, address in symbols.items()
         if name.startswith(BLOCK_PREFIX) and BLOCK_MARK in name and not name.endswith((".cold.1", ".cold.2"))),
        key=lambda block: abs(block[0] - boxed[0]),
    )
    for address, _name in blocks:
        end = _next_start(starts, address)
        code = image.bytes_at(address, end - address)
        if references(code, address, boxed[0]):
            return registrations(code, address, impl_address, constructors, image.c_string_at)
    raise BinaryReadError(
        "no TORCH_LIBRARY_IMPL(aten, MPS) block builds a kernel from make_boxed_function<&mps_fallback>"
    )


def events_stamped_on_gpu(image: MachO) -> bool:
    """Whether MPSEvent::recordLocked's completion block reads its command buffer's GPUEndTime (GPU stamps) rather
    than a host clock; BinaryReadError where the block's symbol is absent."""
    block = image.symbols.get(EVENT_RECORD_BLOCK)
    if block is None:
        raise BinaryReadError(f"no symbol {EVENT_RECORD_BLOCK}: how MPS events are stamped cannot be read")
    stub = image.symbols.get(GPU_END_TIME_STUB)
    end = _next_start(sorted(set(image.symbols.values())), block)
    return stub is not None and stub in called(image.bytes_at(block, end - block), block)


def _next_start(starts: list[int], address: int) -> int:
    index = bisect.bisect_right(starts, address)
    return starts[index] if index < len(starts) else address + 0x1000
