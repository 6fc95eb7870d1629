"""The formats a trained model exports to beside (or instead of) its SavedModel, one table: TFLite
(float32, and dynamic-range int8) and ONNX, with the modules that write and read each, their pip
lines, and the tolerance each file is held to against the Keras model at export (trainer/export.py
writes and checks them). The runtimes are optional extras: a missing one is named with its pip line.

Pure Python: must not import TensorFlow or an optional runtime at module level (configs check
format names here).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from core import storage
from core.optional import require_module

PARITY_FILE = "parity.json"


@dataclass(frozen=True)
class ExportFormat:
    """One format: its file in the export dir ("" for the SavedModel itself), the modules that write
    and read it with their pip line, and its tolerance against the Keras model's logits (issue 52:
    trainer/export_formats.py's `parity`)."""

    file: str
    writes_with: tuple[str, ...]
    reads_with: str
    install: str
    # the largest |logit difference| allowed, times the Keras logits' scale by `relative_to`
    max_logit_diff: float
    # "magnitude": max(1, the largest |Keras logit|) (float formats, whose rounding grows with the logits);
    # "spread": the Keras logits' spread, their std about each image's mean (quantized formats, whose error
    # is a share of the signal: an untrained model's near-uniform logits hold them as tightly as a trained one's)
    relative_to: str
    min_agreement: float  # the least share of the clear images (`clear_margin`) with Keras's top-1
    # an image counts toward agreement when Keras's top-2 margin is at least this times the logits' spread
    # (near ties, where any rounding may flip the class, are left out); 0: every image
    clear_margin: float
    help: str


# int8's tolerance, measured (issue 52): airbench94 and resnet20, untrained and briefly trained, on 256
# images, differ by at most 0.05 to 0.21 x the spread (RMS 0.01 to 0.05) and change the class only of
# images whose top-2 margin is under 0.08 x the spread. Broken files differ by far more: logits shuffled
# across classes 5 to 9 x, a file ignoring its input 3 to 6 x, noise of the logits' own spread added 3 to
# 4 x, even noise of a fifth of it 0.66 to 0.87 x.
FORMATS: dict[str, ExportFormat] = {
    "saved_model": ExportFormat("", (), "tensorflow", "", 1e-4, "magnitude", 0.0, 0.0,
                                "TF Serving and Vertex AI; encoded image bytes or float images in"),
    "tflite": ExportFormat("model.tflite", (), "ai_edge_litert.interpreter", "pip install 'amoeba-nas[litert]' "
                           "(or: pip install ai-edge-litert)", 1e-3, "magnitude", 0.0, 0.0,
                           "LiteRT (TensorFlow Lite), float32"),
    "tflite_int8": ExportFormat("model_int8.tflite", (), "ai_edge_litert.interpreter", "pip install 'amoeba-nas[litert]' "
                                "(or: pip install ai-edge-litert)", 0.5, "spread", 0.9, 0.1,
                                "LiteRT, dynamic-range int8 weights (about a quarter of the size)"),
    "onnx": ExportFormat("model.onnx", ("tf2onnx", "onnx"), "onnxruntime", "pip install 'amoeba-nas[onnx]' "
                         "(or: pip install tf2onnx onnx onnxruntime)", 1e-3, "magnitude", 0.0, 0.0,
                         "ONNX (opset of tf2onnx), onnxruntime"),
}


def check_formats(formats: Sequence[str]) -> tuple[str, ...]:
    """The formats asked for, checked against the table; ValueError naming an unknown one."""
    unknown = [name for name in formats if name not in FORMATS]
    if unknown or not formats:
        raise ValueError(f"export_format: {unknown or 'none given'}: choose among {', '.join(FORMATS)}")
    return tuple(dict.fromkeys(formats))


def require(module: str, fmt: str) -> object:
    """`module` imported, or ImportError naming the format and the pip line that installs it."""
    return require_module(module, f"export format {fmt!r}", FORMATS[fmt].install)


def format_path(export_dir: str, fmt: str) -> str:
    return storage.join(export_dir, FORMATS[fmt].file) if FORMATS[fmt].file else export_dir


def check_runtimes(formats: Sequence[str]) -> None:
    """ImportError naming the first format whose writer or runtime is missing, with its pip line: run
    before a training whose end exports, so that nothing is trained for an export that cannot be."""
    for fmt in check_formats(formats):
        for module in (*FORMATS[fmt].writes_with, FORMATS[fmt].reads_with):
            require(module, fmt)


EXPORT_FORMAT_HELP = ("Formats --export_dir writes, each checked against the Keras model on evaluation images "
                      "(parity.json): " + "; ".join(f"{name}: {fmt.help}" for name, fmt in FORMATS.items()) + ".")


def check_precision(formats: Sequence[str], precision: str) -> None:
    """ValueError when a converted format is asked of a model that computes in 16 bits (TensorFlow's
    TFLite converter and tf2onnx take float32 graphs only: a bfloat16 Conv2D does not convert)."""
    converted = [fmt for fmt in formats if fmt != "saved_model"]
    if converted and precision != "float32":
        raise ValueError(f"export_format {', '.join(converted)}: needs a model trained with precision float32, "
                         f"not {precision} (the converters take float32 graphs only); export saved_model")
