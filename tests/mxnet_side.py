"""Run by the tests with MXNet's interpreter (.venv-mxnet), which the host cannot import.

``python tests/mxnet_side.py REQUEST.json``: for each model in the request, build it with
Gluon and report its trainable parameters and forward FLOPs per sample; where the request
gives a PyTorch model's weights (an .npz of its state_dict in order, and an input ``x``),
load them in order into the Gluon model and save its output for that input.
"""

from __future__ import annotations

import json
import sys

import mxnet as mx
import numpy as np

from bench.trial.models import build, common, flops


def main(request_path: str) -> int:
    request = json.loads(open(request_path).read())
    report = {}
    for name, item in request.items():
        size = item["size"]
        net = build("mxnet", name, item["classes"], size)
        entry = {
            "params": common.mxnet_trainable_params(net),
            "flops": flops.mxnet_flops_per_sample(net, size),
        }
        if "weights" in item:
            saved = np.load(item["weights"])
            names = sorted(k for k in saved.files if k.startswith("p"))
            params = list(net.collect_params().values())
            entry["tensors"] = [len(names), len(params)]
            for key, param in zip(names, params, strict=False):
                if tuple(saved[key].shape) != tuple(param.shape):
                    entry["mismatch"] = f"{key} {saved[key].shape} vs {param.name} {param.shape}"
                    break
                param.set_data(mx.nd.array(saved[key]))
            net.hybridize()
            out = net(mx.nd.array(saved["x"])).asnumpy()  # predict mode: BN uses running stats
            np.save(item["out"], out)
        report[name] = entry
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
