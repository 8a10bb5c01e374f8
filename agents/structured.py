"""Structured output: the ways a backend can ask a server for the game's JSON, and finding which
one a server takes.

Servers differ. OpenAI and vLLM take a JSON schema; llama.cpp's own server answers 500 to that
but takes a JSON object constrained by the schema (it builds a grammar from it); some servers
take only a grammar, some nothing of the kind. The first structured call to an endpoint tries
the backend's ways in order of preference, moving on when the server refuses one; the first
way that is answered is kept for the rest of the run (per endpoint and model, shared by every
agent on them, since one server may serve models that differ) and said once through
``Services.note`` (topic "output mode"), which the runner prints and keeps in the run store.

A server refuses a mode by saying so (400, 422, or an error naming the field), or by behaviour:
a request in the mode fails with a bare error while the same request without the schema is
answered. A server failing both ways is failing, not refusing, and nothing is concluded.

The last resort, plain text, spells the schema out in the prompt: the game's parser judges
every reply either way.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import trio

from arena.contract import FatalAgentError, Services

from .llm import CallRefused, ChatRequest, Completion, LLMAgent, TransientError

TOPIC = "output mode"

# what each mode holds a reply to, truthfully: what was asked for, and who enforces it
WHAT = {
    "json_schema": "response_format json_schema with the game's schema, without strict: a server that builds a grammar "
                   "from the schema (vLLM, llama.cpp) holds replies to it; OpenAI's API takes it as a guide only",
    "json_object": "response_format json_object with the schema beside it: llama.cpp's servers build a grammar from "
                   "the schema and hold replies to it; other servers hold them to JSON at most",
    "grammar": "a GBNF grammar built from the game's schema holds the reply (llama.cpp)",
    "tool": "the reply is a forced tool call whose input the model writes to the game's schema (not enforced)",
    "text": "plain text: nothing is enforced, the schema is described in the prompt",
}


class ModeUnavailable(CallRefused):
    """This side cannot ask in the mode (a library it needs is missing): the probe moves on."""


Attempt = Callable[[ChatRequest, str | None], Awaitable[Completion]]


@dataclass
class _Finding:
    """What one endpoint and model take, once known; the lock makes concurrent first calls wait for the first probe."""

    lock: trio.Lock = field(default_factory=trio.Lock)
    mode: str | None = None
    fatal: str | None = None
    # a mode whose request failed without a reason, to be told apart from a failing server on the next try:
    # (mode, how the refusal reads if it is one, the modes refused before it)
    suspect: tuple[str, str, list[str]] | None = None


# per run: a run's services live as long as the run, and a finding must not outlive it (another
# run may find another server on the same port)
_findings: weakref.WeakKeyDictionary[Services, dict[tuple, _Finding]] = weakref.WeakKeyDictionary()


async def complete_structured(agent: LLMAgent, request: ChatRequest, modes: Sequence[str], attempt: Attempt,
                              refused: Callable[[Exception], bool], forced: bool = False,
                              describe: Callable[[str, ChatRequest], str] | None = None) -> Completion:
    """One completion in the endpoint's output mode, found first if this is its first structured call.

    ``modes``: the backend's ways, best first; ``attempt(request, mode)`` makes one request in a mode
    (``None``: the request has no schema); ``refused(exc)`` tells a refusal of the mode from any
    other failure. ``forced``: the scenario chose the single mode in ``modes``; if the server
    refuses it, the agent cannot play as configured (checked by asking once in plain text, so that
    a request the server refuses for another reason is not mistaken for a refused mode).
    ``describe(mode, request)``: what the mode holds the reply to, for the note (default: ``WHAT``)."""
    if request.schema_ is None:
        return await attempt(request, None)
    key = (agent.backend_name, agent.endpoint(), agent.config.model, tuple(modes))
    finding = _findings.setdefault(agent.services, {}).setdefault(key, _Finding())
    if finding.fatal:
        raise FatalAgentError(finding.fatal)
    if finding.mode is None:
        # Concurrent first calls wait for the first one's finding, but not for long: the wait is spent
        # from their own timeout, and a refusal costs the server nothing, so after a while they find
        # out for themselves.
        held = False
        with trio.move_on_after(_patience()):
            await finding.lock.acquire()
            held = True
        try:
            if finding.fatal:
                raise FatalAgentError(finding.fatal)
            if finding.mode is None:
                tried = tuple(modes) + (("text",) if forced and modes[-1] != "text" else ())
                return await _probe(agent, request, tried, attempt, refused, finding, forced,
                                    describe or (lambda mode, _: WHAT[mode]))
        finally:
            if held:
                finding.lock.release()
    return await attempt(request, finding.mode)


def _patience() -> float:
    """How long a call waits for another call's probe: a quarter of the time it has left, at most 5 s."""
    left = trio.current_effective_deadline() - trio.current_time()
    return min(5.0, left / 4)


async def _probe(agent: LLMAgent, request: ChatRequest, modes: tuple[str, ...], attempt: Attempt,
                 refused: Callable[[Exception], bool], finding: _Finding, forced: bool,
                 describe: Callable[[str, ChatRequest], str]) -> Completion:
    if finding.suspect is not None:
        return await _by_behaviour(agent, request, modes, attempt, refused, finding, forced, describe)
    refusals: list[str] = []
    for mode in modes:
        try:
            completion = await attempt(request, mode)
        except (CallRefused, TransientError) as exc:
            if mode == "text":
                raise  # not about the mode: the call fails as any call does, and the next one probes again
            if isinstance(exc, ModeUnavailable) or refused(exc):
                refusals.append(f"{mode} ({_short(exc)})")
                continue
            if _unexplained(exc):  # the next try tells a refused mode from a failing server
                finding.suspect = (mode, f"{mode} ({_short(exc)}; answered without the schema)",
                                   refusals)
            raise  # a failure like any other, for now: retried after the backoff
        return _settle(agent, request, finding, mode, completion, refusals, forced, modes[0], describe)
    raise AssertionError("the last mode tried is plain text, which raises or returns")


async def _by_behaviour(agent: LLMAgent, request: ChatRequest, modes: tuple[str, ...], attempt: Attempt,
                        refused: Callable[[Exception], bool], finding: _Finding, forced: bool,
                        describe: Callable[[str, ChatRequest], str]) -> Completion:
    """The last try in a mode failed without saying why (a bare 500). Whether the server refuses the
    mode shows in how it treats the same request without the schema: a server that fails that too
    is failing, not refusing (the failure stands, and the next try starts afresh: one request per
    try, as for any failing server); one that answers it refuses the mode, once asking again in the
    mode shows it was no passing failure. Refused, the rest of the run is plain text."""
    mode, refusal, refusals = finding.suspect
    finding.suspect = None
    plain = await attempt(request, "text")
    try:
        again = await attempt(request, mode)
    except (CallRefused, TransientError) as second:
        if not (isinstance(second, ModeUnavailable) or refused(second) or _unexplained(second)):
            return plain  # busy now: this turn has its answer, and the next call finds out
        return _settle(agent, request, finding, "text", plain, refusals + [refusal], forced, modes[0], describe)
    return _settle(agent, request, finding, mode, _together(again, plain), refusals, forced, modes[0], describe)


def _settle(agent: LLMAgent, request: ChatRequest, finding: _Finding, mode: str, completion: Completion,
            refusals: list[str], forced: bool, first: str, describe: Callable[[str, ChatRequest], str]) -> Completion:
    """Keep ``mode`` as the endpoint's finding and say it once (or stop a forced agent whose mode was refused)."""
    if finding.mode is not None or finding.fatal:  # another call found out first: its finding stands
        return completion
    where = f"{agent.config.model} at {agent.endpoint()}"
    if forced and mode != first:
        finding.fatal = (f"agent {agent.name!r}: {where} refuses the output mode {first} that the scenario sets "
                         f"(response_format: {refusals[0]}); remove response_format (or set it to auto) to let Arena "
                         "find what the server takes")
        agent.services.note(agent.name, agent.endpoint(), TOPIC, finding.fatal)
        raise FatalAgentError(finding.fatal)
    finding.mode = mode
    text = f"{where}: output mode {mode}, {describe(mode, request)}"
    if forced:
        text += " (set in the scenario)"
    if refusals:
        text += "; refused: " + ", ".join(refusals)
    agent.services.note(agent.name, agent.endpoint(), TOPIC, text)
    return completion


# statuses that say "not now" rather than "not this": rate limits, overload, a timeout, a conflict
BUSY = frozenset({408, 409, 429, 503, 529})


def _unexplained(exc: Exception) -> bool:
    """A failure the server answered with a status that neither names the mode nor says it is busy:
    the kind a server gives to a request it cannot take as well as to one it failed by chance."""
    return (isinstance(exc, TransientError) and exc.status is not None and exc.status not in BUSY
            and exc.retry_after is None)


def _together(kept: Completion, spent: Completion) -> Completion:
    """The reply kept, with the tokens of both requests the call made (both were paid for); unknown if either is."""
    def add(a: int | None, b: int | None) -> int | None:
        return None if a is None or b is None else a + b

    return kept.model_copy(update={"prompt_tokens": add(kept.prompt_tokens, spent.prompt_tokens),
                                   "completion_tokens": add(kept.completion_tokens, spent.completion_tokens)})


def _short(exc: Exception, width: int = 200) -> str:
    line = " ".join(str(exc).split()) or type(exc).__name__
    return line if len(line) <= width else line[: width - 1] + "…"


def described(request: ChatRequest) -> ChatRequest:
    """The request in plain text, the schema no longer enforced but spelled out after the last prompt."""
    words = ("Reply with a single JSON object, and nothing else, that follows this JSON schema: "
             + json.dumps(request.schema_, ensure_ascii=False, separators=(",", ":")))
    messages = list(request.messages)
    if messages and messages[-1]["role"] == "user":
        messages[-1] = {**messages[-1], "content": messages[-1]["content"] + "\n\n" + words}
    else:
        messages.append({"role": "user", "content": words})
    return request.model_copy(update={"messages": messages, "schema_": None})
