"""Files on the user's behalf: the one atomic writer and the one bounded reader.

- `write_text_atomically(path, text)` is how perfsuite writes a file a user keeps (baselines, doctor facts, the
  session's summary and results): it replaces a regular file or makes a new one in one step, so a reader sees the
  old file or the new one, never half of one. It never replaces a device, a folder, a FIFO or another special file.
- `write_new_text_atomically(folder, name_for, text)` is its append-only twin (the archive): the same temporary
  file, but linked to a name that is free, never replacing anything already there.
- `keep_out_of_git(folder)` makes perfsuite's working folder `.perfsuite/` ignore itself, and refuses a file in
  its place with a message.
- `read_bytes_capped(path, max_bytes, remedy)` is how perfsuite reads a file a user names: only a regular file,
  opened so that a FIFO cannot block, and never more than `max_bytes`, whatever the file says its size is.
  `perfsuite.store.jsonfile.read_json_file` builds on it.

Both follow symlinks, but only to a regular file (or, for the writer, to a path that does not exist yet).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from perfsuite.errors import BadFileError, UsageError

NEW_FILE_MODE = 0o644  # a file perfsuite makes is shared (baselines go into version control)
_READ_CHUNK_BYTES = 1 << 20
WRITE_REMEDY = "perfsuite writes only to regular files and new paths; name another file"
WORK_FOLDER = ".perfsuite"  # perfsuite's working folder in a project: it ignores itself (`keep_out_of_git`)
WORK_FOLDER_IGNORE = "# perfsuite's working files (A/B base checkouts, session summaries); never committed\n*\n"


def write_text_atomically(path: Path | str, text: str) -> Path:
    """Write `text` (UTF-8) to `path` in one step; return the file written (a symlink's target).

    How: a hidden temporary file beside the target (`.<name>.<random>.tmp`), fsynced, renamed over the target
    with os.replace, then the folder fsynced so that the rename survives a power cut. Missing folders are made.
    A file replaced keeps its permission bits; a new one gets 0644.

    Raises BadFileError, naming the path, when it is (or links to) a folder, device, FIFO, socket or other
    special file; UnicodeEncodeError for text that is not UTF-8 (before anything is made); OSError when the
    folder cannot be made or written (read-only, disk full). On any failure the old file is untouched and no
    temporary file is left.
    """
    target = Path(os.path.realpath(path))
    data = text.encode("utf-8")
    mode = refuse_special_file(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Keep the replaced file's permission bits, or make the new one shared.
    temporary = _durable_temporary(target.parent, f".{target.name}.", data, stat.S_IMODE(mode) & 0o777)
    try:
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    fsync_folder(target.parent)
    return target


def write_new_text_atomically(folder: Path | str, name_for: Callable[[], str], text: str, attempts: int = 8) -> Path:
    """Write `text` (UTF-8) as a new file in `folder` named `name_for()`; return its path. Nothing already there is
    ever replaced or written through: a name that is taken (a file, a folder, a symlink to anything) makes
    `name_for` draw another, up to `attempts` times.

    How: the temporary file of `write_text_atomically` (`.<random>.tmp`, fsynced, mode 0644), hard-linked to the
    new name (a link fails where the name exists, unlike a rename), then removed; the folder is fsynced. Missing
    folders are made. Raises UnicodeEncodeError for text that is not UTF-8, FileExistsError when no free name was
    drawn, OSError when the folder cannot be made or written; on any failure no file is left, temporary or final.
    """
    folder = Path(folder)
    data = text.encode("utf-8")
    folder.mkdir(parents=True, exist_ok=True)
    temporary = _durable_temporary(folder, ".", data, NEW_FILE_MODE)
    try:
        for _ in range(attempts):
            target = folder / name_for()
            try:
                os.link(temporary, target)
            except FileExistsError:
                continue
            break
        else:
            raise FileExistsError(f"{folder}: no free file name after {attempts} tries")
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
    fsync_folder(folder)
    return target


def _durable_temporary(folder: Path, prefix: str, data: bytes, mode: int) -> str:
    """A hidden temporary file `<prefix><random>.tmp` in `folder` holding `data`, fsynced, with permission bits
    `mode` (mkstemp makes it 0600); removed again if writing it fails."""
    descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=prefix, suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    return temporary


def keep_out_of_git(folder: Path) -> None:
    """Where `folder` is perfsuite's working folder (named WORK_FOLDER: the A/B base checkouts, and the session's
    summaries by default), make it when missing, with a .gitignore that ignores everything in it, so the project's
    `git status` never shows it; any other folder is left alone. Raises UsageError when a file (or anything but a
    folder) is in its place, OSError when it cannot be made or written."""
    if folder.name != WORK_FOLDER:
        return
    if os.path.lexists(folder) and not folder.is_dir():
        raise UsageError(
            f"{folder} is {_kind_at(folder)}, but perfsuite keeps its working files (A/B base checkouts, the "
            f"session's summaries) in a folder of that name; move it out of the way (e.g. `mv {folder} "
            f"{folder}.old`) and run again"
        )
    ignore = folder / ".gitignore"
    if not ignore.exists():
        folder.mkdir(parents=True, exist_ok=True)
        write_text_atomically(ignore, WORK_FOLDER_IGNORE)


def _kind_at(path: Path) -> str:
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return "a broken symlink"
    return (special_file_kind(mode) or "a file") + _resolved(path)


def refuse_special_file(path: Path | str, remedy: str = WRITE_REMEDY) -> int:
    """The mode of the regular file at `path` (after symlinks), or 0644 for a regular file when nothing is there;
    BadFileError naming `path` (and a symlink's target), the problem and `remedy` when it is a folder, device, FIFO
    or other special file."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return stat.S_IFREG | NEW_FILE_MODE
    kind = special_file_kind(mode)
    if kind is not None:
        raise BadFileError(path, f"is {kind}{_resolved(Path(path))}, not a regular file", remedy)
    return mode


def fsync_folder(folder: Path) -> None:
    """Flush `folder`'s entries to disk, so a rename inside it is durable; a no-op where folders cannot be opened."""
    with contextlib.suppress(OSError):
        descriptor = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


def read_bytes_capped(path: Path | str, max_bytes: int, remedy: str, *, missing_ok: bool = False) -> bytes | None:
    """The content of the regular file at `path`, at most `max_bytes` long; None when it does not exist and
    `missing_ok`.

    Raises BadFileError naming `path`, the problem and `remedy` when the path is (or links to) anything but a
    regular file, when the file is larger than `max_bytes` (by its size, or by what is read: a file that grows
    or understates its size is cut off after `max_bytes + 1` bytes), or cannot be read.
    """
    path = Path(path)
    try:
        status = os.stat(path)
        kind = special_file_kind(status.st_mode)
        if kind is not None:
            raise BadFileError(path, f"is {kind}{_resolved(path)}, not a regular file", remedy)
        if status.st_size > max_bytes:
            raise BadFileError(
                path, f"is {_size(status.st_size)}, more than the {_size(max_bytes)} a perfsuite file can be", remedy
            )
        # O_NONBLOCK: should a FIFO take the file's place after the check, opening it does not wait for a writer.
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
        try:
            kind = special_file_kind(os.fstat(descriptor).st_mode)
            if kind is not None:
                raise BadFileError(path, f"is {kind}, not a regular file", remedy)
            data = _read_at_most(descriptor, max_bytes + 1)
        finally:
            os.close(descriptor)
    except FileNotFoundError:
        if missing_ok:
            return None
        raise BadFileError(path, "no such file", remedy) from None
    except OSError as error:
        raise BadFileError(path, f"cannot be read ({error.strerror})", "Check the path and its permissions.") from None
    if len(data) > max_bytes:
        raise BadFileError(
            path, f"holds more than the {_size(max_bytes)} a perfsuite file can be (it grew while it was read, or "
            "its size is misreported)", remedy,
        )
    return data


def read_text_capped(path: Path | str, max_bytes: int, remedy: str, *, missing_ok: bool = False) -> str | None:
    """`read_bytes_capped` decoded as UTF-8; a file that is not UTF-8 raises BadFileError naming the first bad byte."""
    data = read_bytes_capped(path, max_bytes, remedy, missing_ok=missing_ok)
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BadFileError(path, f"is not UTF-8 text (byte {error.start})", remedy) from None


def _read_at_most(descriptor: int, limit_bytes: int) -> bytes:
    chunks = []
    read_bytes = 0
    while read_bytes < limit_bytes:
        chunk = os.read(descriptor, min(_READ_CHUNK_BYTES, limit_bytes - read_bytes))
        if not chunk:
            break
        chunks.append(chunk)
        read_bytes += len(chunk)
    return b"".join(chunks)


def special_file_kind(mode: int) -> str | None:
    """What a file of `mode` is ("a folder", "a FIFO (named pipe)", ...) when it is not a regular file, else None."""
    if stat.S_ISREG(mode):
        return None
    for test, name in (
        (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "a special file"


def _resolved(path: Path) -> str:
    """` (TARGET)` when `path` is a symlink, so that a message names what it points to."""
    return f" ({os.path.realpath(path)})" if os.path.islink(path) else ""


def _size(size_bytes: int) -> str:
    return f"{size_bytes / 2**20:.0f} MiB" if size_bytes >= 2**20 else f"{size_bytes} bytes"
