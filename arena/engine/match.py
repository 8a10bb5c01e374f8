"""The match loop: DeepEval's synchronous interaction, on trio.

Post the rules; then, round by round, ask every speaker at once (each under a turn timeout,
re-asking on invalid replies; an agent with its reply ready, a plain-function strategy, is taken in
line, as it has nothing to wait for), post the replies, let the game apply the actions, close the
round so that what was said becomes visible, and ask the referee whether the match is over.
Finally the referee scores it.

Only what a seat said can become its move (``arena.engine.turns``). An exception from an agent
is never a move: it ends the match, carried out of the round like any other error. A backend
that cannot be reached interrupts the match (it is replayed later, never scored) once the other
seats of the round have answered; any other error fails it at once.
"""

from __future__ import annotations

import functools
import traceback
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import trio

from arena.contract import plugins
from arena.contract import seeding
from arena.contract.agent import Agent
from arena.contract.capabilities import Review
from arena.contract.errors import ArenaError, BackendUnavailable, MatchSetupError, leaves
from arena.contract.events import (
    Event,
    MatchEnded,
    MatchFailed,
    MatchInterrupted,
    MatchStarted,
    MessagePosted,
    RoundClosed,
    Scrubbed,
    SeatInfo,
)
from arena.contract.game import Game
from arena.contract.messages import REFEREE, Message, MessageKind, Turn
from arena.contract.records import EventLog, MatchRecord, MatchSpec
from arena.contract.referee import Referee, RefereeSpec, Scores
from arena.engine.anonymity import Filter
from arena.engine.desk import JUDGE, MatchDesk
from arena.engine.pool import MessagePool
from arena.engine.turns import Asker, EventSink, Outcome

__all__ = ["JUDGE", "EventSink", "Match", "Played", "default_referees", "play_match", "play_spec", "seat_labels", "seat_order"]


def seat_labels(roles: list[str]) -> list[str]:
    """'Player 1', 'Player 2', ... for shared roles; the bare role name for a role held once."""
    totals, seen, labels = Counter(roles), Counter(), []
    for role in roles:
        seen[role] += 1
        labels.append(role if totals[role] == 1 else f"{role} {seen[role]}")
    return labels


@dataclass(frozen=True, slots=True)
class Played:
    """What playing a match came to: its record, and the outage that interrupted it (None when
    nothing did). The run waits for that endpoint to answer again and then plays the match again."""

    record: MatchRecord
    outage: BackendUnavailable | None = None


def seat_order(spec: MatchSpec) -> list[str]:
    """The spec's agents in seat order: drawn from the match seed unless the plan fixed it."""
    order = list(spec.agents)
    if spec.shuffle_seats:
        seeding.rng(spec.seed, "seats").shuffle(order)
    return order


class Match:
    """One match, built whole from its spec and the run's agents: game, seats, agents, referees
    and pool exist from the start. Building it raises ``MatchSetupError`` (or the game's own
    error) for a spec that cannot be played; ``play_spec`` makes that a failed record."""

    def __init__(self, spec: MatchSpec, agents: Mapping[str, Agent], sinks: Sequence[EventSink] = ()):
        self.spec = spec
        self.events = EventLog(match=spec.key)  # a posted message is kept once: the log refers to the pool's
        self._sinks = tuple(sinks)  # each gets every event as it happens: the store, the live view
        game_cls: type[Game] = plugins.load("game", spec.game)
        n = len(spec.agents)
        problem = game_cls.seat_count_problem(n)
        if problem:
            raise MatchSetupError(f"{spec.game} {problem}; {n} agents given")
        params = game_cls.Params.model_validate(spec.params)
        problem = game_cls.seat_problem(params, n)
        if problem:
            raise MatchSetupError(f"{spec.game}: {problem}")
        missing = sorted(set(spec.agents) - set(agents))
        if missing:
            raise MatchSetupError(f"the match seats {', '.join(map(repr, missing))}, which the scenario does not define")
        order = seat_order(spec)
        roles = game_cls.seat_roles(params, n)
        labels = seat_labels(roles)
        self.seats: tuple[SeatInfo, ...] = tuple(SeatInfo(label=l, role=r, agent=a) for l, r, a in zip(labels, roles, order))
        self.agents: dict[str, Agent] = {seat.label: agents[seat.agent] for seat in self.seats}
        self.names: dict[str, str] = {seat.label: seat.agent for seat in self.seats}
        self.game: Game = game_cls(params, labels, dict(zip(labels, roles)), seeding.rng(spec.seed, "game"))
        self.pool = MessagePool(labels)
        self.filter = Filter(spec.scrub, spec.scrub_replacement, spec.scrub_allow, spec.scrub_material)
        self.asker = Asker(spec.key, spec.seed, spec.settings, self._emit)
        self.action_schema = self.game.action_schema()  # cached by the game: built once per class or params
        desk = MatchDesk(agents, self.asker, self.filter, self.pool,
                         lambda text, data: self._post(REFEREE, text, (), "verdict", data))
        self.referees: list[Referee] = [_referee(r, desk) for r in spec.referees or default_referees(game_cls)]

    def _emit(self, event: Event) -> None:
        self.events.append(event)
        for sink in self._sinks:
            sink(event)

    def _post(self, sender: str, content: str, recipients, kind: MessageKind, data=None) -> Message:
        """Post a message; the anonymity filter makes, once, the version the other seats get (the
        sender gets its own words back as it wrote them). A seat's words are the filter's to learn
        even when nobody hears them yet: a game may quote them later, to a judge."""
        recipients = tuple(recipients)
        shown = shown_data = None
        heard = recipients.count(sender) < len(recipients)  # someone other than the sender reads it
        if self.filter and (heard or sender != REFEREE):
            shown, found = (self.filter.text if sender == REFEREE else self.filter.said)(content)
            shown_data, in_data = self.filter.data(data) if data is not None else (None, [])
            if not heard:  # learnt, not shown
                shown = shown_data = None
            elif found or in_data:
                self._emit(Scrubbed(match=self.spec.key, round=self.pool.round, seat=sender, found=found + in_data))
        message = self.pool.post(sender, content, recipients, kind, data, shown, shown_data)
        self._emit(MessagePosted(match=self.spec.key, message=message))
        return message

    async def play(self) -> Played:
        key, game = self.spec.key, self.game
        round = 0
        try:
            self._emit(MatchStarted(match=key, game=self.spec.game, seed=self.spec.seed, seats=self.seats))
            for seat in game.seats:
                self._post(REFEREE, game.rules(seat), [seat], "rules", game.rules_data(seat))
            self.pool.close_round()
            ended = "finished"
            while True:
                round = self.pool.round
                await self._play_round(round)
                over = await self._is_over(round)
                if over:
                    break
                if round >= self.spec.settings.max_rounds:  # the safety stop, not the game's end: said as such
                    ended = "truncated"
                    break
            metrics = await self._score()
            payoffs = next(iter(metrics.values()), {})
            agent = {seat.label: seat.agent for seat in self.seats}
            verdicts = self.referees[0].reviews(game)
            reviews = [Review(*v).given_in(key, self.spec.repeat, agent) for v in verdicts]
        except Exception as exc:
            error = _describe(exc)
            outage = next((e for e in leaves(exc) if isinstance(e, BackendUnavailable)), None)
            if outage is not None:
                self._emit(MatchInterrupted(match=key, error=error))
                return Played(self._record("interrupted", round, {}, error), outage)
            self._emit(MatchFailed(match=key, error=error))
            return Played(self._record("failed", round, {}, error))
        self._emit(MatchEnded(match=key, rounds=round, payoffs=payoffs, status=ended))
        return Played(self._record(ended, round, payoffs, reviews=reviews, metrics=metrics))

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
            params=self.game.params.model_dump(mode="json"),
            seed=self.spec.seed,
            seats=self.seats,
            status=status,
            rounds=rounds,
            payoffs=payoffs,
            messages=self.pool.log,
            events=self.events,
            error=error,
            reviews=list(reviews),
            metrics=metrics or {},
        )

    async def _play_round(self, round: int) -> None:
        game = self.game
        speakers = game.speakers(round)
        # what each speaker is asked becomes part of its conversation, posted in seat order before anyone answers
        turns = [self._turn(seat, round) for seat in speakers]
        # Agents that have their reply at once (scripted strategies) are taken in line: a task and a
        # timer each would cost more than their turn. The others are asked all at once.
        first = {turn.seat: self.agents[turn.seat].reply_now(turn) for turn in turns}
        waiting = [turn for turn in turns if first[turn.seat] is None]
        outcomes = {turn.seat: await self._take_turn(turn, first[turn.seat]) for turn in turns
                    if first[turn.seat] is not None}
        if len(waiting) == 1:  # nothing to run at once, and a nursery costs more than the turn
            outcomes[waiting[0].seat] = await self._take_turn(waiting[0])
        elif waiting:
            outcomes.update(await self._take_turns(waiting))
        else:  # a round that waited on nothing still lets the run's other matches, and a Ctrl-C, in
            await trio.lowlevel.checkpoint()
        audience = game.hears(round)
        actions = {}
        for seat in speakers:  # seat order, not arrival order: the transcript stays deterministic
            outcome = outcomes[seat]
            actions[seat] = outcome.action
            self.asker.taken(round, seat, outcome)
            if not outcome.defaulted:  # a failed turn says nothing; its attempts are in the events
                listeners = [s for s in audience.successors(seat) if s != seat] if seat in audience else []
                self._post(seat, game.reply_text(seat, round, outcome.reply), listeners, "reply")
        for notice in game.apply(round, actions):
            self._post(REFEREE, notice.text, notice.to, "notice", notice.data)
        self.pool.close_round()
        self._emit(RoundClosed(match=self.spec.key, round=round))

    def _turn(self, seat: str, round: int) -> Turn:
        """The seat's turn: what it may see (already filtered when it was posted, so reading it costs
        nothing) and this round's prompt, which is posted to the seat's conversation as it is asked.
        Its structured facts pass the same filter as the text a model reads."""
        game = self.game
        history = game.history(seat, round, self.pool.visible_to(seat))
        prompt = self._post(REFEREE, game.prompt(seat, round), [seat], "prompt")
        data = game.prompt_data(seat, round)
        if self.filter:
            data = self.filter.data(data)[0]
        return self.asker.turn(seat, game.roles[seat], round, history,
                               prompt.shown if prompt.shown is not None else prompt.content, game.turn_schema(seat, round), data)

    async def _take_turn(self, turn: Turn, first: str | None = None) -> Outcome:
        game, seat, round = self.game, turn.seat, turn.round
        return await self.asker.ask(self.agents[seat], turn, lambda reply: game.parse(seat, reply, round),
                                    lambda: game.default_action(seat, round), first, self.names[seat])

    async def _take_turns(self, turns: list[Turn]) -> dict[str, Outcome]:
        """Every speaker's turn at once. A backend that cannot be reached lets the other seats finish
        (their answers are paid for and cached, so the replay gets them free), then ends the match;
        any other error ends it at once, the other turns cut short."""
        done: dict[str, Outcome | BackendUnavailable] = {}

        async def take(turn: Turn) -> None:
            try:
                done[turn.seat] = await self._take_turn(turn)
            except BackendUnavailable as exc:
                done[turn.seat] = exc

        async with trio.open_nursery() as nursery:
            for turn in turns[1:]:
                nursery.start_soon(take, turn)
            await take(turns[0])  # in the match's own task: one task fewer to start and schedule
        for result in done.values():
            if isinstance(result, BackendUnavailable):
                raise result
        return done  # type: ignore[return-value]  # no outage left in it


def _referee(spec: RefereeSpec, desk: MatchDesk) -> Referee:
    cls: type[Referee] = plugins.load("referee", spec.use)
    return cls(cls.Params.model_validate(spec.params), desk)


@functools.lru_cache(maxsize=None)  # asked for every match; a game class's default never changes
def default_referees(game_cls: type[Game]) -> tuple[RefereeSpec, ...]:
    names = game_cls.default_referee
    return tuple(RefereeSpec(use=name) for name in ((names,) if isinstance(names, str) else names))


def _describe(exc: BaseException) -> str:
    """The first error's own words, then where it was raised; nurseries wrap errors in groups."""
    first, *others = leaves(exc)
    text = f"{type(first).__name__}: {first}"
    if others:
        text += f" (and {len(others)} more)"
    if not isinstance(first, ArenaError):  # those are worded for the user; anything else is a bug: say where
        frames = traceback.extract_tb(first.__traceback__)[-3:]
        text += "\n" + "".join(traceback.format_list(frames))
    return text


def _unplayable(spec: MatchSpec, exc: Exception, sinks: Sequence[EventSink]) -> MatchRecord:
    """The record of a match that could not be set up: failed, with the reason, nothing played."""
    error = _describe(exc)
    event = MatchFailed(match=spec.key, error=error)
    for sink in sinks:
        sink(event)
    return MatchRecord(key=spec.key, group=spec.group, repeat=spec.repeat, game=spec.game, params=dict(spec.params),
                       seed=spec.seed, seats=(), status="failed", rounds=0, payoffs={}, messages=(), events=[event],
                       error=error)


async def play_spec(spec: MatchSpec, agents: Mapping[str, Agent], sinks: Sequence[EventSink] = ()) -> Played:
    """Set up and play one match; a spec that cannot be set up gives a failed record."""
    try:
        match = Match(spec, agents, sinks)
    except Exception as exc:
        return Played(_unplayable(spec, exc, sinks))
    return await match.play()


async def play_match(spec: MatchSpec, agents: Mapping[str, Agent], sinks: Sequence[EventSink] = ()) -> MatchRecord:
    """The record of ``play_spec``: for tests and notebooks, where nothing waits on an outage."""
    return (await play_spec(spec, agents, sinks)).record
