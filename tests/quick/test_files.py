"""The one atomic writer and the one bounded reader of perfsuite/store/files.py.

The writer replaces only a regular file or creates a new one, in one step, leaving nothing behind on failure.
The reader opens only regular files (a FIFO cannot hang it, a device cannot flood it) and never reads more than
its cap, whatever the file says its size is.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hostile_files import fails_after, run_with_memory_cap

from perfsuite.errors import BadFileError
from perfsuite.store import files
from perfsuite.store.files import read_bytes_capped, write_text_atomically

REMEDY = "Record it again."


def leftovers(folder: Path, keep: set[str]) -> list[str]:
    return sorted(name for name in os.listdir(folder) if name not in keep)


# --- the writer -------------------------------------------------------------------------------------------


def test_a_new_file_is_written_with_its_text(tmp_path):
    path = tmp_path / "facts.json"
    assert write_text_atomically(path, "{\"a\": 1}\n") == path
    assert path.read_text(encoding="utf-8") == "{\"a\": 1}\n"


def test_a_regular_file_is_replaced_and_keeps_its_permission_bits(tmp_path):
    path = tmp_path / "facts.json"
    path.write_text("old")
    path.chmod(0o640)
    write_text_atomically(path, "new")
    assert (path.read_text(), stat.S_IMODE(path.stat().st_mode)) == ("new", 0o640)


def test_a_new_file_is_readable_by_everyone_as_a_shared_file_should_be(tmp_path):
    path = tmp_path / "facts.json"
    write_text_atomically(path, "x")
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_missing_folders_are_made(tmp_path):
    path = tmp_path / "a" / "b" / "facts.json"
    write_text_atomically(path, "x")
    assert path.read_text() == "x"


def test_text_is_written_as_utf8(tmp_path):
    path = tmp_path / "facts.json"
    write_text_atomically(path, "Apple M2 Max \u2014 r\u00e9sum\u00e9")
    assert path.read_bytes() == "Apple M2 Max \u2014 r\u00e9sum\u00e9".encode()


def test_a_symlink_to_a_regular_file_replaces_the_target_and_keeps_the_link(tmp_path):
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert write_text_atomically(link, "new") == target
    assert link.is_symlink() and target.read_text() == "new"


def test_a_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "new.json")
    write_text_atomically(link, "x")
    assert (tmp_path / "new.json").read_text() == "x" and link.is_symlink()


def test_a_fifo_is_refused_naming_it_and_stays_a_fifo(tmp_path):
    fifo = tmp_path / "facts.json"
    os.mkfifo(fifo)
    with pytest.raises(BadFileError) as error:
        write_text_atomically(fifo, "x")
    assert str(error.value).startswith(f"{fifo}: is a FIFO (named pipe), not a regular file")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert leftovers(tmp_path, {"facts.json"}) == []


def test_a_folder_is_refused_naming_it_and_nothing_is_left_beside_it(tmp_path):
    folder = tmp_path / "facts.json"
    folder.mkdir()
    with pytest.raises(BadFileError, match=r"facts\.json: is a folder, not a regular file"):
        write_text_atomically(folder, "x")
    assert folder.is_dir() and leftovers(tmp_path, {"facts.json"}) == []


def test_a_symlink_to_a_device_is_refused_naming_the_device(tmp_path):
    link = tmp_path / "facts.json"
    link.symlink_to(os.devnull)
    with pytest.raises(BadFileError) as error:
        write_text_atomically(link, "x")
    assert "is a character device (/dev/null), not a regular file" in str(error.value)
    assert link.is_symlink() and os.readlink(link) == os.devnull


def test_a_device_is_refused_without_touching_it():
    with pytest.raises(BadFileError, match="/dev/null: is a character device, not a regular file"):
        write_text_atomically(os.devnull, "x")
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_a_path_under_a_file_is_an_os_error_and_the_file_is_untouched(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("keep")
    with pytest.raises(OSError):
        write_text_atomically(blocker / "facts.json", "x")
    assert blocker.read_text() == "keep"


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "facts.json"
    path.write_text("old")

    def disk_full(descriptor: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space left"):
        write_text_atomically(path, "new")
    assert path.read_text() == "old" and leftovers(tmp_path, {"facts.json"}) == []


def test_text_that_cannot_be_utf8_is_refused_before_any_file_is_made(tmp_path):
    path = tmp_path / "facts.json"
    with pytest.raises(UnicodeEncodeError):
        write_text_atomically(path, "lone \udc80 surrogate")
    assert leftovers(tmp_path, set()) == []


def test_the_temporary_file_is_hidden_beside_the_target_with_the_name_sweepers_look_for(tmp_path, monkeypatch):
    seen = []
    real_replace = os.replace

    def spy(source: str, destination: Path) -> None:
        seen.append(Path(source).name)
        real_replace(source, destination)

    monkeypatch.setattr(files.os, "replace", spy)
    write_text_atomically(tmp_path / "facts.json", "x")
    assert len(seen) == 1 and seen[0].startswith(".facts.json.") and seen[0].endswith(".tmp")


# --- the reader -------------------------------------------------------------------------------------------


def test_a_regular_file_is_read(tmp_path):
    path = tmp_path / "a.json"
    path.write_bytes(b"12345")
    assert read_bytes_capped(path, 5, REMEDY) == b"12345"


def test_a_missing_file_is_none_when_missing_is_ok(tmp_path):
    assert read_bytes_capped(tmp_path / "absent.json", 5, REMEDY, missing_ok=True) is None


def test_a_missing_file_is_an_error_naming_it(tmp_path):
    with pytest.raises(BadFileError, match=r"absent\.json: no such file\. Record it again\."):
        read_bytes_capped(tmp_path / "absent.json", 5, REMEDY)


def test_a_file_over_the_cap_is_refused_with_its_size(tmp_path):
    path = tmp_path / "a.json"
    path.write_bytes(b"x" * (3 * 2**20))
    with pytest.raises(BadFileError, match=r"is 3 MiB, more than the 1 MiB a perfsuite file can be"):
        read_bytes_capped(path, 2**20, REMEDY)


def test_a_file_that_understates_its_size_is_cut_off_at_the_cap():
    # /proc files say they are 0 bytes long and hold more: the reader counts what it reads, not what stat says.
    status = Path("/proc/self/status")
    if not status.is_file() or status.stat().st_size != 0:
        pytest.skip("needs Linux's /proc, whose files report size 0")
    with pytest.raises(BadFileError, match="more than the 100 bytes a perfsuite file can be"):
        read_bytes_capped(status, 100, REMEDY)


def test_a_symlink_to_dev_zero_is_refused_without_reading_it(tmp_path):
    link = tmp_path / "nvidia-h200.json"
    link.symlink_to("/dev/zero")
    done = run_with_memory_cap(
        f"from perfsuite.store.files import read_bytes_capped\nread_bytes_capped({str(link)!r}, 2**20, 'Fix it.')"
    )
    assert f"BadFileError: {link}: is a character device (/dev/zero), not a regular file. Fix it." in done.stderr


def test_a_fifo_is_refused_at_once_instead_of_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "a.json"
    os.mkfifo(fifo)
    with fails_after(5), pytest.raises(BadFileError, match=r"is a FIFO \(named pipe\), not a regular file"):
        read_bytes_capped(fifo, 100, REMEDY)


def test_a_folder_is_refused(tmp_path):
    with pytest.raises(BadFileError, match="is a folder, not a regular file"):
        read_bytes_capped(tmp_path, 100, REMEDY)


def test_a_folder_is_refused_even_when_missing_is_ok(tmp_path):
    with pytest.raises(BadFileError, match="is a folder"):
        read_bytes_capped(tmp_path, 100, REMEDY, missing_ok=True)


def test_an_unreadable_file_names_the_os_reason(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    path = tmp_path / "a.json"
    path.write_text("{}")
    path.chmod(0)
    with pytest.raises(BadFileError, match=r"cannot be read \(Permission denied\)"):
        read_bytes_capped(path, 100, REMEDY)


def test_a_file_swapped_for_a_fifo_after_the_check_is_still_refused(tmp_path, monkeypatch):
    # Between stat and open another process may put a FIFO in the file's place: the open cannot block, and the
    # open file is checked again.
    path = tmp_path / "a.json"
    path.write_text("{}")
    real_open = os.open

    def swap_then_open(name: str, flags: int, *args: int) -> int:
        os.unlink(path)
        os.mkfifo(path)
        return real_open(name, flags, *args)

    monkeypatch.setattr(files.os, "open", swap_then_open)
    with fails_after(5), pytest.raises(BadFileError, match="is a FIFO"):
        read_bytes_capped(path, 100, REMEDY)
