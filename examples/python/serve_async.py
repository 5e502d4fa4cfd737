#!/usr/bin/python3
"""Symphony from asyncio: await server.infer_async(...) in coroutines.

    PYTHONPATH=build/release/bindings/python /usr/bin/python3 examples/python/serve_async.py

Runs on four emulated GPUs (each batch takes exactly l(b) = 0.5 ms * b + 5 ms
and runs no model), so it needs no model file. Client coroutines send a burst
of requests, then steady streams; the deferred scheduler gathers them into
large batches within the 50 ms SLO.
"""

import asyncio
import time

import symphony


async def client(server: symphony.Server, n: int, gap_s: float) -> list:
    results = []
    for _ in range(n):
        try:
            r = await server.infer_async("resnet", None, details=True)
            results.append(r.batch_size)
        except symphony.Dropped as e:
            results.append(f"dropped ({e.reason})")
        await asyncio.sleep(gap_s)
    return results


async def main() -> None:
    with symphony.Server(devices="emulated:4", policy="deferred") as server:
        server.add_model("resnet", slo_ms=50, max_batch=32, alpha_ms=0.5, beta_ms=5.0)
        server.start()

        # A burst: 120 requests at once, awaited together (return_exceptions:
        # a request the scheduler cannot serve in time comes back as Dropped).
        t0 = time.perf_counter()
        burst = await asyncio.gather(*(server.infer_async("resnet", None, details=True) for _ in range(120)),
                                     return_exceptions=True)
        served = [r for r in burst if isinstance(r, symphony.InferResult)]
        print(f"burst of 120: done in {(time.perf_counter() - t0) * 1e3:.0f} ms, {len(served)} served, "
              f"batch sizes {sorted({r.batch_size for r in served})}, "
              f"devices used {sorted({r.device for r in served})}")

        # Steady streams: 20 clients, each sending its next request 2 ms after the
        # previous answer; the scheduler gathers them into batches of ~20.
        per_client = await asyncio.gather(*(client(server, 50, 0.002) for _ in range(20)))
        sizes = [s for c in per_client for s in c if isinstance(s, int)]
        print(f"stream of {len(sizes)} requests: mean batch {sum(sizes) / len(sizes):.1f}")

        bound = symphony.analytical_bound(server.model_profile("resnet"), slo_ms=50, gpus=4)
        print(f"analytical bound on 4 GPUs: batch {bound.batch}, {bound.throughput_rps:.0f} req/s")
    print(server.stats()["models"]["resnet"]["batch_histogram"])


if __name__ == "__main__":
    asyncio.run(main())
