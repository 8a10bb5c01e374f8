"""The leaderboard: every method of peer rank over one set of reviews, with intervals and agreement (PRD, DeepEval)."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel

from . import bootstrap as bs
from .agreement import UNITS, ExampleAgreement, RankingAgreement, Unit, example_agreement, ranking_agreement, verdicts
from .bias import ReviewerBias, reviewer_bias
from .bradley_terry import PRIOR_TIES, fit as fit_bradley_terry
from .elo import PASSES, SCHEMES, Scheme, elo, starting_weights
from .places import competition_ranks, standing
from .reviews import HUMAN, ReviewError, Reviews
from .weight_check import WeightCheck, check_weights
from .separability import Separability, separability
from .style import AnswerStyles, StyleControl, style_control
from .winrate import pairwise_matrix, win_rate

Method = Literal["winrate", "elo", "bt"]
METHODS: tuple[Method, ...] = ("winrate", "elo", "bt")


class Separated(BaseModel):
    """Bradley–Terry: the groups the results split apart (names), and what was done about it."""

    unbeaten: list[list[str]]  # never lost to anyone outside their group
    winless: list[list[str]]  # never beat nor tied anyone outside theirs
    prior_ties: float  # virtual ties added between every two contestants


class MethodResult(BaseModel):
    method: Method
    weighted: bool
    scores: dict[str, float]
    rank: dict[str, int]  # standard competition ranking: equal scores share a place ("1, 2, 2, 4")
    low: dict[str, float] | None  # bootstrap 95% interval, questions resampled; None with no bootstrap
    high: dict[str, float] | None
    weights: dict[str, float] | None = None  # reviewer weights behind the scores
    iterations: int | None = None  # win rate: iterations to the fixed point; Elo: passes
    last_change: float | None = None
    spread: dict[str, float] | None = None  # Elo: standard deviation over orderings
    scheme: Scheme | None = None  # weighted Elo: how the weights were taken (see arena.rank.elo)
    separated: Separated | None = None  # Bradley–Terry on data that separate
    separated_samples: int | None = None  # Bradley–Terry: bootstrap samples that separate (fitted with the prior)
    separability: Separability | None = None  # how many pairs' intervals do not overlap; None with no intervals
    notes: list[str] = []  # what a reader must know to trust the numbers

    def ranking(self) -> list[str]:
        return standing(self.scores)


class Agreement(BaseModel):
    method: Method
    examples: ExampleAgreement
    ranking: RankingAgreement


class TurnShare(BaseModel):
    """What a contestant's row stands on, for a board ranked from a run's reviews: its own turns in the
    matches that reviewed (its answers and its verdicts), and the shares valid and defaulted."""

    turns: int
    valid_turns: int
    defaulted_turns: int
    valid_share: float | None
    defaulted_share: float | None


class Leaderboard(BaseModel):
    contestants: list[str]
    reviewers: list[str]
    reviews: int  # battles counted: calibrated verdicts, and reviews without a sample index (votes pooled)
    reference: str | None
    methods: list[MethodResult]
    pairwise: list[list[float | None]]  # win rate of row over column, ties half; weighted when pairwise_weights
    pairwise_weights: dict[str, float] | None = None  # the weighted win rate's reviewer weights, when weighted
    bias: list[ReviewerBias]
    agreement: list[Agreement]
    # set by arena.results for a board of a run's reviews; a reviews file has no turns to count
    stands_on: dict[str, TurnShare] | None = None  # contestant -> its turns behind the board
    weight_check: WeightCheck | None = None  # weighted boards: do the reviewers weighed most agree most?
    notes: list[str] = []  # what a reader must know of the whole board (mostly defaults, say)
    style_control: StyleControl | None = None  # Bradley–Terry with style covariates, when asked for (arena.rank.style)


def _separation_note(result: MethodResult, samples: int) -> None:
    split = result.separated
    if split is not None:
        parts = [f"{' and '.join(group)} never lost to the others" for group in split.unbeaten]
        parts += [f"{' and '.join(group)} never beat nor tied the others" for group in split.winless]
        result.notes.append(f"The data separate the contestants ({'; '.join(parts)}): maximum likelihood has no finite "
                            f"answer, so Bradley–Terry adds {split.prior_ties:g} virtual tie between every two "
                            "contestants, a prior that pulls strengths together.")
    if result.separated_samples:
        result.notes.append(f"{result.separated_samples} of {samples} bootstrap samples separate the contestants; "
                            f"they were fitted with the same prior ({PRIOR_TIES:g} virtual tie per pair), so the "
                            "interval's ends are shrunk, not measured.")


def _fit(method: Method, reviews: Reviews, weighted: bool, fixed, orderings: int, samples: int, seed: int,
         scheme: Scheme = "ordering", passes: int = PASSES) -> MethodResult:
    rng = np.random.default_rng(seed)
    counts = bs.question_counts(reviews, samples, rng) if samples else None
    names = reviews.contestants
    extra: dict = {}
    bounds = None
    if method == "winrate":
        found = win_rate(reviews, weighted, fixed)
        if samples:
            bounds = bs.interval(bs.win_rate_samples(reviews, counts, weighted, fixed))
        scores = found.scores
        extra = dict(weights=found.weights, iterations=found.iterations, last_change=found.last_change)
    elif method == "elo":
        found = elo(reviews, weighted, fixed, orderings=orderings, passes=passes, seed=seed, scheme=scheme)
        if samples:
            start, as_contestant = starting_weights(reviews, fixed)
            if found.scheme == "ordering":  # each sample replays its own order with its own weights
                bounds = bs.interval(bs.elo_samples(reviews, counts, rng, start, as_contestant, found.passes))
            else:  # one pass with the weights found
                used = np.array([found.weights[r] for r in reviews.reviewers])
                bounds = bs.interval(bs.elo_samples(reviews, counts, rng, used, np.full_like(as_contestant, -1)))
        scores = found.scores
        extra = dict(weights=found.weights, iterations=found.passes, last_change=found.last_change,
                     spread=found.spread, scheme=found.scheme)
    else:
        weights = win_rate(reviews, True, fixed).weights if weighted else None
        found = fit_bradley_terry(reviews, weights=weights)
        if samples:
            w = None if weights is None else np.array([weights[r] for r in reviews.reviewers])
            draws, split = bs.bradley_terry_samples(reviews, counts, w)
            bounds = bs.interval(draws)
            extra["separated_samples"] = split
        scores = found.scores
        extra["weights"] = weights
        if found.separation is not None:
            extra["separated"] = Separated(unbeaten=[[names[i] for i in g] for g in found.separation.unbeaten],
                                           winless=[[names[i] for i in g] for g in found.separation.winless],
                                           prior_ties=PRIOR_TIES)
    low, high = (None, None) if bounds is None else (dict(zip(names, bounds[0].tolist())), dict(zip(names, bounds[1].tolist())))
    result = MethodResult(method=method, weighted=weighted, scores=scores, rank=competition_ranks(scores), low=low,
                          high=high, separability=None if low is None else separability(scores, low, high), **extra)
    _separation_note(result, samples)
    return result


def leaderboard(
    reviews: Reviews,
    methods: tuple[Method, ...] = METHODS,
    reviewers: list[str] | None = None,
    weighted: bool = False,
    fixed: dict[str, float] | None = None,
    reference: str | None = HUMAN,
    orderings: int = 1000,
    bootstrap: int = 200,
    seed: int = 0,
    agreement_unit: Unit = "order",
    elo_scheme: Scheme = "ordering",
    passes: int = PASSES,
    styles: AnswerStyles | None = None,
) -> Leaderboard:
    """Rank the contestants from ``reviewers``' reviews (default: everyone but the ``reference``),
    and measure their agreement with the ``reference`` reviewer: by default the human raters, when
    the reviews have any; a reference named otherwise must have reviewed.
    ``bootstrap=0`` gives no intervals. ``styles``: each answer's style, for a style-controlled
    Bradley–Terry beside the methods (``arena.rank.style``)."""
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise ReviewError(f"unknown method {', '.join(map(repr, unknown))}; methods: {', '.join(METHODS)}")
    if agreement_unit not in UNITS:
        raise ReviewError(f"unknown agreement unit {agreement_unit!r}; one of {', '.join(UNITS)}")
    if elo_scheme not in SCHEMES:
        raise ReviewError(f"unknown Elo weighting {elo_scheme!r}; one of {', '.join(SCHEMES)}")
    if bootstrap < 0 or orderings < 1 or passes < 1:
        raise ReviewError(f"need bootstrap >= 0 (got {bootstrap}), orderings >= 1 (got {orderings}) "
                          f"and passes >= 1 (got {passes})")
    if reference is not None and reference not in reviews.reviewers:
        if reference != HUMAN:  # the default is looked for; a name someone typed must be there
            raise ReviewError(f"no reviews by {reference!r} to check the others against; "
                              f"reviewers here: {', '.join(reviews.reviewers)}")
        reference = None
    chosen = reviewers or [r for r in reviews.reviewers if r != reference]
    if not chosen:
        raise ReviewError("no reviewers left to rank with")
    given = reviews.by(chosen)
    selected = given.battles()  # the samples of one comparison calibrated into one verdict, as the game does
    # first: its temporaries (40 MB for a million reviews) come and go before the Elo loads numba (60 MB more)
    bias = reviewer_bias(given, selected)
    results = [_fit(m, selected, weighted, fixed, orderings, bootstrap, seed, elo_scheme, passes) for m in methods]
    agreement = []
    truth_verdicts = None
    if reference is not None and reference not in chosen:
        truth = reviews.by([reference]).battles()
        truth_verdicts = verdicts(truth)
        judged = Reviews.from_rows(truth.rows())  # rankings are compared over the contestants the reference judged
        for result in results:
            # the reviewers' verdict on an example is their vote, weighed as the method weighs them
            vote_weights = result.weights if result.weighted else None
            truth_scores = _fit(result.method, judged, False, None, orderings, 0, seed).scores
            agreement.append(Agreement(
                method=result.method,
                examples=example_agreement(verdicts(selected, vote_weights, agreement_unit), truth_verdicts),
                ranking=ranking_agreement(result.scores, truth_scores),
            ))
    pairwise_weights = win_rate(selected, True, fixed).weights if weighted else None
    matrix = pairwise_matrix(selected, pairwise_weights)
    weight_check = None
    if weighted:
        weight_check = check_weights(selected, {r.method: r.weights for r in results if r.weights}, fixed,
                                     agreement_unit, reference, truth_verdicts)
    controlled = None if styles is None else style_control(
        selected, styles, bootstrap, seed, win_rate(selected, True, fixed).weights if weighted else None)
    return Leaderboard(
        contestants=selected.contestants, reviewers=selected.reviewers, reviews=len(selected), reference=reference,
        methods=results, pairwise=[[None if np.isnan(v) else float(v) for v in row] for row in matrix],
        pairwise_weights=pairwise_weights, bias=bias, agreement=agreement,
        weight_check=weight_check, notes=[weight_check.warning] if weight_check and weight_check.warning else [],
        style_control=controlled,
    )


__all__ = ["Leaderboard", "MethodResult", "ReviewError", "Reviews", "TurnShare", "leaderboard"]
