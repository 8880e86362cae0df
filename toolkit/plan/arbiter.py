"""Reading the Arbiter's reply: ``Thought: ...`` then ``Action: Finish(answer)`` or
``Action: Replan``.

A replan plans the request's side effects again, so only a written ``Replan`` counts
as one. A reply cut inside ``Finish(`` (the token budget ran out before its ``)``) is a
finish with the answer written so far, marked ``truncated``; a reply that is neither
(cut before its action, or free text) is ``unreadable`` and ends the request.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["ArbiterAction", "ArbiterVerdict", "read_arbiter"]

ArbiterAction = Literal["finish", "replan", "unreadable"]

_FINISH = re.compile(r"Action:\s*Finish\((?P<answer>.*)\)", re.S)
_CUT_FINISH = re.compile(r"Action:\s*Finish\((?P<answer>.*)\Z", re.S)
_REPLAN = re.compile(r"Action:\s*Replan\b")
_THOUGHT = re.compile(r"Thought:\s*(?P<thought>[^\n]*)")
_SHOWN = 120  # characters of an unreadable reply quoted in its problem


@dataclass(frozen=True)
class ArbiterVerdict:
    """What the Arbiter decided; ``problem`` says why an ``unreadable`` reply is."""

    action: ArbiterAction
    answer: str = ""
    thought: str = ""
    truncated: bool = False
    problem: str = ""

    @property
    def finish(self) -> bool:
        """True when the request is answered (``answer``)."""
        return self.action == "finish"

    @property
    def replan(self) -> bool:
        """True when the Arbiter asked for another plan."""
        return self.action == "replan"


def read_arbiter(text: str) -> ArbiterVerdict:
    """The verdict of an Arbiter reply (never raises)."""
    thought_match = _THOUGHT.search(text)
    thought = thought_match.group("thought").strip() if thought_match else ""
    finish = _FINISH.search(text)
    replan = _REPLAN.search(text)
    if finish and (replan is None or finish.start() < replan.start()):
        return ArbiterVerdict("finish", finish.group("answer").strip(), thought)
    if replan:
        return ArbiterVerdict("replan", thought=thought)
    cut = _CUT_FINISH.search(text)
    if cut and cut.group("answer").strip():
        return ArbiterVerdict("finish", cut.group("answer").strip(), thought, truncated=True)
    shown = repr(text.strip()[-_SHOWN:]) if text.strip() else "an empty reply"
    if cut:
        problem = f"the Arbiter's reply was cut before its answer: {shown}"
    else:
        problem = f"the Arbiter's reply has neither Finish(...) nor Replan: {shown}"
    return ArbiterVerdict("unreadable", thought=thought, problem=problem)
