"""No prompt ever names another agent: agents only know seats."""

from __future__ import annotations

import pytest

from arena.contract import plugins
from arena.engine.match import play_match
from arena.contract.records import MatchSpec

from helpers import ROOT, Recording, Roundtable, scripted

# Names that look like what people call their agents: models, vendors, people.
NAMES = ["gpt-4o-mini", "claude-3-haiku", "llama3-8b-local", "alice_bot", "Qwen2.5"]


@pytest.fixture
def roundtable():
    plugins.register("game", "roundtable", Roundtable)
    yield
    plugins.unregister("game", "roundtable")


@pytest.mark.parametrize(
    "game, params, strategies",
    [
        ("public_goods", {"mode": 1}, ["always_all", "free_rider", "tit_for_tat", "conditional_cooperator", "random_contributor"]),
        ("public_goods", {"mode": 2}, ["always_all", "free_rider", "tit_for_tat", "conditional_cooperator", "garbage"]),
        ("roundtable", {}, ["fixed"] * 5),
    ],
)
async def test_no_prompt_contains_another_agents_name(roundtable, game, params, strategies):
    agents = {}
    for name, strategy in zip(NAMES, strategies):
        extra = {"params": {"replies": ["I agree.", "Let us move on."]}} if strategy == "fixed" else {}
        agents[name] = Recording(scripted(name, strategy, **extra))
    for seed in range(3):
        record = await play_match(MatchSpec(key=f"{game}{seed}", game=game, params=params, agents=tuple(NAMES), seed=seed), agents)
        assert record.status == "finished"
    checked = 0
    for name, agent in agents.items():
        assert agent.turns, f"{name} was never asked"
        for turn in agent.turns:
            sent = turn.model_dump_json() + repr(turn.as_chat())
            for other in NAMES:
                if other != name:
                    assert other.lower() not in sent.lower(), f"{other!r} leaked into a prompt to {name!r}"
            checked += 1
    assert checked >= 5 * 3 * 3
    # the watcher, on the other hand, knows who sat where
    assert {s.agent for s in record.seats} == set(NAMES)


@pytest.mark.parametrize("text, kept, removed", [
    ("Philosophy, metaphors, metadata and a Googled phishing mail", "Philosophy, metaphors, metadata and a Googled phishing mail", []),
    ("I am GPT-4o-mini, trained by OpenAI.", "I am [x], trained by [x].", ["GPT-4o-mini", "OpenAI"]),
    ("Qwen2.5-72B and claude-3-5-sonnet-20241022 agree; GPT4 too.", "[x] and [x] agree; [x] too.",
     ["Qwen2.5-72B", "claude-3-5-sonnet-20241022", "GPT4"]),
    ("ChatGPT's answer, Gemini's answer", "[x]'s answer, [x]'s answer", ["ChatGPT", "Gemini"]),
    # versions and families written after a space, as people write them
    ("I am Claude 3 Opus by Anthropic; you sound like GPT 4 Turbo or Gemini Pro 1.5.",
     "I am [x] by [x]; you sound like [x] or [x].", ["Claude 3 Opus", "Anthropic", "GPT 4 Turbo", "Gemini Pro 1.5"]),
    ("Claude 3.5 Haiku, Claude Sonnet 4 and GPT 4o", "[x], [x] and [x]", ["Claude 3.5 Haiku", "Claude Sonnet 4", "GPT 4o"]),
    ("Llama 3.1 70B Instruct, Mistral Large 2", "[x], [x]", ["Llama 3.1 70B Instruct", "Mistral Large 2"]),
    ("GPT\u20114o, with a non-breaking hyphen", "[x], with a non-breaking hyphen", ["GPT\u20114o"]),
    ("Grok by xAI; Open AI's model", "[x] by [x]; [x]'s model", ["Grok", "xAI", "Open AI"]),
    # a family word alone is a word, and a word after a name stays when it only starts like a family
    ("a haiku, a sonnet, a pro and an opus", "a haiku, a sonnet, a pro and an opus", []),
    ("Claude 3 Prose", "[x] Prose", ["Claude 3"]),
])
def test_the_filter_takes_names_with_their_versions_but_not_words_that_start_alike(text, kept, removed):
    from arena.engine.anonymity import scrub
    from arena.run.scenario import VENDOR_TERMS

    terms = tuple(sorted(VENDOR_TERMS, key=lambda t: (-len(t), t)))
    assert scrub(text, terms, "[x]") == (kept, removed)


def test_an_agents_name_is_scrubbed_as_a_model_would_write_it():
    """``alice_gpt4o`` is written alice-gpt4o or alice gpt4o in prose; each is the same name."""
    from arena.engine.anonymity import scrub
    from arena.run.scenario import parse_scenario

    scenario = parse_scenario({
        "name": "t", "anonymity": {"vendors": False},
        "agents": {"alice_gpt4o": {"backend": "scripted", "strategy": "free_rider"},
                   "bob-mini": {"backend": "scripted", "strategy": "always_all"}},
        "games": [{"game": "public_goods"}]})
    text = "alice-gpt4o, alice gpt4o and alice_gpt4o agree with bob_mini and bob mini; alice alone is a name."
    assert scrub(text, scenario.scrub_terms(), "[x]")[0] == "[x], [x] and [x] agree with [x] and [x]; alice alone is a name."


async def test_a_synthetic_judge_reads_no_name_the_text_does_not_carry():
    questions = str(ROOT / "scenarios" / "data" / "sample-questions.jsonl")
    judge = Recording(scripted("j", "synthetic_judge", params={"name": "j"}))
    agents = {"alice": scripted("alice", "synthetic_contestant", params={"quality": 0.5, "style": "Signed, alice."}),
              "bob": scripted("bob", "synthetic_contestant", params={"quality": 0.5}), "j": judge}
    spec = MatchSpec(key="m", game="pairwise_review", agents=tuple(agents), seed=1, shuffle_seats=False,
                     params={"questions": questions, "case": "s1"}, scrub=("alice",))
    record = await play_match(spec, agents)  # a synthetic judge reads prompt_data, a model only the text
    assert record.status == "finished"
    for turn in judge.turns[1:] if judge.turns[0].round == 1 else judge.turns:
        assert "alice" not in turn.prompt  # the text is filtered ...
        assert "alice" not in " ".join(turn.prompt_data["answers"])  # ... its structured copy is not


def test_the_quick_check_folds_every_character_outside_ascii_that_the_pattern_matches_to_an_ascii_one():
    """The quick check reads an NFKC copy of the text and makes İ and ı an i; it is exact only if every
    character that a case-insensitive pattern matches to an ASCII one, without being ASCII, is one of
    those two or becomes ASCII under NFKC."""
    import re
    import unicodedata

    from arena.engine.anonymity import _DOTTED

    ascii_char = re.compile(r"[\x00-\x7f]", re.IGNORECASE)
    found = {chr(c) for c in range(0x80, 0x110000) if not 0xD800 <= c < 0xE000 and ascii_char.fullmatch(chr(c))}
    assert found == set("\u0130\u0131\u017f\u212a")
    assert {c for c in found if not unicodedata.normalize("NFKC", c).isascii()} == set(_DOTTED)


@pytest.mark.parametrize("text", [
    "Player A gives 5 coins. " * 60,  # long, ASCII, no name: the quick check alone
    "We agree \u2014 \u201cfair\u201d is what we call it. " * 40,  # typographic punctuation, no name
    "I, GPT-4o, and Claude-3 (by ANTHROPIC) agree.",
    "\u201cThis is alice-gpt\u201d \u2014 said openai\u2019s model.",
    "\u017flack, with a long s",  # strays: the pattern runs, whatever the lowered text says
    "\u212aimi, with a Kelvin sign",
    "GPT\u0130, with a dotted capital I",
    "gpt\u0131, with a dotless i",
    "metaphor, Googled, gptx, xgpt, pre-claude: words that start alike are kept",
    "",
])
@pytest.mark.parametrize("terms", [
    ("alice-gpt", "gpt", "claude", "openai", "anthropic", "slack", "kimi", "gpti"),
    ("通义千问", "gpt"),  # a term outside ASCII: the pattern always runs
])
def test_the_quick_check_changes_nothing_the_filter_finds(text, terms):
    from arena.engine.anonymity import _compiled, _replaced, scrub

    _, owner, spans = _compiled(terms).find(text)  # the pattern, without the quick check
    assert scrub(text, terms, "[x]") == _replaced(text, owner, spans, "[x]")


def test_a_long_reply_without_names_is_let_through_without_the_pattern():
    from arena.engine.anonymity import _compiled

    absent = _compiled(("alice-gpt", "gpt", "claude", "slaude")).absent
    assert absent("Player A gives 5 coins. " * 60)
    assert absent("We agree \u2014 \u201cfair\u201d. " * 40)
    assert not absent("... and GPT-4o said so")
    assert not absent("... and alice gpt said so")  # a spelling with a joint: still found
    assert not absent("... and \uff27\uff30\uff34-4 said so")  # fullwidth letters: still found
    assert absent("\u017fome text")  # a stray, folded as the pattern reads it: no name
    assert not absent("\u017flaude, cl\u0430ude and CL\u0391UDE")  # ſ, a Cyrillic а, a Greek Α: the pattern runs
    assert not _compiled(("通义千问",)).absent("no names")


# -- names as identities: every spelling, and nothing else ------------------------------------------------
def _filter(allow=(), material=False, **agents):
    from arena.engine.anonymity import Filter, identity_names

    return Filter(identity_names(agents or {"alice": {"model": "my-finetune"}, "bob": {"model": "o3"}}, allow=allow),
                  "[x]", tuple(allow), material)


@pytest.mark.parametrize("written", [
    "my-finetune", "my finetune", "MyFinetune", "myfinetune", "my_finetune", "MY-FINETUNE", "My Finetune",
    "o3", "o3-mini", "O3",
    "\uff27\uff30\uff34-4", "\uff27\uff30\uff34-\uff14o", "\uff4d\uff59\uff46\uff49\uff4e\uff45\uff54\uff55\uff4e\uff45",  # fullwidth
    "G\u0420\u0422-4",  # Cyrillic Р and Т among Latin letters
    "G\u200bPT-4", "Cl\u00adaude",  # a zero-width space, a soft hyphen
    "alice", "Alice", "bob", "OpenAI", "Open AI", "Meta-Llama-3-8B", "llama3", "Llama", "PaLM 2", "Phi-3",
])
def test_every_spelling_of_a_name_an_agent_writes_is_withheld(written):
    text = f"Between us: I am {written}, and proud of it\uff01"
    assert _filter().said(text) == ("Between us: I am [x], and proud of it\uff01", [written])  # the rest as written


@pytest.mark.parametrize("text", [
    "a meta-analysis of llama wool, palm oil and the bard's phi ratio",
    "metaphors, metadata, Googled, Philosophy, a llama.cpp build",
    "o3o, zo3, co3 and 3o3",  # a short id is a whole word or nothing
    "\u041c\u0435\u0442\u0430 \u0438 \u0420\u043e\u0441\u0441\u0438\u044f",  # Russian words whose letters look Latin
    "Ｔｈｅ fullwidth text that names nobody",
])
def test_ordinary_words_stay_even_in_what_agents_write(text):
    assert _filter().said(text) == (text, [])


def test_the_referee_text_stays_whole_and_a_quoted_reply_loses_its_names():
    f = _filter()
    rules = "You are Judge. Compare the answers on Google Sheets and GPT-4 that alice's tutor wrote."
    assert f.text(rules) == (rules, [])  # the referee's words, before anyone spoke: nothing to hide
    words = "A Llama, a Palm, the Bard, Phi and a Meta-analysis: words at the start of a sentence."
    assert f.text(words) == (words, [])
    reply, found = f.said("Use Google Sheets' SUM.\nSigned, alice (my-finetune).")
    assert reply == "Use [x] Sheets' SUM.\nSigned, [x] ([x])." and found == ["Google", "alice", "my-finetune"]
    prompt = f"[Question]\n{rules}\n\n[Assistant 1]\nUse Google Sheets' SUM.\nSigned, alice (my-finetune).\n[End]"
    shown, found = f.text(prompt)
    assert shown == f"[Question]\n{rules}\n\n[Assistant 1]\nUse [x] Sheets' SUM.\nSigned, [x] ([x]).\n[End]"
    assert found == ["Google", "alice", "my-finetune"]


def test_an_agent_repeating_the_referees_words_reveals_nothing_and_keeps_them():
    f = _filter()
    question = "How do I use Google Sheets to track my budget?"
    f.text(f"Question: {question}\n\nWrite your answer.")
    reply = f"{question}\nFirst, open Google Sheets. I am alice."
    assert f.said(reply) == (f"{question}\nFirst, open [x] Sheets. I am [x].", ["Google", "alice"])
    judge = f"[Question]\n{question}\n\n[Assistant 1]\n{reply}\n[End of Assistant 1]"
    assert f.text(judge)[0] == f"[Question]\n{question}\n\n[Assistant 1]\n{question}\nFirst, open [x] Sheets. I am [x].\n[End of Assistant 1]"


def test_the_allow_list_keeps_what_it_names_and_material_scrubs_the_referee_too():
    f = _filter(allow=["Google Sheets", "bob"])
    assert f.said("Google Sheets, not Google; bob and alice") == ("Google Sheets, not [x]; bob and [x]", ["Google", "alice"])
    material = _filter(material=True)
    assert material.text("Answer by GPT-4 from OpenAI") == ("Answer by [x] from [x]", ["GPT-4", "OpenAI"])


def test_on_by_default_and_off_only_when_the_scenario_says_so():
    from arena.run.scenario import parse_scenario

    def parsed(**top):
        return parse_scenario({"name": "t", "agents": {"my-finetune": {"backend": "scripted", "strategy": "free_rider"},
                                                      "o3": {"backend": "scripted", "strategy": "always_all"}},
                               "games": [{"game": "public_goods"}], **top})

    assert {"my-finetune", "o3", "OpenAI"} <= set(parsed().scrub_terms())
    assert {"my-finetune", "o3"} <= set(parsed(anonymity=None).scrub_terms())
    for off in (False, "off", {"scrub": False}):
        assert parsed(anonymity=off).scrub_terms() == ()
    assert "Google" not in parsed(anonymity={"allow": ["google"]}).scrub_terms()
    (spec, *_) = __import__("arena.run.tournament", fromlist=["plan"]).plan(parsed(anonymity={"allow": ["Google Sheets"]}))
    assert spec.scrub_allow == ("Google Sheets",) and "o3" in spec.scrub


MODEL_BACKENDS = {"openai", "anthropic", "llamacpp"}


def test_every_shipped_model_scenario_hides_names():
    """A scenario that seats a model says so: `anonymity` is written in it and not turned off."""
    import yaml

    from arena.run.scenario import load_scenario

    checked = []
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not any(isinstance(a, dict) and a.get("backend") in MODEL_BACKENDS for a in raw["agents"].values()):
            continue
        assert "anonymity" in raw, f"{path.name} seats models but does not say `anonymity: {{}}`"
        terms = load_scenario(path).scrub_terms()
        allowed = set((raw["anonymity"] or {}).get("allow", ()))
        assert set(raw["agents"]) - allowed <= set(terms), f"{path.name}: the filter is off"
        assert {"OpenAI", "Claude"} <= set(terms), f"{path.name}: vendor names are let through"
        checked.append(path.stem)
    assert {"lfqa-peer-discussion", "idiom-solitaire-models", "local-llm", "faireval-bpc"} <= set(checked)
