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
    """`exported WHAT to DIR (...)`, then one line per file: its name and how closely it agrees with
    the Keras model."""
    lines = [f"exported {what}to {export_dir} ({PARITY_FILE}: each file against the Keras model on "
             f"{next(iter(checks.values()))['images']} evaluation images):"]
    for name, check in checks.items():
        lines.append(f"  {name:<12} {check['file']:<18} top-1 agreement {check['top1_agreement']:.4f}, "
                     f"largest logit difference {check['max_logit_diff']:.2g}")
    return "\n".join(lines)
