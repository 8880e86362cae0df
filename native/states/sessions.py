"""What a `StateStore` remembers of the prompts it prefilled: each session's last prompt,
recent prompts, and which session's prompt each sequence holds. From these it finds a
prompt's divergence point and whether a request taking over a sequence saves the state
left there first."""

from __future__ import annotations

from collections import OrderedDict, deque

import numpy as np
from numpy.typing import NDArray

from toolweave.checkpoints import common_prefix
from toolweave.native.engine import Engine

__all__ = ["SessionPrompts", "hands_over"]

_SESSIONS_KEPT = 1024  # sessions whose last prompt is remembered (for their divergence point)


class SessionPrompts:
    """The prompts sessions and sequences last held; `history` recent prompts are kept to
    place the first checkpoint of a session on recurrent models. Not thread-safe: the
    store calls it under its lock."""

    def __init__(self, history: int) -> None:
        self._history: deque[NDArray[np.int32]] = deque(maxlen=history)
        self._sessions: OrderedDict[str, NDArray[np.int32]] = OrderedDict()
        #: (engine, sequence) -> the session whose prompt the store left there, and it.
        self._owners: dict[tuple[int, int], tuple[str, NDArray[np.int32]]] = {}

    def record(self, engine: Engine, seq: int, session: str, prompt: NDArray[np.int32]) -> None:
        """Remember that `session` sent `prompt`, now left in `seq` of `engine`."""
        self._history.append(prompt)
        self._sessions[session] = prompt
        self._sessions.move_to_end(session)
        self._owners[(id(engine), seq)] = (session, prompt)
        while len(self._sessions) > _SESSIONS_KEPT:
            self._sessions.popitem(last=False)

    def owner(self, engine: Engine, seq: int) -> tuple[str, NDArray[np.int32]] | None:
        """The session whose prompt the store left in `seq` and that prompt, if `seq`
        still starts with it (the decoder may have appended its output since)."""
        found = self._owners.get((id(engine), seq))
        if found is None:
            return None
        live = engine.seq_tokens.get(seq, ())
        prompt = found[1]
        if common_prefix(live, prompt) < len(prompt):
            return None
        return found

    def divergence(self, session: str, prompt: NDArray[np.int32], truncatable: bool) -> int:
        """Where this prompt departs from what its session is expected to resend.

        Within a session: the common prefix with the session's previous prompt (Tandem's
        locality: the next request will share about as much). A session's first prompt
        has no predecessor; a truncatable state of the whole prompt serves any later
        prefix of it, so that is what is saved; a recurrent state is useful only where it
        ends, so the common prefix with any recent prompt (shared instructions) is used.
        """
        previous = self._sessions.get(session)
        if previous is not None:
            return common_prefix(previous, prompt)
        if truncatable:
            return len(prompt)
        return max((common_prefix(p, prompt) for p in self._history), default=0)


def hands_over(owner: tuple[str, NDArray[np.int32]], session: str, keep: int) -> bool:
    """Whether a request keeping the first `keep` tokens of the prompt `owner` left in a
    sequence should save that state first: always for another session's prompt it cuts
    into; within one session only when it keeps less than half of it (another prompt
    stream, which comes back), not for a sibling sharing most of it (the divergence
    checkpoint covers those)."""
    prompt_len = len(owner[1])
    if keep >= prompt_len:
        return False
    return owner[0] != session or keep < prompt_len / 2
