"""The names of the training augmentations that trainer/records.py's `train_dataset` implements.

A plain list with no imports, so that `TrainConfig` and the commands' flags read it without
TensorFlow, and records.py checks its argument without importing the training config.
This module must not import anything.
"""

# "inception": distorted crops and flips; "cifar": zero pad-crop and random flip; "airbench": reflect
# pad-crop of 2 pixels and alternating flip (each image's flip drawn once, then every other epoch all flipped)
AUGMENTATIONS = ("inception", "cifar", "airbench")
