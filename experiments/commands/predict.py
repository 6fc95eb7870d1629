"""amoeba predict --export_dir=DIR IMAGE... [--top_k=5 --format=text|json]: classify images.

DIR is an export dir written by `amoeba train --export_dir` (or `amoeba evaluate --export_dir`,
`amoeba promote --export_dir`); --export_format picks the file and runtime that classify (saved_model
by TensorFlow; tflite and tflite_int8 by LiteRT's interpreter; onnx by onnxruntime: optional
extras, named with their pip line when missing);
images are local or gs:// paths in any format TensorFlow decodes. An image that cannot be read (missing,
empty, truncated, not an image) gets one line on stderr saying why, and the others are classified all
the same; the exit status is then 1 (0 when every image was classified). With --format=json such an
image's entry is {"image": PATH, "error": WHY}. (`--model` is the deprecated
spelling of --export_dir: in `amoeba train`, --model names an architecture.)
"""

from __future__ import annotations

SUMMARY = "classify images with an exported model"  # for `amoeba --help`

import json
import sys

from absl import app, flags

from core.export_formats import FORMATS

FLAGS = flags.FlagValues()
USES_TENSORFLOW = True  # the CLI imports it first, quietly
flags.DEFINE_string("export_dir", None, "Export dir (what amoeba train, evaluate or promote --export_dir wrote).",
                    flag_values=FLAGS)
flags.DEFINE_string("model", None, "Deprecated: --export_dir.", flag_values=FLAGS)
flags.DEFINE_enum("export_format", "saved_model", list(FORMATS), "Which exported file classifies.", flag_values=FLAGS)
flags.DEFINE_integer("top_k", 5, "Labels shown per image.", lower_bound=1, flag_values=FLAGS)
flags.DEFINE_enum("format", "text", ["text", "json"], "Output format.", flag_values=FLAGS)


def main(args: list[str]) -> None:
    export_dir = FLAGS.export_dir
    if FLAGS.model:
        print("amoeba predict: --model is deprecated; use --export_dir", file=sys.stderr)
        export_dir = export_dir or FLAGS.model
    if not export_dir or not args:
        raise app.UsageError("usage: amoeba predict --export_dir=DIR IMAGE...")
    from trainer.export import predict

    try:
        results = predict(export_dir, args, FLAGS.top_k, FLAGS.export_format)
    except (ValueError, OSError, ImportError) as err:
        raise app.UsageError(str(err)) from None
    if FLAGS.format == "json":
        print(json.dumps(results))
    for result in results:
        if "error" in result:
            print(f"amoeba predict: {result['image']}: {result['error']}", file=sys.stderr)
        elif FLAGS.format == "text":
            print(result["image"])
            for p in result["predictions"]:
                print(f"  {p['probability']:.4f}  {p['label']}")
    failed = sum("error" in result for result in results)
    if failed:
        classified = len(results) - failed
        raise app.UsageError(f"{failed} of {len(results)} image(s) could not be read; {classified} classified")
