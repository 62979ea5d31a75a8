"""The semantic ranker's ONNX Runtime engine: a local export of the sentence-transformers model.

The whole sentence-transformers pipeline (transformer, pooling and, if the model has it,
normalisation) is traced once with `torch.onnx.export` from the model on disk and run by
ONNX Runtime; tokenisation stays with the model's own tokenizer, so truncation
(`max_seq_length`) and special tokens are exactly those of the torch engine. Nothing is
downloaded: the export is made from the local model and cached as a file next to the
embedding cache, named by the model fingerprint, the quantisation and the CPU
instruction set it was quantised for (see `export_path`), so a changed model or another
CPU never reuses a stale graph.

`quantize=int8` is ONNX Runtime's dynamic int8 quantisation of every MatMul (per-channel
int8 weights, uint8 activations quantised per batch). Without VNNI (avx512_vnni / avx_vnni)
the u8*s8 products can saturate on avx2, so weights are then quantised with 7-bit range
(`reduce_range`), as optimum's avx2 config does.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from evalpipe.rankers.dense.precision import cpu_flags

#: `quantize` values the ONNX engine accepts (None = the fp32 export).
ONNX_QUANTIZE = ("int8",)
#: The export's opset; part of the file name so an exporter change gets a new file.
OPSET = 17
INSTALL_HINT_ONNX = "install with: pip install 'evalpipe[onnx]' (onnxruntime and onnx)"


def int8_variant(flags: set[str] | None = None) -> str:
    """`vnni` where the CPU has int8 dot-product instructions, else `avx2` (reduced weight range)."""
    flags = cpu_flags() if flags is None else flags
    return "vnni" if flags & {"avx512_vnni", "avx_vnni", "amx_int8"} else "avx2"


def export_path(root: str | Path, fingerprint: str, quantize: str | None) -> Path:
    """Where the graph for (model fingerprint, quantisation, int8 variant) is cached."""
    tag = "fp32" if quantize is None else f"{quantize}-{int8_variant()}"
    return Path(root) / f"{fingerprint[:24]}-opset{OPSET}-{tag}.onnx"


def require_onnxruntime() -> Any:
    """The `onnxruntime` module; ImportError (with the install hint) when it or `onnx` is missing."""
    try:
        # lazy: onnx, numpy, onnxruntime, ~668 ms (in a try)
        import onnx  # noqa: F401  (the exporter and the quantiser need it)
        import onnxruntime
    except ImportError as exc:
        raise ImportError(f"{exc}; {INSTALL_HINT_ONNX}") from None
    return onnxruntime


def tokenize(st_model: Any, texts: list[str]) -> dict[str, Any]:
    """The model's own tokenisation (`preprocess` in sentence-transformers >= 6, `tokenize` before)."""
    fn = getattr(st_model, "preprocess", None) or st_model.tokenize
    return fn(texts)


class _Pipeline:
    """nn.Module wrapper: token tensors in, sentence embedding out (what torch.onnx.export traces)."""

    @staticmethod
    def build(st_model: Any, input_names: list[str]) -> Any:
        # lazy: torch, ~1210 ms
        import torch

        class Pipeline(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.model = st_model

            def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
                return self.model(dict(zip(input_names, tensors, strict=True)))["sentence_embedding"]

        return Pipeline().eval()


def _atomic(final: Path, write: Any) -> None:
    """Write via a temp file in the same directory + os.replace: a concurrent run never sees half a file."""
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, final)
    finally:
        Path(tmp).unlink(missing_ok=True)


def export_fp32(st_model: Any, path: Path) -> None:
    """Trace `st_model` (sentence-transformers) to an fp32 ONNX graph with dynamic batch and length."""

    # lazy: torch, ~1213 ms
    import torch

    sample = tokenize(st_model, ["an export sample", "a second, longer export sample text"])
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in sample]
    args = tuple(sample[n] for n in names)
    axes = {n: {0: "batch", 1: "tokens"} for n in names} | {"sentence_embedding": {0: "batch"}}

    def write(tmp: str) -> None:
        with warnings.catch_warnings(), torch.no_grad():  # tracer warnings: noise for users
            warnings.simplefilter("ignore")
            torch.onnx.export(
                _Pipeline.build(st_model, names),
                args,
                tmp,
                input_names=names,
                output_names=["sentence_embedding"],
                dynamic_axes=axes,
                opset_version=OPSET,
                dynamo=False,
            )

    _atomic(path, write)


def quantize_int8(fp32_path: Path, path: Path) -> None:
    """ONNX Runtime dynamic int8 (per-channel weights) of every MatMul of the fp32 graph."""
    # lazy: onnxruntime, onnx, numpy, ~713 ms
    from onnxruntime.quantization import QuantType, quantize_dynamic

    reduce_range = int8_variant() == "avx2"
    _atomic(
        path,
        lambda tmp: quantize_dynamic(
            str(fp32_path),
            tmp,
            weight_type=QuantType.QInt8,
            per_channel=True,
            reduce_range=reduce_range,
            op_types_to_quantize=["MatMul"],
        ),
    )


def ensure_export(st_model: Any, root: str | Path, fingerprint: str, quantize: str | None) -> Path:
    """The cached graph for this model/quantisation, exporting (and quantising) it first if needed."""
    fp32 = export_path(root, fingerprint, None)
    if not fp32.is_file():
        export_fp32(st_model, fp32)
    if quantize is None:
        return fp32
    out = export_path(root, fingerprint, quantize)
    if not out.is_file():
        quantize_int8(fp32, out)
    return out


class OnnxEncoder:
    """Encodes texts with an ONNX Runtime session over the exported graph and the model's tokenizer."""

    def __init__(self, st_model: Any, graph: Path, threads: int | None = None):
        ort = require_onnxruntime()
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = threads or min(os.cpu_count() or 1, 8)
        # Spinning workers wait for work by burning CPU: on a shared machine that steals the
        # cores the other worker needs (measured: slower than torch at load 12); sleep instead.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.st_model = st_model
        self.graph = graph

    @property
    def max_seq_length(self) -> int:
        return int(self.st_model.max_seq_length)

    @max_seq_length.setter
    def max_seq_length(self, value: int) -> None:
        self.st_model.max_seq_length = value

    def encode_batch(self, texts: list[str]) -> np.ndarray:
        """float32 sentence embeddings of one batch (as the model outputs them: normalised if it does)."""
        features = tokenize(self.st_model, texts)
        feed = {name: features[name].numpy().astype(np.int64, copy=False) for name in self.inputs}
        return np.asarray(self.session.run(["sentence_embedding"], feed)[0], dtype=np.float32)

    def get_embedding_dimension(self) -> int:
        get = getattr(self.st_model, "get_embedding_dimension", None)
        return int(get() if get is not None else self.st_model.get_sentence_embedding_dimension())
