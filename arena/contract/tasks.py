"""What a turn asks of a seat, in words shared by the games that ask and the strategies that answer.

A game that hands scripted players structured facts (``Game.prompt_data``) names the turn's
task under ``"task"`` (and, for writing games, the ``"stage"`` of the work) with these members;
a strategy matches on the same members, so a misspelt task is an ``AttributeError`` rather than
a turn that silently gets "I have nothing to say". They are ``str`` enums: equal to the plain
word, written to JSON as it, so stored data and older records read the same. A game with a kind
of turn of its own defines its own ``StrEnum`` the same way.
"""

from __future__ import annotations

from enum import StrEnum


class Task(StrEnum):
    ANSWER = "answer"  # answer a question (a contestant whose answers are judged)
    JUDGE = "judge"  # give a verdict: compare two answers, or a referee's judging brief
    REVIEW = "review"  # review two answers on one's own (before a discussion of them)
    DISCUSS = "discuss"  # go on discussing those reviews with the other reviewer
    DEBATE = "debate"  # argue which of two answers is better
    SCORE = "score"  # score one response on each dimension asked for
    SUMMARIZE = "summarize"  # sum up a turn of a debate
    CODE = "code"  # write, revise or review code


class Stage(StrEnum):
    """Where a writer/editor game's work is, for the seat asked (``prompt_data["stage"]``)."""

    WRITE = "write"  # the first version: code, or a translation
    REVISE = "revise"  # the writer's next version, after a review
    REVIEW = "review"  # the editor comments on the latest version (code review)
    EDIT = "edit"  # the editor hands in the polished version
