"""The tabular simulator behind `amoeba benchmark`: an algorithm searched over a benchmark's table
(NAS-Bench-201, or the bundled one) in seconds, without training.

- tabular.py: the tables; simulator.py: the simulated search; benchmark_config.py: its settings;
  fronts.py: Pareto fronts over the table; plots.py: the best-so-far figure.

Stands beside the search, promote and report (which it must not import), and must not import the
command line (experiments.cli, experiments.commands, experiments.api) or experiments.tracking; of
the top level, only experiments.settings, experiments.layout and experiments.units. No TensorFlow
or Ray.
"""
