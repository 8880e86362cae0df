"""The BFCL v4 data files: where they live and how they are read.

The files are kept in a cache directory filled from the ``bfcl-eval`` wheel.
The data files ship inside the wheel; installing the package would pull in a large
dependency tree, so the wheel is downloaded with ``pip download --no-deps`` and only
``bfcl_eval/data/**`` is extracted (`unpack_wheel_dir` does the same for other parts
of the wheel, such as the multi-turn tool code). The cache directory is filled
atomically (extract to a temporary directory, then rename), so a directory that exists
is complete.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from toolweave.errors import ToolweaveError
from toolweave.eval.pip_fetch import FetchError, pip_download

T = TypeVar("T")

__all__ = [
    "BFCL_VERSION",
    "DatasetError",
    "Message",
    "bfcl_data_dir",
    "build_cases",
    "read_category",
    "read_json_lines",
    "turn_messages",
    "unpack_wheel_dir",
]

BFCL_VERSION = "2026.3.23"
_ENV_VAR = "TOOLWEAVE_BFCL_DIR"
_DATA_PREFIX = "bfcl_eval/data/"
_DOWNLOAD_TIMEOUT_S = 300
_HINT = f"check network access to PyPI, or set {_ENV_VAR} to an unpacked bfcl_eval/data directory"
# Entries that every complete data directory holds.
_MARKERS = ("BFCL_v4_simple_python.json", "possible_answer", "multi_turn_func_doc")


Message = Mapping[str, str]


class DatasetError(ToolweaveError):
    """A benchmark data set is missing, cannot be downloaded, or does not parse."""


def bfcl_data_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Return the directory holding BFCL's ``bfcl_eval/data`` files, downloading once.

    The directory is ``cache_dir``, else ``$TOOLWEAVE_BFCL_DIR``, else
    ``~/.cache/toolweave/bfcl-2026.3.23``. Prints nothing; raises `DatasetError`.
    """
    if cache_dir is None:
        cache_dir = os.environ.get(_ENV_VAR) or (
            Path.home() / ".cache" / "toolweave" / f"bfcl-{BFCL_VERSION}"
        )
    return unpack_wheel_dir(
        Path(cache_dir).expanduser(), _DATA_PREFIX, _MARKERS, what="the BFCL data", hint=_HINT
    )


def unpack_wheel_dir(
    target: Path, prefix: str, markers: Sequence[str], *, what: str, hint: str
) -> Path:
    """Return ``target`` holding the files of the ``bfcl-eval`` wheel under ``prefix``.

    A ``target`` holding every name in ``markers`` is complete and returned as is;
    otherwise the wheel is downloaded and ``prefix`` is extracted into a temporary
    directory that is then renamed to ``target``. ``what`` names the files and ``hint``
    the way out in `DatasetError` messages.
    """
    if _is_complete(target, markers):
        return target
    if target.exists() and any(target.iterdir()):
        raise DatasetError(
            f"{target} exists but does not hold {what} (no {', '.join(markers)}); "
            f"delete it to download again"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".bfcl-", dir=target.parent) as tmp:
        wheel = _download_wheel(Path(tmp), hint)
        staged = Path(tmp) / "unpacked"
        _extract_tree(wheel, prefix, staged)
        if not _is_complete(staged, markers):
            raise DatasetError(f"{wheel.name} does not hold the expected {prefix} files")
        try:
            os.replace(staged, target)  # works onto a missing or empty directory
        except OSError:
            if not _is_complete(target, markers):  # another process may have won the race
                raise DatasetError(f"cannot move {what} into {target}") from None
    return target


def read_json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, value)`` for each non-blank line of a JSON-lines file.

    A line that is not JSON yields ``(line_number, None)``, so callers can skip and
    count it; a missing file raises `DatasetError`.
    """
    try:
        handle = path.open(encoding="utf-8")
    except FileNotFoundError:
        raise DatasetError(f"BFCL data file {path} does not exist") from None
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError:
                yield number, None


def read_category(root: Path, category: str) -> Iterator[tuple[str, Any, Any]]:
    """Yield ``(id, entry, ground_truth)`` for each question of ``BFCL_v4_<category>.json``.

    Ground truth comes from ``possible_answer/`` (None for an id it lacks). For a line
    that is not a JSON object with a string id, ``entry`` is None and ``id`` is
    ``"<file>:<line>"``.
    """
    questions = root / f"BFCL_v4_{category}.json"
    answers = root / "possible_answer" / questions.name
    truth: dict[str, Any] = {}
    for _, item in read_json_lines(answers):
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            truth[item["id"]] = item.get("ground_truth")
    for line, entry in read_json_lines(questions):
        key = entry.get("id") if isinstance(entry, dict) else None
        if isinstance(key, str):
            yield key, entry, truth.get(key)
        else:
            yield f"{questions.name}:{line}", None, None


def build_cases(
    root: Path,
    category: str,
    build: Callable[[Any, Any], T],
    errors: tuple[type[Exception], ...],
) -> tuple[tuple[T, ...], dict[str, str]]:
    """Build one case per question of `category`; entries that fail with one of `errors`
    are skipped and returned as ``{id: reason}`` instead of stopping the load."""
    cases: list[T] = []
    skipped: dict[str, str] = {}
    for key, entry, truth in read_category(root, category):
        try:
            if entry is None:
                raise ValueError("not a JSON object with an id")
            cases.append(build(entry, truth))
        except errors as exc:
            skipped[key] = str(exc) or type(exc).__name__
    return tuple(cases), skipped


def turn_messages(turn: Any) -> tuple[Message, ...]:
    """Convert one BFCL turn (a list of messages) to ``{"role", "content"}`` dicts.

    Raises ValueError for anything else.
    """
    if not isinstance(turn, list):
        raise ValueError("a turn is not a list of messages")
    messages: list[Message] = []
    for message in turn:
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ValueError(f"malformed message {message!r}")
        messages.append({"role": message["role"], "content": str(message.get("content", ""))})
    return tuple(messages)


def _is_complete(directory: Path, markers: Sequence[str]) -> bool:
    return all((directory / name).exists() for name in markers)


def _download_wheel(into: Path, hint: str) -> Path:
    try:
        return pip_download(
            f"bfcl-eval=={BFCL_VERSION}",
            into,
            sdist=False,
            pattern="bfcl_eval-*.whl",
            timeout=_DOWNLOAD_TIMEOUT_S,
        )
    except FetchError as exc:
        raise DatasetError(f"{exc}; {hint}") from None


def _extract_tree(wheel: Path, prefix: str, into: Path) -> None:
    """Extract ``prefix**`` from ``wheel`` into ``into`` (prefix removed), refusing odd paths."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.infolist():
                if member.is_dir() or not member.filename.startswith(prefix):
                    continue
                relative = PurePosixPath(member.filename[len(prefix) :])
                if relative.is_absolute() or ".." in relative.parts:
                    raise DatasetError(f"unsafe path {member.filename!r} in {wheel.name}")
                destination = into.joinpath(*relative.parts)
                destination.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(member) as source, destination.open("wb") as sink:
                    shutil.copyfileobj(source, sink)
    except zipfile.BadZipFile as exc:
        raise DatasetError(f"{wheel.name} is not a valid wheel: {exc}") from None
