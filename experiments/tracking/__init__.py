"""What a run records beside its own files: hparams.py (TensorBoard's HParams dashboard) and
mlflow_log.py (MLflow runs), for searches and promotes alike.

The first step of the pipeline's imports: must not import another subpackage of experiments
(search, promote, report, simulate) or the command line (experiments.cli, experiments.commands,
experiments.api); of the top level, only experiments.settings, experiments.layout and
experiments.units. No TensorFlow or Ray when imported.
"""
