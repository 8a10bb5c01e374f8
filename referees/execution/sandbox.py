"""Run untrusted (model-written) Python under limits, isolated from the host.

``run_python`` executes a script; ``run_tests`` runs a program against
HumanEval-style tests. Both return an ``Outcome``: a status a referee can
score, a sentence a person can read, the captured (bounded) output, and the
list of protections that were really in force on this machine.

How it is done, and what happens where the machine refuses a step, is in
docs/sandbox.md. The isolation itself lives in ``sandbox_child.py``, which runs
as a separate process: a threaded, trio-driven parent must not do
namespace or credential work between fork and exec.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import shutil
import signal as signals
import subprocess
import sys
import tempfile
from pathlib import Path, PurePosixPath
from typing import Literal

import trio
from pydantic import BaseModel, ConfigDict, Field

from arena.contract import ArenaError
from arena.referees.execution.harness import SERVER, TESTER

__all__ = ["Limits", "Outcome", "SandboxError", "run_python", "run_tests", "sweep_leftovers"]

LAUNCHER = Path(__file__).with_name("sandbox_child.py")

# Each run gets its own uid from this range, unused by any account: the limit
# on processes is counted per uid, so runs going on at the same time must not
# share one, and "kill every process of this uid" must hit only this run.
UID_BASE = 1_500_000_000
UID_SPAN = 100_000_000

# What a run without the seccomp filter gives up, whatever the reason.
_WITHOUT_FILTER = "the program may make any system call its uid allows, user namespaces included"

# Beyond the wall limit, how long the launcher gets to clean up before the
# parent kills it outright.
GRACE_SECONDS = 5.0

Status = Literal["ok", "failed", "timeout", "cpu", "memory", "file_size", "processes", "output", "crashed"]


class SandboxError(ArenaError, RuntimeError):
    """The sandbox itself could not run the program: a setup problem, not the program's fault."""


class Limits(BaseModel):
    """What one run may use. Each limit, when hit, stops the run and is named in the outcome."""

    model_config = ConfigDict(extra="forbid")

    wall_seconds: float = Field(10, gt=0, description="real time from start to finish")
    cpu_seconds: float = Field(5, gt=0, description="CPU time per process, rounded up to whole seconds")
    memory_mb: int = Field(512, ge=16, description="address space per process, and all the program's processes together")
    file_size_mb: float = Field(16, ge=0, description="largest file the program may write")
    disk_mb: int = Field(64, ge=1, description="everything in the work directory together")
    processes: int = Field(32, ge=1, description="processes and threads at once, the program included")
    output_kb: int = Field(64, ge=1, description="kept of stdout, and of stderr; more stops the program")


class Outcome(BaseModel):
    status: Status
    reason: str  # one sentence for a person
    returncode: int | None  # None when killed by a signal
    signal: str | None
    stdout: str
    stderr: str
    seconds: float  # wall time of the program
    cpu_seconds: float | None
    protections: list[str]  # what was in force, e.g. "network namespace", "unprivileged uid 1512345678"
    missing: list[str]  # what could not be set up on this machine, and what that means
    uid: int | None = None  # the run's own uid, when there was one

    @property
    def passed(self) -> bool:
        return self.status == "ok"


async def run_python(
    code: str,
    limits: Limits | None = None,
    files: dict[str, str | bytes] | None = None,
    *,
    namespaces: bool = True,
    seccomp: bool = True,
    memory_group: bool = True,
) -> Outcome:
    """Run ``code`` as ``main.py`` in a fresh directory holding ``files``.

    ``namespaces=False`` skips the kernel namespaces (network, mount, PID...),
    for machines where they misbehave; ``seccomp=False`` skips the system-call
    filter alone, so a test can show a call the filter refuses working without
    it; ``memory_group=False`` puts the watchdog in the cgroup's place. The
    outcome's ``missing`` says what each gave up.
    """
    limits = limits or Limits()
    all_files = dict(files or {})
    all_files["main.py"] = code
    raw = await _execute(all_files, "main.py", limits, namespaces, seccomp, memory_group=memory_group)
    return _judge(raw, limits)


async def run_tests(program: str, tests: str, entry_point: str, limits: Limits | None = None) -> Outcome:
    """Run HumanEval-style ``tests`` (which define ``check(candidate)``) against ``program``'s ``entry_point``.

    The tests run in a process of their own that never executes the program: ``candidate`` is a
    proxy that calls the program, in its own process, over a pipe. "ok" means ``check`` returned
    there; "failed" means an assertion or another exception, or the program quit or stopped
    answering: the reason gives the error.
    """
    limits = limits or Limits()
    if not entry_point.isidentifier():
        raise ValueError(f"entry_point must be a Python name, not {entry_point!r}")
    tester = TESTER.replace("ENTRY_POINT", repr(entry_point))
    raw = await _execute({"main.py": SERVER, "solution.py": program}, "main.py", limits, True, True,
                         tests={"main.py": tester}, hidden=tests)
    return _judge_tests(raw, limits)


# ------------------------------------------------------------------ running


def _interpreter() -> tuple[str, list[str]]:
    """The real interpreter behind any virtualenv, and the directories it needs."""
    exe = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    roots = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.base_exec_prefix), os.path.dirname(exe)}
    # Keep only the outermost of nested roots.
    ordered = sorted(roots, key=len)
    kept: list[str] = []
    for r in ordered:
        if not any(r == k or r.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(r)
    return exe, kept


def _write_files(directory: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        rel = PurePosixPath(name)
        if rel.is_absolute() or ".." in rel.parts or not rel.parts:
            raise ValueError(f"file names must be relative paths inside the work directory, not {name!r}")
        path = directory.joinpath(*rel.parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            path.write_text(content, encoding="utf-8")
        else:
            path.write_bytes(content)


class _Capped:
    """Keeps the first ``cap`` bytes of a stream; notices when there was more."""

    def __init__(self, cap: int):
        self.cap = cap
        self.data = bytearray()
        self.exceeded = False

    def add(self, chunk: bytes) -> None:
        room = self.cap - len(self.data)
        if len(chunk) > room:
            self.exceeded = True
        self.data += chunk[: max(room, 0)]


async def _drain(stream: trio.abc.ReceiveStream, sink: _Capped, on_exceeded=None) -> None:
    async with stream:
        while chunk := await stream.receive_some(65536):
            sink.add(chunk)
            if sink.exceeded and on_exceeded is not None:
                on_exceeded()
                on_exceeded = None


def _seccomp(wanted: bool) -> tuple[str | None, list[str]]:
    """The filter for the launcher (hex BPF, or None) and what ``missing`` must say about it."""
    if not wanted:
        return None, [f"seccomp filter turned off: {_WITHOUT_FILTER}"]
    # Imported here, not with this package, so that `python -m` can run it as the script that prints the filter.
    from arena.referees.execution.seccomp_filter import FilterUnavailable, compiled

    try:
        bpf, unknown = compiled()
    except FilterUnavailable as e:
        return None, [f"no seccomp filter ({e}): {_WITHOUT_FILTER}"]
    if unknown:
        return bpf.hex(), [f"seccomp filter without {', '.join(unknown)}: this libseccomp does not know them, so they stay allowed"]
    return bpf.hex(), []


_PREFIX = "arena-sandbox-"
_LOCK = "lock"
_swept: set[str] = set()


def sweep_leftovers(directory: str | None = None) -> list[str]:
    """Remove the work directories of runs whose process is gone (killed, say, with kill -9).

    Each run holds an flock on its directory's lock file for as long as its process lives, so a
    directory whose lock can be taken belongs to nobody. A directory without the lock file
    (one being made this instant, or one of another version) is left alone. Returns what went.
    """
    directory = directory or tempfile.gettempdir()
    removed = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(_PREFIX):
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.geteuid():
                continue
            fd = os.open(os.path.join(entry.path, _LOCK), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # its run is alive
        else:
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.path)
        finally:
            os.close(fd)
    return removed


def _make_base() -> tuple[Path, int]:
    """A fresh work directory and the locked descriptor that says it is in use."""
    directory = tempfile.gettempdir()
    if directory not in _swept:  # once per process: the leftovers of runs that were killed
        _swept.add(directory)
        sweep_leftovers(directory)
    while True:
        base = Path(tempfile.mkdtemp(prefix=_PREFIX))
        lock = os.open(base / _LOCK, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        fcntl.flock(lock, fcntl.LOCK_EX)  # waits only while a sweep that got here first holds it
        if os.fstat(lock).st_nlink:
            os.write(lock, f"{os.getpid()}\n".encode())  # for a person wondering whose it is
            return base, lock
        os.close(lock)  # that sweep took it for a leftover: start again


async def _execute(files: dict[str, str | bytes], main: str, limits: Limits, namespaces: bool, seccomp: bool,
                   tests: dict[str, str] | None = None, hidden: str = "", memory_group: bool = True) -> dict:
    """Run ``main`` among ``files``; with ``tests``, their ``main.py`` too, as the tester (see
    sandbox_child.py), which gets ``hidden`` (the tests' source) and the run's secret through an
    anonymous file: neither is ever on a disk the program could read."""
    python, roots = _interpreter()
    bpf, filter_missing = _seccomp(seccomp)
    base, lock = _make_base()
    result_r = None
    handed: list[int] = []
    try:
        # Traversable but not listable: without a mount namespace the program
        # reaches its work directory through here, and nothing else in it.
        base.chmod(0o711)
        (base / "in").mkdir(mode=0o700)
        (base / "root").mkdir(mode=0o755)
        _write_files(base / "in", files)
        report_r, report_w = os.pipe()
        handed.append(report_w)
        tester = None
        secret = secrets.token_hex(16)
        if tests is not None:
            (base / "tests").mkdir(mode=0o700)
            _write_files(base / "tests", tests)
            result_r, result_w = os.pipe()
            handed.append(result_w)
            given = os.memfd_create("arena-tests", os.MFD_CLOEXEC)
            handed.append(given)
            data = secret.encode() + b"\n" + hidden.encode("utf-8", "surrogatepass")
            while data:
                data = data[os.write(given, data):]
            os.lseek(given, 0, os.SEEK_SET)
            tester = {"uid": None, "result_fd": result_w, "nonce_fd": given}
        uid = UID_BASE + secrets.randbelow(UID_SPAN)
        if tester is not None:
            tester["uid"] = uid + UID_SPAN  # a range of its own: never another run's program
        config = {
            "base": str(base),
            "main": main,
            "python": python,
            "python_roots": roots,
            "fallback_pythons": ["/usr/local/bin/python3", "/usr/bin/python3"],
            "uid": uid,
            "namespaces": namespaces,
            "seccomp_bpf": bpf,
            "report_fd": report_w,
            "tester": tester,
            "memory_group": memory_group,
            "limits": {
                "wall_seconds": limits.wall_seconds,
                "cpu_seconds": limits.cpu_seconds,
                "memory_bytes": limits.memory_mb << 20,
                "file_size_bytes": int(limits.file_size_mb * (1 << 20)),
                "disk_bytes": limits.disk_mb << 20,
                "processes": limits.processes,
            },
        }
        try:
            process = await trio.lowlevel.open_process(
                [sys.executable, "-I", "-B", str(LAUNCHER), json.dumps(config)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=tuple(handed),
                start_new_session=True,
                env={},  # nothing of ours, API keys included, reaches even the launcher
            )
        except BaseException:
            for fd in (report_r, result_r):
                if fd is not None:
                    os.close(fd)
            raise
        finally:
            for fd in handed:
                os.close(fd)
            handed = []

        cap = limits.output_kb * 1024
        out, err, report, result = _Capped(cap), _Capped(cap), _Capped(1 << 20), _Capped(4096)
        control = process.stdin
        stopped_for_output = False

        def stop_for_output() -> None:
            nonlocal stopped_for_output
            stopped_for_output = True
            # Closing the control pipe asks the supervisor to kill everything.
            nursery.start_soon(control.aclose)

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_drain, process.stdout, out, stop_for_output)
                nursery.start_soon(_drain, process.stderr, err, stop_for_output)
                nursery.start_soon(_drain, trio.lowlevel.FdStream(report_r), report)
                if result_r is not None:
                    nursery.start_soon(_drain, trio.lowlevel.FdStream(result_r), result)
                    result_r = None  # the stream closes it
                with trio.move_on_after(limits.wall_seconds + GRACE_SECONDS) as guard:
                    await process.wait()
                if guard.cancelled_caught:
                    _kill(process)
                    await process.wait()
                # Whatever still holds the pipes open once the launcher is gone
                # (only possible without a PID namespace) is not waited for.
                nursery.cancel_scope.deadline = trio.current_time() + 1
        finally:
            # Also on cancellation from outside: ask politely, then insist.
            with trio.CancelScope(shield=True):
                await control.aclose()
                with trio.move_on_after(2):
                    await process.wait()
                _kill(process)
                await process.wait()
    finally:
        for fd in handed + [fd for fd in (result_r,) if fd is not None]:
            os.close(fd)
        shutil.rmtree(base, ignore_errors=True)
        os.close(lock)

    try:
        info = json.loads(bytes(report.data)) if report.data else {}
    except json.JSONDecodeError:
        info = {}
    if info.get("error") or info.get("exec_error") or "exitcode" not in info:
        detail = info.get("error") or info.get("exec_error") or err.data.decode(errors="replace")
        raise SandboxError(f"the sandbox could not run the program: {detail.strip() or 'no report from the launcher'}")
    if info.get("seccomp_refused"):
        filter_missing.append(f"no seccomp filter (the kernel refused it: {info['seccomp_refused']}): {_WITHOUT_FILTER}")
    info["missing"] = info["missing"] + filter_missing
    info.update(
        stdout=_text(out),
        stderr=_text(err),
        output_exceeded=stopped_for_output,
        stdout_exceeded=out.exceeded,
        result=bytes(result.data),
        secret=secret,
    )
    return info


def _kill(process: trio.Process) -> None:
    if process.returncode is None:
        try:
            os.killpg(process.pid, signals.SIGKILL)
        except OSError:
            process.kill()


def _text(sink: _Capped) -> str:
    text = sink.data.decode("utf-8", errors="replace")
    if sink.exceeded:
        text += f"\n[... cut at {sink.cap // 1024} KB]"
    return text


# ------------------------------------------------------------------ judging


def _num(x: float) -> str:
    return f"{x:g}"


def _signal_name(number: int) -> str:
    try:
        return signals.Signals(number).name
    except ValueError:
        return f"signal {number}"


_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+)')
# What CPython says when pthread_create fails: the process limit counts threads, and each
# thread's stack takes address space.
_NO_MORE_THREADS = re.compile(r"^RuntimeError: can't start new thread\s*$", re.MULTILINE)


def _last_error(stderr: str) -> str | None:
    """The final line of the last traceback, with where it happened when the message alone says little."""
    lines = [line for line in stderr.rstrip().splitlines() if line.strip()]
    if not lines:
        return None
    last = lines[-1].strip()
    if not re.match(r"^[A-Za-z_][\w.]*(:|$)", last):
        return last
    where = None
    for i in range(len(lines) - 2, -1, -1):
        m = _FRAME.match(lines[i])
        if m:
            where = f"{Path(m.group(1)).name}, line {m.group(2)}"
            source = lines[i + 1].strip() if i + 1 < len(lines) - 1 and not _FRAME.match(lines[i + 1]) else ""
            if source and source != "^" and not set(source) <= set("^~ "):
                where += f": {source}"
            break
    return f"{last} ({where})" if where else last


def _judge(raw: dict, limits: Limits) -> Outcome:
    code = raw["exitcode"]
    returncode = code if code is not None and code >= 0 else None
    signal = _signal_name(-code) if code is not None and code < 0 else None
    cpu = raw.get("cpu_seconds")
    error = _last_error(raw["stderr"]) or ""
    live = raw.get("tasks_at_end")
    # A program whose threads cannot start usually waits on the ones it has, or spins, until the
    # wall or CPU limit ends it; but what it ran into first was the process (or memory) limit.
    out_of_threads = _NO_MORE_THREADS.search(raw["stderr"])
    cpu_limit = max(1, -(-limits.cpu_seconds // 1))
    if raw.get("output_exceeded"):
        which = "stdout" if raw["stdout_exceeded"] else "stderr"
        status, reason = "output", f"it wrote more than {limits.output_kb} KB to {which} (the output limit) and was stopped"
    elif raw.get("memory_exceeded"):
        status, reason = "memory", (f"its processes together used more than {limits.memory_mb} MB "
                                    "(the memory limit, for all of them at once) and were stopped")
    elif out_of_threads and not raw["stopped"]:
        error = out_of_threads.group(0).strip()
        if raw["timed_out"] and live is not None and live < limits.processes:
            # Its threads were still there, fewer than the limit: their stacks used up the address space.
            status, reason = "memory", (f"it could not start another thread with {live} threads running: each one's "
                                        f"stack counts against its {limits.memory_mb} MB (the memory limit)")
        else:
            status, reason = "processes", f"it tried to run more than {limits.processes} processes or threads at once (the process limit)"
    elif raw["timed_out"]:
        status, reason = "timeout", f"it was still running after {_num(limits.wall_seconds)} s (the wall-time limit) and was stopped"
        if live is not None and live >= limits.processes:
            status = "processes"
            reason = (f"it started processes or threads up to the limit of {limits.processes} and was still running "
                      f"after {_num(limits.wall_seconds)} s; all were stopped")
    elif raw["stopped"]:
        status, reason = "crashed", "it was stopped by the sandbox"
    elif signal == "SIGXCPU" or (signal == "SIGKILL" and cpu is not None and cpu >= cpu_limit):
        status, reason = "cpu", f"it used up its {_num(cpu_limit)} s of CPU time (the CPU limit) and was stopped"
    elif signal == "SIGXFSZ" or "File too large" in error:
        status, reason = "file_size", f"it tried to write a file larger than {_num(limits.file_size_mb)} MB (the file-size limit)"
    elif "No space left on device" in error:
        status, reason = "file_size", f"it filled its work directory ({limits.disk_mb} MB, the disk limit)"
    elif error.startswith("MemoryError") or "Cannot allocate memory" in error:
        status, reason = "memory", f"it ran out of memory: it may use {limits.memory_mb} MB (the memory limit)"
    elif "Resource temporarily unavailable" in error or "can't start new thread" in error:
        status, reason = "processes", f"it tried to run more than {limits.processes} processes or threads at once (the process limit)"
    elif signal is not None:
        status, reason = "crashed", f"it was killed by {signal}"
    elif returncode:
        status = "failed"
        reason = f"it failed: {error}" if error else f"it exited with code {returncode}"
    else:
        status, reason = "ok", "it finished normally"
    if status in ("cpu", "memory", "file_size", "processes") and error and status != "cpu":
        reason += f" [{error}]"
    return Outcome(
        status=status,
        reason=reason,
        returncode=returncode,
        signal=signal,
        stdout=raw["stdout"],
        stderr=raw["stderr"],
        seconds=round(raw["seconds"], 3),
        cpu_seconds=None if cpu is None else round(cpu, 3),
        protections=raw["protections"],
        missing=raw["missing"],
        uid=raw.get("uid"),
    )


# What stops the program whatever the tests say: a limit it ran into.
_LIMITS = ("timeout", "cpu", "memory", "file_size", "processes", "output")


def _verdict(raw: dict) -> tuple[dict | None, str | None]:
    """The tester's verdict, or None and why there is none."""
    if not raw["result"]:
        code = raw.get("tester_exitcode")
        how = f" (they were killed by {_signal_name(-code)})" if code is not None and code < 0 else ""
        return None, f"the tests ended without a verdict{how}"
    parts = raw["result"].split(b" ")
    try:
        secret, outcome, error = parts[0].decode(), parts[1], bytes.fromhex(parts[2].decode()).decode(errors="replace")
    except (IndexError, ValueError):
        secret = outcome = error = None
    if len(parts) != 3 or outcome not in (b"P", b"F") or not secrets.compare_digest(secret.encode(), raw["secret"].encode()):
        # Only the tester holds the pipe and the secret: this should never come from the program.
        return None, "the verdict channel held a message without the run's secret, so not the tests' own"
    return {"passed": outcome == b"P", "error": error}, None


def _judge_tests(raw: dict, limits: Limits) -> Outcome:
    """The outcome of run_tests: the tester's verdict, unless a limit stopped the program first."""
    verdict, missing = _verdict(raw)
    outcome = _judge(raw, limits)  # what the program's own process did: its exit, its signals, the limits
    if outcome.status in _LIMITS:
        return outcome
    error = verdict.get("error") if verdict else None
    if verdict and verdict.get("passed") is True:
        outcome.status, outcome.reason = "ok", "all tests passed"
    elif verdict:
        error = str(error or "the tests failed")
        if error.startswith("MemoryError"):
            outcome.status = "memory"
            outcome.reason = f"it ran out of memory: it may use {limits.memory_mb} MB (the memory limit) [{error}]"
        else:
            outcome.status, outcome.reason = "failed", f"it failed: {error}"
    elif outcome.status != "crashed":
        outcome.status, outcome.reason = "failed", missing
    return outcome
