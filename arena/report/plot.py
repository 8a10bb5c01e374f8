"""`arena plot`: the report's figures as images, from the same numbers (figures.py)."""

from __future__ import annotations

import math
from pathlib import Path

from arena.contract.files import replacing

from .svg import PALETTE

KINDS = ("heatmap", "trend", "weights")


def _grid(n: int) -> tuple[int, int]:
    cols = 1 if n == 1 else 2
    return math.ceil(n / cols), cols


def _heatmap(ax, panel: dict) -> None:
    import numpy as np

    values = np.array([[np.nan if v is None else v for v in row] for row in panel["values"]], dtype=float)
    if panel["center"] is not None:
        span = max(panel["high"] - panel["center"], panel["center"] - panel["low"]) or 1.0
        image = ax.imshow(values, cmap="RdBu", vmin=panel["center"] - span, vmax=panel["center"] + span)
    else:
        image = ax.imshow(values, cmap="Blues", vmin=panel["low"], vmax=panel["high"])
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    ax.set_xticks(range(len(panel["cols"])), panel["cols"], rotation=45, ha="right")
    ax.set_yticks(range(len(panel["rows"])), panel["rows"])
    for i, row in enumerate(panel["values"]):
        for j, v in enumerate(row):
            level = 0.5 if v is None else float(image.norm(v))
            dark = level > 0.6 if panel["center"] is None else abs(level - 0.5) > 0.3  # white text on dark cells
            ax.text(j, i, "—" if v is None else f"{v:.{panel['digits']}f}", ha="center", va="center", fontsize=8,
                    color="white" if dark else "black")


def _trend(ax, panel: dict) -> None:
    for i, s in enumerate(panel["series"]):
        c = PALETTE[i % len(PALETTE)]
        ax.plot(s["x"], s["y"], color=c, label=f"{s['name']} {s['y'][-1]:.{panel.get('digits', 2)}f}")
        if s.get("sd"):
            ax.fill_between(s["x"], [y - d for y, d in zip(s["y"], s["sd"])], [y + d for y, d in zip(s["y"], s["sd"])],
                            color=c, alpha=0.12, linewidth=0)
    ax.set_xlabel(panel["x_label"])
    ax.set_ylabel(panel["y_label"])
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")


def _weights(ax, panel: dict) -> None:
    ax.barh(panel["names"][::-1], panel["values"][::-1], color=PALETTE[0])
    for y, v in enumerate(panel["values"][::-1]):
        ax.text(v, y, f" {v:.3f}", va="center", fontsize=8)
    ax.set_xlabel("weight")
    ax.set_xlim(0, max(panel["values"], default=1) * 1.2 or 1)


DRAW = {"heatmap": _heatmap, "trend": _trend, "weights": _weights}
EMPTY = {
    "heatmap": "this run has no pairwise results (no reviews and no game with two roles)",
    "trend": "this run has no finished matches",
    "weights": "this run has no reviews, so no reviewer weights",
}


def plot(figures: dict, kind: str, path: Path) -> int:
    """Draw every panel of ``kind`` into one PNG; returns the number of panels."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    panels = figures[kind]
    if not panels:
        raise ValueError(EMPTY[kind])
    rows, cols = _grid(len(panels))
    size = {"heatmap": (6.5, 5.5), "trend": (7.5, 4.5), "weights": (6.0, 3.5)}[kind]
    fig, axes = plt.subplots(rows, cols, figsize=(size[0] * cols, size[1] * rows), squeeze=False)
    for ax, panel in zip(axes.flat, panels):
        DRAW[kind](ax, panel)
        ax.set_title(panel["title"], fontsize=10, wrap=True)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.tight_layout()
    try:
        with replacing(path) as partial:  # the temporary name keeps the suffix: the format stays the asked one
            fig.savefig(partial, dpi=110)
    finally:
        plt.close(fig)
    return len(panels)
