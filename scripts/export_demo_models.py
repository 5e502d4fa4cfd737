"""Exports the demo's torchvision models to TorchScript, with random weights,
and lays them out as a model repository in Triton's layout.

Usage: export_demo_models.py OUTDIR [--size 64] [--repository DIR]

Each model is scripted and saved as OUTDIR/<model>.pt (what examples/demo.yaml
serves). The server freezes and optimizes it for inference when it loads it
(batch norm folded into convolutions, oneDNN convolutions on CPU: 5-10x faster
than a plain trace on Debian's CPU libtorch); such optimized modules cannot be
saved, so that happens at load time. Models that already exist are kept, so
running this again costs nothing.

The repository (default OUTDIR/repository; docs/repository.md) holds each
model as DIR/<model>/config.pbtxt and DIR/<model>/1/model.pt (a hard link to
OUTDIR/<model>.pt where the file system allows, else a copy): the three models
of examples/demo.yaml with its SLOs and batch limits, and a fourth
(mobilenet_v2) that scripts/demo.sh loads while serving. Each model's
profile is cached beside its model.pt on first use.
"""
import argparse
import os
import shutil
import sys
import time

MODELS = ["squeezenet1_1", "shufflenet_v2_x0_5", "resnet18"]  # the models of examples/demo.yaml
EXTRA = ["mobilenet_v2"]  # the model scripts/demo.sh loads while serving
# symphony.slo_ms and max_batch_size of each model in the repository: those of
# examples/demo.yaml (keep them in step), and the fourth's. resnet18's batches
# are kept to 7 (about 50 ms on a CPU): on a device it shares with the two 60 ms
# models, a longer one makes their requests late (docs/serving.md#models-that-
# share-a-device; at 40 r/s its batches are smaller anyway).
SERVING = {
    "squeezenet1_1": (60, 32),
    "shufflenet_v2_x0_5": (60, 32),
    "resnet18": (150, 7),
    "mobilenet_v2": (150, 32),
}

CONFIG = """# Written by scripts/export_demo_models.py. Triton's model configuration
# (docs/repository.md); symphony.slo_ms is Symphony's latency SLO. An empty
# dynamic_batching sets no max_queue_delay_microseconds: the deferral is not
# capped, as in examples/demo.yaml. The tensors keep the names they have when
# demo.yaml serves the model ("input", "output"), bound in order.
platform: "pytorch_libtorch"
max_batch_size: {max_batch}
input [ {{ name: "input" data_type: TYPE_FP32 dims: [ 3, {size}, {size} ] }} ]
output [ {{ name: "output" data_type: TYPE_FP32 dims: [ 1000 ] }} ]
dynamic_batching {{ }}
parameters: {{ key: "symphony.slo_ms" value: {{ string_value: "{slo_ms}" }} }}
"""


def write_repository(outdir, repo, models, size):
    """DIR/<model>/config.pbtxt and DIR/<model>/1/model.pt; files already
    there are kept (so are the profiles cached beside them)."""
    for name in models:
        slo_ms, max_batch = SERVING.get(name, (100, 32))  # other models (gpu-check.sh's --models)
        version = os.path.join(repo, name, "1")
        os.makedirs(version, exist_ok=True)
        config = CONFIG.format(max_batch=max_batch, size=size, slo_ms=slo_ms)
        path = os.path.join(repo, name, "config.pbtxt")
        if not os.path.exists(path) or open(path).read() != config:
            with open(path + ".tmp", "w") as f:
                f.write(config)
            os.replace(path + ".tmp", path)
        model = os.path.join(version, "model.pt")
        if os.path.exists(model):
            continue
        try:
            os.link(os.path.join(outdir, name + ".pt"), model + ".tmp")
        except OSError:
            shutil.copyfile(os.path.join(outdir, name + ".pt"), model + ".tmp")
        os.replace(model + ".tmp", model)
    print(f"model repository in {repo}: {', '.join(models)}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--size", type=int, default=64, help="image side the models are exported for")
    ap.add_argument("--models", nargs="*", default=MODELS + EXTRA)
    ap.add_argument("--repository", help="where to write the model repository (default OUTDIR/repository)")
    args = ap.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    export(args)
    write_repository(args.outdir, args.repository or os.path.join(args.outdir, "repository"), args.models,
                     args.size)


def export(args):
    todo = [m for m in args.models if not os.path.exists(os.path.join(args.outdir, m + ".pt"))]
    if not todo:
        print(f"demo models present in {args.outdir}", file=sys.stderr)
        return
    import torch
    import torchvision

    torch.manual_seed(0)
    torch.set_num_threads(1)
    for i, name in enumerate(todo, 1):
        t0 = time.time()
        model = getattr(torchvision.models, name)().eval()
        scripted = torch.jit.script(model)
        with torch.inference_mode():
            scripted(torch.randn(1, 3, args.size, args.size))  # fails now if the size does not fit the model
        path = os.path.join(args.outdir, name + ".pt")
        scripted.save(path + ".tmp")
        os.replace(path + ".tmp", path)
        print(f"[{i}/{len(todo)}] exported {name} to {path} ({time.time() - t0:.1f} s)", file=sys.stderr)


if __name__ == "__main__":
    import warnings

    warnings.filterwarnings("ignore")
    main()
