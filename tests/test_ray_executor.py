"""A run played by Ray actors (``execution: {executor: ray}``, ``arena run --executor ray``) is the
run one process plays: the same export byte for byte, the run's process the one writer of its store
(a worker killed or gone silent mid-run: tests/test_ray_global.py). A cluster that cannot be reached
is said in a sentence before anything is played.

One local Ray instance (127.0.0.1, no dashboard, 2 CPUs) serves the module; the user's path, where
`arena run` starts an instance of its own and stops it, runs once as a command. Nothing here leaves
127.0.0.1."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest
import yaml

from arena.cli import main
from arena.contract.errors import ConfigError
from arena.run.executor import ExecutorError
from arena.run.runner import run_tournament
from arena.run.scenario import Execution, parse_scenario
from arena.run.tournament import count

from conformance_kit import local_only, local_ray  # noqa: F401  (an autouse fixture: no real key, no proxy)
from helpers import ROOT, ContendedLimit, arena_offline, open_store
from mock_llm import OpenAIMock

try:
    import ray
except ImportError:  # the test extras install it, so CI runs these
    ray = None

needs_ray = pytest.mark.skipif(ray is None, reason="Ray is not installed (pip install 'arena-eval[ray]')")


@pytest.fixture(scope="module")
def cluster():
    """One local Ray instance for the module."""
    with local_ray() as instance:
        yield instance


def write(path: Path, raw: dict) -> Path:
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


def public_goods(rounds: int = 5) -> dict:
    """The quickstart, one repeat: 30 matches of four scripted players."""
    raw = yaml.safe_load((ROOT / "scenarios" / "quickstart.yaml").read_text(encoding="utf-8"))
    raw["tournament"]["repeats"] = 1
    for entry in raw["games"]:
        entry["params"]["rounds"] = rounds
    return raw


def pairwise_review() -> dict:
    """Five synthetic peers answer and judge eight questions: every comparison a synthetic judge's."""
    raw = yaml.safe_load((ROOT / "scenarios" / "pairwise-review-synthetic.yaml").read_text(encoding="utf-8"))
    params = raw["games"][0]["params"]
    params["questions"] = str(ROOT / "scenarios" / params["questions"])
    return raw


def cli(*args) -> int:
    return main([str(a) for a in args])


def exported(run_dir: Path, capsys) -> tuple[str, str]:
    out = []
    for form in ("jsonl", "csv"):
        capsys.readouterr()
        assert main(["export", str(run_dir), "--format", form]) == 0
        out.append(capsys.readouterr().out)
    return out[0], out[1]


def played_here_never(monkeypatch) -> None:
    """The run's own process plays no match: only the actors may."""
    def refuse(*args, **kwargs):
        raise AssertionError("a match was played in the run's own process")
    monkeypatch.setattr("arena.run.executor.play_spec", refuse)


def no_workers_left() -> bool:
    return not [name for name in ray.util.list_named_actors() if name.startswith("arena-worker")]


# -- the same results, wherever the matches are played --------------------------------------------


@needs_ray
@pytest.mark.parametrize("scenario, matches", [(public_goods, 30), (pairwise_review, 8)],
                         ids=["public-goods", "pairwise-review"])
def test_ray_workers_store_what_the_run_s_own_process_stores(tmp_path, capsys, monkeypatch, cluster, scenario, matches):
    raw = scenario()
    path = write(tmp_path / "s.yaml", raw)
    assert cli("run", path, "--quiet", "--run-dir", tmp_path / "local") == 0
    local = exported(tmp_path / "local", capsys)
    played_here_never(monkeypatch)
    assert cli("run", path, "--quiet", "--executor", "ray", "--workers", 2, "--run-dir", tmp_path / "ray") == 0
    assert exported(tmp_path / "ray", capsys) == local  # JSON lines and CSV, byte for byte
    lines = local[0].splitlines()
    assert len(lines) == count(parse_scenario(raw)) == matches and {json.loads(x)["status"] for x in lines} == {"finished"}
    assert no_workers_left()  # the run's actors are gone with it; the cluster stays


@needs_ray
def test_a_run_without_an_address_starts_a_local_ray_instance_and_stops_it(tmp_path, capsys):
    """The user's path: `arena run --executor ray` with no cluster around, as a command."""
    raw = public_goods(rounds=2)
    raw["games"] = raw["games"][:1]
    path = write(tmp_path / "s.yaml", raw)
    done = arena_offline("run", path, "--quiet", "--executor", "ray", "--run-dir", tmp_path / "ray", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout.splitlines()[-1] == f"15 of 15 matches finished. Run directory: {tmp_path / 'ray'}"
    assert cli("run", path, "--quiet", "--run-dir", tmp_path / "local") == 0
    assert exported(tmp_path / "ray", capsys) == exported(tmp_path / "local", capsys)


# -- what a model is sent, and the limits ---------------------------------------------------------


def model_scenario(url: str) -> dict:
    model = {"backend": "openai", "base_url": url, "model": "mock-model", "seed": 1, "temperature": 0,
             "backoff": 0.01, "timeout": 20}
    return {"name": "models", "seed": 5, "agents": {"alice": model, "bob": dict(model)},
            "games": [{"game": "public_goods", "params": {"rounds": 1}}],
            "tournament": {"format": "fixed", "repeats": 2},  # two matches: one per worker
            "concurrency": {"matches": 2}, "limits": {"openai": {"calls": 1}}}


@needs_ray
async def test_ray_workers_send_a_model_what_one_process_sends_and_hold_the_run_s_limits(tmp_path, monkeypatch, cluster):
    """``calls: 1`` is one request in flight for the whole run, not one per actor. Each of the two actors
    plays a match whose two seats ask at once: the server holds the first request until the run's process
    has a request of the other actor waiting for its place (the limit held), or a second request reaches
    the server (the limit broken), whichever comes first."""
    limit = ContendedLimit(monkeypatch, "actor")
    seen = {}
    for ray_run in (False, True):
        limit.holding = ray_run  # one process plays both matches: no other actor to wait for
        with OpenAIMock(responder=limit.answer) as mock:
            raw = model_scenario(mock.base_url)
            execution = Execution(executor="ray", workers=2) if ray_run else None
            store = open_store(tmp_path / str(ray_run), raw)
            try:
                result = await run_tournament(parse_scenario(raw), store, use_cache=False, execution=execution)
                calls = list(store.read.calls())
            finally:
                store.close()
            seen[ray_run] = sorted(json.dumps(body, sort_keys=True) for body in mock.bodies())
        assert result.count("finished") == 2 and len(calls) == 4
    assert len(seen[True]) == 4 and seen[True] == seen[False]  # the same requests, byte for byte
    assert limit.peak == 1, f"{limit.peak} requests were in flight at once under calls: 1"


# -- what cannot be ------------------------------------------------------------------------------


@needs_ray
def test_a_cluster_that_cannot_be_reached_is_said_before_anything_is_played(tmp_path):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    path = write(tmp_path / "s.yaml", public_goods())
    done = arena_offline("run", path, "--quiet", "--executor", "ray", "--address", f"127.0.0.1:{port}",
                         "--run-dir", tmp_path / "run", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"error: the Ray cluster at 127.0.0.1:{port} cannot be reached" in done.stderr
    assert "nothing was played" in done.stderr
    shown = arena_offline("export", tmp_path / "run", cwd=tmp_path)
    assert shown.returncode == 0 and shown.stdout == ""


def test_without_ray_the_ray_executor_is_a_sentence(monkeypatch):
    from arena.run.ray_workers import connected

    monkeypatch.setitem(sys.modules, "ray", None)  # as if it were not installed
    with pytest.raises(ExecutorError, match=r"executor: ray needs Ray, which is not installed here: "
                                            r"pip install 'arena-eval\[ray\]'"):
        with connected(None):
            pass


@needs_ray
@pytest.mark.parametrize("address, said", [
    ("ray://10.0.0.1:10001", "is a Ray client address, and a client is not a node"),
    ("headnode", "is not a Ray cluster's address: give auto or HOST:PORT of its head"),
])
def test_an_address_that_is_no_cluster_s_is_said(monkeypatch, address, said):
    from arena.run.ray_workers import connected

    def refuse(*args, **kwargs):
        raise AssertionError("Ray was asked to connect")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # as in a new process: the module's instance is not used
    monkeypatch.setattr(ray, "init", refuse)
    with pytest.raises(ExecutorError, match=said):
        with connected(address):
            pass


def base() -> dict:
    return {"name": "x", "agents": {"a": {"backend": "scripted", "strategy": "free_rider"},
                                    "b": {"backend": "scripted", "strategy": "free_rider"}},
            "games": [{"game": "public_goods"}]}


def test_the_execution_block_and_its_older_spelling():
    assert parse_scenario(base()).execution_settings() == Execution()  # the run's own process
    assert parse_scenario(base() | {"concurrency": {"processes": 3}}).execution_settings() == \
        Execution(executor="processes", workers=3)  # concurrency.processes still means what it meant
    same = {"concurrency": {"processes": 3}, "execution": {"executor": "processes", "workers": 3}}
    assert parse_scenario(base() | same).execution_settings() == Execution(executor="processes", workers=3)
    ray_ = {"execution": {"executor": "ray", "address": "auto", "workers": 4}}
    assert parse_scenario(base() | ray_).execution_settings(processes=2) == Execution(executor="processes", workers=2)
    for wrong, said in [
        ({"execution": {"executor": "ray"}, "concurrency": {"processes": 2}}, "concurrency.processes: 2 is the older "
         "spelling of execution: {executor: processes, workers: 2}, and this scenario's execution block says otherwise"),
        ({"execution": {"executor": "local", "workers": 2}}, "executor: local plays every match in the run's own process"),
        ({"execution": {"executor": "processes", "address": "auto"}}, "address is where a Ray cluster is, for executor: ray"),
        ({"execution": {"executor": "spark"}}, "expected 'local', 'processes' or 'ray'"),
        ({"execution": {"workers": 0}}, "execution.workers"),
        ({"execution": {"exeutor": "ray"}}, "did you mean 'executor'"),
    ]:
        with pytest.raises(ConfigError) as caught:
            parse_scenario(base() | wrong)
        assert said in str(caught.value)


def test_the_command_line_s_executor_options_are_checked_like_the_scenario(tmp_path, capsys):
    path = write(tmp_path / "s.yaml", base())
    for args, said in [
        (["--executor", "local", "--workers", "2"], "error: the command line: execution: executor: local plays every "
         "match in the run's own process"),
        (["--address", "auto"], "address is where a Ray cluster is, for executor: ray, not local"),
        (["--executor", "ray", "--processes", "2"], "--processes N is the older spelling of --executor processes "
         "--workers N: give one of them"),
    ]:
        assert cli("run", path, "--quiet", "--run-dir", tmp_path / "run", *args) == 2
        err = capsys.readouterr().err
        assert said in " ".join(err.split()) and "Traceback" not in err


OLDER_FIELD = ("note: concurrency.processes: 2 is the older spelling of execution: {executor: processes, workers: 2}; "
               "it still works")
OLDER_FLAG = "note: --processes 2 is the older spelling of --executor processes --workers 2; it still works"


def test_the_older_spellings_of_worker_processes_still_work_and_each_says_the_new_one_once(tmp_path, capsys):
    """concurrency.processes and --processes play what execution's spelling plays, and each says once,
    on stderr, what to write instead; the new spelling says nothing. Played as a user plays it (a
    process of its own: this module's Ray instance stays out of the forked workers)."""
    raw = base() | {"seed": 3, "games": [{"game": "public_goods", "params": {"rounds": 2}}],
                    "tournament": {"format": "fixed", "repeats": 4}}
    new = write(tmp_path / "new.yaml", raw | {"execution": {"executor": "processes", "workers": 2}})
    old = write(tmp_path / "old.yaml", raw | {"concurrency": {"processes": 2}})
    plain = write(tmp_path / "plain.yaml", raw)
    ways = {"new": (new, []), "new flags": (plain, ["--executor", "processes", "--workers", "2"]),
            "old field": (old, []), "old flag": (plain, ["--processes", "2"]), "both old": (old, ["--processes", "2"])}
    said = {}
    for way, (path, flags) in ways.items():
        done = arena_offline("run", path, "--quiet", "--run-dir", tmp_path / way, *flags, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        said[way] = [line for line in done.stderr.splitlines() if "older spelling" in line]
    assert said == {"new": [], "new flags": [], "old field": [OLDER_FIELD], "old flag": [OLDER_FLAG],
                    "both old": [OLDER_FIELD, OLDER_FLAG]}
    played = exported(tmp_path / "new", capsys)
    assert played[0].count("\n") == 4  # four matches
    for way in ways:
        assert exported(tmp_path / way, capsys) == played, way
    for path, notes in ((old, [OLDER_FIELD]), (new, []), (plain, [])):
        done = arena_offline("validate", path, cwd=tmp_path)
        assert done.returncode == 0 and "ok" in done.stdout, done.stderr
        assert [line for line in done.stderr.splitlines() if line.strip()] == notes
    assert parse_scenario(base() | {"concurrency": {"processes": 1}}).older_spellings() == [
        "concurrency.processes: 1 is the older spelling of execution: {executor: local} (the default); it still works"]
    assert parse_scenario(base() | {"concurrency": {"matches": 3}}).older_spellings() == []
