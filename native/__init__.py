"""The llama.cpp side of toolweave: the only package that imports `llama_cpp`.

`engine` wraps one model and one multi-sequence context; `constraints` holds the
llguidance token matcher; `calibration` measures what a pass costs; `caller` answers
requests with tool calls through the decoders of `decode/`; `states/` keeps KV states;
`baselines/` are what the benchmarks compare against. Public names are imported from
`toolweave` itself.
"""
