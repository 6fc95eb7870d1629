"""The TF-free values and I/O every other package may import: the training recipes (`ProxyConfig`,
the proxy dataset table PROXY_DATASETS and the proxy's split plan in core.proxy_config;
`TrainConfig` in core.train_config; the precision and augmentation names) and storage of small
files on local paths and gs:// (core.storage); what to tell a user whose --data is no prepared
data dir (core.data_dir).

Nothing here may import TensorFlow, Ray, or any package of ours but searchspace, not even inside a
function: the search driver, the commands' flag definitions and the trainer all read these values,
and a proxy dataset's loader is named by its import path, imported only in a trial worker.
"""
