"""The model zoo's specification: which model families, built from which files, how.

The zoo is a set of tiny random-weight GGUF models, one per model family, built at test
time from what the llama-cpp-python sdist ships: llama.cpp's vocab-only GGUFs (the real
tokenizer of each family) and its chat templates. Each model has the family's
tokenizer, its chat template and an architecture llama.cpp runs, with a few layers and
a small width, so every family's tokenizer and template can be tested in seconds.

This module is pure data: the builder is `toolweave.adapters.bench.zoo`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ARCHS",
    "MISSING_VOCABS",
    "QUANTS",
    "SDIST_VERSION",
    "ZOO_DIMS",
    "ZOO_FAMILIES",
    "ZOO_REVISION",
    "ZooDims",
    "ZooFamily",
    "arch_metadata",
    "arch_tensors",
    "family_named",
    "template_member",
    "vocab_member",
]

#: The llama-cpp-python sdist the vocabularies and templates come from (the installed one).
SDIST_VERSION = "0.3.36"
#: Bumped whenever a built model would change (dims, tensors, seeds): a new cache folder.
ZOO_REVISION = 1

#: Architectures the builder can lay out (`arch_tensors`).
ARCHS = ("llama", "qwen2", "qwen3", "phi3", "gemma3", "command-r")
#: Quantization types a zoo model may have (F16: written as built, not quantized).
QUANTS = ("F16", "Q8_0", "Q4_K_M")


@dataclass(frozen=True)
class ZooDims:
    """The size of every zoo model. Q4_K packs rows of 256 values, so `n_embd` and
    `n_ff` are multiples of 256 and the K-quant kernels run on every matrix."""

    n_layer: int = 2
    n_embd: int = 256
    n_head: int = 4
    n_head_kv: int = 2
    n_ff: int = 512
    n_ctx_train: int = 4096

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @property
    def q_dim(self) -> int:
        return self.head_dim * self.n_head

    @property
    def kv_dim(self) -> int:
        return self.head_dim * self.n_head_kv


ZOO_DIMS = ZooDims()


@dataclass(frozen=True)
class ZooFamily:
    """One zoo model: a family's tokenizer and chat template on a tiny architecture.

    `syntax` is the tool-call syntax the template itself teaches the model (what
    `toolweave.formats.format_for_chat_template` should pick for it); `note` says where
    the zoo model departs from the real family.
    """

    name: str
    stands_for: str
    vocab: str
    template: str
    arch: str
    quant: str
    syntax: str
    note: str = ""

    @property
    def file_name(self) -> str:
        return f"zoo-{self.name}-{self.quant}.gguf"

    @property
    def seed(self) -> int:
        """A fixed seed per family (the same weights in every build)."""
        return sum((i + 1) * b for i, b in enumerate(self.name.encode())) % (1 << 31)


ZOO_FAMILIES: tuple[ZooFamily, ...] = (
    ZooFamily(
        "qwen2",
        "Qwen2.5",
        vocab="qwen2",
        template="Qwen-Qwen2.5-7B-Instruct.jinja",
        arch="qwen2",
        quant="Q4_K_M",
        syntax="hermes",
    ),
    ZooFamily(
        "qwen35",
        "Qwen3.5",
        vocab="qwen35",
        template="Qwen3.5-4B.jinja",
        arch="qwen3",
        quant="Q8_0",
        syntax="qwen-xml",
        note="qwen3 architecture: Qwen3.5's hybrid linear attention is not built",
    ),
    ZooFamily(
        "llama3",
        "Llama 3.2",
        vocab="llama-bpe",
        template="meta-llama-Llama-3.2-3B-Instruct.jinja",
        arch="llama",
        quant="Q4_K_M",
        syntax="llama3",
    ),
    ZooFamily(
        "phi3",
        "Phi-3.5 mini",
        vocab="phi-3",
        template="microsoft-Phi-3.5-mini-instruct.jinja",
        arch="phi3",
        quant="Q8_0",
        syntax="json",
        note="the template has no tool syntax: plain JSON calls",
    ),
    ZooFamily(
        "gemma4",
        "Gemma 4",
        vocab="gemma-4",
        template="google-gemma-4-31B-it.jinja",
        arch="gemma3",
        quant="Q4_K_M",
        syntax="gemma4",
        note="gemma3 architecture: Gemma 4's per-layer inputs and MoE are not built",
    ),
    ZooFamily(
        "command-r",
        "Command R7B",
        vocab="command-r",
        template="CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja",
        arch="command-r",
        quant="Q8_0",
        syntax="command-r",
    ),
    ZooFamily(
        "mistral",
        "Mistral (Nemo template)",
        vocab="llama-spm",
        template="mistralai-Mistral-Nemo-Instruct-2407.jinja",
        arch="llama",
        quant="F16",
        syntax="mistral",
        note="Mistral 7B's 32k SentencePiece vocabulary (llama-spm), whose [INST] and "
        "[TOOL_CALLS] are plain text; Nemo's tekken vocabulary is not shipped",
    ),
)

#: Families asked for whose vocabulary the sdist does not ship (so they are not built).
MISSING_VOCABS: tuple[str, ...] = ("granite", "lfm2")


def family_named(name: str) -> ZooFamily:
    for family in ZOO_FAMILIES:
        if family.name == name:
            return family
    known = ", ".join(f.name for f in ZOO_FAMILIES)
    raise KeyError(f"no zoo family {name!r} (known: {known})")


def vocab_member(family: ZooFamily, version: str = SDIST_VERSION) -> str:
    """The sdist member holding the family's vocab-only GGUF."""
    return f"llama_cpp_python-{version}/vendor/llama.cpp/models/ggml-vocab-{family.vocab}.gguf"


def template_member(family: ZooFamily, version: str = SDIST_VERSION) -> str:
    """The sdist member holding the family's chat template."""
    return f"llama_cpp_python-{version}/vendor/llama.cpp/models/templates/{family.template}"


def arch_metadata(arch: str, dims: ZooDims = ZOO_DIMS) -> dict[str, int | float]:
    """The architecture's hyperparameters, keyed without the ``{arch}.`` prefix.

    Integers are written as uint32, floats as float32 (what llama.cpp reads)."""
    if arch not in ARCHS:
        raise KeyError(f"no zoo layout for architecture {arch!r} (known: {', '.join(ARCHS)})")
    meta: dict[str, int | float] = {
        "context_length": dims.n_ctx_train,
        "embedding_length": dims.n_embd,
        "block_count": dims.n_layer,
        "feed_forward_length": dims.n_ff,
        "attention.head_count": dims.n_head,
        "attention.head_count_kv": dims.n_head_kv,
        "rope.freq_base": 10000.0,
    }
    if arch == "command-r":
        meta["attention.layer_norm_epsilon"] = 1e-5
        meta["logit_scale"] = 0.0625
    else:
        meta["attention.layer_norm_rms_epsilon"] = 1e-6
    if arch in ("llama", "phi3"):
        meta["rope.dimension_count"] = dims.head_dim
    if arch in ("qwen3", "gemma3"):
        meta["attention.key_length"] = dims.head_dim
        meta["attention.value_length"] = dims.head_dim
    return meta


def arch_tensors(
    arch: str, n_vocab: int, dims: ZooDims = ZOO_DIMS
) -> list[tuple[str, tuple[int, ...]]]:
    """Every tensor of the architecture with its ggml shape (ne0 first: a matrix
    ``(n_in, n_out)``). The output projection is tied to the token embedding."""
    if arch not in ARCHS:
        raise KeyError(f"no zoo layout for architecture {arch!r} (known: {', '.join(ARCHS)})")
    e, q, kv, ff, hd = dims.n_embd, dims.q_dim, dims.kv_dim, dims.n_ff, dims.head_dim
    out: list[tuple[str, tuple[int, ...]]] = [
        ("token_embd.weight", (e, n_vocab)),
        ("output_norm.weight", (e,)),
    ]
    for i in range(dims.n_layer):
        b = f"blk.{i}."
        layer: list[tuple[str, tuple[int, ...]]] = [(b + "attn_norm.weight", (e,))]
        if arch == "phi3":
            layer += [(b + "attn_qkv.weight", (e, q + 2 * kv))]
        else:
            layer += [
                (b + "attn_q.weight", (e, q)),
                (b + "attn_k.weight", (e, kv)),
                (b + "attn_v.weight", (e, kv)),
            ]
        if arch == "qwen2":
            layer += [
                (b + "attn_q.bias", (q,)),
                (b + "attn_k.bias", (kv,)),
                (b + "attn_v.bias", (kv,)),
            ]
        if arch in ("qwen3", "gemma3"):
            layer += [(b + "attn_q_norm.weight", (hd,)), (b + "attn_k_norm.weight", (hd,))]
        layer += [(b + "attn_output.weight", (q, e))]
        if arch == "gemma3":
            layer += [(b + "post_attention_norm.weight", (e,))]
        if arch != "command-r":  # command-r runs attention and FFN on one norm, in parallel
            layer += [(b + "ffn_norm.weight", (e,))]
        if arch == "phi3":
            layer += [(b + "ffn_up.weight", (e, 2 * ff))]
        else:
            layer += [(b + "ffn_gate.weight", (e, ff)), (b + "ffn_up.weight", (e, ff))]
        layer += [(b + "ffn_down.weight", (ff, e))]
        if arch == "gemma3":
            layer += [(b + "post_ffw_norm.weight", (e,))]
        out += layer
    return out
