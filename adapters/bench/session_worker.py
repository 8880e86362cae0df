"""The new process of `toolweave bench session`: one configuration, the same sessions.

    python -m toolweave.adapters.bench.session_worker JOB_DIR

Reads ``JOB_DIR/spec.json`` (written by `bench_session`), runs every turn of its
conversations in configuration ``config`` with the states left in ``state_dir``, and
writes ``JOB_DIR/out.json``: the turn records (phase ``new_process``) and the seconds
from the process's start to the configuration built (imports and model loading).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

_T0 = time.perf_counter()


def main(argv: list[str]) -> int:
    from toolweave.adapters.bench.session import run_configs
    from toolweave.adapters.bench.session_run import Conversation

    if len(argv) != 1:
        print("usage: python -m toolweave.adapters.bench.session_worker JOB_DIR", file=sys.stderr)
        return 2
    job = Path(argv[0])
    try:
        spec = json.loads((job / "spec.json").read_text(encoding="utf-8"))
        convs = [Conversation.from_json(c) for c in spec["conversations"]]
        name = str(spec["config"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"session worker: bad spec in {job}: {exc}", file=sys.stderr)
        return 2
    t_import = time.perf_counter() - _T0
    records, startup_s = run_configs(
        [name],
        convs,
        model_path=Path(spec["model"]),
        n_ctx=int(spec["n_ctx"]),
        max_tokens=int(spec["max_tokens"]),
        llama_threads=int(spec["llama_threads"]),
        state_dir=Path(spec["state_dir"]),
        chat_template=spec.get("chat_template"),
        exact=bool(spec.get("exact", False)),
        phase="new_process",
        warm=False,
    )
    out = {"records": records, "startup_s": t_import + startup_s}
    (job / "out.json").write_text(json.dumps(out), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
