"""Everything TensorFlow: data pipelines, model builders, candidate training.

Modules here may import TensorFlow/Keras; they must not import Ray or the search algorithms.
"""
