"""What a replay agent replays: the replies of a finished Arena run, or of a JSONL file.

A reply is recorded with where it was given (the entry, the case, the repeat and who sat where), by
which seat or role, in which round and at which attempt. A turn is found by the match's identity, the
seat and the round, never by the name of the agent asking: a match key names the seating by places in
the entry's agent list, so a new judge in an old judge's place finds the same match (runs of the older
key scheme name agents: there the new judges stand in for the old ones, ``stands_in``), and a table
the record never saw (the same programmer with another reviewer) is no match. With ``by_role`` a
turn is found by its own role's places alone, whoever else sat there: for seats whose replies do not
depend on the others (contestants' answers judged by a panel of another size).

``read_run`` reads an Arena run through the contract's run reader (``open_run``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from arena.contract import ArenaError, MatchIdentity, StoreError, Turn, open_run

RUN_FILE = "run.sqlite"
TIMED_OUT = None  # a recorded attempt that got no reply in time: replayed by waiting out the deadline


class RecordError(ArenaError):
    """The record cannot be read, or holds nothing for a turn it is asked for."""


Identity = MatchIdentity  # a match as a replay looks it up: entry, case, repeat and seating


def match_identity(key: str) -> Identity:
    """The identity a match key names (the contract's ``MatchIdentity``)."""
    try:
        return MatchIdentity.parse(key)
    except ValueError as exc:
        raise RecordError(str(exc)) from None


Replies = dict[tuple[str, int, int], str | None]  # a match's replies by (seat, round, attempt from 0)


@dataclass
class RunRecord:
    """A finished run's replies, by match."""

    source: str
    scenario: str
    entries: set[str]  # the scenario's game entries, played or not
    matches: dict[Identity, Replies]

    def find(self, turn: Turn, stands_in: Mapping[str, str], by_role: bool = False) -> str | None:
        """``stands_in``: agents of this run that took the place of agents of the record (new judges);
        ``by_role``: a match the record lacks is the recorded one that seated the same places in this
        turn's role, when there is exactly one."""
        identity = match_identity(turn.match)
        if identity.entry not in self.entries:
            raise RecordError(
                f"the record {self.source} is a run of scenario {self.scenario!r}, which has no entry "
                f"{identity.entry!r} (it has {', '.join(map(repr, sorted(self.entries))) or 'none'}): it was "
                "recorded for another scenario, so it cannot replay this one")
        # keys of the older scheme name agents: a new judge is looked up under the name of the one it replaces
        wanted = identity.model_copy(update={"names": tuple(stands_in.get(a, a) for a in identity.names)})
        replies = self.matches.get(wanted)
        if replies is None and by_role and identity.seating:
            replies = self._by_role(identity, turn)
        replies = replies or {}
        where = (turn.seat, turn.round, turn.attempt)
        if where in replies:
            return replies[where]
        raise RecordError(f"the record {self.source} has no reply for match {turn.match!r}, {describe(turn)}")

    def _by_role(self, identity: Identity, turn: Turn) -> Replies | None:
        places = identity.role_places(turn.role)
        found = [m for m in self.matches if m.seating and (m.entry, m.case, m.repeat) == (identity.entry, identity.case,
                 identity.repeat) and m.role_places(turn.role) == places]
        if len(found) > 1:
            raise RecordError(f"the record {self.source} has {len(found)} matches seating places {places} as "
                              f"{turn.role} for match {turn.match!r}: which one to replay is not clear")
        return self.matches[found[0]] if found else None


@dataclass(frozen=True)
class Line:
    """One reply of a JSONL record; a line without a case fits every case (a game that has none)."""

    case: str | None
    round: int
    reply: str
    attempt: int = 0
    seat: str | None = None
    role: str | None = None
    entry: str | None = None
    repeat: int | None = None

    def fits(self, identity: Identity, turn: Turn) -> bool:
        return ((self.seat is None or self.seat == turn.seat) and (self.role is None or self.role == turn.role)
                and (self.entry is None or self.entry == identity.entry)
                and (self.repeat is None or self.repeat == identity.repeat)
                and self.round == turn.round and self.attempt == turn.attempt)


@dataclass
class LinesRecord:
    """A JSONL record's replies, by case."""

    source: str
    lines: dict[str | None, list[Line]]

    def find(self, turn: Turn, stands_in: Mapping[str, str], by_role: bool = False) -> str | None:
        identity = match_identity(turn.match)
        if identity.case not in self.lines and None not in self.lines:
            raise RecordError(f"the record {self.source} has no line for case {identity.case!r} (match {turn.match!r}): "
                              "it was written for another question set or scenario")
        for line in self.lines.get(identity.case, []) + self.lines.get(None, []):
            if line.fits(identity, turn):
                return line.reply
        raise RecordError(f"the record {self.source} has no reply for match {turn.match!r}, {describe(turn)}")


def describe(turn: Turn) -> str:
    """The turn, as an error names it."""
    again = f", attempt {turn.attempt + 1}" if turn.attempt else ""
    return f"seat {turn.seat!r} ({turn.role}), round {turn.round}{again}"


def read_record(path: str | Path) -> RunRecord | LinesRecord:
    """A run folder's record or a JSONL file's, said in a sentence when it is neither. Read once per
    version of the file however many agents replay it (the contestants of a rescore share one run)."""
    path = Path(path).expanduser()
    if path.is_dir():
        if not (path / RUN_FILE).is_file():
            raise RecordError(f"{path} is a folder without a run ({RUN_FILE}): give a run folder or a JSONL file")
        return _read(path, *_version(path / RUN_FILE))
    if path.is_file():
        return _read(path, *_version(path))
    raise RecordError(f"{path} does not exist: give a run folder or a JSONL file of replies")


def _version(file: Path) -> tuple[int, int]:
    found = file.stat()
    return found.st_mtime_ns, found.st_size


@lru_cache(maxsize=8)
def _read(path: Path, mtime: int, size: int) -> RunRecord | LinesRecord:
    return read_run(path) if path.is_dir() else read_lines(path)


def read_run(run_dir: Path) -> RunRecord:
    """Every reply of a run's finished (or truncated) matches, through the contract's run reader."""
    matches: dict[Identity, Replies] = defaultdict(dict)
    try:
        with open_run(run_dir) as run:
            info = run.run_info()
            for stored in run.transcript_rows(events=("turn_failed", "action")):
                if stored.match.status not in ("finished", "truncated"):
                    continue
                replies = matches[match_identity(stored.match.key)]
                for _, kind, body in stored.events:
                    event = json.loads(body)
                    if kind == "turn_failed":
                        replies[(event["seat"], event["round"], event["attempt"] - 1)] = event["reply"]
                    elif not event["defaulted"]:
                        replies[(event["seat"], event["round"], event["attempts"] - 1)] = event["reply"]
    except StoreError as exc:
        raise RecordError(f"{run_dir} holds no readable run: {exc}") from None
    entries = {identity.entry for identity in matches} | _entries(info.get("scenario") or "")
    return RunRecord(str(run_dir), info.get("name") or "?", entries, dict(matches))


def _entries(scenario_text: str) -> set[str]:
    """The names of a scenario's game entries (a label, else the game), from its text as stored."""
    try:
        raw = yaml.safe_load(scenario_text)
        return {str(g.get("label") or g["game"]) for g in raw["games"]}
    except (yaml.YAMLError, TypeError, KeyError, AttributeError):
        return set()


def read_lines(path: Path) -> LinesRecord:
    """A JSONL file of replies: ``{"case", "round", "reply"}`` with, optionally, ``seat`` or ``role``,
    ``attempt`` (1 for the first), ``entry`` and ``repeat``; without ``case``, a line fits every case.
    Answer files of the form ``{"question_id", "text"}`` (FastChat's and PRD's Vicuna80 generations)
    are read as replies to the first round."""
    lines: dict[str | None, list[Line]] = defaultdict(list)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordError(f"{path} cannot be read: {exc}") from None
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
            case = row.get("case", row.get("question_id"))
            reply = row.get("reply", row.get("text"))
            if not isinstance(reply, str):
                raise ValueError("a line needs a reply (or text), a string")
            line = Line(None if case is None else str(case), int(row.get("round", 1)), reply,
                        int(row.get("attempt", 1)) - 1, row.get("seat"),
                        row.get("role"), row.get("entry"), None if row.get("repeat") is None else int(row["repeat"]))
        except (ValueError, TypeError, AttributeError) as exc:
            raise RecordError(f"{path}, line {number}: {exc}") from None
        lines[line.case].append(line)
    if not lines:
        raise RecordError(f"{path} holds no replies")
    return LinesRecord(str(path), dict(lines))
