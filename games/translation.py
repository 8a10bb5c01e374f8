"""Machine translation (DeepEval 3.7.4): a translator translates a source text, a proofreader
polishes the translation. Writer/editor: with the tournament's role swap every ordered pair
plays both roles.

Texts come from a JSONL file, one a line: ``{"id", "source", "source_lang", "target_lang"}``
and optionally ``"reference"``. ``language_pair`` (``de-en``) keeps one pair, so a scenario
gives each pair its own entry and its own tables, as the paper does. When a text has a
reference, the rules score each seat's text by chrF against it (sacrebleu): the translator's
draft and the proofreader's polished version. ``llm_judge`` rates both 1-10 with reasons.

No turn on nothing: when the translator gives no translation (no valid reply after the re-asks,
or none in time), the proofreader is not asked to polish an empty draft. The match ends after
the translator's turn with a notice saying so (``skipped: Proofreader`` in its data): the
translator scores chrF 0 and the judge rates the translator alone; the proofreader, who had no
turn, gets no score. A proofreader that gives nothing leaves the draft as it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from arena.contract import Game, HasCases, InvalidReply, Judged, JudgeRequest, Notice, Stage, path_field

from .questions import case_of, load_jsonl

TRANSLATOR, PROOFREADER = "Translator", "Proofreader"
LANGUAGES = {"en": "English", "de": "German", "fr": "French", "zh": "Chinese", "es": "Spanish", "it": "Italian",
             "ja": "Japanese", "pt": "Portuguese", "ru": "Russian", "nl": "Dutch", "ko": "Korean", "ar": "Arabic"}


def language(code: str) -> str:
    return LANGUAGES.get(code.lower(), code)


class Text(BaseModel):
    id: str
    source: str
    source_lang: str
    target_lang: str
    reference: str | None = None

    @field_validator("id", mode="before")
    @classmethod
    def _id(cls, value):
        return str(value) if isinstance(value, int) else value

    @property
    def pair(self) -> str:
        return f"{self.source_lang}-{self.target_lang}"


@lru_cache(maxsize=8)
def load_texts(path: str) -> dict[str, Text]:
    """Texts by id, in file order; errors name the line."""
    return load_jsonl(path, Text, "text", "id, source, source_lang, target_lang, optional reference")


def chrf(hypothesis: str, reference: str) -> float:
    from sacrebleu.metrics import CHRF

    return float(CHRF().sentence_score(hypothesis, [reference]).score)


class TranslationTask(StrEnum):
    """This game's kind of turn, named under ``prompt_data["task"]`` as the contract's ``Task`` is
    (its ``"stage"`` is the contract's ``Stage``, shared with the other writer/editor game)."""

    TRANSLATION = "translation"  # translate, or polish a translation


class TranslationParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    texts: str = path_field(description="A JSONL file of texts to translate.")
    language_pair: str | None = Field(None, description="Keep only texts of this pair, e.g. de-en (default: all).")
    limit: int | None = Field(None, ge=1, description="Play the first N texts.")
    case: str | None = Field(None, description="Set by the tournament: the text this match plays.")


class Translation(Game, HasCases, Judged):
    description = "A translator translates, a proofreader polishes; chrF against a reference, and an LLM judge."
    Params = TranslationParams
    min_seats = max_seats = 2

    @classmethod
    def seat_roles(cls, params, n_seats):
        return [TRANSLATOR, PROOFREADER]

    @classmethod
    def cases(cls, params: TranslationParams) -> list[str]:
        texts = load_texts(params.texts)
        ids = [t.id for t in texts.values() if params.language_pair in (None, t.pair)]
        if not ids:
            pairs = ", ".join(sorted({t.pair for t in texts.values()}))
            raise ValueError(f"no text of language pair {params.language_pair!r} in {params.texts} (it has: {pairs})")
        return ids[: params.limit]

    @classmethod
    def rounds_needed(cls, params, n_seats):
        return 2  # the translator drafts, the proofreader polishes

    def __init__(self, params, seats, roles, rng):
        super().__init__(params, seats, roles, rng)
        self.text: Text = case_of(load_texts(params.texts), params.case)
        self.draft: str | None = None
        self.polished: str | None = None

    def _languages(self) -> tuple[str, str]:
        return language(self.text.source_lang), language(self.text.target_lang)

    def rules(self, seat: str) -> str:
        src, tgt = self._languages()
        if seat == TRANSLATOR:
            return (f"You are a professional translator. Translate the {src} text below into {tgt}. A proofreader will "
                    f"then polish your translation. Reply with the {tgt} translation only.\n\n{src} text:\n{self.text.source}")
        return (f"You are a professional translation editor. A translator will translate the {src} text below into "
                f"{tgt}; polish that translation so that it is accurate and reads naturally. Reply with the polished "
                f"{tgt} text only, nothing else.\n\n{src} text:\n{self.text.source}")

    def speakers(self, round: int) -> list[str]:
        return [TRANSLATOR if round == 1 else PROOFREADER]

    def prompt(self, seat: str, round: int) -> str:
        _, tgt = self._languages()
        if seat == TRANSLATOR:
            return f"Give your {tgt} translation."
        return f"Give the polished {tgt} translation."

    def prompt_data(self, seat: str, round: int) -> dict[str, Any]:
        # the reference translation scores the seats; it is shown to none of them
        return {"task": TranslationTask.TRANSLATION, "stage": Stage.WRITE if seat == TRANSLATOR else Stage.EDIT, "source": self.text.source,
                "source_lang": self.text.source_lang, "target_lang": self.text.target_lang, "current": self.draft}

    def parse(self, seat: str, reply: str, round: int) -> str:
        text = reply.strip()
        if not text:
            raise InvalidReply(f"Your reply was empty. Reply with the {self._languages()[1]} text only.")
        return text

    def example_reply(self, seat: str, round: int) -> str:
        # a translation is about as long as the reference, or else the source
        return self.text.reference or self.text.source

    def default_action(self, seat: str, round: int) -> str | None:
        return None if seat == TRANSLATOR else self.draft  # no translation; a silent proofreader leaves the draft as it was

    def apply(self, round: int, actions: Mapping[str, str | None]) -> list[Notice]:
        if round == 1:
            self.draft = actions[TRANSLATOR]
            if self.draft is None:
                return [Notice(to=(), text=f"The {TRANSLATOR.lower()} gave no translation, so the {PROOFREADER.lower()} "
                               "was not asked: there was nothing to polish.",
                               data={"draft": None, "polished": None, "skipped": PROOFREADER})]
            return []
        self.polished = actions[PROOFREADER]
        return [Notice(to=(), text="Translation finished.", data={"draft": self.draft, "polished": self.polished})]

    def is_over(self, round: int) -> bool:
        return round >= 2 or self.draft is None  # no draft: no proofreading

    def _skipped(self) -> bool:
        """The proofreader was not asked: the translator gave nothing to polish."""
        return self.draft is None

    def _chrf(self) -> dict[str, float]:
        if self.text.reference is None:
            return {}
        if self._skipped():
            return {TRANSLATOR: 0.0}
        return {TRANSLATOR: chrf(self.draft or "", self.text.reference),
                PROOFREADER: chrf(self.polished or "", self.text.reference)}

    def payoffs(self) -> dict[str, float]:
        """chrF (0-100) against the reference: the translator's draft, the proofreader's polished text;
        nothing when the text has no reference; nothing for a proofreader that was not asked."""
        return self._chrf()

    def judge_request(self) -> JudgeRequest:
        src, tgt = self._languages()
        if self._skipped():
            text = (f"You are a translation expert rating a translator from its work. The translator was asked to "
                    f"translate the {src} text below into {tgt} and gave no translation.\n\n{src} source text:\n"
                    f"{self.text.source}")
            data = {"source": self.text.source, "first": "", "final": "", "writer": TRANSLATOR, "editor": PROOFREADER,
                    "pair": self.text.pair, "skipped": PROOFREADER}
            return JudgeRequest(text=text, seats=(TRANSLATOR,), data=data)
        text = ("You are a translation expert rating a translator and a proofreader from their work. Criteria: (1) is "
                "the translator's translation faithful in meaning to the source text; (2) did the proofreader's "
                f"polishing make the translation more accurate and natural.\n\n{src} source text:\n{self.text.source}\n\n"
                f"[{TRANSLATOR}] {tgt} translation:\n{self.draft}\n\n[{PROOFREADER}] polished {tgt} translation:\n{self.polished}")
        data = {"source": self.text.source, "first": self.draft or "",
                "final": self.polished or "", "writer": TRANSLATOR, "editor": PROOFREADER, "pair": self.text.pair}
        return JudgeRequest(text=text, seats=(TRANSLATOR, PROOFREADER), data=data)
