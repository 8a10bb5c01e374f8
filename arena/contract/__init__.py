"""The plugin contract: everything a game, an agent backend or a referee may import.

Plugins import this package and nothing else of Arena's. It imports nothing of ours
from outside itself.
"""

from arena.contract.agent import Agent, AgentConfig, FatalAgentError
from arena.contract.agent import ReplyCut
from arena.contract.calls import CachedReply, CallRecord, CallStarted, Services
from arena.contract.errors import ArenaError, BackendUnavailable, ConfigError, MatchSetupError, Problem
from arena.contract.events import Event, SeatInfo
from arena.contract.capabilities import AnswersOnce, HasCases, Judged, JudgeRequest, PlaysComparisons, Program, ReportsReviews, Review, WritesCode
from arena.contract.game import Game, InvalidReply, NoParams, Notice, everyone_hears_everyone, nobody_hears_anyone
from arena.contract.paths import path_field
from arena.contract.messages import REFEREE, Message, Retry, Transcript, Turn
from arena.contract.records import MatchIdentity, MatchRecord, MatchSettings, MatchSpec
from arena.contract.referee import Desk, Referee, RefereeSpec, Scores
from arena.contract.runs import (DamagedStore, EventRow, MatchRow, MessageRow, NoRunYet, NotAFolder, NotPermitted,
                                 OtherFormat, RunReader, ScoreRow, StoreError, TurnRow, open_run)
from arena.contract.strategy import Strategy, StrategyParams
from arena.contract.summaries import Column, FinalNotice, Summarized, Summary, Table
from arena.contract.tasks import Stage, Task

__all__ = [
    "Agent", "AgentConfig", "ArenaError", "BackendUnavailable", "CachedReply", "CallRecord", "CallStarted", "ConfigError", "Desk", "Event",
    "FatalAgentError", "Game", "HasCases", "InvalidReply", "Judged", "JudgeRequest", "MatchRecord", "MatchSettings",
    "MatchSetupError", "MatchSpec", "Message", "NoParams", "Notice", "Problem", "Program", "REFEREE", "Referee",
    "RefereeSpec", "ReportsReviews", "Retry", "Review", "Scores", "SeatInfo", "Services", "Stage", "Strategy",
    "StrategyParams", "Task", "Transcript", "Turn", "WritesCode", "everyone_hears_everyone", "nobody_hears_anyone", "path_field",
]
__all__ += ["ReplyCut", "MatchIdentity", "PlaysComparisons", "AnswersOnce"]
__all__ += ["Column", "FinalNotice", "Summarized", "Summary", "Table"]
# reading a finished run (the row types' ``Transcript`` is arena.contract.runs.Transcript: the name here is the messages')
__all__ += ["DamagedStore", "EventRow", "MatchRow", "MessageRow", "NoRunYet", "NotAFolder", "NotPermitted",
            "OtherFormat", "RunReader", "ScoreRow", "StoreError", "TurnRow", "open_run"]
