"""What one training step of a supernet (trainer/supernet_training.py: the sandwich of `--sandwich`
subnets) costs against one step of its seed trained alone by the search's proxy trainer
(trainer/candidate_step.py, the same batch and recipe), measured side by side: both traced first,
then `--rounds` rounds of `--steps` steps of each in turn on the same batches, and the median step of
each. At equal epochs the ratio is the supernet's training against the seed's own (issue 54's goal:
at most 4x). The last line printed is one JSON object; nothing is written.

Run: .venv/bin/python benchmarks/supernet_cost.py --data=DIR [--width=1] [--rounds=3] [--steps=8]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--width", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--sandwich", type=int, default=4)
    args = parser.parse_args()

    from core.proxy_config import ProxyConfig
    from experiments.search import sizing
    from searchspace.convnet import AIRBENCH94, at_width, convnet_space
    from searchspace.supernet import supernet_space
    from trainer.candidate_loop import ProxyTraining
    from trainer.candidate_network import inference_function, proxy_network
    from trainer.proxy_data import load_proxy_data, train_pipeline
    from trainer.supernet_training import SupernetTraining
    from trainer.worker_setup import GRAPPLER_OFF, graph_options

    proxy = ProxyConfig(dataset="prepared", data=os.path.abspath(args.data),
                        **sizing.proxy_settings(sizing.DataFacts.read(args.data)))
    data = load_proxy_data(proxy)
    seed = at_width(AIRBENCH94, args.width)
    space = supernet_space(seed, convnet_space(proxy.input_size))
    supernet = SupernetTraining(space, proxy, data, args.sandwich)
    model, _ = proxy_network(seed, proxy, data.input_shape, data.num_classes, True, "convnet", data.x_train)
    alone = ProxyTraining(model, inference_function(model, data.input_shape), data, proxy, None, None)
    batches = list(train_pipeline(data.x_train, data.y_train, proxy.train_batch_size, 0).take(args.steps))
    rng = random.Random(0)
    archs = [supernet.archs(rng) for _ in batches]
    steps = {"supernet": lambda i: supernet.step(*batches[i], archs[i]), "alone": lambda i: alone.train_step(*batches[i])}
    times: dict[str, list[float]] = {name: [] for name in steps}
    with graph_options(GRAPPLER_OFF):
        traces = {}
        for name, step in steps.items():
            start = time.perf_counter()
            float(step(0))
            traces[name] = time.perf_counter() - start
        for _ in range(args.rounds):
            for name, step in steps.items():
                for i in range(len(batches)):
                    start = time.perf_counter()
                    float(step(i))
                    times[name].append(time.perf_counter() - start)
    median = {name: statistics.median(t) for name, t in times.items()}
    print(json.dumps({"cpu": "avx512" if "avx512bw" in open("/proc/cpuinfo").read() else "avx2",
                      "seed": seed.key(), "batch": proxy.train_batch_size, "sandwich": args.sandwich,
                      "supernet_step_ms": round(1000 * median["supernet"], 1),
                      "alone_step_ms": round(1000 * median["alone"], 1),
                      "ratio": round(median["supernet"] / median["alone"], 2),
                      "trace_s": {k: round(v, 1) for k, v in traces.items()}}))


if __name__ == "__main__":
    main()
