"""The search: `amoeba search` and `experiments.api.search` run an evolution/ algorithm over candidate
trainings through Ray Tune, and resume it from its journal.

- driver.py: the search driver (the Tune run, its resume, the circuit breaker); search_config.py:
  its settings (SearchConfig); output_dir.py: opening its output dir, new or resumed from the
  journal; trial.py: the trial function (one candidate trained by trainer/ in a Ray worker).
- sizing.py and calibration.py: a search sized to its data (`amoeba search --data=DIR` without a
  space) and airbench94's calibration run that sets its target; resources.py, local_ray.py,
  stop_signals.py: the Ray cluster, its workers and Ctrl-C.
- progress.py, ranking.py, results.py: the progress lines, the ranking rule and the results tables.

Must not import the later steps (experiments.promote, experiments.report), the command line
(experiments.cli, experiments.commands, experiments.api) or experiments.simulate; of the top level,
only experiments.settings, experiments.layout and experiments.units. TensorFlow only inside functions.
"""
