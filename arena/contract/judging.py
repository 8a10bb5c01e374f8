"""The scored verdict a judge agent gives on a finished match: every seat scored on a scale with
its reasons, as one JSON object. The ``llm_judge`` and ``panel`` referees ask for it in the same
words and read it the same way; it lives here so that any referee, Arena's or a package's, can."""

from __future__ import annotations

import json
import re

from arena.contract.game import InvalidReply

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def answer_format(seats: tuple[str, ...], low: int, high: int) -> str:
    example = ", ".join(f'"{seat}": {{"evaluation": "<why>", "score": <{low}-{high}>}}' for seat in seats)
    return (f"Score each of {', '.join(seats)} on a scale of {low} to {high} (whole numbers), and give the specific "
            f"reasons for each score. Reply with only a JSON object of this form: {{{example}}}")


def parse_verdict(reply: str, seats: tuple[str, ...], low: int, high: int) -> dict[str, tuple[int, str]]:
    """Each seat's (score, evaluation) from a judge's reply; InvalidReply says what is wrong."""
    fenced = _FENCE.search(reply)
    text = fenced.group(1) if fenced else reply
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise InvalidReply("Your reply held no JSON object. " + answer_format(seats, low, high))
    try:
        verdict = json.loads(text[start:end + 1])
    except json.JSONDecodeError as exc:
        raise InvalidReply(f"Your reply was not valid JSON ({exc.msg}). " + answer_format(seats, low, high)) from None
    if not isinstance(verdict, dict):
        raise InvalidReply("Your reply must be one JSON object. " + answer_format(seats, low, high))
    by_name = {str(k).strip().lower(): v for k, v in verdict.items()}
    result = {}
    for seat in seats:
        entry = by_name.get(seat.lower())
        if entry is None:
            raise InvalidReply(f"Your verdict did not score {seat}. " + answer_format(seats, low, high))
        score = entry.get("score") if isinstance(entry, dict) else entry
        if isinstance(score, str) and score.strip().lstrip("-").isdigit():
            score = int(score.strip())
        if isinstance(score, bool) or not isinstance(score, (int, float)) or score != int(score) or not low <= score <= high:
            raise InvalidReply(f"The score for {seat} must be a whole number from {low} to {high}; it was {score!r}.")
        why = entry.get("evaluation", "") if isinstance(entry, dict) else ""
        result[seat] = (int(score), str(why))
    return result
