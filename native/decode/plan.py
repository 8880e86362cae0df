"""What the response loop does in each decoding mode, decided once from the mode name."""

from __future__ import annotations

from dataclasses import dataclass

from toolweave.modes import Mode, check_mode

__all__ = ["DecodePlan"]

#: The modes the response decoder runs (`grammar` is llama-cpp-python's own decoder).
_LOOP_MODES = ("constrained", "jump", "fast", "lossless")


@dataclass(frozen=True)
class DecodePlan:
    """The steps the response loop takes besides plain constrained greedy decoding.

    `jump_forward`: commit the tokens the grammar forces without decoding them.
    `draft_values`: draft a call's required values in parallel once its tool is known
    (read-only tools with optional arguments then get a provisional call).
    `trust_drafts`: write drafts back unverified and hand out the call at once (`fast`);
    otherwise drafts are verified under the real serial prefix (`lossless`).
    `forecasts`: verify forecasts of what comes next where the model has a free choice.
    """

    mode: Mode
    jump_forward: bool
    draft_values: bool
    trust_drafts: bool
    forecasts: bool

    @classmethod
    def for_mode(cls, mode: str) -> DecodePlan:
        """The plan of `mode`; `ModeError` for `grammar` or an unknown name."""
        checked = check_mode(mode, _LOOP_MODES)
        drafting = checked in ("fast", "lossless")
        return cls(
            mode=checked,
            jump_forward=checked != "constrained",
            draft_values=drafting,
            trust_drafts=checked == "fast",
            forecasts=drafting,
        )
