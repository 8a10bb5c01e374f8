"""Common mistakes and accidents get one sentence with its own advice and exit 2, never a traceback:
a file given as the run folder, a folder or store this user may not enter or read (never called
damaged, never set aside), a full disk (nothing is lost: the same command goes on), Ctrl-C at any
moment of a command (exit 130), a concurrency past its cap. Where permissions matter the commands
run in a child process that file modes bind, root's override dropped; the full disk is a real one,
a tiny tmpfs mounted in a mount namespace of the test's own."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import ROOT, interruptible
from store_kit import TINY, as_unprivileged, cli, copy_run, one_line, permissions_bind, write_scenario

QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A run of two matches, played to the end, its scenario, and its export."""
    from arena.cli.commands import main

    home = tmp_path_factory.mktemp("finished")
    scenario = write_scenario(home)
    assert main(["run", str(scenario), "--quiet", "--run-dir", str(home / "run")]) == 0
    return home / "run", scenario


def readers(run_dir, out: Path) -> list[list]:
    """Every command that reads a run directory, writing anything it writes under ``out``."""
    return [["rank", run_dir], ["rank", run_dir, "--json"], ["export", run_dir], ["show", run_dir],
            ["report", run_dir, "-o", out / "r.html"], ["watch", run_dir, "--plain"],
            ["plot", run_dir, "--kind", "heatmap", "-o", out / "h.png"],
            ["annotate", "export", run_dir, "-o", out / "a.csv"], ["annotate", "import", run_dir, out / "a.csv"]]


def said_once(code, err: str) -> str:
    said = one_line(err)
    assert code == 2, err
    assert said.count("error:") == 1 and "Traceback" not in err, err
    return said


# -- a file where a folder belongs ------------------------------------------------------------------
def test_a_file_given_as_the_run_folder_is_said_to_be_a_file_by_every_command(finished_run, tmp_path, capsys):
    _, scenario = finished_run
    for command in readers(scenario, tmp_path):
        code, _, err = cli(capsys, *command)
        said = said_once(code, err)
        assert f"{scenario} is a file, not a folder: give the run directory" in said, (command, said)
        assert f"to play that scenario: `arena run {scenario}`" in said, said
    code, _, err = cli(capsys, "runs", scenario)
    assert f"{scenario} is a file, not a folder" in said_once(code, err)
    code, _, err = cli(capsys, "run", scenario, "--quiet", "--run-dir", scenario)
    said = said_once(code, err)
    assert f"{scenario} is a file, not a folder: a run needs a folder of its own" in said and "--run-dir" in said
    assert not list(tmp_path.iterdir()), "nothing was written"


# -- permissions --------------------------------------------------------------------------------------
@pytest.fixture
def bound(tmp_path):
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o000)
    try:
        if not permissions_bind(closed):
            pytest.skip("file permissions do not bind a child here (root whose capabilities cannot be dropped)")
    finally:
        closed.rmdir()


def test_a_run_folder_this_user_may_not_enter_is_not_permitted_and_the_listing_goes_on(finished_run, tmp_path, bound):
    source, scenario = finished_run
    runs = tmp_path / "runs"
    fine, locked = copy_run(source, runs / "fine"), copy_run(source, runs / "locked")
    locked.chmod(0o000)
    try:
        commands = [*readers(locked, tmp_path), ["run", scenario, "--quiet", "--run-dir", locked], ["runs", runs],
                    ["runs", runs, "--json"]]
        results = as_unprivileged(commands, cwd=tmp_path)
    finally:
        locked.chmod(0o755)
    *refused, (listed, table, _), (_, document, _) = results
    for command, (code, _, err) in zip(commands, refused):
        said = said_once(code, err)
        assert f"{locked}: not permitted: this user may not enter it (it is not damaged" in said, (command, said)
        assert "damaged, and" not in said.replace("not damaged, and", "")
    assert listed == 0
    rows = {row["run_dir"]: row for row in json.loads(document)}
    assert rows[str(fine)]["status"] == "finished" and rows[str(fine)]["finished"] == 2
    assert rows[str(locked)]["status"] == "not permitted: this user may not read it"
    assert "not permitted" in one_line(table) and "finished" in one_line(table)


def test_a_store_this_user_may_not_read_is_never_called_damaged_nor_set_aside(finished_run, tmp_path, capsys, bound):
    source, scenario = finished_run
    run_dir = copy_run(source, tmp_path / "runs" / "unreadable")
    store = run_dir / "run.sqlite"
    before = store.read_bytes()
    store.chmod(0o000)
    try:
        commands = [*readers(run_dir, tmp_path), ["run", scenario, "--quiet", "--run-dir", run_dir],
                    ["run", scenario, "--quiet", "--run-dir", run_dir, "--force-new"], ["runs", tmp_path / "runs"]]
        results = as_unprivileged(commands, cwd=tmp_path)
    finally:
        store.chmod(0o644)
    *refused, (listed, table, _) = results
    for command, (code, _, err) in zip(commands, refused):
        said = said_once(code, err)
        assert f"{store}: not permitted: this user may not read it (it is not damaged, and nothing was changed)" in said, \
            (command, said)
        assert "--force-new, which sets it aside" not in said and "is damaged" not in said
    assert "(--force-new sets aside only a store it could read)" in one_line(refused[-1][2])
    assert listed == 0 and "not permitted" in one_line(table) and "damaged" not in table
    assert sorted(p.name for p in run_dir.iterdir()) == sorted(p.name for p in source.iterdir()), "nothing set aside"
    assert store.read_bytes() == before
    # once it may be read, it resumes: nothing was played again
    code, out, err = cli(capsys, "run", scenario, "--quiet", "--run-dir", run_dir)
    assert code == 0, err
    assert "2 finished matches are kept" in one_line(out) and "2 of 2 matches finished, 2 from the earlier run" in one_line(out)


# -- a full disk --------------------------------------------------------------------------------------
FULL_DISK = textwrap.dedent("""
    # Inside a mount namespace of its own: a 1 MiB tmpfs fills part way through a run of 120 matches.
    import json, subprocess, sys
    from pathlib import Path
    disk, out, scenario = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]

    def mount(size, *more):
        subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join([f"size={size}", *more]), "none", str(disk)], check=True)

    def arena(*args):
        done = subprocess.run([sys.executable, "-m", "arena.cli", *map(str, args)], capture_output=True, text=True)
        return [done.returncode, done.stdout, done.stderr]

    steps = {}
    mount("1m")
    (disk / "export.jsonl").write_text("the export that was here before\\n")  # before the disk fills
    steps["full run"] = arena("run", scenario, "--quiet", "--run-dir", disk / "r")
    steps["kept"] = arena("show", disk / "r", "--json")
    steps["full export"] = arena("export", out / "reference", "-o", disk / "export.jsonl")
    steps["left"] = sorted(p.name for p in disk.iterdir())
    steps["export after"] = (disk / "export.jsonl").read_text()
    mount("64m", "remount")  # space freed
    steps["again"] = arena("run", scenario, "--quiet", "--run-dir", disk / "r")
    steps["export"] = arena("export", disk / "r")
    print(json.dumps(steps))
""")


def test_a_full_disk_says_so_loses_nothing_and_the_same_command_goes_on(tmp_path):
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("no unshare(1) to make a mount namespace with a tiny disk in it")
    probe = subprocess.run([unshare, "--user", "--map-root-user", "--mount", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"this system makes no user and mount namespace: {probe.stderr.decode().strip()}")
    reference = tmp_path / "reference"
    done = subprocess.run([sys.executable, "-m", "arena.cli", "run", QUICKSTART, "--quiet", "--run-dir", reference],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    expected = subprocess.run([sys.executable, "-m", "arena.cli", "export", reference], capture_output=True, text=True)
    disk = tmp_path / "disk"
    disk.mkdir()
    driver = subprocess.run([unshare, "--user", "--map-root-user", "--mount", sys.executable, "-c", FULL_DISK, disk,
                             tmp_path, QUICKSTART], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert driver.returncode == 0, driver.stderr
    steps = json.loads(driver.stdout)

    code, _, err = steps["full run"]
    said = said_once(code, err)
    assert said.startswith("error: disk full: free space, then run again: nothing is lost (SQLite says: database or "
                           f"disk is full; the finished matches are kept in {disk / 'r'}, and the same command plays the "
                           "rest)"), said
    code, shown, err = steps["kept"]
    assert code == 0, err
    kept = sum(m["status"] == "finished" for m in json.loads(shown)["matches"])
    assert 1 <= kept < 120, "the disk filled part way through"

    code, _, err = steps["full export"]
    said = said_once(code, err)
    assert (f"error: disk full: free space, then run again: nothing is lost (cannot write {disk / 'export.jsonl'}: No space "
            "left on device; the file already there is unchanged)") == said
    assert steps["export after"] == "the export that was here before\n"
    assert not [name for name in steps["left"] if "partial" in name]

    code, out, err = steps["again"]
    assert code == 0, err
    assert f"{kept} finished matches are kept" in one_line(out)
    assert f"120 of 120 matches finished, {kept} from the earlier run" in one_line(out)
    assert steps["export"][1] == expected.stdout, "the same matches as a run that never ran out of disk"


# -- Ctrl-C ----------------------------------------------------------------------------------------------
# Each point is a module the command imports, reported by Python itself (importtime) once it is loaded:
# the first is the first module imported after the `arena` package, as early as the command's code runs.
POINTS = ["the command's first import", "pydantic", "rich", "trio", "arena.run.scenario", "arena.store.writer",
          "arena.run.runner"]


SCRIPT = Path(sys.executable).with_name("arena")  # the console script an install makes


@pytest.mark.parametrize("launcher", ["python -m arena.cli", "arena"])
@pytest.mark.parametrize("point", POINTS)
def test_ctrl_c_at_any_moment_exits_130_without_a_traceback(tmp_path, point, launcher):
    if launcher == "arena" and not SCRIPT.exists():
        pytest.skip(f"no console script at {SCRIPT}")
    start = [SCRIPT] if launcher == "arena" else [sys.executable, "-m", "arena.cli"]
    command = [*start, "run", QUICKSTART, "--plain", "--run-dir", tmp_path / "run"]
    child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             preexec_fn=interruptible, env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"})
    try:
        seen, package = [], False
        for line in child.stderr:  # one line per module, as each finishes loading
            seen.append(line)
            name = line.rsplit("|", 1)[-1].strip()
            if name == point or (package and point == POINTS[0]):
                child.send_signal(signal.SIGINT)
                break
            package = package or name == "arena.cli"
        else:
            raise AssertionError(f"the command ended before it imported {point}")
        rest = child.stderr.read()
        assert child.wait(timeout=60) == 130, rest
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert "Traceback" not in "".join(seen) + rest and "KeyboardInterrupt" not in rest, rest


def test_ctrl_c_while_the_run_plays_exits_130_and_the_same_command_resumes(tmp_path):
    run_dir = tmp_path / "run"
    command = [sys.executable, "-m", "arena.cli", "run", QUICKSTART, "--plain", "--run-dir", run_dir]
    child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=interruptible)
    try:
        for line in child.stdout:
            if " r1 " in line:  # a round of a match closed: the run is under way
                child.send_signal(signal.SIGINT)
                break
        out, err = child.communicate(timeout=60)
        assert child.returncode == 130, err
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert "Traceback" not in err and "Interrupted. Finished matches are kept" in one_line(out)
    again = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert again.returncode == 0 and "120 of 120 matches finished" in one_line(again.stdout), again.stderr


# -- sizes -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("concurrency, problem", [
    (100_000_000, "concurrency.matches: expected less than or equal to 10000 (given: 100000000)"),
    ({"matches": 4, "per_agent": 20_000}, "concurrency.per_agent: expected less than or equal to 10000 (given: 20000)"),
    ({"agents": {"give": 99_999_999}}, "concurrency.agents.give: expected less than or equal to 10000 (given: 99999999)"),
])
def test_concurrency_is_capped_like_every_other_size(tmp_path, capsys, concurrency, problem):
    scenario = write_scenario(tmp_path, {**TINY, "concurrency": concurrency})
    for command in (["validate", scenario], ["run", scenario, "--quiet", "--run-dir", tmp_path / "run"]):
        code, _, err = cli(capsys, *command)
        assert problem in said_once(code, err)
    assert not (tmp_path / "run").exists()


def test_concurrency_on_the_command_line_is_capped_too(tmp_path):
    scenario = write_scenario(tmp_path)
    for option, cap in (("--concurrency", "10,000 (the cap of concurrency.matches)"),
                        ("--processes", "256 (the cap of concurrency.processes)")):
        done = subprocess.run([sys.executable, "-m", "arena.cli", "run", scenario, option, "100000000", "--run-dir",
                               tmp_path / "run"], capture_output=True, text=True, cwd=ROOT)
        assert done.returncode == 2 and f"expected at most {cap}, not 100,000,000" in done.stderr
    assert not (tmp_path / "run").exists()


def test_a_store_this_user_may_read_but_not_write_is_read_and_not_resumed(finished_run, tmp_path, bound):
    source, scenario = finished_run
    run_dir = copy_run(source, tmp_path / "runs" / "read-only-store")
    store = run_dir / "run.sqlite"
    before = store.read_bytes()
    store.chmod(0o444)
    try:
        (code, _, err), (shown, out, _) = as_unprivileged(
            [["run", scenario, "--quiet", "--run-dir", run_dir], ["show", run_dir, "--json"]], cwd=tmp_path)
    finally:
        store.chmod(0o644)
    said = said_once(code, err)
    assert f"{store}: not permitted: this user may not write to it (it is not damaged, and nothing was changed)" in said
    assert shown == 0 and [m["status"] for m in json.loads(out)["matches"]] == ["finished", "finished"]
    assert store.read_bytes() == before
