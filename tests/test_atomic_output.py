"""Exports, reports, figures, annotation sheets and imported reviews are written whole or not at all: a
write that fails part way leaves the file that was there before untouched, and no temporary file behind.

The failure is a real one: the commands run in a child process that may not grow any file past 1 KiB
(RLIMIT_FSIZE, with SIGXFSZ ignored), so each write stops with "File too large" part way through, the
way a full disk stops it."""

from __future__ import annotations

import json

import pytest
import yaml

from helpers import ROOT
from store_kit import as_unprivileged, cli, one_line

QUESTIONS = ROOT / "scenarios" / "data" / "sample-questions.jsonl"
LIMIT = 1024
OLD = "the file that was here before\n"


@pytest.fixture(scope="module")
def reviewed_run(tmp_path_factory):
    """A run whose judges' verdicts carry BPDE (so there is something to annotate), and a PRD-style folder."""
    from arena.cli.commands import main

    home = tmp_path_factory.mktemp("reviewed")
    agents = {name: {"backend": "scripted", "strategy": "synthetic_judge",
                     "params": {"name": name, "quality": quality, "skill": 0.15, "position_bias": 0.1}}
              for name, quality in (("alice", 0.8), ("bob", 0.5), ("carol", 0.3))}
    raw = {"name": "reviewed", "seed": 3, "agents": agents, "tournament": {"role_swap": False},
           "games": [{"game": "pairwise_review", "params": {"questions": str(QUESTIONS), "contestants": 3, "peer": True}}]}
    (home / "s.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    assert main(["run", str(home / "s.yaml"), "--quiet", "--run-dir", str(home / "run")]) == 0
    ratings = home / "prd" / "ratings-gpt4"
    ratings.mkdir(parents=True)
    lines = [json.dumps({"question_id": q, "score": 1 + q % 3}) for q in range(400)]
    (ratings / "answer_alpaca-vs-answer_vicuna-gpt4-reviewer.jsonl").write_text("\n".join(lines) + "\n")
    return home / "run", home / "prd"


def commands(run_dir, prd, out):
    return {
        out / "matches.jsonl": ["export", run_dir, "-o", out / "matches.jsonl"],
        out / "matches.csv": ["export", run_dir, "--format", "csv", "-o", out / "matches.csv"],
        out / "report.html": ["report", run_dir, "-o", out / "report.html"],
        out / "heatmap.png": ["plot", run_dir, "--kind", "heatmap", "-o", out / "heatmap.png"],
        out / "todo.csv": ["annotate", "export", run_dir, "--beta", "1", "--seed", "1", "-o", out / "todo.csv"],
        out / "reviews.jsonl": ["import", "prd", prd, "-o", out / "reviews.jsonl"],
    }


def test_a_write_that_fails_part_way_keeps_the_old_file_and_leaves_nothing_behind(reviewed_run, tmp_path, capsys):
    run_dir, prd = reviewed_run
    # with room to write, each command writes a file larger than the limit below (this also fills the compiled
    # code caches some of them keep, which would otherwise be written, and cut short, in the limited process)
    room = tmp_path / "room"
    room.mkdir()
    for target, command in commands(run_dir, prd, room).items():
        code, _, err = cli(capsys, *command)
        assert code == 0, (command, err)
        assert target.stat().st_size > LIMIT, command
    assert len((room / "reviews.jsonl").read_text().splitlines()) == 400
    assert (room / "heatmap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", "the format follows the target's suffix"

    out = tmp_path / "out"
    out.mkdir()
    planned = commands(run_dir, prd, out)
    for target in planned:
        target.write_text(OLD)
    results = as_unprivileged(list(planned.values()), cwd=tmp_path, limit_file_size=LIMIT)
    for (target, command), (code, stdout, stderr) in zip(planned.items(), results):
        said = one_line(stderr)
        assert code == 2, (command, stdout, stderr)
        assert f"cannot write {target}: File too large (the file already there is unchanged)" in said, said
        assert "Traceback" not in said
        assert target.read_text() == OLD, command
    assert sorted(p.name for p in out.iterdir()) == sorted(t.name for t in planned), "no temporary file left behind"


KILLED_AT_RENAME = """
import os, sys, threading
from pathlib import Path
real = os.replace
def replace(src, dst, *args, **kwargs):
    if Path(src).name.endswith(".partial.jsonl"):  # the export is whole beside its target: stop for the kill
        said = Path(sys.argv[1] + ".tmp")
        said.write_text(Path(src).name)
        real(said, sys.argv[1])
        threading.Event().wait()
    return real(src, dst, *args, **kwargs)
os.replace = replace
from arena.cli.commands import main
sys.exit(main(sys.argv[2:]))
"""


def test_partial_exports_left_by_a_kill_are_removed_by_the_next_export_and_one_being_written_is_not(
        reviewed_run, tmp_path, capsys):
    import fcntl
    import os
    import signal
    import subprocess
    import sys
    import time

    run_dir, _ = reviewed_run
    target = tmp_path / "matches.jsonl"
    left = []
    for n in range(2):  # two exports killed with their file whole and not yet renamed
        ready = tmp_path / f"ready{n}"
        child = subprocess.Popen([sys.executable, "-c", KILLED_AT_RENAME, str(ready), "export", str(run_dir), "-o",
                                  str(target)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            while not ready.exists() and child.poll() is None:  # the child says when it has reached the rename
                time.sleep(0.01)
            assert child.poll() is None, child.stderr.read().decode()
            child.send_signal(signal.SIGKILL)
        finally:
            child.wait(timeout=60)
        left.append(tmp_path / ready.read_text())
        assert left[-1].stat().st_size > LIMIT
    assert not target.exists()
    # a write of the same target in progress in another process: it holds its file's lock, as `replacing` does
    live = tmp_path / ".matches.0123abcd.partial.jsonl"
    held = os.open(live, os.O_WRONLY | os.O_CREAT)
    other = tmp_path / ".matches.report.0123abcd.partial.jsonl"  # not this target's: left alone
    other.write_text("x")
    try:
        fcntl.flock(held, fcntl.LOCK_EX)
        code, _, err = cli(capsys, "export", run_dir, "-o", target)
        assert code == 0, err
    finally:
        os.close(held)
    assert sorted(p.name for p in tmp_path.glob(".matches.*")) == sorted([live.name, other.name])
    code, out, _ = cli(capsys, "export", run_dir)
    assert target.read_text() == out and out
    # the one being written is fair game once its writer is gone
    code, _, _ = cli(capsys, "export", run_dir, "-o", target)
    assert code == 0 and not live.exists() and other.exists()
