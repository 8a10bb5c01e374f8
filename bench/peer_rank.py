"""Peer rank: how fast are arena.rank's leaderboard methods, on one core?

1. One million synthetic reviews (50 contestants with hidden strengths, 10
   reviewers of which 6 are also contestants, 2 000 questions, so each
   (question, reviewer) reviews 50 pairs). Scores come from a Bradley–Terry
   model with Davidson ties; a reviewer's acuity scales the strength gap it
   sees, and stronger contestants are sharper reviewers, so PRD's weights have
   something to find. Timed: the weighted win rate to its fixed point, the
   Bradley–Terry fit, and 200 question-bootstrap samples of both
   (arena.rank.bootstrap). Target: under 5 s together.
2. Order-averaged Elo on PRD's 8 000 LLM reviews of Vicuna80 (the ``human``
   reviewer left out): 1 000 orderings of one unweighted pass (target: at most
   0.5 s), and the weighted Elo of both schemes, 5 passes each (target: under 5 s).
3. A plain pure-Python implementation of PRD's Alg. 2 (weighted win rate, one
   loop over every review tuple per iteration, dicts), kept here as the
   reference. It must give the same scores as the vectorised version (to 1e-9)
   on a subsample; it is then run for as many iterations as the vectorised
   version took on the full data (or, when that would take more than
   ``--reference-limit`` seconds, timed on the subsample and extrapolated
   linearly in the number of reviews), for the speed-up.
4. Elo at scale, against FastChat's approach (Chatbot Arena's notebook: an
   online Elo loop in plain Python over the battles, and a bootstrap that
   resamples the battles and runs that loop once per round), written here in
   our own code. On the million synthetic reviews: one pass, arena against that
   loop fed the very same battles in the same order (they must agree to 1e-6;
   target: at least as fast, goal 5x); and a 100-round Elo bootstrap, each in a
   fresh process so its peak memory is its own (target: at most 300 MB for
   arena's). FastChat's bootstrap is timed on ``--fastchat-rounds`` rounds and
   scaled to 100, which the output says.

Everything runs on one core: the BLAS thread variables are set to 1 before
numpy is imported.

    python bench/peer_rank.py            # 1 000 000 reviews
    python bench/peer_rank.py --quick    # 100 000 reviews
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # one core; must happen before numpy is imported

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from scipy.stats import spearmanr  # noqa: E402

from arena.rank.bootstrap import bradley_terry_samples, elo_samples, question_counts, win_rate_samples  # noqa: E402
from arena.rank.bradley_terry import bradley_terry  # noqa: E402
from arena.rank.elo import elo, random_orders, starting_weights  # noqa: E402
from arena.rank.elo_loop import COMPILED, replay  # noqa: E402
from arena.rank.prd import read_prd  # noqa: E402
from arena.rank.reviews import Reviews  # noqa: E402
from arena.rank.winrate import win_rate  # noqa: E402

if COMPILED:  # loaded before anything is timed: every Elo here, warm-ups included, takes the compiled loop
    import arena.rank.elo_compiled  # noqa: E402, F401

TARGET_SYNTHETIC = 5.0  # s: weighted win rate + Bradley–Terry + bootstrap, 1M reviews
TARGET_ELO = 5.0  # s: weighted Elo, 1 000 orderings, PRD's 8 000 LLM reviews
TARGET_ORDERINGS = 0.5  # s: unweighted Elo, 1 000 orderings, PRD's 8 000 LLM reviews
TARGET_PASS_RATIO = 1.0  # one Elo pass over the million reviews, times faster than FastChat's loop (goal: 5)
TARGET_BOOTSTRAP_MIB = 300  # peak memory of a process running a 100-round Elo bootstrap over the million
BOOTSTRAP_ROUNDS = 100
AGREEMENT = 1e-9
PRD_FOLDER = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "prd" / "vicuna80"
PRD_MODELS = ["gpt4", "claude", "vicuna-13b", "gpt35", "bard"]


# -- synthetic reviews ------------------------------------------------------------------------------

def synthetic(n: int, questions: int, contestants: int, reviewers: int, scoring: int, seed: int):
    """``n`` reviews by ``reviewers`` reviewers, the first ``scoring`` of them contestants too.

    Returns the Reviews and the hidden strengths (log-odds, one per contestant)."""
    rng = np.random.default_rng(seed)
    C, R = contestants, reviewers
    names = [f"model-{i:02d}" for i in range(C)]
    strength = rng.normal(0.0, 1.0, C)
    # Contestants that also review: spread over the strength range.
    ranked = np.argsort(strength)
    judges_as_contestants = ranked[np.linspace(0, C - 1, scoring).round().astype(int)]
    external = [f"judge-{i}" for i in range(R - scoring)]
    reviewer_names = sorted(external + [names[c] for c in judges_as_contestants])
    acuity = np.empty(R)
    for r, name in enumerate(reviewer_names):
        if name.startswith("model-"):
            c = names.index(name)
            acuity[r] = 0.2 + 1.0 / (1.0 + np.exp(-1.5 * strength[c]))  # stronger model, sharper reviewer
        else:
            acuity[r] = rng.uniform(0.5, 1.0)
    # Every (question, reviewer) gets the same number of pairs, give or take one.
    cell = rng.permutation(np.arange(n) % (questions * R))
    question, reviewer = cell // R, cell % R
    a = rng.integers(0, C, n)
    b = (a + rng.integers(1, C, n)) % C  # never a itself
    gap = acuity[reviewer] * (strength[a] - strength[b])
    tie = 0.5  # Davidson's ν: P(A) ∝ e^{g/2}, P(B) ∝ e^{-g/2}, P(tie) ∝ ν
    pa, pb = np.exp(gap / 2), np.exp(-gap / 2)
    total = pa + pb + tie
    u = rng.random(n) * total
    score = np.where(u < pa, -1, np.where(u < pa + tie, 0, 1)).astype(np.int8)
    reviews = Reviews(question=question.astype(np.int64), a=a.astype(np.int64), b=b.astype(np.int64),
                      reviewer=reviewer.astype(np.int64), score=score,
                      questions=[f"q{i:05d}" for i in range(questions)], contestants=names, reviewers=reviewer_names)
    return reviews, strength


def subsample(reviews: Reviews, n: int, seed: int) -> Reviews:
    keep = np.sort(np.random.default_rng(seed).choice(len(reviews), size=n, replace=False))
    return Reviews(reviews.question[keep], reviews.a[keep], reviews.b[keep], reviews.reviewer[keep], reviews.score[keep],
                   reviews.questions, reviews.contestants, reviews.reviewers)


# -- the reference: PRD's Alg. 2, one Python loop over the reviews per iteration --------------------

def reference_win_rate(rows: list[tuple[str, str, str, str, int]], contestants: list[str], reviewers: list[str],
                       max_iterations: int = 100, tolerance: float = 1e-12) -> tuple[dict[str, float], dict[str, float], int]:
    """PRD's weighted win rate, written the obvious way.

    Each iteration walks every review tuple (question, A, B, reviewer, score), counting
    per reviewer and contestant the wins (ties half, f(s) = (1 - s) / 2 for A) and the
    battles; a contestant's score is the weighted mean over reviewers of its win rates
    (Eq. 1); reviewers that are contestants get their score, min-max scaled over those
    reviewers and scaled to share what the other reviewers (fixed at 1/R) leave (Eq. 2).
    The same reading as arena.rank.winrate, so the two must agree."""
    R = len(reviewers)
    weights = {r: 1.0 / R for r in reviewers}
    scorers = [r for r in reviewers if r in contestants]
    share = 1.0 - (R - len(scorers)) / R
    scores: dict[str, float] = {}
    iterations = 0
    for iterations in range(1, max_iterations + 1):
        wins: dict[tuple[str, str], float] = defaultdict(float)
        battles: dict[tuple[str, str], int] = defaultdict(int)
        for _question, a, b, reviewer, score in rows:
            a_won = (1 - score) / 2
            wins[reviewer, a] += a_won
            wins[reviewer, b] += 1 - a_won
            battles[reviewer, a] += 1
            battles[reviewer, b] += 1
        total: dict[str, float] = defaultdict(float)
        mass: dict[str, float] = defaultdict(float)
        for (reviewer, contestant), n in battles.items():
            total[contestant] += weights[reviewer] * wins[reviewer, contestant] / n
            mass[contestant] += weights[reviewer]
        scores = {c: total[c] / mass[c] for c in contestants}
        if not scorers:
            break
        low = min(scores[r] for r in scorers)
        span = max(scores[r] for r in scorers) - low
        scaled = {r: (scores[r] - low) / span if span > 0 else 1.0 for r in scorers}
        norm = sum(scaled.values())
        new = dict(weights)
        for r in scorers:
            new[r] = scaled[r] / norm * share
        change = max(abs(new[r] - weights[r]) for r in reviewers)
        weights = new
        if change <= tolerance:
            break
    return scores, weights, iterations


def rows_of(reviews: Reviews) -> list[tuple[str, str, str, str, int]]:
    """PRD's review tuples (question, A, B, reviewer, score): what the pure-Python reference reads."""
    return [(r.question, r.a, r.b, r.reviewer, r.score) for r in reviews.rows()]


# -- the reference for Elo: FastChat's approach, in plain Python ------------------------------------

def battles_of(reviews: Reviews, order: np.ndarray) -> list[tuple[str, str, str]]:
    """FastChat's battle rows (model_a, model_b, winner), in ``order``."""
    winner = {-1: "model_a", 0: "tie", 1: "model_b"}
    names = reviews.contestants
    return [(names[a], names[b], winner[s]) for a, b, s in
            zip(reviews.a[order].tolist(), reviews.b[order].tolist(), reviews.score[order].tolist())]


def online_elo(battles: list[tuple[str, str, str]], k: float = 32, scale: float = 400, base: float = 10,
               initial: float = 1000) -> dict[str, float]:
    """The online Elo of Chatbot Arena's notebook: one Python loop over the battles, ratings in a
    dict, each battle moving both ratings by K times the surprise. (FastChat uses K = 4; PRD and
    arena use 32.)"""
    rating: dict[str, float] = defaultdict(lambda: initial)
    for model_a, model_b, winner in battles:
        ra, rb = rating[model_a], rating[model_b]
        expected_a = 1 / (1 + base ** ((rb - ra) / scale))
        expected_b = 1 / (1 + base ** ((ra - rb) / scale))
        score_a = 1.0 if winner == "model_a" else 0.0 if winner == "model_b" else 0.5
        rating[model_a] += k * (score_a - expected_a)
        rating[model_b] += k * (1 - score_a - expected_b)
    return dict(rating)


def online_elo_bootstrap(battles: list[tuple[str, str, str]], rounds: int, seed: int) -> list[dict[str, float]]:
    """FastChat's bootstrap: each round resamples the battles with replacement (their
    ``battles.sample(frac=1.0, replace=True)``) and runs the online loop on them."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(rounds):
        picked = rng.integers(0, len(battles), len(battles)).tolist()
        out.append(online_elo([battles[i] for i in picked]))
    return out


def save_reviews(reviews: Reviews, path: Path) -> None:
    np.savez(path, question=reviews.question, a=reviews.a, b=reviews.b, reviewer=reviews.reviewer, score=reviews.score,
             questions=np.array(reviews.questions), contestants=np.array(reviews.contestants),
             reviewers=np.array(reviews.reviewers))


def load_reviews(path: Path) -> Reviews:
    with np.load(path) as f:
        return Reviews(f["question"], f["a"], f["b"], f["reviewer"], f["score"], f["questions"].tolist(),
                       f["contestants"].tolist(), f["reviewers"].tolist())


def child(kind: str, path: Path, seed: int, rounds: int) -> None:
    """One bootstrap in this (fresh) process, on the reviews saved at ``path`` (loaded, as a user's
    would be, rather than generated: generating leaves freed memory the allocator keeps); prints
    its time and memory as JSON."""
    reviews = load_reviews(path)
    start, as_contestant = starting_weights(reviews, None)
    nobody = np.full_like(as_contestant, -1)
    if kind == "arena":
        small = subsample(reviews, 1000, 0)
        elo_samples(small, question_counts(small, 1, np.random.default_rng(0)), np.random.default_rng(0),
                    start, nobody, compiled=True)  # loads the compiled loop
    else:
        battles = battles_of(reviews, np.arange(len(reviews)))
    reset = reset_peak()
    before = status_mib("VmRSS")
    begin = time.perf_counter()
    if kind == "arena":
        rng = np.random.default_rng(seed)
        samples = elo_samples(reviews, question_counts(reviews, rounds, rng), rng, start, nobody)
        finite = bool(np.isfinite(samples).all())
    else:
        finite = all(np.isfinite(list(r.values())).all() for r in online_elo_bootstrap(battles, rounds, seed))
    seconds = time.perf_counter() - begin
    print(json.dumps({"seconds": seconds, "rounds": rounds, "peak_mib": status_mib("VmHWM"), "before_mib": before,
                      "finite": finite, "peak_is_the_steps": reset}))


def in_child(kind: str, path: Path, args, rounds: int) -> dict:
    found = subprocess.run([sys.executable, __file__, "--child", kind, "--child-input", str(path), "--seed",
                            str(args.seed), "--child-rounds", str(rounds)], capture_output=True, text=True, check=True)
    return json.loads(found.stdout.strip().splitlines()[-1])


# -- helpers ----------------------------------------------------------------------------------------

def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def status_mib(field: str) -> float:
    """VmRSS (now) or VmHWM (the peak) of this process, from /proc. Unlike ru_maxrss, which a child
    started by fork and exec inherits from its parent, VmHWM starts afresh with the new program."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak() -> bool:
    """Start VmHWM again from the current resident size (Linux >= 4.0), so a step's peak is its own
    plus what the process already held, not the building of its input."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


# -- the benchmark ----------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="100 000 reviews instead of 1 000 000")
    parser.add_argument("--reviews", type=int, help="synthetic reviews (default 1 000 000, 100 000 with --quick)")
    parser.add_argument("--questions", type=int, default=2000, help="synthetic questions (default 2 000)")
    parser.add_argument("--samples", type=int, default=200, help="bootstrap samples (default 200)")
    parser.add_argument("--orderings", type=int, default=1000, help="Elo orderings (default 1 000)")
    parser.add_argument("--passes", type=int, default=5, help="weighted Elo passes (default 5)")
    parser.add_argument("--check", type=int, default=20_000, help="reviews in the subsample where the reference must agree")
    parser.add_argument("--reference-limit", type=float, default=60.0,
                        help="run the reference on all reviews only if that is expected to take at most this many s")
    parser.add_argument("--prd", type=Path, default=PRD_FOLDER, help="PRD's vicuna80 folder")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--fastchat-rounds", type=int, default=3,
                        help="bootstrap rounds of FastChat's loop actually run (scaled to 100)")
    parser.add_argument("--child", choices=["arena", "fastchat"], help=argparse.SUPPRESS)
    parser.add_argument("--child-rounds", type=int, default=BOOTSTRAP_ROUNDS, help=argparse.SUPPRESS)
    parser.add_argument("--child-input", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    n = args.reviews or (100_000 if args.quick else 1_000_000)
    if args.child:
        child(args.child, args.child_input, args.seed, args.child_rounds)
        return 0

    print(f"Python {platform.python_version()}, numpy {np.__version__}, {platform.system()} {platform.machine()}, "
          f"{os.cpu_count()} CPUs (BLAS threads pinned to 1), Elo loop "
          + (f"compiled (numba {__import__('numba').__version__})" if COMPILED else "numpy fallback (no numba)"))
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    failures = []

    # 1. synthetic reviews ---------------------------------------------------------------------------
    (reviews, strength), built = timed(synthetic, n, args.questions, 50, 10, 6, args.seed)
    C, R, Q = len(reviews.contestants), len(reviews.reviewers), len(reviews.questions)
    print(f"\n1. {len(reviews):,} synthetic reviews: {C} contestants, {R} reviewers "
          f"({sum(r in reviews.contestants for r in reviews.reviewers)} of them contestants), {Q:,} questions, "
          f"{len(reviews) / (Q * R):.0f} pairs per (question, reviewer); built in {built:.2f} s (not timed)")
    win_rate(subsample(reviews, 1000, 0), weighted=True)  # warm-up: imports, pydantic
    bradley_terry(subsample(reviews, 1000, 0))

    found, t_wr = timed(win_rate, reviews, weighted=True)
    bt, t_bt = timed(bradley_terry, reviews)
    rng = np.random.default_rng(args.seed)
    counts, t_counts = timed(question_counts, reviews, args.samples, rng)
    wr_samples, t_wrs = timed(win_rate_samples, reviews, counts, True, None)
    (bt_samples, _), t_bts = timed(bradley_terry_samples, reviews, counts)
    total = t_wr + t_bt + t_counts + t_wrs + t_bts
    print(f"   weighted win rate     {t_wr:7.3f} s  ({found.iterations} iterations, last change {found.last_change:.1e})")
    print(f"   Bradley–Terry         {t_bt:7.3f} s")
    print(f"   bootstrap counts      {t_counts:7.3f} s  ({args.samples} samples of {Q:,} questions)")
    print(f"   bootstrap win rate    {t_wrs:7.3f} s  ({args.samples} weighted win rates)")
    print(f"   bootstrap BT          {t_bts:7.3f} s  ({args.samples} Bradley–Terry fits)")
    ok = total < TARGET_SYNTHETIC
    print(f"   total                 {total:7.3f} s  (target < {TARGET_SYNTHETIC:g} s): {verdict(ok)}")
    if not ok:
        failures.append("synthetic")
    truth = strength
    wr_scores = np.array([found.scores[c] for c in reviews.contestants])
    bt_scores = np.array([bt[c] for c in reviews.contestants])
    print(f"   rank correlation with the hidden strengths: weighted win rate {spearmanr(wr_scores, truth)[0]:.4f}, "
          f"Bradley–Terry {spearmanr(bt_scores, truth)[0]:.4f}")
    weights = sorted(found.weights.items(), key=lambda kv: -kv[1])
    print("   weights: " + ", ".join(f"{r} {w:.3f}" for r, w in weights))
    print(f"   bootstrap 95% width, median over contestants: win rate "
          f"{np.median(np.subtract(*np.nanpercentile(wr_samples, [97.5, 2.5], axis=0))):.4f}, "
          f"BT {np.median(np.subtract(*np.nanpercentile(bt_samples, [97.5, 2.5], axis=0))):.1f} Elo points")

    # 2. Elo on PRD ------------------------------------------------------------------------------------
    elo_ok = None
    if args.prd.is_dir():
        (everything, _skipped), t_read = timed(read_prd, args.prd, PRD_MODELS)
        llm = everything.by([r for r in everything.reviewers if r != "human"])
        print(f"\n2. PRD Vicuna80: {len(llm):,} LLM reviews by {', '.join(llm.reviewers)} "
              f"(read in {t_read:.2f} s, not timed), {args.orderings:,} orderings")
        elo(llm, orderings=10, seed=1, weighted=True)  # warm-up: loads the compiled loop
        single, t_single = timed(elo, llm, weighted=False, orderings=args.orderings)
        orderings_ok = t_single <= TARGET_ORDERINGS
        print(f"   unweighted Elo, 1 pass          {t_single:7.3f} s  (target <= {TARGET_ORDERINGS:g} s): "
              f"{verdict(orderings_ok)};  {t_single / len(llm) / args.orderings * 1e9:.0f} ns per review and ordering")
        elo_ok = orderings_ok
        for scheme in ("ordering", "mean"):
            weighted, t_elo = timed(elo, llm, weighted=True, orderings=args.orderings, passes=args.passes, scheme=scheme)
            ok = t_elo < TARGET_ELO
            elo_ok = elo_ok and ok
            print(f"   weighted Elo ({scheme:8s}), {weighted.passes} passes {t_elo:7.3f} s  (target < {TARGET_ELO:g} s): "
                  f"{verdict(ok)};  " + ", ".join(f"{c} {s_:.0f}" for c, s_ in
                                                   sorted(weighted.scores.items(), key=lambda kv: -kv[1])))
        print("   (PRD Table 3, All (Weighted): gpt4 1213, claude 1125, vicuna-13b 912, gpt35 894, bard 856)")
        if not elo_ok:
            failures.append("elo")
    else:
        print(f"\n2. PRD data not found at {args.prd}: skipped")

    # 3. the pure-Python reference -----------------------------------------------------------------
    check_n = min(args.check, len(reviews))
    small = subsample(reviews, check_n, args.seed + 1)
    small_rows = rows_of(small)
    vec_small = win_rate(small, weighted=True)
    (ref_scores, ref_weights, ref_iterations), t_ref_small = timed(
        reference_win_rate, small_rows, small.contestants, small.reviewers)
    diff = max(abs(ref_scores[c] - vec_small.scores[c]) for c in small.contestants)
    diff_w = max(abs(ref_weights[r] - vec_small.weights[r]) for r in small.reviewers)
    agree = diff <= AGREEMENT
    print(f"\n3. pure-Python Alg. 2 reference on a {check_n:,}-review subsample: {ref_iterations} iterations "
          f"(vectorised {vec_small.iterations}), max |score difference| {diff:.1e}, weights {diff_w:.1e} "
          f"(must be <= {AGREEMENT:g}): {verdict(agree)}")
    if not agree:
        failures.append("reference")
    per_review_iteration = t_ref_small / (ref_iterations * check_n)
    estimate = per_review_iteration * found.iterations * len(reviews)
    if estimate <= args.reference_limit:
        all_rows = rows_of(reviews)
        (full_scores, _, iterations), t_ref = timed(reference_win_rate, all_rows, reviews.contestants,
                                                    reviews.reviewers, max_iterations=found.iterations)
        del all_rows
        full_diff = max(abs(full_scores[c] - found.scores[c]) for c in reviews.contestants)
        how = f"measured on all {len(reviews):,} reviews, {iterations} iterations; max |score difference| {full_diff:.1e}"
    else:
        # A bigger subsample for the timing, then linear in reviews and iterations.
        timing_n = min(len(reviews), max(check_n, 100_000))
        timing = subsample(reviews, timing_n, args.seed + 2)
        timing_rows = rows_of(timing)
        (_, _, iterations), t_part = timed(reference_win_rate, timing_rows, timing.contestants, timing.reviewers,
                                           max_iterations=found.iterations)
        t_ref = t_part / (iterations * timing_n) * found.iterations * len(reviews)
        how = (f"EXTRAPOLATED: {t_part:.2f} s for {iterations} iterations on {timing_n:,} reviews, "
               f"scaled linearly to {found.iterations} iterations on {len(reviews):,} (estimate was {estimate:.0f} s "
               f"> limit {args.reference_limit:g} s)")
    print(f"   reference on the full data: {t_ref:8.2f} s  ({how})")
    print(f"   vectorised weighted win rate: {t_wr:.3f} s  ->  speed-up x{t_ref / t_wr:,.0f}")
    print(f"   reference: {t_ref / (found.iterations * len(reviews)) * 1e9:.0f} ns per review and iteration")

    # 4. Elo at scale, against FastChat's approach -------------------------------------------------------
    print(f"\n4. Elo at scale: the {len(reviews):,} synthetic reviews, against FastChat's approach (plain Python)")
    order = random_orders(len(reviews), 1, np.random.default_rng(args.seed))
    start, as_contestant = starting_weights(reviews, None)
    nobody = np.full_like(as_contestant, -1)
    replay(reviews.a, reviews.b, reviews.score, reviews.reviewer, order[:, :1000], start, nobody,
           len(reviews.contestants))  # warm-up
    (ours, _, _), t_ours = timed(replay, reviews.a, reviews.b, reviews.score, reviews.reviewer, order, start, nobody,
                                 len(reviews.contestants))
    _, t_elo_pass = timed(elo, reviews, orderings=1, seed=args.seed)
    battles = battles_of(reviews, order[0])
    theirs, t_theirs = timed(online_elo, battles)
    del battles
    gap = max(abs(theirs[c] - ours[0][i]) for i, c in enumerate(reviews.contestants))
    ratio = t_theirs / t_elo_pass
    pass_ok = ratio >= TARGET_PASS_RATIO and gap < 1e-6
    print(f"   one pass, FastChat's loop   {t_theirs:7.3f} s  ({t_theirs / len(reviews) * 1e9:.0f} ns per review)")
    print(f"   one pass, arena's loop      {t_ours:7.3f} s  ({t_ours / len(reviews) * 1e9:.0f} ns per review; "
          f"x{t_theirs / t_ours:.0f}); the same battles in the same order: max |rating difference| {gap:.1e}")
    print(f"   elo(orderings=1)            {t_elo_pass:7.3f} s  (the loop, drawing the order, the result) -> "
          f"x{ratio:.0f} faster than FastChat's loop (target >= x{TARGET_PASS_RATIO:g}, goal x5): {verdict(pass_ok)}")
    if not pass_ok:
        failures.append("elo pass")
    small = subsample(reviews, 1000, 0)  # compiles (or loads) the bootstrap's loop before the children use it
    elo_samples(small, question_counts(small, 1, np.random.default_rng(0)), np.random.default_rng(0), start, nobody)
    with tempfile.TemporaryDirectory() as folder:
        saved = Path(folder) / "reviews.npz"
        save_reviews(reviews, saved)
        mine = in_child("arena", saved, args, BOOTSTRAP_ROUNDS)
        fast = in_child("fastchat", saved, args, args.fastchat_rounds)
    fast_total = fast["seconds"] / fast["rounds"] * BOOTSTRAP_ROUNDS
    boot_ok = mine["peak_mib"] <= TARGET_BOOTSTRAP_MIB and mine["finite"]
    during = "during it" if mine["peak_is_the_steps"] else "over the whole process (peak could not be reset)"
    print(f"   {BOOTSTRAP_ROUNDS}-round bootstrap, arena       {mine['seconds']:7.2f} s, peak resident {mine['peak_mib']:.0f} "
          f"MiB {during}, holding {mine['before_mib']:.0f} MiB when it began (target <= {TARGET_BOOTSTRAP_MIB} MiB): "
          f"{verdict(boot_ok)}")
    print(f"   {BOOTSTRAP_ROUNDS}-round bootstrap, FastChat's  {fast_total:7.2f} s  (EXTRAPOLATED from "
          f"{fast['rounds']} rounds in {fast['seconds']:.2f} s), peak resident {fast['peak_mib']:.0f} MiB, holding "
          f"{fast['before_mib']:.0f} MiB when it began (its battles as Python tuples)  "
          f"-> arena x{fast_total / mine['seconds']:.0f} faster")
    if not boot_ok:
        failures.append("elo bootstrap")

    print(f"\npeak RSS {peak_rss_mib():.0f} MiB; load average at the end: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("overall: " + ("PASS" if not failures else "FAIL (" + ", ".join(failures) + ")"))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
