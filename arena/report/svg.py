"""Inline SVG figures for the report, drawn from the numbers in figures.py.

Each drawn value also sits in a ``data-value`` attribute, so a test (or a curious
reader of the source) can check the picture against ``arena rank --json``.
"""

from __future__ import annotations

import math
from html import escape

PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"]
FONT = 'font-family="system-ui, sans-serif" font-size="12"'


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _svg(width: float, height: float, body: list[str], label: str) -> str:
    return (f'<svg class="figure" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" '
            f'width="{width:.0f}" height="{height:.0f}" role="img" aria-label="{escape(label)}" {FONT}>'
            + "".join(body) + "</svg>")


def _text(x: float, y: float, text: str, anchor: str = "start", extra: str = "") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" {extra}>{escape(text)}</text>'


def fmt(value: float | None, digits: int) -> str:
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    if high <= low:
        return [low]
    raw = (high - low) / count
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 2.5, 5, 10) if m * step >= raw)
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) / step + 1e-9) + 1)]


def intervals(rows: list[tuple[str, float, float, float]], digits: int, label: str, compact: bool = False) -> str:
    """A dot per row at its score, a bar over its 95% interval."""
    name_w, plot_w, row_h, top = (80, 150, 22, 10) if compact else (150, 360, 22, 10)
    labels = [f"{fmt(score, digits)}  [{fmt(lo, digits)}, {fmt(hi, digits)}]" for _, score, lo, hi in rows]
    value_w = 16 + 7 * max(len(text) for text in labels)  # about 7 px a character at 12 px
    lows = [min(r[1], r[2]) for r in rows]
    highs = [max(r[1], r[3]) for r in rows]
    low, high = min(lows), max(highs)
    pad = (high - low) * 0.05 or abs(high) * 0.05 or 1.0
    low, high = low - pad, high + pad
    x = lambda v: name_w + (v - low) / (high - low) * plot_w
    ticks = _ticks(low, high, 4 if compact else 5)
    axis_y = top + row_h * len(rows) + 4
    body = [f'<line x1="{x(t):.1f}" y1="{top}" x2="{x(t):.1f}" y2="{axis_y}" stroke="#e4e4e4"/>' for t in ticks]
    body += [_text(x(t), axis_y + 14, f"{t:g}", "middle", 'fill="#666"') for t in ticks]
    for i, (name, score, lo, hi) in enumerate(rows):
        y = top + row_h * i + row_h / 2
        body.append(_text(name_w - 8, y + 4, name, "end"))
        body.append(f'<line x1="{x(lo):.1f}" y1="{y:.1f}" x2="{x(hi):.1f}" y2="{y:.1f}" stroke="{color(0)}" stroke-width="2"/>')
        body.append(f'<circle cx="{x(score):.1f}" cy="{y:.1f}" r="4.5" fill="{color(0)}" data-name="{escape(name)}" '
                    f'data-value="{score!r}" data-low="{lo!r}" data-high="{hi!r}"><title>{escape(name)}: '
                    f'{fmt(score, digits)} [{fmt(lo, digits)}, {fmt(hi, digits)}]</title></circle>')
        body.append(_text(name_w + plot_w + 10, y + 4, labels[i], extra='fill="#333"'))
    return _svg(name_w + plot_w + value_w, axis_y + 22, body, label)


def _cell_color(value: float | None, low: float, high: float, center: float | None) -> str:
    if value is None:
        return "#f0f0f0"
    if center is None:  # one-sided scale: white to blue
        t = 0.0 if high <= low else (value - low) / (high - low)
        r, g, b = (int(255 + (c - 255) * t) for c in (49, 104, 163))
        return f"rgb({r},{g},{b})"
    span = max(high - center, center - low) or 1.0
    t = max(-1.0, min(1.0, (value - center) / span))
    target = (49, 104, 163) if t > 0 else (200, 70, 60)
    r, g, b = (int(255 + (c - 255) * abs(t)) for c in target)
    return f"rgb({r},{g},{b})"


def heatmap(panel: dict) -> str:
    rows, cols, values = panel["rows"], panel["cols"], panel["values"]
    cell, name_w = 54, 150
    head_h = 20 + 5 * max((len(c) for c in cols), default=4)  # room for the slanted column names
    body = []
    for j, name in enumerate(cols):
        cx = name_w + cell * j + cell / 2
        body.append(f'<text transform="translate({cx:.1f},{head_h - 6}) rotate(-45)">{escape(name)}</text>')
    for i, name in enumerate(rows):
        y = head_h + cell * i
        body.append(_text(name_w - 8, y + cell / 2 + 4, name, "end"))
        for j in range(len(cols)):
            v = values[i][j]
            fill = _cell_color(v, panel["low"], panel["high"], panel["center"])
            x = name_w + cell * j
            value_attr = "" if v is None else f' data-value="{v!r}"'
            body.append(f'<rect class="cell" x="{x}" y="{y}" width="{cell - 2}" height="{cell - 2}" fill="{fill}" '
                        f'data-row="{escape(name)}" data-col="{escape(cols[j])}"{value_attr}>'
                        f'<title>{escape(name)} vs {escape(cols[j])}: {fmt(v, panel["digits"])}</title></rect>')
            body.append(_text(x + cell / 2 - 1, y + cell / 2 + 4, fmt(v, panel["digits"]), "middle"))
    return _svg(name_w + cell * len(cols) + 10, head_h + cell * len(rows) + 10, body, panel["title"])


def trend(panel: dict) -> str:
    width, height, left, right, top, bottom = 720, 320, 60, 150, 12, 40
    series = panel["series"]
    xs = [x for s in series for x in s["x"]]
    ys = [y + d for s in series for y, d in zip(s["y"], s.get("sd") or [0] * len(s["y"]))]
    ys += [y - d for s in series for y, d in zip(s["y"], s.get("sd") or [0] * len(s["y"]))]
    x_low, x_high = min(xs, default=0), max(xs, default=1) or 1
    y_low, y_high = min(ys, default=0), max(ys, default=1)
    if y_high <= y_low:
        y_low, y_high = y_low - 1, y_high + 1
    plot_w, plot_h = width - left - right, height - top - bottom
    px = lambda v: left + (v - x_low) / ((x_high - x_low) or 1) * plot_w
    py = lambda v: top + (y_high - v) / (y_high - y_low) * plot_h
    body = []
    y_ticks, x_ticks = _ticks(y_low, y_high), _ticks(x_low, x_high)
    for t in y_ticks:
        body.append(f'<line x1="{left}" y1="{py(t):.1f}" x2="{left + plot_w}" y2="{py(t):.1f}" stroke="#e4e4e4"/>')
        body.append(_text(left - 6, py(t) + 4, f"{t:g}", "end", 'fill="#666"'))
    for t in x_ticks:
        body.append(_text(px(t), top + plot_h + 16, f"{t:g}", "middle", 'fill="#666"'))
    body.append(_text(left + plot_w / 2, height - 6, panel["x_label"], "middle", 'fill="#444"'))
    body.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#bbb"/>')
    ends = []
    for i, s in enumerate(series):
        if s.get("sd"):
            upper = [f"{px(x):.1f},{py(y + d):.1f}" for x, y, d in zip(s["x"], s["y"], s["sd"])]
            lower = [f"{px(x):.1f},{py(y - d):.1f}" for x, y, d in reversed(list(zip(s["x"], s["y"], s["sd"])))]
            body.append(f'<polygon points="{" ".join(upper + lower)}" fill="{color(i)}" opacity="0.12"/>')
        points = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(s["x"], s["y"]))
        body.append(f'<polyline points="{points}" fill="none" stroke="{color(i)}" stroke-width="2" '
                    f'data-name="{escape(s["name"])}" data-last="{s["y"][-1]!r}"/>')
        ends.append((py(s["y"][-1]), i, s))
    ends.sort()
    last_y = -1e9
    for y, i, s in ends:  # labels at the line ends, nudged apart so they stay readable
        y = max(y, last_y + 14)
        last_y = y
        body.append(_text(left + plot_w + 8, y + 4, f"{s['name']} {s['y'][-1]:.{panel.get('digits', 2)}f}", extra=f'fill="{color(i)}"'))
    return _svg(width, max(height, last_y + 12), body, panel["title"])


def bars(names: list[str], values: list[float | None], label: str, center: float = 0.0, digits: int = 3,
         low: float | None = None, high: float | None = None) -> str:
    """Horizontal bars from ``center`` to each value (None: no bar)."""
    name_w, plot_w, value_w, row_h = 150, 320, 70, 22
    known = [v for v in values if v is not None]
    low = min([center] + known) if low is None else low
    high = max([center] + known) if high is None else high
    if high <= low:
        high = low + 1
    x = lambda v: name_w + (v - low) / (high - low) * plot_w
    body = [f'<line x1="{x(center):.1f}" y1="0" x2="{x(center):.1f}" y2="{row_h * len(names)}" stroke="#888"/>']
    for i, (name, v) in enumerate(zip(names, values)):
        y = row_h * i
        body.append(_text(name_w - 8, y + 15, name, "end"))
        if v is not None:
            a, b = sorted((x(center), x(v)))
            body.append(f'<rect x="{a:.1f}" y="{y + 4}" width="{max(b - a, 1):.1f}" height="{row_h - 8}" '
                        f'fill="{color(0 if v >= center else 2)}" data-name="{escape(name)}" data-value="{v!r}"/>')
        body.append(_text(name_w + plot_w + 8, y + 15, fmt(v, digits)))
    return _svg(name_w + plot_w + value_w, row_h * len(names) + 4, body, label)
