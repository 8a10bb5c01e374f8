"""The match loop: DeepEval's synchronous interaction, on trio.

Post the rules; then, round by round, ask every speaker at once (each under a
turn timeout, re-asking on invalid replies), post the replies, let the game
apply the actions, close the round so that what was said becomes visible, and
ask the referee whether the match is over. Finally the referee scores it.

Only what a seat said can become its move: an invalid reply is asked again and
then defaulted, a reply that does not come in time is defaulted. An exception
from an agent is never a move: a backend that cannot be reached interrupts the
match (it is replayed later, never scored); any other error fails it.
"""

from __future__ import annotations

import json
import traceback
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, Literal

import trio
from pydantic import BaseModel, ConfigDict, Field

from arena.contract import plugins
from arena.contract import seeding
from arena.contract.agent import Agent
from arena.contract.errors import ArenaError, BackendUnavailable, MatchSetupError
from arena.contract.events import (
    ActionTaken,
    Event,
    MatchEnded,
    MatchFailed,
    MatchInterrupted,
    MatchStarted,
    MessagePosted,
    RoundClosed,
    Scrubbed,
    SeatInfo,
    TurnFailed,
)
from arena.engine.anonymity import scrub, scrub_data
from arena.contract.game import Game, InvalidReply
from arena.contract.messages import REFEREE, Message, Retry, Turn
from arena.engine.pool import MessagePool
from arena.contract.records import EventLog, MatchRecord, MatchSettings, MatchSpec
from arena.contract.referee import Referee, RefereeSpec, Scores

# What an outside agent asked by a referee is called in events and calls: no game's role gives a seat
# this label (pairwise_review has seats called "Judge"), so the two can always be told apart.
JUDGE = "Referee's judge"

EventSink = Callable[[Event], None]


def seat_labels(roles: list[str]) -> list[str]:
    """'Player 1', 'Player 2', ... for shared roles; the bare role name for a role held once."""
    totals, seen, labels = Counter(roles), Counter(), []
    for role in roles:
        seen[role] += 1
        labels.append(role if totals[role] == 1 else f"{role} {seen[role]}")
    return labels


def _jsonable(action: Any) -> Any:
    if isinstance(action, BaseModel):
        return action.model_dump(mode="json")
    try:
        json.dumps(action)
        return action
    except TypeError:
        return repr(action)


class Match:
    def __init__(self, spec: MatchSpec, agents: Mapping[str, Agent], on_event: EventSink | None = None):
        self.spec = spec
        self._agents = agents
        self._on_event = on_event
        self.events = EventLog(match=spec.key)  # a posted message is kept once: the log refers to the pool's
        self.seats: tuple[SeatInfo, ...] = ()
        self.game: Game | None = None
        self.pool: MessagePool | None = None
        self._fatal: BaseException | None = None  # an agent's error: it ends the match after the current step
        self.outage: BackendUnavailable | None = None  # set when the match was interrupted by one

    def _set_up(self) -> None:
        spec = self.spec
        game_cls: type[Game] = plugins.load("game", spec.game)
        n = len(spec.agents)
        if n < game_cls.min_seats or (game_cls.max_seats is not None and n > game_cls.max_seats):
            most = "" if game_cls.max_seats is None else f" and at most {game_cls.max_seats}"
            raise MatchSetupError(f"{spec.game} needs at least {game_cls.min_seats}{most} seats; {n} agents given")
        params = game_cls.Params.model_validate(spec.params)
        problem = game_cls.seat_problem(params, n)
        if problem:
            raise MatchSetupError(f"{spec.game}: {problem}")
        order = list(spec.agents)
        if spec.shuffle_seats:
            seeding.rng(spec.seed, "seats").shuffle(order)
        roles = game_cls.seat_roles(params, n)
        labels = seat_labels(roles)
        self.seats = tuple(SeatInfo(label=l, role=r, agent=a) for l, r, a in zip(labels, roles, order))
        self.agents = {s.label: self._agents[s.agent] for s in self.seats}
        self.game = game_cls(params, labels, dict(zip(labels, roles)), seeding.rng(spec.seed, "game"))
        self.referees = [self._referee(r) for r in spec.referees or default_referees(game_cls)]
        self.pool = MessagePool(labels)
        self._action_schema = game_cls.Action.model_json_schema() if game_cls.Action is not None else None

    def _referee(self, spec: RefereeSpec) -> Referee:
        cls: type[Referee] = plugins.load("referee", spec.use)
        return cls(cls.Params.model_validate(spec.params), _Desk(self))

    def _emit(self, event: Event) -> None:
        self.events.append(event)
        if self._on_event is not None:
            self._on_event(event)

    def _post(self, sender: str, content: str, recipients, kind, data=None, shown: str | None = None) -> Message:
        """Post a message; unless ``shown`` is given, the anonymity filter makes, once, the version
        the other seats get (the sender gets its own words back as it wrote them)."""
        recipients = tuple(recipients)
        shown_data = None
        if shown is None and self.spec.scrub and any(r != sender for r in recipients):
            shown, found = scrub(content, self.spec.scrub, self.spec.scrub_replacement)
            shown_data, in_data = scrub_data(data, self.spec.scrub, self.spec.scrub_replacement)
            if found or in_data:
                self._emit(Scrubbed(match=self.spec.key, round=self.pool.round, seat=sender, found=found + in_data))
        message = self.pool.post(sender, content, recipients, kind, data, shown, shown_data)
        self._emit(MessagePosted(match=self.spec.key, message=message))
        return message

    async def play(self) -> MatchRecord:
        key = self.spec.key
        round = 0
        try:
            self._set_up()
            self._emit(MatchStarted(match=key, game=self.spec.game, seed=self.spec.seed, seats=self.seats))
            for seat in self.game.seats:
                self._post(REFEREE, self.game.rules(seat), [seat], "rules", self.game.rules_data(seat))
            self.pool.close_round()
            while True:
                round = self.pool.round
                await self._play_round(round)
                if self._fatal is not None:
                    raise self._fatal
                over = round >= self.spec.settings.max_rounds or await self._is_over(round)
                if self._fatal is not None:  # a judge asked whether it is over could not answer
                    raise self._fatal
                if over:
                    break
            metrics = await self._score()
            if self._fatal is not None:
                raise self._fatal
            payoffs = next(iter(metrics.values()), {})
            agent = {seat.label: seat.agent for seat in self.seats}
            verdicts = self.referees[0].reviews(self.game)
            reviews = [(q, agent.get(a, a), agent.get(b, b), agent.get(r, r), int(s)) for q, a, b, r, s in verdicts]
        except Exception as exc:
            error = _describe(exc)
            self.outage = next((e for e in _leaves(exc) if isinstance(e, BackendUnavailable)), None)
            if self.outage is not None:
                self._emit(MatchInterrupted(match=key, error=error))
                return self._record("interrupted", round, {}, error)
            self._emit(MatchFailed(match=key, error=error))
            return self._record("failed", round, {}, error)
        self._emit(MatchEnded(match=key, rounds=round, payoffs=payoffs))
        return self._record("finished", round, payoffs, reviews=reviews, metrics=metrics)

    async def _is_over(self, round: int) -> bool:
        for referee in self.referees:
            if await referee.is_over(self.game, self.pool, round):
                return True
        return False

    async def _score(self) -> Scores:
        """Every referee's figures, in referee order; the verdicts they post close one last round."""
        metrics: Scores = {}
        for referee in self.referees:
            for metric, values in (await referee.score(self.game, self.pool)).items():
                if metric in metrics:
                    raise MatchSetupError(f"two referees report the metric {metric!r}; give one another `metric` name")
                metrics[metric] = {seat: float(v) for seat, v in values.items()}
        if self.pool.last is not None and self.pool.last.kind == "verdict":
            self.pool.close_round()
        return metrics

    def _record(self, status, rounds, payoffs, error=None, reviews=(), metrics=None) -> MatchRecord:
        return MatchRecord(
            key=self.spec.key,
            group=self.spec.group,
            repeat=self.spec.repeat,
            game=self.spec.game,
            params=self.game.params.model_dump(mode="json") if self.game else dict(self.spec.params),
            seed=self.spec.seed,
            seats=self.seats,
            status=status,
            rounds=rounds,
            payoffs=payoffs,
            messages=self.pool.log if self.pool else (),
            events=self.events,
            error=error,
            reviews=list(reviews),
            metrics=metrics or {},
        )

    async def _play_round(self, round: int) -> None:
        speakers = self.game.speakers(round)
        outcomes: dict[str, tuple[Any, str | None, int, bool]] = {}
        # what each speaker is asked becomes part of its conversation, posted in seat order before anyone answers
        turns = [self._turn(seat, round) for seat in speakers]
        if len(turns) == 1:  # one speaker: nothing to run at once, and a nursery costs more than the turn
            with trio.CancelScope() as scope:
                await self._take_turn(turns[0], outcomes, scope)
        else:
            async with trio.open_nursery() as nursery:
                for turn in turns:
                    nursery.start_soon(self._take_turn, turn, outcomes, nursery.cancel_scope)
        if self._fatal is not None:
            return
        audience = self.game.hears(round)
        actions = {}
        for seat in speakers:  # seat order, not arrival order: the transcript stays deterministic
            action, reply, attempts, defaulted = outcomes[seat]
            actions[seat] = action
            self._emit(
                ActionTaken(
                    match=self.spec.key, round=round, seat=seat, action=_jsonable(action),
                    reply=reply, attempts=attempts, defaulted=defaulted,
                )
            )
            if not defaulted:  # a failed turn says nothing; its attempts are in the events
                listeners = [s for s in audience.successors(seat) if s != seat] if seat in audience else []
                self._post(seat, reply, listeners, "reply")
        for notice in self.game.apply(round, actions):
            self._post(REFEREE, notice.text, notice.to, "notice", notice.data)
        self.pool.close_round()
        self._emit(RoundClosed(match=self.spec.key, round=round))

    def _turn(self, seat: str, round: int) -> Turn:
        """The seat's turn: what it may see (already filtered when it was posted, so reading it costs
        nothing) and this round's prompt, which is posted to the seat's conversation as it is asked."""
        game = self.game
        history = game.history(seat, round, self.pool.visible_to(seat))
        prompt = self._post(REFEREE, game.prompt(seat, round), [seat], "prompt")
        return Turn.model_construct(  # the history is a view of the inbox: validating it would copy it
            match=self.spec.key, seat=seat, role=game.roles[seat], round=round, history=history,
            prompt=prompt.shown if prompt.shown is not None else prompt.content, retries=(), seed=0,
            action_schema=self._action_schema, prompt_data=self._filtered(game.prompt_data(seat, round)),
        )

    def _filtered(self, data):
        """Structured facts for scripted agents pass the same filter as the text a model reads."""
        return scrub_data(data, self.spec.scrub, self.spec.scrub_replacement)[0] if self.spec.scrub else data

    async def _take_turn(self, base: Turn, outcomes: dict, scope: trio.CancelScope) -> None:
        game, seat, round = self.game, base.seat, base.round
        try:
            outcomes[seat] = await self._ask(self.agents[seat], base, lambda reply: game.parse(seat, reply),
                                             lambda: game.default_action(seat, round))
        except BackendUnavailable as exc:  # not a move: the match stops once the other seats have answered,
            self._fatal = exc  # since their answers are paid for and cached, and the replay gets them free
        except Exception as exc:  # not a move either: the match ends with it, the other seats' turns cut short
            self._fatal = exc
            scope.cancel()

    async def _ask(self, agent: Agent, base: Turn, parse, default) -> tuple[Any, str | None, int, bool]:
        """One turn under the timeout and invalid-reply rules: (action, reply, attempts, defaulted).

        An invalid reply is recorded and asked again, with the reason, up to ``max_retries`` times.
        A reply that has not come within ``turn_timeout`` is recorded as a timeout and defaulted at
        once: asking again would only wait again (the backend has already retried what it could
        inside that time). What the agent raises is not caught here: it is not a move."""
        settings = self.spec.settings
        retries: list[Retry] = []
        last_reply: str | None = None
        for attempt in range(settings.max_retries + 1):
            turn = Turn.model_construct(**{**base.__dict__, "retries": tuple(retries),
                                           "seed": seeding.derive(self.spec.seed, "turn", base.seat, base.round, attempt)})
            reply: str | None = None
            with trio.move_on_after(settings.turn_timeout) as timer:
                reply = await agent.reply(turn)
            if timer.cancelled_caught:
                self._failed(base, attempt, "timeout", None, f"No reply arrived within {settings.turn_timeout:g} seconds.")
                return default(), last_reply, attempt + 1, True
            if not isinstance(reply, str):
                reason = "The reply was not text."
                reply = None if reply is None else repr(reply)
            else:
                last_reply = reply
                try:
                    return parse(reply), reply, attempt + 1, False
                except InvalidReply as exc:
                    reason = exc.reason
            self._failed(base, attempt, "invalid", reply, reason)
            retries.append(Retry(reply=reply, reason=reason))
        return default(), last_reply, settings.max_retries + 1, True

    def _failed(self, turn: Turn, attempt: int, failure: str, reply: str | None, reason: str) -> None:
        self._emit(TurnFailed(match=self.spec.key, round=turn.round, seat=turn.seat, attempt=attempt + 1,
                              failure=failure, reply=reply, reason=reason))


class _Desk:
    """A match's services to its referees: asking an outside agent, posting a verdict."""

    def __init__(self, match: Match):
        self._match = match

    async def ask(self, agent: str, prompt: str, parse, data=None):
        match = self._match
        if agent not in match._agents:
            raise MatchSetupError(f"the referee asks agent {agent!r}, which the scenario does not define")
        if match._fatal is not None:  # the match is ending: asking more judges would only wait on the same outage
            return None
        round = match.pool.round
        if match.spec.scrub:  # the judge reads the seats' words: it must not learn who wrote them either
            prompt = scrub(prompt, match.spec.scrub, match.spec.scrub_replacement)[0]
            data = match._filtered(data)
        base = Turn.model_construct(match=match.spec.key, seat=JUDGE, role="judge", round=round, history=(), prompt=prompt,
                                    retries=(), seed=0, action_schema=None, prompt_data=data)
        try:
            action, reply, attempts, defaulted = await match._ask(match._agents[agent], base, parse, lambda: None)
        except Exception as exc:  # as for a seat: not a verdict; the match ends with it once the referee returns
            match._fatal = exc
            return None
        match._emit(ActionTaken(match=match.spec.key, round=round, seat=JUDGE, action=_jsonable(action), reply=reply,
                                attempts=attempts, defaulted=defaulted))
        return action

    def post_verdict(self, text: str, data: dict[str, Any]) -> None:
        self._match._post(REFEREE, text, [], "verdict", data)


def default_referees(game_cls: type[Game]) -> tuple[RefereeSpec, ...]:
    names = game_cls.default_referee
    return tuple(RefereeSpec(use=name) for name in ((names,) if isinstance(names, str) else names))


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _describe(exc: BaseException) -> str:
    """The first error's own words, then where it was raised; nurseries wrap errors in groups."""
    first, *others = _leaves(exc)
    text = f"{type(first).__name__}: {first}"
    if others:
        text += f" (and {len(others)} more)"
    if not isinstance(first, ArenaError):  # those are worded for the user; anything else is a bug: say where
        frames = traceback.extract_tb(first.__traceback__)[-3:]
        text += "\n" + "".join(traceback.format_list(frames))
    return text


async def play_match(spec: MatchSpec, agents: Mapping[str, Agent], on_event: EventSink | None = None) -> MatchRecord:
    return await Match(spec, agents, on_event).play()
