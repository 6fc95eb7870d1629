"""The --export_format flag of the commands that export (train, evaluate; promote's is a field of
PromoteConfig) and the lines they print of what was written. Must not import TensorFlow.
"""

from __future__ import annotations

from absl import flags

from core.export_formats import EXPORT_FORMAT_HELP, FORMATS, PARITY_FILE


def define_export_format(values: flags.FlagValues) -> None:
    """--export_format in `values`, its names checked when the flags are parsed (a usage error)."""
    flags.DEFINE_list("export_format", ["saved_model"], EXPORT_FORMAT_HELP, flag_values=values)
    flags.register_validator("export_format", lambda names: bool(names) and all(n in FORMATS for n in names),
                             message=f"export_format: choose among {', '.join(FORMATS)}", flag_values=values)


def exported_lines(export_dir: str, checks: dict[str, dict], what: str = "") -> str:
    """`exported WHAT to DIR (...)`, then one line per file: its own top-1 on the evaluation split (one
    view, as it serves: what the file delivers) and how closely it agrees with the Keras model; a last
    line where the recipe's evaluations averaged test-time views the files do not run."""
    first = next(iter(checks.values()))
    lines = [f"exported {what}to {export_dir} ({PARITY_FILE}: each file's top-1 on the "
             f"{first.get('eval_images') or 0:,} evaluation images, one view, and its agreement with the Keras "
             f"model on {first['images']} of them):"]
    for name, check in checks.items():
        top1 = f"top-1 {check['top1']:.4f}" if check.get("top1") is not None else "top-1 not measured"
        lines.append(f"  {name:<12} {check['file']:<18} {top1}; top-1 agreement {check['top1_agreement']:.4f}, "
                     f"largest logit difference {check['max_logit_diff']:.2g}")
    tta = first.get("eval_tta")
    if tta and tta != "none":
        lines.append(f"  (the comparison's and evaluations' top-1 average the --eval_tta={tta} views; the files "
                     "serve one view, so the top-1 above is what they deliver)")
    return "\n".join(lines)
