"""The anonymity filter: who wrote what is hidden from every reader but the author, and nothing else is.

Two rules make it so.

*What* is a name: an agent's name, its model, a vendor's name, in the spellings a model writes them
("my-finetune", "my finetune", "MyFinetune"; "ＧＰＴ-４" in fullwidth letters; "GPT-4o-mini" with its
version), matched on an NFKC-normalised copy of the text (look-alike Greek and Cyrillic letters folded,
invisible characters left out) so that "ＧＰＴ" or "G\u200bPT" match too, while the text keeps every
other character as it was written. A name is a whole word ("Meta" is not in
"metaphor"), and a vendor's name that is also an ordinary word (llama, palm, bard, phi, meta) counts
only when written as a brand (capitalised, or with a version: "llama3"), never in "meta-analysis".
A scenario's allow-list keeps phrases it names ("Google Sheets").

*Whose* text it is: what agents wrote loses its names (a reply, as the other seats get it); the
referee's own text (rules, labels, questions, answers read from a dataset) reaches every reader as
written. A referee's prompt that quotes a reply is both: the filter remembers each name an agent
wrote with the words around it on its line, and withholds a name in the referee's text only where
those words surround it, that is, in the quoted passage. A name an agent only repeats from what the
referee showed it (quoting the question) is the referee's, not an identity. A scenario can ask for
the referee's text to be scrubbed as well (``material``).

One ``Filter`` serves the match loop, the judge's desk and the annotation files.
"""

from __future__ import annotations

import re
import unicodedata
from enum import Enum
from functools import lru_cache
from typing import Any

__all__ = ["VENDOR_TERMS", "ORDINARY", "Filter", "identity_names", "scrub", "scrub_data"]

VENDOR_TERMS = (
    "OpenAI", "ChatGPT", "GPT", "Anthropic", "Claude", "Google", "Gemini", "Gemma", "PaLM", "Bard", "Meta",
    "Llama", "Mistral", "Mixtral", "Codestral", "Qwen", "DeepSeek", "Vicuna", "Phi", "Grok", "xAI", "Open AI",
    "Cohere", "ChatGLM", "Baichuan",
)
# Vendor names that are also everyday words: a name only as a brand (any capital letter, or a version).
ORDINARY = frozenset({"llama", "palm", "bard", "phi", "meta", "grok", "mistral", "vicuna", "gemma"})

_DASHES = "\\-\u2010\u2011\u2012\u2013\u2014"  # the hyphen and its typographic kin (a non-breaking hyphen: "GPT‑4o")
_JOINT = rf"[\s{_DASHES}_./]?"  # between the parts of a name: "my-finetune", "my finetune", "myfinetune"
# Words that name a model's size or family after its vendor's name ("Claude 3 Opus", "Gemini Pro 1.5",
# "gpt-4o-mini"): taken only when they follow a name or its version, since alone most are plain words.
_TIERS = ("opus|sonnet|haiku|instant|turbo|pro|ultra|flash|nano|mini|lite|large|medium|small|preview|instruct|coder|"
          "vision|chat|it|hf|base|latest|exp")
# A version attached to a name ("-4o", "2.5", "-72B", "-20241022") or a tier joined by a dash ("-mini");
# a dashed word that is neither ("-analysis", "-style") is not part of the name.
_ATTACHED = rf"(?:[{_DASHES}._]?\d[\w.]*(?<!\.)|[{_DASHES}_.](?:{_TIERS}|[^\W\d_]*\d\w*)(?![^\W\d_]))*"
_SPACED = rf"(?:[ \u00a0]+(?:\d(?:[\w.{_DASHES}]*\w)?|(?:{_TIERS})(?:[{_DASHES}._]?\d(?:[\w.]*\w)?)?))*"
_JOINERS = frozenset("-\u2010\u2011\u2012\u2013\u2014_/.")  # what joins two names into one ("Meta-Llama-3")
_CONTEXT = 24  # characters each side of a name, on its line, that tell an agent's passage from the referee's

# Letters of other scripts that look like Latin ones: folded for matching, so "GРТ" (with Cyrillic Р and Т)
# is "GPT"; a word written wholly in those scripts is left alone (it is Greek or Russian, not a disguise).
_HOMOGLYPHS = dict(zip(
    "АВЕКМНОРСТХаеорсухіјѕԁΑΒΕΖΗΙΚΜΝΟΡΤΥΧοι",
    "ABEKMHOPCTXaeopcyxijsdABEZHIKMNOPTYXoi"))
_FOLD = str.maketrans(_HOMOGLYPHS)
_LOOKALIKE = frozenset(_HOMOGLYPHS)
# Of the characters outside ASCII that a case-insensitive pattern matches to an ASCII one (İ and ı to i,
# ſ to s, the Kelvin sign to k), the two that NFKC leaves outside ASCII: the quick check makes them i.
# tests/test_anonymity.py finds them all again, by scanning Unicode.
_DOTTED = ("\u0130", "\u0131")
# What the quick check deletes before looking for a name's parts run together: every joint a spelling may
# have (whitespace, the dashes, _ . /), as UTF-8 bytes, since bytes are translated and searched at C speed.
_JOINT_BYTES = bytes(b for b in range(128) if re.fullmatch(rf"[\s{_DASHES}_./]", chr(b)))
# the first bytes of Greek and Cyrillic letters in UTF-8: a text holding none has no look-alike to fold
_GREEK_CYRILLIC = tuple(bytes([b]) for b in range(0xCD, 0xD5))


def identity_names(agents: dict[str, Any], extra=(), vendors: bool = True, allow=()) -> tuple[str, ...]:
    """The names a run hides: its agents', their models' (and a model path's file name), the scenario's
    own terms, and the vendors' (unless turned off), less what the allow-list keeps. A name of one
    character, or of two without a digit, would take words with it and is left out; "o3" stays."""
    names = list(extra)
    for name, raw in agents.items():
        names.append(str(name))
        model = raw.get("model") if isinstance(raw, dict) else None
        if model:
            model = str(model)
            names.append(model)
            tail = re.split(r"[/\\]", model)[-1]
            names += [tail, re.sub(r"\.gguf$", "", tail, flags=re.I)]
    if vendors:
        names += VENDOR_TERMS
    kept = {a.casefold() for a in allow}
    names = {n.strip() for n in names if n and n.strip().casefold() not in kept}
    return tuple(sorted((n for n in names if len(n) > 2 or (len(n) == 2 and any(c.isdigit() for c in n))),
                        key=lambda n: (-len(n), n)))


@lru_cache(maxsize=1024)
def _fold_char(char: str) -> str:
    if unicodedata.category(char) == "Cf":  # invisible (a zero-width space, a soft hyphen): no part of a name
        return ""
    return unicodedata.normalize("NFKC", char).translate(_FOLD)


def _folded(text: str) -> tuple[str, list[int] | None]:
    """The text as the pattern reads it, and where each of its characters came from (None: the same text)."""
    if text.isascii():
        return text, None
    parts, owner = [], []
    for i, char in enumerate(text):
        folded = char if char.isascii() else _fold_char(char)
        parts.append(folded)
        owner.extend([i] * len(folded))
    return "".join(parts), owner


def _split(name: str) -> list[str]:
    """A name's parts, the joints of its spellings: at separators, between a small and a capital letter
    ("MyFinetune"), and between letters and digits ("gpt4o")."""
    folded = _folded(name)[0]
    parts = []
    for piece in re.split(rf"[\s{_DASHES}_./]+", folded):
        piece = re.sub(r"(?<=[a-z])(?=[A-Z])|(?<=[^\W\d_])(?=\d)|(?<=\d)(?=[^\W\d_])", " ", piece)
        parts += piece.split()
    return parts


class _Names:
    """The compiled pattern of a set of names and the allow-list."""

    def __init__(self, names: tuple[str, ...], allow: tuple[str, ...]):
        spelled = {}
        for name in names:
            parts = _split(name)
            if parts:
                spelled.setdefault(_JOINT.join(re.escape(p) for p in parts), parts)
        ordered = sorted(spelled, key=lambda p: -sum(len(x) for x in spelled[p]))
        alternatives = "|".join(ordered) or "(?!)"
        self.pattern = re.compile(rf"(?<!\w)(?P<core>{alternatives})(?P<tail>{_ATTACHED}{_SPACED})(?![^\W\d_])",
                                  re.IGNORECASE)
        # a match holds a name's parts in order with at most a joint between them: with the joints taken out
        # of the text, the parts run together are a cheap test before the pattern
        self.needles = tuple(sorted({"".join(parts).lower().encode() for parts in spelled.values()}))
        self.ascii = all(n.isascii() for n in self.needles)
        self.ordinary = any("".join(parts).lower() in ORDINARY for parts in spelled.values())
        allowed = [_JOINT.join(re.escape(p) for p in _split(a)) for a in allow if _split(a)]
        self.allow = re.compile(rf"(?<!\w)(?:{'|'.join(allowed)})(?!\w)", re.IGNORECASE) if allowed else None

    def absent(self, text: str) -> bool:
        """Whether the text surely names nobody, found without the pattern: most replies name nobody."""
        if not self.ascii:
            return False
        if text.isascii():
            low = text.encode().lower().translate(None, _JOINT_BYTES)
        else:
            # NFKC takes fullwidth letters, ſ and the Kelvin sign to ASCII, and look-alikes are folded as written
            # (a capital Т is a T, a small т no t). The needles are ASCII: what is left outside ASCII is a joint
            # (a typographic dash), which goes, or no part of a name, whose going can only add a false alarm;
            # but İ and ı, which the pattern matches to i, become i.
            normal = unicodedata.normalize("NFKC", text)
            utf8 = normal.encode()
            if any(lead in utf8 for lead in _GREEK_CYRILLIC):
                normal = normal.translate(_FOLD)
            for dotted in _DOTTED:
                if dotted in normal:
                    normal = normal.replace(dotted, "i")
            low = normal.encode("ascii", "ignore").lower().translate(None, _JOINT_BYTES)
        for needle in self.needles:
            if needle in low:
                return False
        return True

    def find(self, text: str) -> tuple[str, list[int] | None, list[tuple[int, int]]]:
        """The folded text, its map back to the text, and the spans (in the folded text) of every name in it."""
        folded, owner = _folded(text)
        matches = list(self.pattern.finditer(folded))
        if self.allow is not None:
            allowed = [m.span() for m in self.allow.finditer(folded)]
            matches = [m for m in matches if not any(a < m.end() and m.start() < b for a, b in allowed)]
        if owner is not None:
            matches = [m for m in matches if not self._foreign(text, owner, m.start(), m.end())]
        spans: list[tuple[int, int]] = []
        for i, m in enumerate(matches):
            s, e = m.span()
            if self.ordinary and m.group("core").lower() in ORDINARY and self._plain_word(m, folded):
                joined = i + 1 < len(matches) and matches[i + 1].start() - e == 1 and folded[e] in _JOINERS
                if not joined:  # "meta-analysis"; but "Meta-Llama-3"
                    continue
            if spans and (s == spans[-1][1] or (s - spans[-1][1] == 1 and folded[s - 1] in _JOINERS)):
                spans[-1] = (spans[-1][0], e)  # "Meta-Llama-3": one name
            else:
                spans.append((s, e))
        return folded, owner, spans

    @staticmethod
    def _plain_word(m: re.Match[str], folded: str) -> bool:
        core, tail = m.group("core"), m.group("tail")
        if any(c.isdigit() for c in tail):
            return False
        compound = re.match(rf"[{_DASHES}][^\W\d_]", folded[m.end():m.end() + 2]) is not None
        return core.islower() or compound  # "llama", "meta-analysis"; but "Llama", "PaLM", "Meta's"

    @staticmethod
    def _foreign(text: str, owner: list[int] | None, s: int, e: int) -> bool:
        """A word wholly in Cyrillic or Greek letters that happen to spell a name: a word of that language."""
        if owner is None:
            return False
        original = text[owner[s]:owner[e - 1] + 1]
        return any(c in _LOOKALIKE for c in original) and not any(c.isascii() and c.isalpha() for c in original)


@lru_cache(maxsize=64)
def _compiled(names: tuple[str, ...], allow: tuple[str, ...] = ()) -> _Names:
    return _Names(names, allow)


def _replaced(text: str, owner: list[int] | None, spans: list[tuple[int, int]], replacement: str) -> tuple[str, list[str]]:
    if not spans:
        return text, []
    out, found, at = [], [], 0
    for s, e in spans:
        if owner is not None:
            s, e = owner[s], owner[e - 1] + 1
        out += [text[at:s], replacement]
        found.append(text[s:e])
        at = e
    out.append(text[at:])
    return "".join(out), found


def scrub(text: str, terms: tuple[str, ...], replacement: str, allow: tuple[str, ...] = ()) -> tuple[str, list[str]]:
    """Every name in the text replaced, and what was found: for text that is all an agent's."""
    if not terms:
        return text, []
    names = _compiled(tuple(terms), tuple(allow))
    if names.absent(text):
        return text, []
    _, owner, spans = names.find(text)
    return _replaced(text, owner, spans, replacement)


def _walk(value: Any, text) -> tuple[Any, list[str]]:
    found: list[str] = []

    def walk(item: Any) -> Any:
        if isinstance(item, Enum):  # a word of the game's vocabulary (a task), not something a seat wrote
            return item
        if isinstance(item, str):
            clean, hits = text(item)
            found.extend(hits)
            return clean
        if isinstance(item, dict):
            return {walk(k) if isinstance(k, str) else k: walk(v) for k, v in item.items()}
        if isinstance(item, (list, tuple)):
            return type(item)(walk(v) for v in item)
        return item

    return walk(value), found


def scrub_data(value: Any, terms: tuple[str, ...], replacement: str) -> tuple[Any, list[str]]:
    """``scrub`` for structured data: every string inside."""
    if not terms or value is None:
        return value, []
    return _walk(value, lambda s: scrub(s, terms, replacement))


def _around(folded: str, s: int, e: int) -> tuple[str, str]:
    """The words before and after a name on its line, at most ``_CONTEXT`` characters each, without the
    spaces at their far ends (a game may strip a reply, or indent a quoted one)."""
    far = s - _CONTEXT if s > _CONTEXT else 0
    cut = folded.rfind("\n", far, s)
    left = folded[cut + 1 if cut >= 0 else far:s].lstrip()
    cut = folded.find("\n", e, e + _CONTEXT)
    return left, folded[e:cut if cut >= 0 else e + _CONTEXT].rstrip()


class Filter:
    """One match's filter (or one annotation file's): the names it hides, what stands in for them,
    and the passages its agents wrote so far. False when it hides nothing, so a match skips it."""

    __slots__ = ("terms", "replacement", "allow", "material", "_names", "_said", "_unread", "_referee")

    def __init__(self, terms: tuple[str, ...], replacement: str = "[name withheld]", allow: tuple[str, ...] = (),
                 material: bool = False):
        self.terms, self.replacement, self.allow, self.material = tuple(terms), replacement, tuple(allow), material
        self._names = _compiled(self.terms, self.allow) if self.terms else None
        self._said: dict[str, set[tuple[str, str]]] = {}  # a name as an agent wrote it -> the words around it
        # replies whose names are not in ``_said`` yet (folded text, spans): read when the referee's text first
        # names someone, since most matches never quote a name and a reply should not pay for it
        # (a dict of tuples: the same reply twice is read once, and tuples of numbers cost the collector nothing)
        self._unread: dict[str, tuple[tuple[int, int], ...]] = {}
        self._referee: dict[str, set[str]] = {}  # a name in the referee's text -> the lines it is on

    def __bool__(self) -> bool:
        return bool(self.terms)

    def said(self, text: str) -> tuple[str, list[str]]:
        """An agent's own words as others get them: every name withheld (but those it only repeats from
        the referee's text), and remembered with the words around it, to be found where they are quoted."""
        names = self._names
        if names is None or names.absent(text):
            return text, []
        folded, owner, spans = names.find(text)
        referee = self._referee
        if referee:
            spans = [(s, e) for s, e in spans if not self._echoed(folded, s, e)]
        if spans:
            self._unread[folded] = tuple(spans)
        return _replaced(text, owner, spans, self.replacement)

    def _echoed(self, folded: str, s: int, e: int) -> bool:
        """Whether a name and the words around it are a line of the referee's, repeated: they say nothing
        of who wrote them."""
        lines = self._referee.get(folded[s:e].lower())
        if not lines:
            return False
        left, right = _around(folded, s, e)
        passage = left + folded[s:e] + right
        return any(passage in line for line in lines)

    def _read(self) -> dict[str, set[tuple[str, str]]]:
        said = self._said
        for folded, spans in self._unread.items():
            for s, e in spans:
                said.setdefault(folded[s:e].lower(), set()).add(_around(folded, s, e))
        self._unread.clear()
        return said

    def text(self, text: str) -> tuple[str, list[str]]:
        """The referee's text as a reader gets it: as written, but for the names in what it quotes of
        the agents (all names, when the scenario asks for its material to be scrubbed too)."""
        names = self._names
        if names is None or names.absent(text):
            return text, []
        folded, owner, spans = names.find(text)
        if self.material:
            return _replaced(text, owner, spans, self.replacement)
        said = self._read() if self._unread else self._said
        quoted = []
        for s, e in spans:
            key = folded[s:e].lower()
            contexts = said.get(key)
            if contexts and any(folded.endswith(left, 0, s) and folded.startswith(right, e) for left, right in contexts):
                quoted.append((s, e))
            else:  # the referee's own: an agent that repeats this line repeats the referee
                start, end = folded.rfind("\n", 0, s) + 1, folded.find("\n", e)
                self._referee.setdefault(key, set()).add(folded[start:None if end < 0 else end])
        return _replaced(text, owner, quoted, self.replacement)

    def data(self, data: Any) -> tuple[Any, list[str]]:
        """The referee's structured facts (a prompt's, a notice's), by the same rule as its text."""
        if not self or data is None:
            return data, []
        return _walk(data, self.text)
