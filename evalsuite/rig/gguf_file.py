"""Write small Qwen3-layout (and DFlash-drafter) GGUF files with the `gguf` package.

All rig models share one vocabulary, read from a vocab-only GGUF that ships
with the vendored llama.cpp sources (Phi-3's 32k SentencePiece vocabulary,
whose chat template uses real `<|user|>`/`<|assistant|>`/`<|end|>` special
tokens), so the target, its drafts and the learned model are mutually
compatible the way llama-server checks draft/target pairs.

Array layout: a numpy array of shape (rows, cols) is a ggml tensor with
ne = {cols, rows}; linear weights are stored like `torch.nn.Linear.weight`
(out_features, in_features), exactly what llama.cpp's loader expects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

VOCAB_FILE = "ggml-vocab-phi-3.gguf"
MASK_TOKEN = "<|placeholder1|>"
"""An unused special token of the vocabulary, declared as DFlash's mask token."""


def require_gguf() -> Any:
    """The `gguf` module, or an error that says how to install it."""
    try:
        import gguf
    except ImportError:
        from evalsuite.rig.errors import RigError

        raise RigError(
            "The rig writes its models with the gguf package; install it: pip install 'evalsuite[rig]'."
        ) from None
    return gguf


@dataclass(frozen=True)
class Vocab:
    """The tokenizer part of a GGUF file, copied verbatim into every rig model."""

    model: str
    pre: str
    tokens: list[str]
    scores: np.ndarray
    types: np.ndarray
    bos_id: int
    eos_id: int
    unk_id: int
    pad_id: int
    add_bos: bool
    add_eos: bool
    chat_template: str

    def __len__(self) -> int:
        return len(self.tokens)

    def token_id(self, text: str) -> int:
        """The id of a token given its exact text (special tokens included)."""
        try:
            return self.tokens.index(text)
        except ValueError:
            raise KeyError(f"token {text!r} is not in the {VOCAB_FILE} vocabulary") from None

    def normal_ids(self) -> np.ndarray:
        """Ids of ordinary text pieces (type NORMAL) that decode to printable text on their own."""
        keep = [
            i
            for i, (tok, kind) in enumerate(zip(self.tokens, self.types))
            if kind == 1 and tok.replace("\u2581", " ").isprintable()
        ]
        return np.asarray(keep, dtype=np.int64)


def read_vocab(vocab_dir: Path) -> Vocab:
    """Load the shared vocabulary from the vendored `models/` folder."""
    path = vocab_dir / VOCAB_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; the llama.cpp source tree in the cache is incomplete.")
    return read_vocab_file(path)


def read_vocab_file(path: Path) -> Vocab:
    """The tokenizer fields of any GGUF file written with a SentencePiece-style vocabulary."""
    gguf = require_gguf()

    reader = gguf.GGUFReader(path)

    def value(key: str) -> Any:
        return reader.fields[key].contents()

    return Vocab(
        model=value("tokenizer.ggml.model"),
        pre=value("tokenizer.ggml.pre"),
        tokens=list(value("tokenizer.ggml.tokens")),
        scores=np.asarray(value("tokenizer.ggml.scores"), dtype=np.float32),
        types=np.asarray(value("tokenizer.ggml.token_type"), dtype=np.int32),
        bos_id=int(value("tokenizer.ggml.bos_token_id")),
        eos_id=int(value("tokenizer.ggml.eos_token_id")),
        unk_id=int(value("tokenizer.ggml.unknown_token_id")),
        pad_id=int(value("tokenizer.ggml.padding_token_id")),
        add_bos=bool(value("tokenizer.ggml.add_bos_token")),
        add_eos=bool(value("tokenizer.ggml.add_eos_token")),
        chat_template=value("tokenizer.chat_template"),
    )


@dataclass(frozen=True)
class Shape:
    """Hyperparameters of a Qwen3-layout decoder (also used by the DFlash drafter's blocks)."""

    n_vocab: int
    n_embd: int = 128
    n_layer: int = 4
    n_head: int = 4
    n_head_kv: int = 4
    n_ff: int = 384
    n_ctx: int = 4096
    rope_base: float = 10000.0
    rms_eps: float = 1e-6

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


@dataclass
class Tensors:
    """Named numpy tensors in GGUF naming, plus the ggml type each is stored as."""

    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    qtypes: dict[str, str] = field(default_factory=dict)  # name -> "F32" | "F16" | "Q4_0" | "Q8_0"

    def add(self, name: str, array: np.ndarray, qtype: str = "F32") -> None:
        self.arrays[name] = np.ascontiguousarray(array, dtype=np.float32)
        self.qtypes[name] = qtype


def _encode(array: np.ndarray, qtype: str) -> tuple[np.ndarray, Any]:
    gguf = require_gguf()

    kind = gguf.GGMLQuantizationType[qtype]
    if qtype == "F32":
        return array.astype(np.float32), None
    if qtype == "F16":
        return array.astype(np.float16), None
    return gguf.quants.quantize(array.astype(np.float32), kind), kind


def write_gguf(
    path: Path,
    *,
    arch: str,
    name: str,
    shape: Shape,
    tensors: Tensors,
    vocab: Vocab | Path,
    extra: dict[str, Any] | None = None,
) -> None:
    """Write one model file (atomically: a partial file never has the final name).

    `vocab` is a rig vocabulary, or a GGUF file whose `tokenizer.*` keys are
    copied verbatim (a real model's tokenizer: BPE merges and all).
    """
    gguf = require_gguf()

    path.parent.mkdir(parents=True, exist_ok=True)
    staged = path.with_name(path.name + ".partial")
    writer = gguf.GGUFWriter(str(staged), arch=arch)
    writer.add_name(name)
    writer.add_uint32(f"{arch}.context_length", shape.n_ctx)
    writer.add_uint32(f"{arch}.embedding_length", shape.n_embd)
    writer.add_uint32(f"{arch}.block_count", shape.n_layer)
    writer.add_uint32(f"{arch}.feed_forward_length", shape.n_ff)
    writer.add_uint32(f"{arch}.attention.head_count", shape.n_head)
    writer.add_uint32(f"{arch}.attention.head_count_kv", shape.n_head_kv)
    writer.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", shape.rms_eps)
    writer.add_float32(f"{arch}.rope.freq_base", shape.rope_base)
    writer.add_uint32(f"{arch}.vocab_size", shape.n_vocab)
    for key, value in (extra or {}).items():
        if isinstance(value, bool):
            writer.add_bool(key, value)
        elif isinstance(value, int):
            writer.add_uint32(key, value)
        elif isinstance(value, float):
            writer.add_float32(key, value)
        elif isinstance(value, str):
            writer.add_string(key, value)
        else:
            writer.add_array(key, list(value))
    if isinstance(vocab, Path):
        copy_tokenizer(writer, vocab)
    else:
        _add_vocab(writer, vocab)
    for tensor_name, array in tensors.arrays.items():
        data, raw = _encode(array, tensors.qtypes[tensor_name])
        writer.add_tensor(tensor_name, data, raw_dtype=raw)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    staged.replace(path)


def _add_vocab(writer: Any, vocab: Vocab) -> None:
    writer.add_tokenizer_model(vocab.model)
    writer.add_tokenizer_pre(vocab.pre)
    writer.add_token_list(vocab.tokens)
    writer.add_token_scores(vocab.scores.tolist())
    writer.add_token_types(vocab.types.tolist())
    writer.add_bos_token_id(vocab.bos_id)
    writer.add_eos_token_id(vocab.eos_id)
    writer.add_unk_token_id(vocab.unk_id)
    writer.add_pad_token_id(vocab.pad_id)
    writer.add_add_bos_token(vocab.add_bos)
    writer.add_add_eos_token(vocab.add_eos)
    writer.add_chat_template(vocab.chat_template)


def copy_field(writer: Any, field: Any) -> None:
    """Copy one key of a `GGUFReader` into a `GGUFWriter`, its value type kept."""
    gguf = require_gguf()
    kind = field.types[0]
    if kind == gguf.GGUFValueType.ARRAY:
        writer.add_key_value(field.name, field.contents(), kind, sub_type=field.types[-1])
    else:
        writer.add_key_value(field.name, field.contents(), kind)


def copy_tokenizer(writer: Any, source: Path) -> None:
    """Copy every `tokenizer.*` key of the GGUF `source` into `writer`."""
    gguf = require_gguf()
    for name, value in gguf.GGUFReader(source).fields.items():
        if name.startswith("tokenizer."):
            copy_field(writer, value)


def read_model(path: Path) -> tuple[str, Shape, dict[str, np.ndarray]]:
    """Architecture, shape and float32 tensors of a model file written by `write_gguf`."""
    return model_of(require_gguf().GGUFReader(path))


def model_of(reader: Any) -> tuple[str, Shape, dict[str, np.ndarray]]:
    """`read_model` of a GGUF already open in `gguf`'s reader (whose other keys the caller may read too)."""
    gguf = require_gguf()
    arch = reader.fields["general.architecture"].contents()

    def key(name: str) -> Any:
        return reader.fields[f"{arch}.{name}"].contents()

    shape = Shape(
        n_vocab=int(key("vocab_size")),
        n_embd=int(key("embedding_length")),
        n_layer=int(key("block_count")),
        n_head=int(key("attention.head_count")),
        n_head_kv=int(key("attention.head_count_kv")),
        n_ff=int(key("feed_forward_length")),
        n_ctx=int(key("context_length")),
        rope_base=float(np.float32(key("rope.freq_base"))),
        rms_eps=round(float(key("attention.layer_norm_rms_epsilon")), 12),
    )
    arrays: dict[str, np.ndarray] = {}
    for tensor in reader.tensors:
        data = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
        arrays[tensor.name] = np.asarray(data, dtype=np.float32).reshape(tuple(reversed(tensor.shape.tolist())))
    return arch, shape, arrays


def requantize(src: Path, dst: Path, matrix_type: str) -> None:
    """Rewrite a Qwen3-layout model with every matrix stored as `matrix_type` (e.g. Q4_0): a cheaper twin."""
    arch, shape, arrays = read_model(src)
    tensors = Tensors()
    for name, array in arrays.items():
        tensors.add(name, array, "F32" if array.ndim == 1 else matrix_type)
    write_gguf(
        dst,
        arch=arch,
        name=f"{src.stem}-{matrix_type.lower()}",
        shape=shape,
        tensors=tensors,
        vocab=read_vocab_file(src),
    )
