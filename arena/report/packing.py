"""The transcripts as the page holds them, packed in a process of their own.

Every text is stored once in a string table and referred to by index, since rules and notices
repeat from match to match; the transcripts are read from the store's rows as they come, one
match at a time. Packing is plain Python from end to end, so a thread would hold the interpreter
the numbers need: ``Packing`` runs ``packed_json`` in a child process (``python -m
arena.report.packing``, with a store connection of its own), which writes the JSON text the page
embeds to its output while the report's numbers are computed in the parent.

A child started as a module of its own, rather than by ``multiprocessing``, imports only this
module and the store (a third of a second), never the caller's script, which therefore needs no
``if __name__ == "__main__"`` guard. The caller says how many decimals make two payoffs level
(``arena.rank.places.SAME``, as scores are ranked), so the rank modules stay unloaded here.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson  # ten times the speed of json's encoder on a large run's transcripts, and the same bytes

from arena.contract.messages import REFEREE
from arena.contract.records import MatchRecord
from arena.contract.runs import MatchRow, StoredTranscript, open_run

KINDS = {"rules": 0, "reply": 1, "notice": 2, "verdict": 3, "prompt": 4}
FAILURES = {"invalid": 0, "timeout": 1, "error": 2}
SHOWN_EVENTS = ("turn_failed", "action", "scrubbed")  # the events a transcript shows beside its messages


class Packing:
    """``packed_json`` of a run, made by a child process meanwhile; ``result()`` waits for it. Used as
    a context manager, so that the child never outlives a caller that fails or is interrupted."""

    def __init__(self, run_dir: Path, same: int):
        home = str(Path(__file__).resolve().parents[2])  # the folder holding the arena package, installed or not
        path = os.environ.get("PYTHONPATH")
        env = {**os.environ, "PYTHONPATH": home if not path else home + os.pathsep + path}
        self._child = subprocess.Popen([sys.executable, "-m", "arena.report.packing", str(run_dir), str(same)],
                                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self._output: list[tuple[bytes, bytes]] = []
        # read as it comes: a pipe holds 64 KB, and the child would wait on a full one
        self._reader = threading.Thread(target=lambda: self._output.append(self._child.communicate()), daemon=True)
        self._reader.start()

    def result(self) -> tuple[str, int]:
        self._reader.join()
        out, err = self._output[0]
        if self._child.returncode != 0:  # its last line says what went wrong; the traceback follows, for a bug
            said = err.decode(errors="replace").strip()
            raise RuntimeError(f"packing the transcripts failed (exit {self._child.returncode}): "
                               f"{said.splitlines()[-1] if said else 'no error given'}\n{said}")
        count, _, text = out.partition(b"\n")
        return text.decode("utf-8"), int(count)

    def __enter__(self) -> Packing:
        return self

    def __exit__(self, *exc) -> None:
        if self._child.poll() is None:
            self._child.kill()
        self._reader.join()


def packed_json(run_dir: Path, same: int) -> tuple[bytes, int]:
    """The run's transcripts packed for the page, as JSON safe inside <script> (UTF-8), and how many
    matches they hold; ``same``: payoffs that agree to this many decimals are level."""
    store = open_run(run_dir)
    try:
        with no_cycle_collection():
            packed = pack_transcripts(store.transcript_rows(events=SHOWN_EVENTS), same)
            return script_json_bytes(packed), len(packed["matches"])
    finally:
        store.close()


@contextmanager
def no_cycle_collection() -> Iterator[None]:
    """A report builds a million small lists and no reference cycles: the cyclic garbage collector
    would walk them again and again as they pile up (a third of the time of packing), to free
    nothing. It runs again afterwards, as before."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def script_json(value) -> str:
    """JSON safe inside <script>: no '<', '>' or '&' survive, so no reply can close the tag. NaN and
    the infinities, which JSON.parse rejects, become null (orjson's own rule)."""
    return script_json_bytes(value).decode("utf-8")


def script_json_bytes(value) -> bytes:
    # numpy's scalars as numbers: json took its float64 (a float subclass), and orjson takes none unasked
    text = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY)
    return text.replace(b"<", b"\\u003c").replace(b">", b"\\u003e").replace(b"&", b"\\u0026")


class _Strings:
    """Every text once, numbered in the order first met; None is -1. ``add(text, len(index) - 1)``
    is the dict's own setdefault, kept bound for the loops over every message."""

    def __init__(self):
        self.index: dict[str | None, int] = {None: -1}
        self.add = self.index.setdefault

    def __call__(self, text: str | None) -> int:
        return self.add(text, len(self.index) - 1)

    @property
    def items(self) -> list[str]:
        return list(self.index)[1:]


def _scored(match: MatchRow, same: int) -> list[float]:
    return [round(match.payoffs[s.label], same) for s in match.seats if s.label in match.payoffs]


def contests(matches: Iterable[MatchRecord | MatchRow], same: int) -> set[str]:
    """The entries whose matches are contests, where one seat's gain is another's loss: every finished
    match shares out the same total, and some match shared it unevenly. Elsewhere (a shared reward, as
    in code review; scores each seat earns on its own, as a translation's chrF; a public good) a higher
    payoff does not beat anyone, and no match is won. ``matches``: records, or the store's rows of them."""
    totals: dict[str, set[float]] = defaultdict(set)
    uneven: set[str] = set()
    for match in matches:
        if match.status != "finished" or not match.payoffs:
            continue
        scored = _scored(match, same)
        if not scored:
            continue
        totals[match.group].add(round(sum(scored), same - 3))
        if max(scored) != min(scored):
            uneven.add(match.group)
    return {group for group, sums in totals.items() if len(sums) == 1 and group in uneven}


def _outcome(match: MatchRecord | MatchRow, contest: bool, same: int) -> tuple[str, list[int]]:
    """In a contest 'tie' (every scored seat level) or 'decided', with the seats holding the top payoff;
    elsewhere 'scored', with no winner. A match that did not finish has its status instead (failed,
    interrupted, truncated) and no winner."""
    if match.status != "finished":
        return match.status, []
    if not contest:
        return "scored", []
    values = [None if s.label not in match.payoffs else round(match.payoffs[s.label], same) for s in match.seats]
    scored = [v for v in values if v is not None]
    if not scored or max(scored) == min(scored):
        return "tie", []
    top = max(scored)
    return "decided", [i for i, v in enumerate(values) if v == top]


def _asked(event: dict[str, Any], labels: set[str]) -> str:
    """Who took a turn: a seat's label, or a judge a referee asked (no seat) with the judge's name,
    since one round may ask several."""
    agent = event.get("agent")
    return event["seat"] if event["seat"] in labels or not agent else f"{event['seat']} ({agent})"


def pack_transcripts(transcripts: Iterable[StoredTranscript], same: int) -> dict[str, Any]:
    """Every match's transcript for the page, from the store's rows as they are stored (a loop over
    every message of a large run: it does no more than it must). Which entries are contests
    (``contests``) is known only once every match has gone by, so outcomes are filled in at the end."""
    text = _Strings()
    index, add = text.index, text.add
    audiences: dict[str, int] = {}  # by their JSON, as stored: each is parsed once, at the end
    seen_by = audiences.setdefault
    groups: dict[str, tuple[int, str]] = {}  # entry -> (index, game)
    agents: dict[str, int] = {}
    kinds = KINDS.get
    matches, rows = [], []
    for match, posted, happened in transcripts:
        group, _ = groups.setdefault(match.group, (len(groups), match.game))
        seats = [[text(s.label), text(s.role), agents.setdefault(s.agent, len(agents))] for s in match.seats]
        rows.append(match)
        messages = []
        keep = messages.append
        for _, rnd, sender, recipients, kind, content, value, shown in posted:
            # the structured data behind a verdict kept for the record is worth showing; elsewhere it repeats the text
            if value is not None and (kind == "verdict" or (sender == REFEREE and recipients == "[]")):
                data = _shown_data(value)
                data = -1 if data is None else add(data, len(index) - 1)
            else:
                data = -1
            # shown: what the other seats got once the anonymity filter took names out (-1: the same words)
            keep([rnd, add(sender, len(index) - 1), kinds(kind, 2), add(content, len(index) - 1),
                  seen_by(recipients, len(audiences)), data, add(shown, len(index) - 1)])
        failures, actions, scrubbed, invalid = [], [], [], 0
        labels = {s.label for s in match.seats}
        bodies = json.loads(f"[{','.join(row[2] for row in happened)}]") if happened else ()  # one parse per match
        for (_, kind, _), e in zip(happened, bodies):
            if kind == "turn_failed":
                invalid += e["failure"] == "invalid"
                failures.append([e["round"], text(_asked(e, labels)), e["attempt"], FAILURES[e["failure"]], text(e["reply"]),
                                 text(e["reason"])])
            elif kind == "action":
                action = e["action"]
                shown = action if isinstance(action, str) else json.dumps(action, ensure_ascii=False)
                actions.append([e["round"], add(_asked(e, labels), len(index) - 1), add(shown, len(index) - 1),
                                int(e["defaulted"]), e["attempts"]])
            elif kind == "scrubbed":
                scrubbed.append([e["round"], text(e["seat"]), text(", ".join(e["found"]))])
        matches.append({
            "k": match.key, "g": group, "rep": match.repeat, "st": match.status,
            "r": match.rounds, "seed": str(match.seed), "seats": seats,
            "p": [match.payoffs.get(s.label) for s in match.seats], "o": None, "w": None,
            "n": invalid, "m": messages, "f": failures, "a": actions, "x": scrubbed, "e": text(match.error),
        })
    contested = contests(rows, same)
    for match, packed in zip(rows, matches):
        packed["o"], packed["w"] = _outcome(match, match.group in contested, same)
    return {
        "strings": text.items,
        "audiences": [[text(seat) for seat in json.loads(a)] for a in audiences],
        "groups": [{"name": g, "game": game, "contest": g in contested} for g, (_, game) in groups.items()],
        "agents": list(agents),
        "matches": matches,
    }


def _shown_data(stored: str) -> str | None:
    """A message's data as the page shows it: its JSON with the text as written (not escaped to ASCII);
    None for data that holds nothing (an empty object or list, a zero, as the record keeps it)."""
    if stored[:1] in ("{", "[") and len(stored) > 2 and "\\u" not in stored:
        return stored  # json.dumps wrote it: the very text json.dumps(json.loads(stored), ensure_ascii=False) gives
    value = json.loads(stored)
    return json.dumps(value, ensure_ascii=False) if value else None


if __name__ == "__main__":  # Packing's child: the match count on a line, then the JSON text
    gc.disable()  # for good: turned back on, it would walk the million objects just made, in a process about to end
    text, matches = packed_json(Path(sys.argv[1]), int(sys.argv[2]))
    sys.stdout.buffer.write(b"%d\n" % matches + text)
    sys.stdout.buffer.flush()
    # Freeing a large run's million small objects one by one took a fifth of a second, for a process
    # that is done: its output is written and its store closed.
    os._exit(0)
