"""Style control: Bradley–Terry with the answers' style as covariates (as Arena-Hard-Auto does).

Judges tend to prefer the longer answer, and the one with more markdown. To rank on substance, each
battle also carries how its two answers differ in style, and the logistic Bradley–Terry model fits the
contestants' strengths and a coefficient per style feature together:

    logit P(A wins) = θ_A − θ_B + Σ_k β_k · d_k / s_k,   d_k = (A_k − B_k) / (A_k + B_k)  (0 when both are 0)

with ``s_k`` the standard deviation of ``d_k`` over the battles ranked (so a coefficient is what one
typical difference in that feature is worth). The θ are the style-controlled ratings; β says how much
each feature sways the judges. Ties count as half a win each way, as in ``bradley_terry``.

An answer's style (``measure``): its length in words (whitespace-separated; a stand-in for tokens
that needs no tokenizer), and its markdown outside fenced code: header lines, list items (bulleted or
numbered) and bold spans. They are kept per answer, keyed by (question, contestant, match, repeat), so
they follow the reviews through ``Reviews.battles`` whatever the battles' order.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from .bootstrap import interval, question_counts
from .bradley_terry import ELO_SCALE, PRIOR_TIES, separation
from .places import competition_ranks
from .reviews import ReviewError, Reviews
from .separability import Separability, separability

FEATURES = ("length", "headers", "lists", "bold")
FEATURE_NAMES = {"length": "length (words)", "headers": "markdown headers", "lists": "list items", "bold": "bold spans"}
CONFOUNDED = 0.01  # a covariate whose variation the contestants' identities explain to 99% cannot be told from them
CELLS = 20_000_000  # numbers a batch of bootstrap fits may hold at once (160 MB): samples x battles x (8 + covariates)
RIDGE = 1e-6  # keeps the fit unique (strengths are only known up to a constant) without moving it measurably

_FENCE = re.compile(r"^\s*(```|~~~).*?^\s*\1[^\n]*$", re.MULTILINE | re.DOTALL)
_HEADER = re.compile(r"^ {0,3}#{1,6}[ \t]+\S", re.MULTILINE)
_LIST_ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+\S", re.MULTILINE)
_BOLD = re.compile(r"\*\*(?=\S)[^\n]*?\S\*\*|__(?=\S)[^\n]*?\S__")

Key = tuple[str, str, str, int]  # (question, contestant, match, repeat): one answer


def measure(text: str) -> tuple[float, ...]:
    """An answer's style, in the order of ``FEATURES``: words, then header lines, list items and bold
    spans outside fenced code blocks (code is content, not formatting)."""
    prose = _FENCE.sub("", text)
    return (float(len(text.split())), float(len(_HEADER.findall(prose))), float(len(_LIST_ITEM.findall(prose))),
            float(len(_BOLD.findall(prose))))


@dataclass
class AnswerStyles:
    """Each answer's style features, by (question, contestant, match, repeat); ``features``: those measured
    (a subset of ``FEATURES``, in that order), ``source``: where they came from, for messages."""

    features: tuple[str, ...]
    values: dict[Key, tuple[float, ...]] = field(default_factory=dict)
    source: str = "the answers"

    def of(self, battles: Reviews) -> tuple[np.ndarray, np.ndarray]:
        """The features [N, K] of each battle's answer A and answer B."""
        n, k = len(battles), len(self.features)
        a, b = np.empty((n, k)), np.empty((n, k))
        missing: list[tuple[str, str, str]] = []
        for i in range(n):
            question, match, repeat = battles.questions[battles.question[i]], battles.matches[battles.match[i]], int(battles.repeat[i])
            for side, out in ((battles.a, a), (battles.b, b)):
                who = battles.contestants[side[i]]
                found = self.values.get((question, who, match, repeat))
                if found is None:
                    missing.append((question, who, match))
                    continue
                out[i] = found
        if missing:
            question, who, match = missing[0]
            where = f" in match {match!r}" if match else ""
            raise ReviewError(f"style control needs the style of every answer compared, and {self.source} lack "
                              f"{len(missing)} of {2 * n} (the first: the answer of {who!r} to question {question!r}{where})")
        return a, b


def read_style_columns(path: str | Path, required: bool = True) -> AnswerStyles | None:
    """The style columns of a reviews JSONL file (read after ``Reviews.read_jsonl`` checked its lines):
    ``a_length``/``b_length`` (words of the answer shown first and second) on every line, and optionally
    ``a_headers``/``b_headers``, ``a_lists``/``b_lists``, ``a_bold``/``b_bold``, each pair on every line
    or on none. One answer (question, contestant, match, repeat) must have the same figures wherever it
    appears. A file without them is an error, or None when they are not ``required``."""
    path = Path(path)
    lines = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                lines.append((number, json.loads(line)))
    given = [f for f in FEATURES if any(f"a_{f}" in row or f"b_{f}" in row for _, row in lines)]
    if "length" not in given:
        if not required:
            return None
        raise ReviewError(f"{path}: --style-control needs each answer's length, and no line has a_length and "
                          "b_length (the words of the answer shown first and second); a_headers, b_headers, "
                          "a_lists, b_lists, a_bold and b_bold may be given too")
    styles = AnswerStyles(features=tuple(given), source=str(path))
    seen: dict[Key, int] = {}
    for number, row in lines:
        figures = []
        for side in "ab":
            values = []
            for feature in given:
                value = row.get(f"{side}_{feature}")
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                    what = "missing" if value is None else f"{value!r}, not a count"
                    raise ReviewError(f"{path}, line {number}: {side}_{feature} is {what}: give it on every line "
                                      f"(a number of {FEATURE_NAMES[feature]}, 0 or more), or on none")
                values.append(float(value))
            figures.append(tuple(values))
        match, repeat = str(row.get("match", "")), int(row.get("repeat", 1))
        for side, values in zip("ab", figures):
            key = (str(row["question"]), str(row[side]), match, repeat)
            before = styles.values.setdefault(key, values)
            if before != values:
                raise ReviewError(f"{path}, line {number}: the answer of {row[side]!r} to question {key[0]!r} has other "
                                  f"style figures ({side}_...) than on line {seen[key]}; one answer has one style")
            seen.setdefault(key, number)
    return styles


class StyleCoefficient(BaseModel):
    feature: str
    value: float  # Elo points that one standard deviation of the feature's relative difference is worth
    low: float | None  # bootstrap 95% interval; None with no bootstrap
    high: float | None
    significant: bool | None  # the interval leaves out zero
    spread: float  # that standard deviation, of (A − B) / (A + B) over the battles


class StyleControl(BaseModel):
    """The style-controlled Bradley–Terry leaderboard (Elo scale, mean 1000), the same model fitted
    without the covariates (``raw_``) for comparison, and what each style feature is worth."""

    features: list[str]
    length_unit: str = "words"
    scores: dict[str, float]
    rank: dict[str, int]
    low: dict[str, float] | None
    high: dict[str, float] | None
    raw_scores: dict[str, float]
    raw_rank: dict[str, int]
    coefficients: list[StyleCoefficient]
    separability: Separability | None = None
    notes: list[str] = []


def fit_logistic(a: np.ndarray, b: np.ndarray, D: np.ndarray, y: np.ndarray, weights: np.ndarray, C: int,
                 start: np.ndarray | None = None, iterations: int = 100, tolerance: float = 1e-9) -> np.ndarray:
    """Bradley–Terry with covariates as a weighted logistic regression without intercept, by Newton's
    method, for several weightings of the same battles at once: battle n says A (``a[n]``) beat B
    (``b[n]``) with weight ``y[n]`` (1, ½ or 0), its covariates ``D[n]`` [N, K]; ``weights`` [S, N] gives
    S fits [S, C + K] (strengths, then coefficients). The strengths enter a battle only as θ_A − θ_B,
    so the Hessian's blocks are sums over battles gathered by ``bincount`` rather than a dense design
    matrix: a few times faster, and a fraction of the memory. They are known only up to a common
    constant, so they are kept centred, or rounding would wander along that flat direction.
    ``start`` [C + K]: where every fit begins (bootstrap samples: the whole data's fit, a few steps away)."""
    S, K = weights.shape[0], D.shape[1]
    P = C + K
    rows = np.arange(S)[:, None]
    at_a, at_b = (rows * C + a).ravel(), (rows * C + b).ravel()  # [S * N] cells of the [S, C] sums
    pair = (rows * C * C + a * C + b).ravel()
    beta = np.zeros((S, P)) if start is None else np.tile(start, (S, 1))
    ridge = RIDGE * np.eye(P)
    for _ in range(iterations):
        theta = beta[:, :C]
        p = 1.0 / (1.0 + np.exp(-(theta[:, a] - theta[:, b] + beta[:, C:] @ D.T)))  # [S, N]
        residual, curvature = weights * (p - y), weights * p * (1 - p)
        gradient = np.empty((S, P))
        gradient[:, :C] = _per_contestant(at_a, residual, S, C) - _per_contestant(at_b, residual, S, C)
        gradient[:, C:] = residual @ D
        hessian = np.zeros((S, P, P))
        between = np.bincount(pair, curvature.ravel(), S * C * C).reshape(S, C, C)
        hessian[:, :C, :C] = -(between + between.transpose(0, 2, 1))
        on_diagonal = _per_contestant(at_a, curvature, S, C) + _per_contestant(at_b, curvature, S, C)
        hessian[:, np.arange(C), np.arange(C)] += on_diagonal
        for k in range(K):
            weighed = curvature * D[:, k]
            cross = _per_contestant(at_a, weighed, S, C) - _per_contestant(at_b, weighed, S, C)
            hessian[:, :C, C + k] = hessian[:, C + k, :C] = cross
        hessian[:, C:, C:] = (D.T[None] * curvature[:, None, :]) @ D
        step = np.linalg.solve(hessian + ridge, (gradient + RIDGE * beta)[..., None])[..., 0]
        step *= np.minimum(1.0, 5.0 / np.maximum(np.abs(step).max(axis=1, keepdims=True), 1e-300))  # no wild first steps
        step[:, :C] -= step[:, :C].mean(axis=1, keepdims=True)
        beta -= step
        if np.abs(step).max() < tolerance:
            break
    return beta


def _per_contestant(cells: np.ndarray, values: np.ndarray, S: int, C: int) -> np.ndarray:
    return np.bincount(cells, values.ravel(), S * C).reshape(S, C)


def style_control(battles: Reviews, styles: AnswerStyles, samples: int = 200, seed: int = 0,
                  reviewer_weights: dict[str, float] | None = None) -> StyleControl:
    """Style-controlled Bradley–Terry over ``battles`` (``Reviews.battles``), with intervals from
    ``samples`` bootstrap samples of the questions (0: none), drawn with ``seed``."""
    C = len(battles.contestants)
    a_style, b_style = styles.of(battles)
    total = a_style + b_style
    relative = np.divide(a_style - b_style, total, out=np.zeros_like(total), where=total > 0)
    spread = relative.std(axis=0)
    notes = []
    kept = [k for k, feature in enumerate(styles.features) if spread[k] > 1e-12]
    for k, feature in enumerate(styles.features):
        if k not in kept:
            notes.append(f"The answers compared never differ in {FEATURE_NAMES[feature]}: that covariate is left out.")
    features = [styles.features[k] for k in kept]
    D = relative[:, kept] / spread[kept]
    a, b = battles.a, battles.b
    for k, feature in enumerate(features):
        if _explained_by_contestants(a, b, D[:, k], C) > 1 - CONFOUNDED:
            notes.append(f"Who the contestants are all but fixes the difference in {FEATURE_NAMES[feature]} (each "
                         "pair's answers differ about as much in every battle): style and contestant cannot be told "
                         "apart, so that coefficient means little, and the ratings stay near the raw ones.")
    w = np.ones(len(battles)) if reviewer_weights is None else \
        np.array([reviewer_weights[r] for r in battles.reviewers])[battles.reviewer]
    # the battles, then one virtual tie between every two contestants (weighed only where the data separate)
    i, j = np.triu_indices(C, 1)
    a_all, b_all = np.concatenate([a, i]), np.concatenate([b, j])
    D_all = np.vstack([D, np.zeros((i.size, D.shape[1]))])
    y_all = np.concatenate([(1.0 - battles.score) / 2, np.full(i.size, 0.5)])  # 1: A won, 0.5: a tie, 0: B won

    separated = []  # per fit: whether its battles separate the contestants (and it took the prior)

    def fitted(counts: np.ndarray, covariates: np.ndarray, start: np.ndarray | None = None) -> np.ndarray:
        """A fit per row of question counts [S, Q] (each battle weighed by its question's count), with
        the prior where those battles separate. A few samples at a time, so that memory stays near
        ``CELLS`` numbers whatever the number of battles and samples."""
        at_once = max(1, CELLS // (len(y_all) * (8 + covariates.shape[1])))
        found = np.empty((len(counts), C + covariates.shape[1]))
        for first in range(0, len(counts), at_once):
            row_weights = counts[first:first + at_once, battles.question] * w
            split = np.array([_separates(battles, r) for r in row_weights], dtype=float)
            separated.extend(split.astype(bool).tolist())
            all_weights = np.hstack([row_weights, np.outer(split * PRIOR_TIES, np.ones(i.size))])
            found[first:first + at_once] = fit_logistic(a_all, b_all, covariates, y_all, all_weights, C, start)
        return found

    every_question = np.ones((1, len(battles.questions)))
    whole = fitted(every_question, D_all)[0]
    raw = fitted(every_question, D_all[:, :0])[0]
    if separated[0]:
        notes.append(f"The data separate the contestants: as plain Bradley–Terry, the fit adds {PRIOR_TIES:g} virtual "
                     "tie between every two contestants, a prior that pulls strengths together.")
    scores, raw_scores = _elo(whole[:C]), _elo(raw[:C])
    names = battles.contestants
    low = high = None
    coefficient_bounds = None
    if samples:
        counts = question_counts(battles, samples, np.random.default_rng(seed))
        draws = fitted(counts, D_all, whole)
        rating_low, rating_high = interval(_elo(draws[:, :C]))
        low, high = dict(zip(names, rating_low.tolist())), dict(zip(names, rating_high.tolist()))
        if features:  # answers that never differ in style leave no coefficient to bound
            coefficient_bounds = interval(ELO_SCALE * draws[:, C:])
        if any(separated[2:]):
            notes.append(f"{sum(separated[2:])} of {samples} bootstrap samples separate the contestants; they were "
                         f"fitted with the same prior, so the intervals' ends are shrunk, not measured.")
    coefficients = []
    for k, feature in enumerate(features):
        lo = hi = None
        if coefficient_bounds is not None:
            lo, hi = float(coefficient_bounds[0][k]), float(coefficient_bounds[1][k])
        coefficients.append(StyleCoefficient(
            feature=feature, value=float(ELO_SCALE * whole[C + k]), low=lo, high=hi,
            significant=None if lo is None else bool(lo > 0 or hi < 0), spread=float(spread[kept[k]])))
    score_map, raw_map = dict(zip(names, scores.tolist())), dict(zip(names, raw_scores.tolist()))
    return StyleControl(features=features, scores=score_map, rank=competition_ranks(score_map), low=low, high=high,
                        raw_scores=raw_map, raw_rank=competition_ranks(raw_map), coefficients=coefficients,
                        separability=None if low is None else separability(score_map, low, high), notes=notes)


def _explained_by_contestants(a: np.ndarray, b: np.ndarray, column: np.ndarray, C: int) -> float:
    """The share of ``column``'s sum of squares that the contestants' indicators (+1 for A, −1 for B)
    explain by least squares: near 1, the covariate is (almost) a function of who plays."""
    total = float(column @ column)
    if total == 0:
        return 1.0
    laplacian = np.zeros((C, C))
    np.add.at(laplacian, (a, a), 1.0)
    np.add.at(laplacian, (b, b), 1.0)
    np.add.at(laplacian, (a, b), -1.0)
    np.add.at(laplacian, (b, a), -1.0)
    projected = np.bincount(a, column, C) - np.bincount(b, column, C)
    coefficients = np.linalg.lstsq(laplacian, projected, rcond=None)[0]
    return float(projected @ coefficients) / total  # the fitted values' sum of squares


def _separates(battles: Reviews, row_weights: np.ndarray) -> bool:
    """Whether these battles, so weighted, split the contestants (``bradley_terry.separation``)."""
    return separation(*_weighted_counts(battles, row_weights)) is not None


def _weighted_counts(battles: Reviews, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    C = len(battles.contestants)
    a_won, b_won, tied = battles.score == -1, battles.score == 1, battles.score == 0
    wins = np.bincount(battles.a * C + battles.b, weights=weights * a_won, minlength=C * C)
    wins += np.bincount(battles.b * C + battles.a, weights=weights * b_won, minlength=C * C)
    ties = np.bincount(battles.a * C + battles.b, weights=weights * tied, minlength=C * C).reshape(C, C)
    return wins.reshape(C, C), ties + ties.T


def _elo(theta: np.ndarray) -> np.ndarray:
    return 1000 + ELO_SCALE * (theta - theta.mean(axis=-1, keepdims=True))
