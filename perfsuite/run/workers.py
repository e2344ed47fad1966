"""The orchestrator of worker processes (`perfsuite.run.worker`), used by the gate's `--perf-processes` and by A/B
jobs alike: `Workers` starts them from a `WorkerSpec`, talks to each one request at a time, replaces one that died
with a fresh one of the same spec, and stops them (asked to exit, or killed at once when the session is stopping).

A worker that exits, answers something that is not a reply, or gives no answer within the timeout raises
`WorkerGone`, with its exit status and the end of its output (its standard error, where its model's prints go too).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import perfsuite
from perfsuite.run.wire import WorkerSpec, worker_spec_to_json

OUTPUT_TAIL_CHARACTERS = 1500
# How long a worker may take to exit when asked, before it is killed.
EXIT_WAIT_S = 30.0


class WorkerGone(Exception):
    """A worker died or stopped answering: what happened (`what`), its exit status (None while it runs on) and the
    end of its output."""

    def __init__(self, message: str, what: str, exit_status: int | None, output_tail: str) -> None:
        super().__init__(message)
        self.what, self.exit_status, self.output_tail = what, exit_status, output_tail


def harness_folder(folder: Path) -> Path:
    """A folder holding only this process's perfsuite package (a link), first on each A/B worker's path: both sides
    run the same harness, and another interpreter keeps its own torch and libraries."""
    harness = folder / "harness"
    link = harness / "perfsuite"
    if not link.exists():
        harness.mkdir(exist_ok=True)
        link.symlink_to(Path(perfsuite.__file__).resolve().parent, target_is_directory=True)
    return harness


def worker_command(python: str, spec_path: Path, harness: Path | None) -> list[str]:
    """The command line of a worker: `python -m perfsuite.run.worker SPEC` (the gate's, in the session's folder), or
    with `harness` first on its path in place of its working folder (an A/B side's checkout may hold perfsuite)."""
    if harness is None:
        return [python, "-m", "perfsuite.run.worker", str(spec_path)]
    starter = (f"import sys; sys.path[0:1] = [{str(harness)!r}]; from perfsuite.run.worker import main; "
               f"sys.exit(main([{str(spec_path)!r}]))")
    return [python, "-c", starter]


class Worker:
    """One worker process answering one request at a time; its first line (`hello`) says what it runs."""

    def __init__(self, spec: WorkerSpec, folder: Path, number: int, label: str, python: str, cwd: Path | None,
                 harness: bool, timeout_s: float) -> None:
        self.spec, self.number, self.label, self.python, self.cwd = spec, number, label, python, cwd
        self.harness, self.timeout_s = harness, timeout_s
        stamp = f"{os.getpid()}-{time.monotonic_ns()}"
        spec_path = folder / f"worker-{number}-{label}-{stamp}-spec.json"
        spec_path.write_text(json.dumps(worker_spec_to_json(spec)), encoding="utf-8")
        self.log_path = folder / f"worker-{number}-{label}-{stamp}.log"
        self.log = self.log_path.open("w", encoding="utf-8")
        command = worker_command(python, spec_path, harness_folder(folder) if harness else None)
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, cwd=cwd,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._pending = b""
        self._hello: dict[str, Any] | None = None

    @property
    def hello(self) -> dict[str, Any]:
        """What the worker said of itself when it was ready (read on first use, so workers start at once)."""
        if self._hello is None:
            self._hello = self.read()
        return self._hello

    def describe(self) -> str:
        return f"the {self.label} worker ({self.python}, in {self.cwd or Path.cwd()})"

    def gone(self, what: str) -> WorkerGone:
        """The error of this worker gone: `what` happened, with its exit status and the end of its output."""
        tail = self.output_tail()
        return WorkerGone(f"{self.describe()} {what}: {tail or '(no output)'}", what, self.process.returncode, tail)

    def _line(self) -> bytes | None:
        """The next line the worker wrote (None at its end); WorkerGone (the worker killed) past the timeout."""
        assert self.process.stdout is not None
        descriptor = self.process.stdout.fileno()
        deadline = time.monotonic() + self.timeout_s
        while b"\n" not in self._pending:
            left_s = deadline - time.monotonic()
            if left_s <= 0:
                self.process.kill()
                self.process.wait()
                raise self.gone(f"gave no answer within {self.timeout_s:.0f} s and was stopped")
            ready, _, _ = select.select([descriptor], [], [], left_s)
            if not ready:
                continue
            chunk = os.read(descriptor, 1 << 16)
            if not chunk:
                return None
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line

    def read(self) -> dict[str, Any]:
        """The worker's next reply; WorkerGone when it has exited or wrote something that is not one."""
        line = self._line()
        if line is None:
            self.process.wait(timeout=60)
            raise self.gone(f"exited with status {self.process.returncode}")
        text = line.decode("utf-8", errors="replace")
        try:
            reply = json.loads(text)
        except json.JSONDecodeError:
            reply = None
        if not isinstance(reply, dict):
            tail = self.output_tail()
            raise WorkerGone(f"{self.describe()} answered something that is not a reply: {text.strip()[:200]!r}; "
                             f"is it a Python interpreter? (its log: {tail or 'empty'})", "answered something that is "
                             "not a reply", self.process.poll(), tail)
        return reply

    def request(self, document: Mapping[str, Any]) -> dict[str, Any]:
        """Send one request and return its reply (after the worker's first line, read first if it was not yet)."""
        assert self.process.stdin is not None
        self.hello  # noqa: B018 - the first line is the greeting, never a request's reply
        try:
            self.process.stdin.write((json.dumps(document) + "\n").encode("utf-8"))
            self.process.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            self.process.poll()
            raise self.gone(f"is gone (exit status {self.process.returncode})") from None
        return self.read()

    def output_tail(self) -> str:
        """The end of what the worker wrote to its standard error."""
        self.log.flush()
        return self.log_path.read_text(encoding="utf-8", errors="replace").strip()[-OUTPUT_TAIL_CHARACTERS:]

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def ask_to_exit(self) -> None:
        """Ask the worker to exit, without waiting for it (`stop` waits)."""
        if self.process.poll() is None and self.process.stdin is not None and not self.process.stdin.closed:
            try:
                self.process.stdin.write(b'{"op": "exit"}\n')
                self.process.stdin.close()
            except (OSError, ValueError):
                pass  # it is going already: `stop` waits for it or kills it

    def stop(self, at_once: bool = False) -> None:
        """Ask the worker to exit (kill it if it does not within EXIT_WAIT_S); `at_once` kills it (a stopping
        session)."""
        if self.process.poll() is None:
            try:
                if at_once:
                    raise subprocess.TimeoutExpired("", 0)
                self.ask_to_exit()
                self.process.wait(timeout=EXIT_WAIT_S)
            except (OSError, subprocess.TimeoutExpired, ValueError):
                self.process.kill()
                self.process.wait()
        self.log.close()


class Workers:
    """The worker processes of a session, their specs and logs under `folder`: started, replaced when dead, stopped
    together. A request that gets no reply within `timeout_s` stops its worker."""

    def __init__(self, folder: Path, timeout_s: float) -> None:
        self.folder, self.timeout_s = folder, timeout_s
        self.started: list[Worker] = []

    def start(self, spec: WorkerSpec, number: int = 0, label: str = "measuring", python: str = sys.executable,
              cwd: Path | None = None, harness: bool = False) -> Worker:
        """Start a worker of `spec` (it begins importing at once; its greeting is read on first use)."""
        worker = Worker(spec, self.folder, number, label, python, cwd, harness, self.timeout_s)
        self.started.append(worker)
        return worker

    def hand_over(self, worker: Worker) -> Worker:
        """Stop holding `worker`, left running, for another `Workers` to `adopt`; `stop_all` no longer stops it."""
        self.started.remove(worker)
        return worker

    def adopt(self, worker: Worker) -> None:
        """Hold `worker`, handed over by another `Workers`, as if started here."""
        self.started.append(worker)

    def replace(self, worker: Worker) -> Worker:
        """A fresh worker of `worker`'s spec in its place; `worker` is killed if it still runs."""
        self.stop(worker, at_once=True)
        return self.start(worker.spec, worker.number, worker.label, worker.python, worker.cwd, worker.harness)

    def stop(self, worker: Worker, at_once: bool = False) -> None:
        """Stop `worker` (asked to exit, or killed `at_once`)."""
        worker.stop(at_once)
        if worker in self.started:
            self.started.remove(worker)

    def stop_all(self, at_once: bool = False) -> None:
        """Stop every worker still held (asked to exit, or killed `at_once`): all are asked before any is waited
        for, so they exit together (each takes a few tenths of a second to unload torch)."""
        if not at_once:
            for worker in self.started:
                worker.ask_to_exit()
        for worker in list(self.started):
            self.stop(worker, at_once)
