"""Everything TensorFlow: data preparation and tf.data pipelines, the proxy datasets' loaders, the
model builders, candidate training, full training, export and predict. Every module here imports
TensorFlow (or Keras) when it is imported; the TF-free recipes and storage that the search driver
and the commands read (ProxyConfig, TrainConfig, the precision and augmentation names) are in core/.

Modules here read recipes from core/ and genotypes from searchspace/; they must not import Ray,
the search algorithms (evolution/) or experiments/.
"""
