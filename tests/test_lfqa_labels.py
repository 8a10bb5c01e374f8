"""PRD's LFQA labels and its "choose one" reviewers.

The LFQA expert file has one to three judgments per pair. Arena folds them to their majority; an
even split is a tie (``expert_ties: tie``, the default) or, as PRD's code does, the first expert's
vote (``expert_ties: first``). The second rule is checked against the counts computed here from
the raw file, and against the human win rates the paper prints (Tables 10 and 11). A peer
discussion with ``allow_tie: false`` forbids a tie in what the reviewers are sent and asks a tie
again with the reason, proven by the request bodies of the local mock server."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict

import pytest

from arena.contract.events import TurnFailed
from arena.games.discussion_summary import discussion_summaries, summarize
from arena.games.questions import expert_label, load_pairs

from conformance_kit import (
    BACKENDS,
    current_prompt,
    local_only,  # noqa: F401  (an autouse fixture)
    mock_server,
    model_agent,
    scenario,
)
from helpers import ROOT
from mock_llm import body_text
from test_conformance import ANSWER_A, ANSWER_B, QUESTION, own_turns, token
from test_conformance_judging import asked_again, by_rules, play_with_defaults

LFQA = ROOT.parent / "shared" / "data" / "prd" / "lfqa" / "experts_pairwise_human_preferences.jsonl"
needs_lfqa = pytest.mark.skipif(not LFQA.is_file(), reason=f"PRD's LFQA data is not at {LFQA} (../shared/data beside the project)")


def raw_votes() -> list[tuple[str, str, list[int]]]:
    """(type of answer A, type of answer B, the experts' preferences in file order) per pair, read
    from the file directly, without Arena's reader."""
    pairs: dict[tuple, list[dict]] = defaultdict(list)
    for line in LFQA.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        pairs[(row["question"], row["answer_a"], row["answer_b"])].append(row)
    return [(rows[0]["answer_a_type"], rows[0]["answer_b_type"], [r["overall_preference"] for r in rows])
            for rows in pairs.values()]


def test_an_even_split_is_a_tie_or_the_first_experts_vote():
    assert [expert_label(p) for p in ([1], [-1, -1, 1], [1, -1], [-1, 1])] == [1, -1, 0, 0]
    assert [expert_label(p, "first") for p in ([1], [-1, -1, 1], [1, -1], [-1, 1])] == [1, -1, 1, -1]


@needs_lfqa
def test_prds_rule_gives_prds_label_counts():
    votes = raw_votes()
    assert len(votes) == 140 and sum(len(p) for _, _, p in votes) == 260
    # PRD's code: the majority, and where the votes cancel out, the first vote it read
    prd = Counter(int(sum(p) > 0) - int(sum(p) < 0) if sum(p) else p[0] for _, _, p in votes)
    splits = sum(sum(p) == 0 for _, _, p in votes)
    assert splits == 11  # two experts who disagree: the only way 1-3 votes of ±1 cancel out
    first = Counter(c.label for c in load_pairs(str(LFQA), "first").values())
    tie = Counter(c.label for c in load_pairs(str(LFQA)).values())
    assert first == prd == {-1: 70, 1: 70}
    assert tie[0] == splits and tie[-1] + tie[1] == 140 - splits  # Arena's default keeps them as ties
    assert {c.expert_ties for c in load_pairs(str(LFQA), "first").values()} == {"first"}


def gpt3_win_rate(cases, shown_first: bool | None = None) -> float:
    """The machine (GPT-3) answer's win rate against the human one by the labels, ties half: PRD's
    Table 10 (both orders) and Table 11 (``shown_first``: the GPT-3 answer shown first or second)."""
    mixed = [c for c in cases if {c.source_a, c.source_b} == {"human", "machine"}
             and (shown_first is None or (c.source_a == "machine") == shown_first)]
    won = [0.5 if c.label == 0 else float(c.label == (-1 if c.source_a == "machine" else 1)) for c in mixed]
    return sum(won) / len(won)


@needs_lfqa
def test_prds_rule_reproduces_the_papers_human_win_rates_on_lfqa():
    first = list(load_pairs(str(LFQA), "first").values())
    # Table 10, "Human": 58.67%; Table 11, "Human": 57.89% with GPT-3's answer first, 59.46% second
    assert round(100 * gpt3_win_rate(first), 2) == 58.67
    assert (round(100 * gpt3_win_rate(first, True), 2), round(100 * gpt3_win_rate(first, False), 2)) == (57.89, 59.46)
    # with splits as ties the first figures move: the paper did not count them so
    tie = list(load_pairs(str(LFQA)).values())
    assert round(100 * gpt3_win_rate(tie), 2) == 58.0 and round(100 * gpt3_win_rate(tie, True), 2) == 56.58


def test_a_bad_rule_is_refused():
    from arena.games.peer_discussion import PeerDiscussion
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="expert_ties"):
        PeerDiscussion.Params(pairs="x.jsonl", expert_ties="second")


# -- played against the mock: the rule in the record, and reviewers who may not say "tie" ----------
def split_file(tmp_path) -> str:
    """One pair in LFQA's own shape, judged by two experts who disagree: the first prefers answer B."""
    path = tmp_path / "lfqa.jsonl"
    rows = [{"question": QUESTION, "answer_a": ANSWER_A, "answer_b": ANSWER_B, "answer_a_type": "human",
             "answer_b_type": "machine", "overall_preference": vote, "justification": "-"} for vote in (1, -1)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def tie_then_two(body) -> str:
    """Reviewer 1 backs answer 2 throughout. Reviewer 2 answers "tie" when first asked, and answer 2
    from then on (once it has replied: asked again, or at a later turn)."""
    text = body_text(body)
    seat = re.search(r"You are (Reviewer \d)", text).group(1)
    if seat == "Reviewer 2" and own_turns(body) == 0:
        return f"Both answers have merit [{token(text)}].\nPreference: tie"
    return f"Answer 2 is the one I back [{token(text)}].\nPreference: 2"


@pytest.mark.parametrize("backend", BACKENDS)
async def test_without_ties_the_prompt_forbids_one_and_a_tie_is_asked_again_with_the_reason(backend, tmp_path):
    params = {"pairs": split_file(tmp_path), "max_turns": 2, "allow_tie": False, "expert_ties": "first"}
    with mock_server(backend, tie_then_two) as mock:
        agents = {"ann": model_agent(backend, mock, model="ann-model"), "bob": model_agent(backend, mock, model="bob-model")}
        raw = scenario("no-ties", agents, "peer_discussion", params, tournament={"role_swap": False})
        raw["match"]["max_retries"] = 1
        raw["games"][0]["agents"] = ["ann", "bob"]
        (record,), reviews = await play_with_defaults(tmp_path, raw)
        requests = mock.answered()
    assert requests
    for request in requests:  # every request: the rules ask for 1 or 2 and say a tie is not an option
        assert "'Preference: 1' or 'Preference: 2' (a tie is not an option: choose the better answer)" in request.text
        assert "or 'Preference: tie'" not in request.text  # never offered as a choice
    # a backend that holds replies to the game's schema (OpenAI's json_schema) offers no tie either
    schemas = [r.body["response_format"]["json_schema"]["schema"] for r in requests
               if (r.body.get("response_format") or {}).get("type") == "json_schema"]
    assert all(s["properties"]["preference"]["enum"] == ["1", "2"] for s in schemas)
    assert len(schemas) == (len(requests) if backend == "openai" else 0)
    second = by_rules(requests, "You are Reviewer 2,")
    # its first reply said "tie" and was asked again; its second turn (round 3) was asked once
    assert len(second) == 3
    refused, retry = asked_again(second)[0]
    assert refused.reply.endswith("Preference: tie") and second.index(retry) == 1
    assert "A tie is not an option here" not in current_prompt(second[2].body)
    reason = current_prompt(retry.body)
    assert "A tie is not an option here: choose the answer you find better" in reason
    assert "Your last line was 'Preference: tie'" in reason
    failed = [e for e in record.events if isinstance(e, TurnFailed)]
    assert [(e.round, e.seat) for e in failed] == [(1, "Reviewer 2")]
    taken = [(e.round, e.seat, e.action, e.defaulted) for e in record.events if e.type == "action"]
    assert (1, "Reviewer 2", 1, False) in taken and all(action != 0 for _, _, action, _ in taken)
    # the label: the experts split, the first preferred answer B; the notice says which rule made it
    (data,) = [m.data for m in record.messages if m.kind == "notice"]
    assert data["label"] == 1 and data["expert_ties"] == "first" and data["allow_tie"] is False
    assert record.payoffs == {"Reviewer 1": 1.0, "Reviewer 2": 1.0}
    assert sorted((r.reviewer, r.score) for r in reviews) == [("ann", 1), ("bob", 1)]
    (summary,) = discussion_summaries([record])
    assert summary.expert_ties == ["first"]
    (found,) = summarize([record])  # the run summary's tables name the rule in their titles
    assert all("an even split goes to the first expert, as PRD's code" in t.title for t in found.tables)


@pytest.mark.parametrize("rule, label", [("tie", 0), ("first", 1)])
def test_chateval_debate_reads_the_split_by_its_rule_and_records_it(tmp_path, rule, label):
    import random

    from arena.games.chateval_debate import ChatEvalDebate

    params = ChatEvalDebate.Params(pairs=split_file(tmp_path), expert_ties=rule)
    seats = ["Debater 1", "Debater 2"]
    game = ChatEvalDebate(params, seats, {s: "Debater" for s in seats}, random.Random(1))
    assert game.case.label == label
    assert game.summary()["expert_ties"] == rule and game.summary()["label"] == label
