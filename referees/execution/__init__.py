"""The execution referee: runs the code a match produced against its tests, in the sandbox.

Each of the game's programs scores 1 for the seats it is credited to when every test
passes, else 0; why it failed (an assertion, a syntax error, a limit) is the verdict's text.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from arena.contract import Game, Referee, Scores, Transcript, WritesCode
from arena.referees.execution.sandbox import Limits, run_tests


class ExecutionParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    metric: str = Field("tests", description="Name its scores are reported under.")
    limits: Limits = Field(default_factory=Limits, description="The sandbox's limits for one program.")


class ExecutionReferee(Referee):
    Params = ExecutionParams
    description = "Runs the game's final code against its tests in the sandbox: 1 when all pass, else 0."
    needs = (WritesCode,)

    async def score(self, game: Game, pool: Transcript) -> Scores:
        p: ExecutionParams = self.params
        if not isinstance(game, WritesCode):  # `arena validate` says so first; a spec built by hand may still try
            raise ValueError(f"the execution referee needs a game that writes code; {type(game).__name__} does not")
        programs = game.programs()
        if not programs:
            raise ValueError(f"{type(game).__name__} left no code for the execution referee to run in this match")
        scores: dict[str, float] = {}
        for program in programs:
            outcome = await run_tests(program.code, program.tests, program.entry_point, p.limits)
            for seat in program.seats:
                scores[seat] = min(scores.get(seat, 1.0), float(outcome.passed))
            verdict = "all tests passed" if outcome.passed else f"tests not passed: {outcome.reason}"
            # no wall time here: the transcript holds what the match came to, the same wherever and whenever it
            # is played (a Ray worker's run exports what the run's own process does, byte for byte)
            self.desk.post_verdict(f"Execution of {program.entry_point}: {verdict}.", {
                "referee": "execution", "metric": p.metric, "status": outcome.status, "reason": outcome.reason,
                "seats": list(program.seats), "passed": outcome.passed,
                "stderr": outcome.stderr[-2000:], "missing_protections": outcome.missing,
            })
        return {p.metric: scores}
