"""The sandbox for model-written code: what a hostile or broken program can and cannot do.

Each test runs a real program in a real sandbox with small limits, and checks
the outcome a referee would use, plus, from the outside, that nothing escaped.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
import trio

from arena.referees.execution import sandbox
from arena.referees.execution.sandbox import Limits, run_python, run_tests

from helpers import ROOT

SMALL = Limits(wall_seconds=5, cpu_seconds=2, memory_mb=128, file_size_mb=1, disk_mb=8, processes=8, output_kb=16)


def _namespaces_work() -> bool:
    """Probe the machine independently of the code under test."""
    if not shutil.which("unshare"):
        return False
    args = ["unshare", "--net", "--mount", "--pid", "--fork", "true"]
    if os.geteuid() != 0:
        args.insert(1, "--map-root-user")
    return subprocess.run(args, capture_output=True).returncode == 0


NAMESPACES = _namespaces_work()
needs_namespaces = pytest.mark.skipif(not NAMESPACES, reason="this machine refuses namespaces")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="a separate uid per run needs root")


def sandbox_processes(uid: int) -> list[int]:
    """Processes on the host still running as the run's own uid."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid == uid:
                    found.append(int(name))
            except FileNotFoundError:
                pass
    return found


def code(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"


# --------------------------------------------------------------------------- normal runs


async def test_a_normal_program_runs_and_its_output_comes_back():
    outcome = await run_python("print(sum(range(10)))\nimport sys; print('oops', file=sys.stderr)", SMALL)
    assert outcome.status == "ok" and outcome.passed
    assert outcome.returncode == 0 and outcome.signal is None
    assert outcome.stdout == "45\n"
    assert outcome.stderr == "oops\n"
    assert outcome.seconds < 5


async def test_extra_files_are_in_the_work_directory():
    outcome = await run_python(
        "import json; print(json.load(open('data/in.json'))['x'] * 2)", SMALL, files={"data/in.json": '{"x": 21}'}
    )
    assert outcome.stdout == "42\n"
    with pytest.raises(ValueError, match="relative"):
        await run_python("pass", SMALL, files={"../escape.py": ""})


# --------------------------------------------------------------------------- HumanEval style

TESTS = code(
    """
    def check(candidate):
        assert candidate(2, 3) == 5
        assert candidate(-1, 1) == 0
    """
)


async def test_correct_code_passes_humaneval_style_tests():
    outcome = await run_tests("def add(a, b):\n    return a + b\n", TESTS, "add", SMALL)
    assert outcome.status == "ok", outcome.reason
    assert outcome.reason == "all tests passed"


async def test_broken_code_fails_and_the_failing_assertion_is_named():
    outcome = await run_tests("def add(a, b):\n    return a - b\n", TESTS, "add", SMALL)
    assert outcome.status == "failed"
    assert "AssertionError" in outcome.reason
    assert "assert candidate(2, 3) == 5" in outcome.reason  # which test, not just "AssertionError"


async def test_an_exception_in_the_program_is_reported_with_its_message():
    outcome = await run_tests("def add(a, b):\n    return a / 0\n", TESTS, "add", SMALL)
    assert outcome.status == "failed"
    assert "ZeroDivisionError: division by zero" in outcome.reason
    assert "solution.py" in outcome.reason


async def test_a_syntax_error_is_reported():
    outcome = await run_tests("def add(a, b)\n    return a + b\n", TESTS, "add", SMALL)
    assert outcome.status == "failed"
    assert "SyntaxError" in outcome.reason
    assert "solution.py, line 1" in outcome.reason
    plain = await run_python("print('unclosed'", SMALL)
    assert plain.status == "failed" and "SyntaxError" in plain.reason


async def test_a_missing_function_is_reported():
    outcome = await run_tests("def plus(a, b):\n    return a + b\n", TESTS, "add", SMALL)
    assert outcome.status == "failed"
    assert "no 'add'" in outcome.reason


@pytest.mark.parametrize(
    "quit_early",
    ["import sys\nsys.exit(0)", "import os\nos._exit(0)", "exit()"],
)
async def test_quitting_before_the_tests_run_is_not_a_pass(quit_early):
    program = "def add(a, b):\n    return a - b\n" + quit_early + "\n"
    outcome = await run_tests(program, TESTS, "add", SMALL)
    assert outcome.status == "failed", outcome.reason
    assert "exited" in outcome.reason


async def test_a_main_block_in_the_solution_does_not_run():
    program = "def add(a, b):\n    return a + b\nif __name__ == '__main__':\n    input()\n    raise SystemExit(3)\n"
    outcome = await run_tests(program, TESTS, "add", SMALL)
    assert outcome.status == "ok", outcome.reason


# --------------------------------------------------------------------------- secrets


async def test_the_program_sees_no_api_key_nor_any_inherited_variable(monkeypatch):
    secret = "sk-test-" + secrets.token_hex(8)
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    program = code(
        """
        import os
        print(sorted(os.environ))
        print(os.environ.get("OPENAI_API_KEY"))
        for pid in os.listdir("/proc") if os.path.isdir("/proc") else []:
            try:
                print(open(f"/proc/{pid}/environ", "rb").read())
            except OSError:
                pass
        """
    )
    outcome = await run_python(program, SMALL)
    assert outcome.status == "ok", outcome.stderr
    assert secret not in outcome.stdout
    assert "OPENAI_API_KEY" not in outcome.stdout
    first = outcome.stdout.splitlines()[0]
    assert set(eval(first)) <= {"PATH", "LANG", "HOME", "TMPDIR"}  # only what the sandbox sets
    assert "empty environment" in outcome.protections


# --------------------------------------------------------------------------- files

WRITE_ATTEMPTS = code(
    """
    for path in open("targets.txt").read().split():
        try:
            with open(path, "w") as f:
                f.write("escaped")
            print("WROTE", path)
        except OSError as e:
            print("BLOCKED", path, type(e).__name__)
    """
)


@needs_namespaces
async def test_writing_outside_the_work_directory_fails():
    token = secrets.token_hex(6)
    outside = [
        f"/tmp/arena-escape-{token}",
        f"/var/tmp/arena-escape-{token}",
        f"/dev/shm/arena-escape-{token}",
        f"/root/arena-escape-{token}",
        str(ROOT / f"arena-escape-{token}"),
        f"/arena-escape-{token}",
    ]
    inside = f"inside-{token}.txt"
    outcome = await run_python(WRITE_ATTEMPTS, SMALL, files={"targets.txt": "\n".join([*outside, inside])})
    assert outcome.status == "ok", outcome.stderr
    lines = outcome.stdout.splitlines()
    assert f"WROTE {inside}" in lines  # the check itself works: writing where allowed succeeds
    for path in outside:
        assert any(line.startswith(f"BLOCKED {path} ") for line in lines), outcome.stdout
        assert not Path(path).exists(), f"{path} appeared on the host"
    assert "read-only root, only the work directory writable" in outcome.protections


async def test_the_work_directory_is_removed_afterwards(monkeypatch):
    made = []
    real_mkdtemp = sandbox.tempfile.mkdtemp

    def recording_mkdtemp(*args, **kwargs):
        made.append(real_mkdtemp(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(sandbox.tempfile, "mkdtemp", recording_mkdtemp)
    outcome = await run_python("open('left.txt', 'w').write('x' * 1000)", SMALL)
    assert outcome.status == "ok"
    assert len(made) == 1
    assert not Path(made[0]).exists()


# --------------------------------------------------------------------------- network


async def _connect_attempt(namespaces: bool) -> tuple[sandbox.Outcome, int]:
    accepted = 0
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]

    async def accept_all():
        nonlocal accepted
        while True:
            stream = await listeners[0].accept()
            accepted += 1
            await stream.aclose()

    program = code(
        f"""
        import socket
        try:
            socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
            print("CONNECTED")
        except OSError as e:
            print("REFUSED", e)
        """
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(accept_all)
        outcome = await run_python(program, SMALL, namespaces=namespaces)
        await trio.sleep(0.1)
        nursery.cancel_scope.cancel()
    await listeners[0].aclose()
    return outcome, accepted


@needs_namespaces
async def test_the_program_cannot_connect_out():
    outcome, accepted = await _connect_attempt(namespaces=True)
    assert outcome.status == "ok", outcome.stderr
    assert outcome.stdout.startswith("REFUSED"), outcome.stdout
    assert accepted == 0
    assert "network namespace" in outcome.protections


@needs_root
async def test_without_namespaces_the_outcome_says_what_is_missing():
    # The same connection succeeds here: the network check above can fail,
    # and the fallback owns up to it.
    outcome, accepted = await _connect_attempt(namespaces=False)
    assert outcome.stdout.startswith("CONNECTED"), outcome.stdout
    assert accepted == 1
    assert "network namespace" not in outcome.protections
    assert any("network" in m for m in outcome.missing)
    assert any("/tmp" in m for m in outcome.missing)
    # What does not need namespaces still holds.
    assert any(p.startswith("unprivileged uid") for p in outcome.protections)
    hog = await run_python("x = bytearray(1 << 30)", SMALL, namespaces=False)
    assert hog.status == "memory"


# --------------------------------------------------------------------------- limits


async def test_an_infinite_loop_is_stopped_at_the_cpu_limit():
    limits = SMALL.model_copy(update={"cpu_seconds": 1, "wall_seconds": 5})
    outcome = await run_python("while True:\n    pass\n", limits)
    assert outcome.status == "cpu"
    assert "CPU" in outcome.reason
    assert outcome.seconds < 4


async def test_a_sleeping_program_is_stopped_at_the_wall_limit():
    limits = SMALL.model_copy(update={"wall_seconds": 1})
    start = trio.current_time()
    outcome = await run_python("import time\nprint('started')\ntime.sleep(60)\n", limits)
    assert outcome.status == "timeout"
    assert "1 s" in outcome.reason and "wall" in outcome.reason
    assert outcome.stdout == "started\n"  # what it printed before being stopped is kept
    assert trio.current_time() - start < 4


async def test_a_memory_hog_is_reported_as_memory():
    outcome = await run_python("chunks = []\nwhile True:\n    chunks.append(bytearray(8 << 20))\n", SMALL)
    assert outcome.status == "memory"
    assert "128 MB" in outcome.reason and "memory" in outcome.reason


async def test_writing_a_huge_file_hits_the_file_size_limit():
    outcome = await run_python("with open('big.bin', 'wb') as f:\n    f.write(b'x' * (8 << 20))\n", SMALL)
    assert outcome.status == "file_size"
    assert "1 MB" in outcome.reason


@needs_namespaces
async def test_many_small_files_hit_the_disk_limit():
    program = "for i in range(20):\n    open(f'f{i}.bin', 'wb').write(b'x' * (900 << 10))\n"
    outcome = await run_python(program, SMALL)  # 20 x 0.9 MB > 8 MB, each under 1 MB
    assert outcome.status == "file_size"
    assert "8 MB" in outcome.reason


async def test_chatty_output_is_cut_and_stopped():
    outcome = await run_python("while True:\n    print('x' * 1000)\n", SMALL)
    assert outcome.status == "output"
    assert "16 KB" in outcome.reason
    assert len(outcome.stdout) < 16 * 1024 + 100
    assert outcome.stdout.endswith("[... cut at 16 KB]")


# --------------------------------------------------------------------------- processes

BOUNDED_FORKS = code(
    """
    import os, time
    started = 0
    for _ in range(20):
        try:
            pid = os.fork()
        except OSError as e:
            print("fork failed after", started, type(e).__name__)
            break
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        started += 1
    else:
        print("started all 20")
    """
)


async def _process_limit_holds() -> sandbox.Outcome:
    limits = SMALL.model_copy(update={"processes": 4, "wall_seconds": 3})
    outcome = await run_python(BOUNDED_FORKS, limits)
    assert "started all 20" not in outcome.stdout, "the process limit does not hold"
    return outcome


@needs_root
async def test_the_process_limit_stops_forking_and_nothing_is_left_behind():
    outcome = await _process_limit_holds()
    assert outcome.stdout.startswith("fork failed after 3 ")  # the program itself is the 4th
    # Its children were sleeping for 30 s; they must be gone with it.
    assert sandbox_processes(outcome.uid) == []


@needs_root
@pytest.mark.parametrize(
    "bomb",
    [
        "import os\nwhile True:\n    os.fork()\n",
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
    ],
    ids=["dies-on-error", "ignores-errors"],
)
async def test_a_fork_bomb_is_contained_reported_and_cleaned_up(bomb):
    await _process_limit_holds()  # never set a bomb off unless the limit is known to hold
    limits = SMALL.model_copy(update={"processes": 16, "wall_seconds": 2})
    outcome = await run_python(bomb, limits)
    assert outcome.status == "processes", outcome.reason
    assert "16" in outcome.reason
    assert sandbox_processes(outcome.uid) == []
    # The machine is fine: the next run works as usual.
    after = await run_python("print('still here')", SMALL)
    assert after.stdout == "still here\n"


@needs_root
async def test_background_children_do_not_survive_the_program():
    program = code(
        """
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(30)
            os._exit(0)
        print("parent done")
        """
    )
    outcome = await run_python(program, SMALL)
    assert outcome.status == "ok"
    assert sandbox_processes(outcome.uid) == []


@needs_root
async def test_a_cancelled_run_leaves_no_process(monkeypatch):
    uid = sandbox.UID_BASE + secrets.randbelow(sandbox.UID_SPAN)
    monkeypatch.setattr(sandbox, "UID_BASE", uid)
    monkeypatch.setattr(sandbox, "UID_SPAN", 1)
    program = "import os, time\nfor _ in range(3):\n    os.fork()\ntime.sleep(60)\n"
    with trio.move_on_after(1) as scope:
        await run_python(program, SMALL)
    assert scope.cancelled_caught
    assert sandbox_processes(uid) == []


@needs_root
async def test_runs_at_the_same_time_do_not_share_a_process_budget():
    limits = SMALL.model_copy(update={"processes": 6, "wall_seconds": 2})
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    fine = code(
        """
        import os, time
        time.sleep(0.3)  # let the bomb fill its own budget first
        for _ in range(3):
            if os.fork() == 0:
                time.sleep(0.5)
                os._exit(0)
        print("forked 3")
        """
    )
    results = {}

    async def run(name, program):
        results[name] = await run_python(program, limits)

    await _process_limit_holds()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, "bomb", bomb)
        for i in range(3):
            nursery.start_soon(run, f"fine{i}", fine)
    assert results["bomb"].status == "processes"
    for i in range(3):
        assert results[f"fine{i}"].status == "ok", results[f"fine{i}"].reason
        assert results[f"fine{i}"].stdout == "forked 3\n"


# --------------------------------------------------------------------------- what was in force


@needs_root
@needs_namespaces
async def test_the_outcome_lists_the_protections_in_force():
    outcome = await run_python("print('hi')", SMALL)
    for protection in (
        "empty environment",
        "resource limits",
        "PID namespace",
        "mount namespace",
        "network namespace",
        "read-only root, only the work directory writable",
        "no new privileges",
    ):
        assert protection in outcome.protections
    assert f"unprivileged uid {outcome.uid}" in outcome.protections
    assert outcome.uid is not None and outcome.uid >= sandbox.UID_BASE
    assert outcome.missing == []


def test_limits_reject_unknown_fields():
    with pytest.raises(ValueError, match="extra"):
        Limits(wall_secs=3)
    assert Limits().wall_seconds == 10
