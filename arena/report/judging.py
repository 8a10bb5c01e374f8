"""The report's section on judging games against their labels: peer discussion (PRD's opinion
altering and holding by leader and follower, accuracy before and after, per pair of reviewers),
debate verdicts (ChatEval's accuracy and kappa, with position calibration) and scores on named
dimensions against human scores (Spearman and Kendall). The numbers are ``arena rank --json``'s."""

from __future__ import annotations

from html import escape

from .sections import note, section, table
from .svg import fmt


def _share(value, digits: int = 3) -> str:
    return "—" if value is None else fmt(value, digits)


def _discussion(s: dict) -> str:
    head = note(f"{s['discussions']} discussions ({s['labelled']} labelled), {s['mean_turns']:.1f} turns on average; "
                f"they agreed at the start in {s['agreed_at_start']} and at the end in {s['agreed_at_end']}; a reviewer "
                f"changed its mind after they had agreed in {s['changed_after_agreement']}. Accuracy against the labels: "
                f"initial preferences {_share(s['initial_accuracy'])}, final {_share(s['final_accuracy'])}, the "
                f"discussion's outcome (PRD's peer discussion accuracy) {_share(s['discussion_accuracy'])}.")
    rows = [[r["agent"] or "all reviewers", r["position"], r["discussions"], _share(r["initial_accuracy"]),
             _share(r["final_accuracy"]), r["disagreed"], r["altered"], r["held"], _share(r["altered_share"]),
             r["changed_after_agreement"]] for r in s["reviewers"]]
    opinions = ("<h4>Opinion altering and holding, by position</h4>" + note(
        "PRD's discussion ordering effect: OA (the reviewer ended elsewhere than it began) and OH (it ended where it "
        "began) are counted over the discussions that began in disagreement; a leader that alters less than a "
        "follower shows the effect.")
        + table(["Reviewer", "Position", "Discussions", "Initial accuracy", "Final accuracy", "Began apart", "OA", "OH",
                 "OA share", "Changed after agreeing"], rows, numeric_from=2,
                attrs=f' class="judging" data-table="discussion" data-group="{escape(s["group"])}"'))
    rows = [[" / ".join(p["reviewers"]), p["leader"] or "either", p["discussions"], p["agreed"],
             " / ".join(_share(v) for v in p["initial_accuracy"].values()),
             " / ".join(_share(v) for v in p["final_accuracy"].values()), _share(p["discussion_accuracy"])]
            for p in s["pairs"]]
    pairs = ("<h4>Per pair of reviewers and who led</h4>" + note(
        "As PRD's Table 8: each reviewer's accuracy before and after (in the order the pair is named), and the "
        "accuracy of the discussion's outcome, with either reviewer leading.")
        + table(["Reviewers", "Led by", "Discussions", "Agreed at end", "Initial accuracy", "Final accuracy",
                 "Discussion accuracy"], rows, numeric_from=2))
    return f"<h3>{escape(s['group'])}: peer discussion</h3>" + head + opinions + pairs


def _verdicts(scores: list[dict]) -> str:
    rows = [[s["group"], s["strategy"] or "—", s["output"] or "—", "yes" if s["calibrated"] else "no", s["examples"],
             s["left_out"], _share(s["accuracy"]), _share(s["cohen_kappa"]),
             f"{_share(s['as_shown_accuracy'])} ({s['as_shown']})"] for s in scores]
    debaters = [[s["group"], d["agent"], d["examples"], _share(d["accuracy"]), _share(d["first_accuracy"])]
                for s in scores for d in s["debaters"]]
    return ("<h3>Debate verdicts against the labels</h3>" + note(
        "ChatEval's evaluation on FairEval's pairs: the group's verdict (majority of choices, mean of score "
        "differences) against the label, as accuracy and Cohen's kappa. With position calibration each pair was "
        "debated in both orders and the two verdicts combined; the last column scores every match alone.")
        + table(["Entry", "Strategy", "Output", "Calibrated", "Examples", "Left out", "Accuracy", "Cohen's κ",
                 "Accuracy per order"], rows, numeric_from=4, attrs=' class="judging" data-table="verdicts"')
        + "<h4>Each debater's own verdict</h4>"
        + table(["Entry", "Debater", "Examples", "Final accuracy", "First-turn accuracy"], debaters, numeric_from=2))


def _dimensions(s: dict) -> str:
    rows = [[c["dimension"], c["responses"], "" if c["dimension"] not in s["mean"] else fmt(s["mean"][c["dimension"]], 2),
             _share(c["spearman"]), _share(c["kendall"])] for c in s["correlations"]]
    names = [c["dimension"] for c in s["correlations"]]
    alone = [[agent] + [f"{_share(c['spearman'])} / {_share(c['kendall'])}" for c in found]
             for agent, found in s["debaters"].items()]
    return (f"<h3>{escape(s['group'])}: scores on dimensions against human scores</h3>" + note(
        f"ChatEval's Topical-Chat setting: the debaters' mean score per dimension over {s['responses']} responses, "
        "and its Spearman and Kendall correlation with the human scores; below, each debater alone.")
        + table(["Dimension", "Responses", "Mean score", "Spearman", "Kendall"], rows,
                attrs=f' class="judging" data-table="dimensions" data-group="{escape(s["group"])}"')
        + (table(["Debater"] + [f"{n} (ρ / τ)" for n in names], alone) if alone else ""))


def judging(summary: dict) -> str:
    rank = summary["rank"]
    parts = [_discussion(s) for s in rank.get("discussion") or []]
    if rank.get("debate_verdicts"):
        parts.append(_verdicts(rank["debate_verdicts"]))
    parts += [_dimensions(s) for s in rank.get("dimension_scores") or []]
    if not parts:  # most runs judge nothing against labels: no empty section for them
        return ""
    return section("judging", "Judges against labels", "".join(parts))
