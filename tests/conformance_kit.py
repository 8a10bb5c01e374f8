"""Playing a scenario with model agents against the local mock servers, and reading back what
each request carried: which seat asked, at which turn, and whether it held that seat's whole
conversation (the rules, every prompt, its own replies and what it heard, in order) and nothing
it was not meant to see.

A request is matched to its seat by the rules at its start (every seat's rules are its own) and
to its turn by order: a seat's turns are taken one after another, one request each when every
reply is valid. Requests without any seat's rules are an outside judge's (the desk's).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from arena.contract.events import ActionTaken, TurnFailed
from arena.contract.messages import REFEREE, SIMULTANEOUS, Message
from arena.contract.records import MatchRecord
from arena.run.runner import run_tournament
from arena.run.scenario import parse_scenario
from arena.store import RunStore

from mock_llm import AnthropicMock, MockServer, OpenAIMock, Recorded, body_text

BACKENDS = ("openai", "anthropic")
LOCAL = "127.0.0.1,localhost"
_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
_PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


@pytest.fixture(autouse=True)
def local_only(monkeypatch):
    """No real key reaches a mock, and no proxy stands between the client and 127.0.0.1."""
    for variable in _KEYS + _PROXIES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("NO_PROXY", LOCAL)
    monkeypatch.setenv("no_proxy", LOCAL)


@contextmanager
def local_ray(**environment: str) -> Iterator[Any]:
    """A local Ray instance (127.0.0.1, 2 CPUs, no dashboard, no usage statistics), stopped on leaving.
    Its workers inherit the environment it starts with: no real key, no proxy before 127.0.0.1, and
    ``environment``'s variables. Starting one takes seconds: a module shares one."""
    import ray  # an optional extra: only the Ray tests, which skip without it, come here

    with pytest.MonkeyPatch.context() as env:
        for variable in _KEYS + _PROXIES:
            env.delenv(variable, raising=False)
        for variable, value in {"NO_PROXY": LOCAL, "no_proxy": LOCAL, "RAY_USAGE_STATS_ENABLED": "0",
                                **environment}.items():
            env.setenv(variable, value)
        ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False,
                 logging_level=logging.WARNING)
        try:
            yield ray
        finally:
            ray.shutdown()


@contextmanager
def mock_server(backend: str, responder: Callable[[Any], str | dict]) -> Iterator[MockServer]:
    server = OpenAIMock(responder=responder) if backend == "openai" else AnthropicMock(responder=responder)
    with server:
        yield server


def model_agent(backend: str, mock: MockServer, model: str = "mock-model", **extra) -> dict:
    """A model agent on the mock, patient enough for a loaded machine and never retrying a fault
    (there are none): what it is sent is all that is under test."""
    return {"backend": backend, "base_url": mock.base_url, "model": model, "timeout": 120, "retries": 2,
            "backoff": 0.01, **extra}


def scenario(name: str, agents: dict, game: str, params: dict, **top) -> dict:
    entry = {"game": game, "params": params}
    if "referee" in top:
        entry["referee"] = top.pop("referee")
    return {"name": name, "seed": 11, "agents": agents, "games": [entry],
            "match": {"turn_timeout": 600, "max_retries": 0}, **top}


async def play(tmp_path: Path, raw: dict) -> list[MatchRecord]:
    """Run the scenario into a run store and read the matches back from it."""
    parsed = parse_scenario(raw)
    store = RunStore.create_or_resume(tmp_path / "run", parsed.name, yaml.safe_dump(raw), parsed.fingerprint())
    try:
        await run_tournament(parsed, store)
        records = list(store.read.records(status=None))
    finally:
        store.close()
    for record in records:
        assert record.status == "finished", record.error
        failed = [e for e in record.events if isinstance(e, TurnFailed)]
        assert not failed, f"the responder gave replies the game refused: {failed}"
    return records


# -- what a request carried ------------------------------------------------------------------
def seen(message: Message, seat: str) -> str:
    """The message's text as ``seat`` got it: its own words as written, anyone else's as shown."""
    return message.content if message.sender == seat else (message.shown or message.content)


def said(sender: str, text: str) -> str:
    """Another seat's words as a model reads them: its seat label on a line of its own, then the words."""
    return f"{sender} said:\n{text}"


def content(message: dict) -> str:
    """A request message's text; Anthropic's content may be a list of blocks."""
    found = message.get("content")
    return "\n\n".join(b.get("text", "") for b in found) if isinstance(found, list) else (found or "")


def current_prompt(body: dict) -> str:
    """The last user message of a request body: the referee's question at this turn, with, on an API
    that joins neighbouring user turns (Anthropic), what the seat heard since its last reply before it."""
    return content([m for m in body["messages"] if m["role"] == "user"][-1])


def assert_no_speaker_tag(request: Recorded) -> None:
    """No user message of the request starts with a speaker tag a model could copy: the referee's
    voice is the user role itself, and another seat's words begin with its label and 'said:'."""
    for message in request.messages:
        if message["role"] == "user":
            text = content(message)
            assert not text.startswith(f"[{REFEREE}]"), text[:80]
            assert not re.match(r"\[[^\]\n]{1,40}\] ", text), text[:80]


@dataclass
class SeatTurn:
    seat: str
    round: int
    prompt: Message
    request: Recorded

    @property
    def text(self) -> str:
        return self.request.text

    @property
    def asked(self) -> str:
        """The prompt of this turn, as the request carries it: the whole of its last message, or, on an
        API that joins neighbouring user turns, the part after the last paragraph break before it."""
        prompt = seen(self.prompt, self.seat)
        last = self.request.messages[-1]
        text = content(last)
        assert last["role"] == "user" and (text == prompt or text.endswith("\n\n" + prompt)), \
            f"{self.seat}, round {self.round}: the request does not end with its prompt"
        return prompt


def seat_turns(record: MatchRecord, requests: list[Recorded]) -> tuple[list[SeatTurn], list[Recorded]]:
    """Each seat's turns with the request that took it, in round order; and the requests that
    belong to no seat (an outside judge's)."""
    rules = {m.recipients[0]: seen(m, m.recipients[0]) for m in record.messages if m.kind == "rules"}
    by_seat: dict[str, list[Recorded]] = {seat: [] for seat in rules}
    outside = []
    for request in requests:
        assert_no_speaker_tag(request)
        first = next((content(m) for m in request.messages if m["role"] == "user"), "")  # the rules come first
        owners = [seat for seat, text in rules.items() if first == text or first.startswith(text + "\n\n")]
        assert len(owners) <= 1, f"a request carries the rules of {owners}"
        (by_seat[owners[0]] if owners else outside).append(request)
    turns = []
    for seat, asked in by_seat.items():
        prompts = [m for m in record.messages if m.kind == "prompt" and m.recipients == (seat,)]
        assert len(asked) == len(prompts), f"{seat}: {len(prompts)} turns but {len(asked)} requests"
        for prompt, request in zip(prompts, asked):
            turn = SeatTurn(seat, prompt.round, prompt, request)
            assert turn.asked  # the request ends with this turn's prompt, as the referee wrote it, untagged
            turns.append(turn)
    return sorted(turns, key=lambda t: (t.round, t.seat)), outside


def as_lived(messages: list[Message], seat: str) -> list[str]:
    """What ``seat`` read of these messages (posting order), in the order it lived them: in a round it
    was asked in, its own reply before the other seats' replies of that round, which were written at
    the same time and are introduced by the referee's line saying so. The referee's words are as it
    wrote them; another seat's follow its label (``said``)."""
    asked = {m.round for m in messages if m.kind == "prompt" and m.recipients == (seat,)}
    order: list[Message] = []
    for m in messages:
        same_round = [i for i, o in enumerate(order) if o.round == m.round and o.kind == "reply" and o.sender != seat]
        order.insert(same_round[0], m) if m.sender == seat and same_round else order.append(m)
    parts, introduced = [], set()
    for m in order:
        if m.kind == "reply" and m.sender != seat and m.round in asked and m.round not in introduced:
            parts.append(SIMULTANEOUS)
            introduced.add(m.round)
        parts.append(seen(m, seat) if m.sender in (seat, REFEREE) else said(m.sender, seen(m, seat)))
    return parts


def assert_in_order(text: str, parts: list[str], where: str) -> None:
    at = 0
    for part in parts:
        found = text.find(part, at)
        assert found >= 0, f"{where}: missing, or out of order: {part[:120]!r}"
        at = found + len(part)


def assert_conversation(record: MatchRecord, turn: SeatTurn, history: Callable[[Message], bool] = lambda m: True) -> None:
    """The request holds the seat's conversation up to this turn, in order, and nothing of what
    the seat could not see. ``history`` narrows it for games whose turns stand alone."""
    seat, prompt = turn.seat, turn.prompt
    visible = [m for m in record.messages
               if m.index < prompt.index and m.round < prompt.round and m.visible_to(seat) and history(m)]
    lived = as_lived(visible, seat)
    assert_in_order(turn.text, lived + [seen(prompt, seat)], f"{seat}, round {turn.round}")
    assert turn.text.count(SIMULTANEOUS) == lived.count(SIMULTANEOUS), f"{seat}, round {turn.round}"
    shown = {seen(m, seat) for m in visible} | {seen(prompt, seat)}
    hidden = [m for m in record.messages
              if m not in visible and m is not prompt and m.kind != "verdict" and seen(m, seat) not in shown]
    for m in hidden:
        if not any(seen(m, seat) in s for s in shown):  # the same words may be quoted in what it was shown
            assert seen(m, seat) not in turn.text, f"{seat}, round {turn.round} was sent {m.sender}'s {m.kind} of round {m.round}"


def actions(record: MatchRecord) -> list[ActionTaken]:
    return [e for e in record.events if isinstance(e, ActionTaken)]


def replies(record: MatchRecord, seat: str | None = None, before: int | None = None) -> list[Message]:
    return [m for m in record.messages if m.kind == "reply" and (seat is None or m.sender == seat)
            and (before is None or m.round < before)]


def between(text: str, start: str, end: str) -> str | None:
    """The first stretch of ``text`` between two markers, or None."""
    found = re.search(re.escape(start) + r"(.*?)" + re.escape(end), text, re.S)
    return found.group(1) if found else None
