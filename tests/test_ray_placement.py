"""Where a run's work lands on a Ray cluster: an embedded model is loaded once per worker (an
actor), not once per match; agents and referees ask for the CPUs, GPUs and memory their worker
needs, and a request the cluster cannot meet is a sentence before anything is played (Ray itself
would wait for ever); code review's sandbox runs on the workers, and the run is the one the run's
own process plays, byte for byte.

One local Ray instance for the module (127.0.0.1, no dashboard, 2 CPUs, no GPU). Its workers find
a stand-in for llama-cpp-python first on their path (tests/fake_llama_cpp), which counts the
models it loads in a file, so the llamacpp backend itself is what is counted."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest
import yaml

from arena.contract.errors import ConfigError
from arena.run.placement import Need, Resources, workers_that_fit
from arena.run.runner import Observer, run_tournament
from arena.run.scenario import Execution, parse_scenario
from arena.run.tournament import count
from arena.store import RunStore

from conformance_kit import local_only, local_ray  # noqa: F401  (an autouse fixture: no real key, no proxy)
from helpers import ROOT
from test_ray_executor import cli, exported, needs_ray, ray, write
FAKE_LLAMA = Path(__file__).parent / "fake_llama_cpp"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A local Ray instance whose workers import the stand-in llama_cpp and write its loads to a file
    (they inherit the environment the instance starts with)."""
    loads = tmp_path_factory.mktemp("loads") / "loads.txt"
    with local_ray(PYTHONPATH=os.pathsep.join(filter(None, [str(FAKE_LLAMA), os.environ.get("PYTHONPATH")])),
                   FAKE_LLAMA_LOADS=str(loads)):
        yield loads


def scripted(**more) -> dict:
    """Two scripted players of one-round public goods, eight times."""
    return {"name": "placed", "seed": 2,
            "agents": {"a": {"backend": "scripted", "strategy": "free_rider"} | more,
                       "b": {"backend": "scripted", "strategy": "tit_for_tat"} | more},
            "games": [{"game": "public_goods", "params": {"rounds": 1}}],
            "tournament": {"format": "fixed", "repeats": 8}}


class CountsWorkers(Observer):
    """The run's actors, as they are once every one is ready (before the first match)."""

    def __init__(self):
        self.earlier = set(ray.util.list_named_actors())  # another run's, if the cluster has not forgotten them yet
        self.actors: list[str] | None = None

    def planned(self, total: int) -> None:
        if self.actors is None:
            self.actors = sorted(n for n in set(ray.util.list_named_actors()) - self.earlier
                                 if n.startswith("arena-worker"))


async def run(raw: dict, where: Path, observer: Observer | None = None, workers: int | None = None, use_cache=True):
    scenario = parse_scenario(raw)
    store = RunStore.create_or_resume(where, scenario.name, yaml.safe_dump(raw), scenario.fingerprint())
    try:
        execution = Execution(executor="ray", workers=workers, resources=scenario.execution.resources)
        return await run_tournament(scenario, store, observer or Observer(), execution=execution, use_cache=use_cache)
    finally:
        store.close()


# -- an embedded model: once per worker ---------------------------------------------------------


@needs_ray
async def test_an_embedded_model_is_loaded_once_per_worker_not_once_per_match(tmp_path, cluster):
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")  # the stand-in reads nothing; the backend only checks the file is there
    llama = {"backend": "llamacpp", "model": str(model), "chat_format": "chatml", "temperature": 0, "seed": 1}
    raw = {"name": "embedded", "seed": 4, "agents": {"alice": llama, "bob": dict(llama)},
           "games": [{"game": "public_goods", "params": {"rounds": 2}}],
           "tournament": {"format": "fixed", "repeats": 24}}
    cluster.write_text("")
    counter = CountsWorkers()
    result = await run(raw, tmp_path / "run", counter, workers=2, use_cache=False)  # every reply asked of a model
    assert result.count("finished") == 24
    assert len(counter.actors) == 2
    loads = Counter(tuple(line.split()) for line in cluster.read_text().splitlines())
    played = [(pid, what) for pid, what in loads if what == "4096"]  # 256: the check a child makes first, once
    # two workers, two loads of the one model both agents use, for 24 matches of 4 replies each
    assert len(played) == 2 and all(loads[load] == 1 for load in played)
    assert str(os.getpid()) not in {pid for pid, _ in played}  # never in the run's own process
    assert sum(what == "256" for _, what in loads) == 2  # the library's crash check: once per worker as well
    chats = Counter(pid for pid, what in loads.elements() if what == "chat")
    assert sum(chats.values()) == 24 * 2 * 2  # every reply of every match came from a loaded model
    assert set(chats) == {pid for pid, _ in played}  # both workers' models played


# -- resources: what a worker asks for, and a cluster that cannot give it ---------------------------


def test_agents_and_referees_ask_for_resources_which_a_worker_adds_up():
    raw = scripted(resources={"cpus": 0.5, "memory": "1GB"})
    raw["agents"]["b"]["resources"] = {"cpus": 1, "gpus": 1, "memory": "512MB"}
    raw["games"] = [{"game": "public_goods", "params": {"rounds": 1},
                     "referee": [{"use": "rules", "resources": {"cpus": 1}}]}]
    scenario = parse_scenario(raw)
    need = scenario.worker_need()
    assert (need.cpus, need.gpus, need.memory) == (2.5, 1, 1_512_000_000)
    assert need.actor_options() == {"num_cpus": 2.5, "num_gpus": 1, "memory": 1_512_000_000}
    assert need.asked_by == "the resources of agent a, agent b, the rules referee of public_goods, added up"
    assert scenario.agent_config("b")[1].model_dump() == parse_scenario(scripted()).agent_config("b")[1].model_dump()
    assert scenario.games[0].referee[0].params == {}  # the referee is not given them as a parameter
    # where the run is played does not change what it plays: a run resumes with other resources
    assert scenario.fingerprint() == parse_scenario(scripted() | {"games": [
        {"game": "public_goods", "params": {"rounds": 1}, "referee": ["rules"]}]}).fingerprint()
    whole = parse_scenario(raw | {"execution": {"executor": "ray", "resources": {"cpus": 2}}}).worker_need()
    assert (whole.cpus, whole.gpus, whole.memory, whole.asked_by) == (2, 0, None, "execution.resources")
    assert parse_scenario(scripted()).worker_need() == Need()  # nothing asked: one CPU a worker, as before
    beside_params = scripted() | {"games": [{"game": "public_goods", "params": {"rounds": 1},
                                             "referee": [{"use": "rules", "params": {}, "resources": {"gpus": 0.5}}]}]}
    assert parse_scenario(beside_params).worker_need().gpus == 0.5


@pytest.mark.parametrize("change, said", [
    (lambda raw: raw["agents"]["a"].update(resources={"gpus": -1}), "agents.a.resources.gpus: "),
    (lambda raw: raw["agents"]["a"].update(resources={"memory": "lots"}), "agents.a.resources.memory: "),
    (lambda raw: raw["agents"]["a"].update(resources={"cpu": 2}), "did you mean 'cpus'"),
    (lambda raw: raw["agents"]["a"].update(resources={"gpus": True}), "agents.a.resources.gpus: "),
    (lambda raw: raw["games"][0].update(referee=[{"use": "rules", "resources": {"disks": 1}}]),
     "games[0].referee[0].resources.disks"),
    (lambda raw: raw.update(execution={"executor": "processes", "resources": {"cpus": 2}}),
     "resources are what each Ray worker asks the cluster for, for executor: ray, not processes"),
])
def test_a_resources_block_that_is_wrong_is_a_sentence(change, said):
    raw = scripted()
    change(raw)
    with pytest.raises(ConfigError) as caught:
        parse_scenario(raw)
    assert said in str(caught.value)


def test_workers_go_where_a_node_has_all_they_ask_for():
    nodes = [{"Alive": True, "Resources": {"CPU": 8.0, "memory": 32e9}},
             {"Alive": True, "Resources": {"CPU": 4.0, "GPU": 1.0, "memory": 16e9}},
             {"Alive": False, "Resources": {"CPU": 64.0, "GPU": 8.0}}]  # a lost node has no room
    assert workers_that_fit(nodes, Need(), None) == 12  # one CPU each
    assert workers_that_fit(nodes, Need(cpus=3), None) == 3  # 2 + 1: a worker is not split over nodes
    assert workers_that_fit(nodes, Need(gpus=0.5), None) == 2  # two share the one GPU
    assert workers_that_fit(nodes, Need(memory=10**10), 4) == 4
    with pytest.raises(ValueError, match=r"^each Ray worker asks for 1 CPU, 2 GPUs \(x\), and no node of the cluster "
                                         r"can give that: the most GPUs a node has is 1\. Ask for less"):
        workers_that_fit(nodes, Need(gpus=2, asked_by="x"), None)
    with pytest.raises(ValueError, match=r"^5 Ray workers were asked for, and the cluster has room for 3"):
        workers_that_fit(nodes, Need(cpus=3), 5)


@needs_ray
def test_a_gpu_the_cluster_lacks_is_refused_in_a_sentence_before_anything_is_played(tmp_path, capsys, cluster):
    path = write(tmp_path / "s.yaml", scripted(resources={"gpus": 1}))
    assert cli("run", path, "--quiet", "--executor", "ray", "--run-dir", tmp_path / "run") == 2
    err = " ".join(capsys.readouterr().err.split())
    assert ("error: each Ray worker asks for 1 CPU, 2 GPUs (the resources of agent a, agent b, added up), and no node of the "
            "cluster can give that: no node has a GPU. Ask for less, or add a node that has it; nothing was played") in err
    assert "Traceback" not in err
    assert exported(tmp_path / "run", capsys)[0] == ""  # no match
    assert not [n for n in ray.util.list_named_actors() if n.startswith("arena-worker")]  # none was asked for


@needs_ray
def test_memory_no_node_has_is_refused_with_what_the_largest_node_has(tmp_path, capsys, cluster):
    raw = scripted() | {"execution": {"executor": "ray", "resources": {"memory": "100TB"}}}
    assert cli("run", write(tmp_path / "s.yaml", raw), "--quiet", "--run-dir", tmp_path / "run") == 2
    err = " ".join(capsys.readouterr().err.split())
    largest = max(node["Resources"]["memory"] for node in ray.nodes() if node["Alive"])
    assert (f"error: each Ray worker asks for 1 CPU, 100000 GB of memory (execution.resources), and no node of the "
            f"cluster can give that: the most memory a node has is {round(largest / 1e9, 1):g} GB.") in err


@needs_ray
async def test_two_cpus_a_worker_on_two_cpus_places_one_worker(tmp_path, monkeypatch, cluster):
    asked = []
    remote = ray.remote

    def spy(*args, **options):  # what the run asks Ray for its actors
        asked.append(options)
        return remote(*args, **options)

    monkeypatch.setattr(ray, "remote", spy)
    raw = scripted(resources={"cpus": 1})  # two agents: two CPUs a worker
    counter = CountsWorkers()
    result = await run(raw, tmp_path / "run", counter)
    assert result.count("finished") == 8 and len(counter.actors) == 1
    assert [(o["num_cpus"], o["num_gpus"], "memory" in o) for o in asked] == [(2, 0, False)]
    with pytest.raises(Exception, match=r"2 Ray workers were asked for, and the cluster has room for 1 \(each asks "
                                        r"for 2 CPUs, the resources of agent a, agent b, added up\): ask for fewer"):
        await run(raw, tmp_path / "run2", workers=2)


# -- code review: the sandbox runs on the workers -----------------------------------------------


@needs_ray
def test_code_review_with_sandboxed_tests_under_ray_exports_what_the_run_s_own_process_does(tmp_path, capsys,
                                                                                              monkeypatch, cluster):
    raw = yaml.safe_load((ROOT / "scenarios" / "code-review.yaml").read_text(encoding="utf-8"))
    raw["games"][0]["params"]["limit"] = 3
    path = write(tmp_path / "s.yaml", raw)
    assert cli("run", path, "--quiet", "--run-dir", tmp_path / "local") == 0
    local = exported(tmp_path / "local", capsys)

    def refuse(*args, **kwargs):
        raise AssertionError("the run's own process played a match or ran a program")

    monkeypatch.setattr("arena.run.executor.play_spec", refuse)
    monkeypatch.setattr("arena.referees.execution.run_tests", refuse)
    assert cli("run", path, "--quiet", "--executor", "ray", "--workers", 2, "--run-dir", tmp_path / "ray") == 0
    assert exported(tmp_path / "ray", capsys) == local  # JSON lines and CSV, byte for byte
    records = [json.loads(line) for line in local[0].splitlines()]
    assert len(records) == count(parse_scenario(raw)) == 18 and {r["status"] for r in records} == {"finished"}
    passed = [r for r in records if 1.0 in r["payoffs"].values()]
    assert passed and len(passed) < len(records)  # the sandbox passed some programs and failed others


def test_resources_are_a_model_of_their_own():
    assert Resources.model_validate({"memory": "2GB"}).memory == 2_000_000_000
    assert Resources.model_validate({"memory": "2GiB"}).memory == 2 * 1024 ** 3
