#!/usr/bin/python3
"""Serve a TorchScript model from Python with Symphony's deferred batch scheduling.

    PYTHONPATH=build/release/bindings/python /usr/bin/python3 examples/python/serve.py [model.pt]

Without a model it writes a small one (a linear layer, float32[16] -> [4]) to a
temporary directory. Four client threads send 400 requests; the server batches
them on the CPU; every answer is checked against a direct forward.
"""

import sys
import tempfile
import threading
from pathlib import Path

import torch

import symphony


def tiny_model(directory: Path) -> Path:
    torch.manual_seed(0)
    path = directory / "tiny.pt"
    torch.jit.script(torch.nn.Linear(16, 4).eval()).save(str(path))
    return path


def main() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="symphony-example-"))
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else tiny_model(workdir)

    with symphony.Server(devices="cpu", policy="deferred", safety_margin_ms=20, profile_repeats=3) as server:
        # The first time, the server measures the model's latency profile and
        # saves it (here in the temporary directory).
        server.add_model("tiny", path, input="float32[16]", slo_ms=300, max_batch=32,
                         profile=workdir / "tiny.profile.yaml")
        server.start()
        print(f"serving 'tiny' on {server.devices}; l(1) = {server.model_profile('tiny').latency_ms(1):.3f} ms")

        inputs = [torch.randn(16) for _ in range(400)]
        futures = [None] * len(inputs)

        def client(k: int) -> None:
            for i in range(k, len(inputs), 4):
                futures[i] = server.infer("tiny", inputs[i])  # a concurrent.futures.Future

        threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

        direct = torch.jit.load(str(path))
        with torch.no_grad():
            for x, f in zip(inputs, futures):
                torch.testing.assert_close(f.result(), direct(x), rtol=1e-5, atol=1e-6)

        try:
            server.infer("tiny", torch.randn(3))  # wrong shape: raised at once
        except symphony.InvalidInput as e:
            print(f"rejected: {e}")

    stats = server.stats()  # after the with-block: stopped, every request ended
    m = stats["models"]["tiny"]
    print(f"{stats['sent']} requests: {stats['ok']} ok, {stats['late']} late, {stats['dropped']} dropped; "
          f"mean batch {m['mean_batch']:.1f}, batches by size {m['batch_histogram']}, "
          f"p99 latency {m['latency_ms']['p99']:.1f} ms")
    print("all outputs equal a direct forward")


if __name__ == "__main__":
    main()
