"""The parts around every model backend that need no server: rate limits, role merging,
Retry-After, the response cache key, prices, the anonymity filter, and retries under the
turn's deadline."""

from __future__ import annotations

from contextlib import asynccontextmanager

import pytest
import trio

from arena.contract import BackendUnavailable, CachedReply, CallRecord, CallStarted, MatchSettings, Services, Turn, plugins
from arena.engine.anonymity import scrub
from arena.services.cache import ResponseCache, cache_key
from arena.services.ratelimit import CallLimits
from arena.run.runner import run_tournament
from arena.run.scenario import parse_scenario
from arena.agents.llm import Completion, LLMAgent, LLMConfig, TransientError, merge_consecutive, retry_after_seconds
from arena.agents.prices import PRICES, cost, price_of

from helpers import Roundtable, play


async def test_requests_per_minute_are_spread_over_minutes(autojump_clock):
    limits = CallLimits(rpm=2)
    times = []
    start = trio.current_time()
    for _ in range(5):
        async with limits.slot(10):
            times.append(trio.current_time() - start)
    assert times == pytest.approx([0, 0, 60, 60, 120])


async def test_tokens_per_minute_hold_with_actual_usage(autojump_clock):
    limits = CallLimits(tpm=1000)
    start = trio.current_time()
    async with limits.slot(800) as reservation:
        reservation.tokens = 300  # the call used less than estimated
    async with limits.slot(600):  # 300 + 600 fits
        pass
    assert trio.current_time() - start == pytest.approx(0)
    async with limits.slot(600):  # 900 + 600 does not: wait for the first minute to pass
        pass
    assert trio.current_time() - start == pytest.approx(60)


async def test_calls_in_flight_are_capped(autojump_clock):
    limits = CallLimits(calls=2)
    running = peak = 0

    async def call():
        nonlocal running, peak
        async with limits.slot(1):
            running += 1
            peak = max(peak, running)
            await trio.sleep(1)
            running -= 1

    async with trio.open_nursery() as nursery:
        for _ in range(6):
            nursery.start_soon(call)
    assert peak == 2


def test_consecutive_turns_of_one_role_are_merged_and_the_user_goes_first():
    chat = [
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "b"},
        {"role": "user", "content": "c"},
        {"role": "assistant", "content": "d"},
        {"role": "assistant", "content": "e"},
        {"role": "user", "content": "f"},
    ]
    merged = merge_consecutive(chat)
    assert [m["role"] for m in merged] == ["user", "assistant", "user", "assistant", "user"]
    assert merged[2]["content"] == "b\n\nc" and merged[3]["content"] == "d\n\ne"


def test_retry_after_in_seconds_milliseconds_and_dates():
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert retry_after_seconds({"retry-after-ms": "250"}) == 0.25
    assert 0 <= retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) < 1  # in the past: no wait
    assert retry_after_seconds({}) is None and retry_after_seconds(None) is None
    assert retry_after_seconds({"retry-after": "soon"}) is None


def test_the_cache_key_separates_samples_and_parameters(tmp_path):
    base = dict(backend="openai", model="m", endpoint="e", request={"messages": [{"role": "user", "content": "hi"}]})
    assert cache_key(**base, sample=1) == cache_key(**base, sample=1)
    assert cache_key(**base, sample=1) != cache_key(**base, sample=2)  # k samples are k entries
    assert cache_key(**base, sample=1) != cache_key(**{**base, "model": "n"}, sample=1)
    cache = ResponseCache(tmp_path / "c.sqlite")
    cache.put("k", CachedReply("reply", 10, 2, 0.0001, 1.5))
    cache.close()
    assert ResponseCache(tmp_path / "c.sqlite").get("k") == ("reply", 10, 2, 0.0001, 1.5)  # on disk, not in memory


def test_prices_match_model_families_and_unknown_models_cost_nothing_known():
    assert price_of("gpt-4o-mini-2024-07-18", PRICES) == PRICES["gpt-4o-mini"]  # not gpt-4o's
    assert cost("gpt-4o-mini", 1_000_000, 1_000_000, PRICES) == pytest.approx(0.75)
    assert cost("my-local-model", 100, 100, PRICES) is None
    assert cost("my-local-model", 1_000_000, 0, {"my-local-model": (2.0, 4.0)}) == 2.0


def test_scrub_takes_version_suffixes_and_ignores_case():
    text, found = scrub("As gpt-4o-mini (by OpenAI) I say: Claude-3 is wrong.", ("GPT", "OpenAI", "Claude"), "[x]")
    assert text == "As [x] (by [x]) I say: [x] is wrong."
    assert found == ["gpt-4o-mini", "OpenAI", "Claude-3"]
    assert scrub("nothing here", ("GPT",), "[x]") == ("nothing here", [])
    assert scrub("egptian", ("GPT",), "[x]")[0] == "egptian"  # not inside a word


@pytest.fixture
def roundtable():
    plugins.register("game", "roundtable", Roundtable)
    yield
    plugins.unregister("game", "roundtable")


async def test_the_anonymity_filter_hides_names_from_other_seats_only(roundtable):
    def says(text):
        return {"backend": "scripted", "strategy": "fixed", "params": {"replies": [text]}}

    scenario = parse_scenario({
        "name": "anon", "agents": {"boasty": says("I am Claude, made by Anthropic."), "plain": says("Hello all."),
                                   "shy": says("I am the agent called plain?")},
        "games": [{"game": "roundtable"}], "anonymity": {"terms": ["secret-project"]},
    })
    assert {"boasty", "plain", "shy", "Claude", "Anthropic", "secret-project"} <= set(scenario.scrub_terms())
    seen: dict[str, list] = {}

    from arena.run.runner import build_agents

    agents = build_agents(scenario)
    original = {name: agent.reply for name, agent in agents.items()}
    for name, agent in agents.items():
        async def spy(turn, name=name):
            seen.setdefault(name, []).append(turn)
            return await original[name](turn)

        agent.reply = spy
    from arena.engine.match import play_match
    from arena.run.tournament import plan

    (spec,) = plan(scenario)
    record = await play_match(spec, agents)
    assert record.status == "finished"
    boasty = next(s.label for s in record.seats if s.agent == "boasty")
    for name, turns in seen.items():
        last = turns[-1]
        for message in last.history:
            if message.sender == boasty and name != "boasty":
                assert message.content == "I am [name withheld], made by [name withheld]."
            if message.sender == boasty and name == "boasty":
                assert message.content == "I am Claude, made by Anthropic."  # its own words stay its own
            assert "plain" not in message.content or message.sender == last.seat
    # the record (what the watcher sees) keeps the original, and says what was scrubbed
    assert any(m.content == "I am Claude, made by Anthropic." for m in record.messages)
    scrubbed = [e for e in record.events if e.type == "scrubbed"]
    assert scrubbed and {tuple(e.found) for e in scrubbed if e.seat == boasty} == {("Claude", "Anthropic")}


async def test_without_the_filter_nothing_is_scrubbed(roundtable):
    scenario = parse_scenario({
        "name": "open", "games": [{"game": "roundtable"}], "anonymity": "off",  # the opt-out: the filter is on by default
        "agents": {n: {"backend": "scripted", "strategy": "fixed", "params": {"replies": ["I am Claude."]}} for n in "ab"},
    })
    assert scenario.scrub_terms() == ()
    result, records = await play(scenario)
    assert not [e for e in records[0].events if e.type == "scrubbed"]


def test_prices_can_come_from_a_file_beside_the_scenario(tmp_path):
    from arena.contract.errors import ConfigError
    from arena.run.scenario import load_scenario

    (tmp_path / "prices.yaml").write_text("house-model: {input: 1.0, output: 3.0}\n")
    (tmp_path / "s.yaml").write_text(
        "name: p\nprices: prices.yaml\nagents: {a: {backend: scripted, strategy: free_rider}, "
        "b: {backend: scripted, strategy: always_all}}\ngames: [{game: public_goods}]\n"
    )
    scenario = load_scenario(tmp_path / "s.yaml")
    assert scenario.prices["house-model"].output == 3.0
    (tmp_path / "s.yaml").write_text((tmp_path / "s.yaml").read_text().replace("prices.yaml", "nope.yaml"))
    with pytest.raises(ConfigError, match=r"prices: no prices file at .*nope\.yaml"):
        load_scenario(tmp_path / "s.yaml")


# -- one clock: the turn's deadline --------------------------------------------------------------
class Log(Services):
    """Keeps what an agent announces and records, as the run store would."""

    def __init__(self):
        self.started: list[CallStarted] = []
        self.records: list[CallRecord] = []
        self.kept: dict[str, CachedReply] = {}  # the response cache: request -> reply

    @asynccontextmanager
    async def cached(self, **key):
        yield self.kept.get(repr(key))

    def remember(self, reply, **key):
        self.kept[repr(key)] = reply

    def call_started(self, call):
        self.started.append(call)

    def record_call(self, call):
        self.records.append(call)

    def in_flight(self) -> set[str]:
        return {c.token for c in self.started} - {r.token for r in self.records}


class Scripted(LLMAgent):
    """An LLM backend whose server does what ``plan`` says, one step per try: "fail" (a transient
    error, as a refused connection or a 503), "hang" (never answers), "empty" (an answer with no
    text) or "ok"."""

    backend_name = "scripted-llm"

    def __init__(self, plan, probe="answers", **config):
        super().__init__("m", LLMConfig(backend="scripted-llm", model="x", **config), Log())
        self.plan, self.tries, self.probe_does, self.probes = list(plan), 0, probe, 0

    async def probe(self, match=""):
        """"answers", "hangs", "refuses" (a connection refused: the endpoint is down), "empty" (answered
        with no text, as HostedAgent.probe says), or "queued:S" (answered after S seconds, as a busy
        server answers once the work before it is done)."""
        self.probes += 1
        if self.probe_does == "hangs":
            await trio.sleep_forever()
        if self.probe_does.startswith("queued:"):
            await trio.sleep(float(self.probe_does.partition(":")[2]))
        if self.probe_does == "refuses":
            raise BackendUnavailable(self.name, self.backend_name, self.endpoint(), "connection refused")
        if self.probe_does == "empty":
            raise BackendUnavailable(self.name, self.backend_name, self.endpoint(), "a probe was answered with no text")

    def endpoint(self):
        return "http://model.invalid"

    async def complete(self, request):
        step = self.plan[min(self.tries, len(self.plan) - 1)]
        self.tries += 1
        await trio.sleep(0.5)
        if step == "fail":
            raise TransientError("503: overloaded")
        if step == "503":  # the server itself answered with the status: it generated nothing
            raise TransientError("503: overloaded", status=503)
        if step == "hang":
            await trio.sleep_forever()
        if step == "empty":
            return Completion(text="", prompt_tokens=3, completion_tokens=0)
        return Completion(text="fine", prompt_tokens=3, completion_tokens=1)


def a_turn() -> Turn:
    return Turn(match="m1", seat="Player 1", role="Player", round=1, history=(), prompt="Your move.", seed=1)


async def test_transient_failures_are_retried_inside_the_turns_time_then_the_backend_is_unavailable(autojump_clock):
    agent = Scripted(["fail"], retries=100, backoff=1, max_backoff=4)
    start = trio.current_time()
    with trio.move_on_after(30) as turn:
        with pytest.raises(BackendUnavailable) as raised:
            await agent.reply(a_turn())
    assert not turn.cancelled_caught and trio.current_time() - start < 30  # it stopped before the deadline
    assert 5 <= agent.tries <= 15  # as many tries as fit in 30 s, not the 101 the retries allow
    outage = raised.value
    assert (outage.agent, outage.backend, outage.endpoint) == ("m", "scripted-llm", "http://model.invalid")
    assert outage.error.startswith("503: overloaded (after ")
    (record,) = agent.services.records
    assert record.retries == agent.tries - 1 and "unavailable" in record.error and record.prompt_tokens is None
    assert len(agent.services.started) == agent.tries and not agent.services.in_flight()


async def test_retries_run_out_before_the_deadline(autojump_clock):
    agent = Scripted(["fail"], retries=2, backoff=0.1)
    with trio.move_on_after(60):
        with pytest.raises(BackendUnavailable, match=r"after 3 tries"):
            await agent.reply(a_turn())
    assert agent.tries == 3


async def test_a_live_model_cut_off_by_the_deadline_is_a_timeout_and_its_call_is_recorded(autojump_clock):
    agent = Scripted(["hang"])
    with trio.move_on_after(20) as turn:
        await agent.reply(a_turn())
    assert turn.cancelled_caught  # the match sees a timeout, not an error
    assert agent.probes == 1  # the server answered it: it is up, and the model slow
    (record,) = agent.services.records
    assert record.error.startswith("cut off by the turn's deadline") and record.retries == 0
    assert record.prompt_tokens is None and record.completion_tokens is None and not agent.services.in_flight()


@pytest.mark.parametrize("probe", ["hangs", "refuses"])
async def test_a_call_cut_off_by_the_deadline_on_a_server_that_does_not_answer_a_probe_is_an_outage(autojump_clock, probe):
    """Nothing failed before the deadline, so the call alone cannot tell a slow model from a hung
    server: the probe the run uses to find a server's return decides, given as long as the call
    waited (at least PROBE_WAIT)."""
    agent = Scripted(["hang"], probe=probe)
    start = trio.current_time()
    with trio.move_on_after(20) as turn:
        with pytest.raises(BackendUnavailable, match=r"no answer within the turn's 20.0 s, nor to a probe after it"):
            await agent.reply(a_turn())
    assert agent.probes == 1
    assert trio.current_time() - start == pytest.approx(20 + (20 if probe == "hangs" else 0))
    (record,) = agent.services.records
    assert "unavailable" in record.error and record.prompt_tokens is None and not agent.services.in_flight()


async def test_the_deadline_arriving_while_the_server_keeps_failing_is_an_outage(autojump_clock):
    agent = Scripted(["fail", "hang"], backoff=0.5)
    with trio.move_on_after(20) as turn:
        with pytest.raises(BackendUnavailable, match=r"503: overloaded \(when the turn's time ran out\)"):
            await agent.reply(a_turn())
    assert not turn.cancelled_caught
    (record,) = agent.services.records
    assert record.retries == 1 and "unavailable" in record.error and not agent.services.in_flight()


async def test_a_per_try_timeout_retries_a_hung_try_within_the_turn(autojump_clock):
    agent = Scripted(["hang", "ok"], timeout=2, backoff=0.5)
    with trio.move_on_after(20):
        assert await agent.reply(a_turn()) == "fine"
    (record,) = agent.services.records
    assert (record.retries, record.error, record.prompt_tokens) == (1, None, 3)


async def test_a_call_stopped_with_its_match_is_recorded_as_such(autojump_clock):
    agent = Scripted(["hang"])
    with trio.move_on_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.reply, a_turn())
            await trio.sleep(1)
            nursery.cancel_scope.cancel()  # as a match does when another seat's backend fails
    (record,) = agent.services.records
    assert record.error == "cancelled: the match stopped" and not agent.services.in_flight()


def test_the_per_try_timeout_defaults_to_the_turns_time():
    config = LLMConfig(backend="x", model="y")
    assert config.timeout is None and config.retries * config.max_backoff < MatchSettings().turn_timeout


async def test_a_call_every_try_of_which_the_server_refused_spent_nothing_known(autojump_clock):
    """Tokens of a failed call: none when the server answered each try with an error status; unknown
    (None, never 0) once a try failed in a way the server may have billed (no answer, a broken one)."""
    refused = Scripted(["503"], retries=2, backoff=0.1)
    mixed = Scripted(["fail", "503"], retries=2, backoff=0.1)
    for agent in (refused, mixed):
        with trio.move_on_after(60):
            with pytest.raises(BackendUnavailable, match=r"after 3 tries"):
                await agent.reply(a_turn())
    (spent_nothing,) = refused.services.records
    assert (spent_nothing.prompt_tokens, spent_nothing.completion_tokens) == (0, 0)
    (unknown,) = mixed.services.records
    assert (unknown.prompt_tokens, unknown.completion_tokens, unknown.cost) == (None, None, None)

async def test_a_busy_server_that_answers_the_probe_only_after_its_queue_is_a_slow_model_not_an_outage(autojump_clock):
    """llama_cpp.server generates one request at a time: the probe waits behind the call that was cut
    off, which the server finishes anyway. Given as long as the turn had, it is answered: a timeout."""
    agent = Scripted(["hang"], probe="queued:15")
    start = trio.current_time()
    with trio.move_on_after(20) as turn:
        await agent.reply(a_turn())
    assert turn.cancelled_caught and agent.probes == 1
    assert trio.current_time() - start == pytest.approx(35)
    (record,) = agent.services.records
    assert record.error.startswith("cut off by the turn's deadline after 20.0 s")


async def test_an_empty_reply_from_a_server_that_answers_a_probe_is_the_models_and_is_never_cached(autojump_clock):
    agent = Scripted(["empty", "ok"])
    with trio.move_on_after(60):
        assert await agent.reply(a_turn()) == ""  # the match judges it: an invalid reply, asked again
        assert agent.probes == 1 and not agent.services.kept
        assert await agent.reply(a_turn()) == "fine"  # the same request again: asked, not replayed from the cache
    assert agent.tries == 2 and agent.probes == 1
    assert [r.error for r in agent.services.records] == [None, None]
    assert [r.text for r in agent.services.kept.values()] == ["fine"]


@pytest.mark.parametrize("probe", ["empty", "hangs", "refuses"])
async def test_an_empty_reply_from_a_server_that_answers_no_probe_with_text_is_an_outage(autojump_clock, probe):
    agent = Scripted(["empty"], probe=probe)
    with trio.move_on_after(60) as turn:
        with pytest.raises(BackendUnavailable, match=r"the reply had no text, nor had the answer to a probe after it"):
            await agent.reply(a_turn())
    assert not turn.cancelled_caught and agent.tries == 1 and agent.probes == 1 and not agent.services.kept
    (record,) = agent.services.records
    assert "unavailable" in record.error and not agent.services.in_flight()


async def test_an_empty_reply_in_the_cache_is_asked_again(autojump_clock):
    agent = Scripted(["ok"])
    request = agent.chat_request(a_turn())
    key = dict(backend=agent.backend_name, model="x", endpoint=agent.endpoint(), request=request.model_dump(by_alias=True),
               sample=a_turn().seed)
    agent.services.remember(CachedReply("", 3, 0, None, 0.1), **key)  # as an older version kept it
    with trio.move_on_after(60):
        assert await agent.reply(a_turn()) == "fine"
    assert agent.tries == 1 and [r.cached for r in agent.services.records] == [False]
    assert [r.text for r in agent.services.kept.values()] == ["fine"]
