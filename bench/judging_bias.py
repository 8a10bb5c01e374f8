"""How much peer rank and FairEval's calibration undo a biased judge, with synthetic agents whose
true quality is known.

Five synthetic peers answer eight questions and review every pair of answers in both orders
(scenarios/pairwise-review-synthetic.yaml). One of them, "braggart", favours the answer shown
first and its own answers. Printed:

- Kendall's tau between the true ranking and: braggart's reviews alone, all reviewers with equal
  weights, all reviewers weighted by peer rank;
- for braggart: how often the answer shown first wins, and how often its verdict agrees with the
  truth before calibration (each order on its own) and after BPC (the mean over both orders).

    .venv/bin/python bench/judging_bias.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import trio
import yaml
from scipy import stats

ROOT = Path(__file__).resolve().parent.parent


def measure() -> dict:
    from arena.rank.reviews import Reviews
    from arena.rank.winrate import win_rate
    from arena.run.runner import KeepRecords, run_tournament
    from arena.run.scenario import parse_scenario

    raw = yaml.safe_load((ROOT / "scenarios" / "pairwise-review-synthetic.yaml").read_text())
    raw["games"][0]["params"]["questions"] = str(ROOT / "scenarios" / "data" / "sample-questions.jsonl")
    scenario = parse_scenario(raw)
    truth = {name: agent["params"]["quality"] for name, agent in scenario.agents.items()}
    keep = KeepRecords()  # a small run: its records are kept in hand, the runner keeps none
    result = trio.run(run_tournament, scenario, None, keep)
    records = keep.in_order(result)
    reviews = Reviews.from_rows([r for record in records for r in record.reviews])

    def tau(scores):
        names = sorted(truth)
        return float(stats.kendalltau([truth[n] for n in names], [scores[n] for n in names]).statistic)

    alone = win_rate(reviews.by(["braggart"]).battles()).scores
    equal = win_rate(reviews.battles()).scores
    weighted = win_rate(reviews.battles(), weighted=True)
    first_wins = raw_right = raw_total = bpc_right = bpc_total = 0
    for record in records:
        agent = {s.label: s.agent for s in record.seats}
        (notice,) = [m for m in record.messages if m.kind == "notice"]
        for item in notice.data["verdicts"]:
            if agent[item["judge"]] != "braggart":
                continue
            a, b = (agent[s] for s in item["pair"])
            if truth[a] == truth[b]:
                continue
            right = -1 if truth[a] > truth[b] else 1  # the verdict the truth calls for, from the pair's side
            for order, difference in zip(item["orders"], item["results"]):  # score differences, from the pair's side
                verdict = (difference > 0) - (difference < 0)
                first_wins += (verdict == -1) if order == 0 else (verdict == 1)
                raw_right += verdict == right
                raw_total += 1
            bpc_right += item["verdict"] == right
            bpc_total += 1
    return {
        "tau_braggart_alone": tau(alone), "tau_all_equal": tau(equal), "tau_all_weighted": tau(weighted.scores),
        "braggart_weight": weighted.weights["braggart"], "sage_weight": weighted.weights["sage"],
        "braggart_first_shown_wins": first_wins / raw_total, "braggart_accuracy_uncalibrated": raw_right / raw_total,
        "braggart_accuracy_bpc": bpc_right / bpc_total,
    }


def main() -> int:
    figures = measure()
    width = max(map(len, figures))
    for name, value in figures.items():
        print(f"{name:<{width}}  {value:.3f}")
    ok = (figures["tau_all_weighted"] > figures["tau_braggart_alone"]
          and figures["braggart_accuracy_bpc"] > figures["braggart_accuracy_uncalibrated"])
    print("weighted peer rank beats the biased judge alone, and BPC beats its uncalibrated verdicts:", "yes" if ok else "NO")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
