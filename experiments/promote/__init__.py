"""The promote: `amoeba promote` retrains a search's best cells at full size beside baselines, and
decides the verdict.

- driver.py: the promote run (its trials, its resume, comparison.csv); promote_config.py: its
  settings (PromoteConfig); promote_plan.py: which models it trains.
- comparison.py, headline.py, targets.py, noise.py: the verdict (who wins, by how much, at what
  time to a target accuracy, and whether the difference is more than noise).

May import experiments.search (what a search wrote) and experiments.tracking; must not import
experiments.report, experiments.simulate or the command line (experiments.cli, experiments.commands,
experiments.api); of the top level, only experiments.settings, experiments.layout and
experiments.units. TensorFlow only inside functions.
"""
