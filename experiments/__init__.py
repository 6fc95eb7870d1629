"""The pipeline's steps, one subpackage each, beside the `amoeba` command and the library API that run them.

- search/: `amoeba search` (an evolution/ algorithm driving candidate training through Ray Tune, and
  its resume), the trial function, the proxy's sizing and calibration, progress and results.
- promote/: `amoeba promote` retrains the best cells beside baselines and decides the verdict.
- report/: `amoeba report`'s HTML page, its figures and cell drawings.
- tracking/: TensorBoard HParams and MLflow records of searches and promotes.
- simulate/: the tabular simulator behind `amoeba benchmark`.
- At the top: the `amoeba` command (cli.py, one module per subcommand in commands/, recipe_flags.py,
  export_flags.py, the flag files in configs/), the Python API (api.py), and what every step may
  import: settings.py (config fields as flags), layout.py (the files a run writes), units.py.

A step imports the steps before it (tracking < search < promote < report; simulate stands alone) and
the top's settings, layout and units, never a later step or the command line (tests/test_packages.py).
This package wires the others together: it must not implement search algorithms (evolution/),
search spaces (searchspace/) or models and training (trainer/). No module here loads TensorFlow
when imported: trainer/ is imported inside the functions that train, evaluate, predict, prepare
or size models, so the search driver and `amoeba COMMAND --help` run without TensorFlow.
"""
