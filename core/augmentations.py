"""The names of the training augmentations that trainer/records.py's `train_dataset` implements.

A plain list with no imports, so that `TrainConfig` and the commands' flags read it without
TensorFlow, and records.py checks its argument without importing the training config.
This module must not import anything.
"""

AUGMENTATIONS = ("inception", "cifar")  # "inception": distorted crops and flips; "cifar": pad-crop-flip
