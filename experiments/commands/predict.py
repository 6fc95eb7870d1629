"""amoeba predict --model=EXPORT_DIR IMAGE... [--top_k=5 --format=text|json]: classify images.

EXPORT_DIR is a SavedModel written by `amoeba train --export_dir`; images are local or gs://
paths in any format TensorFlow decodes.
"""

from __future__ import annotations

import json

from absl import app, flags

FLAGS = flags.FlagValues()
USES_TENSORFLOW = True  # the CLI imports it first, quietly
flags.DEFINE_string("model", None, "Exported SavedModel dir.", flag_values=FLAGS)
flags.DEFINE_integer("top_k", 5, "Labels shown per image.", lower_bound=1, flag_values=FLAGS)
flags.DEFINE_enum("format", "text", ["text", "json"], "Output format.", flag_values=FLAGS)


def main(args: list[str]) -> None:
    if not FLAGS.model or not args:
        raise app.UsageError("usage: amoeba predict --model=EXPORT_DIR IMAGE...")
    from trainer.export import predict

    try:
        results = predict(FLAGS.model, args, FLAGS.top_k)
    except (ValueError, OSError) as err:
        raise app.UsageError(str(err)) from None
    if FLAGS.format == "json":
        print(json.dumps(results))
        return
    for result in results:
        print(result["image"])
        for p in result["predictions"]:
            print(f"  {p['probability']:.4f}  {p['label']}")
