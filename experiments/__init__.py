"""The search driver and its library API, beside the `amoeba` command that runs them.

- Driver: search.py (`amoeba search`: an evolution/ algorithm driving candidate training through
  Ray Tune, and its resume), api.py (the same from Python, over your own space and training
  function), trial.py (the trial function: one candidate trained by trainer/ in a Ray worker),
  progress.py, local_ray.py; promote.py retrains the best cells beside baselines (promote_plan.py: which).
- The tabular simulator: tabular.py, simulator.py, fronts.py (`amoeba benchmark`).
- Results and reports: results.py, report.py, plots.py, cell_graph.py.
- The `amoeba` command: cli.py, one module per subcommand in experiments/commands/,
  recipe_flags.py, the flag files in configs/.

This package wires the others together: it must not implement search algorithms (evolution/),
search spaces (searchspace/) or models and training (trainer/). No module here loads TensorFlow
when imported: trainer/ is imported inside the functions that train, evaluate, predict, prepare
or size models, so the search driver and `amoeba COMMAND --help` run without TensorFlow.
"""
