"""asyncio: await server.infer_async(...) from coroutines."""

import asyncio

import pytest
import torch

import symphony


def test_gather_many_requests(cpu_server, models_dir):
    s = cpu_server("linear")
    module = torch.jit.load(str(models_dir / "linear.pt"))
    xs = [torch.randn(4) for _ in range(200)]

    async def main():
        futs = [s.infer_async("linear", x) for x in xs]
        assert all(isinstance(f, asyncio.Future) for f in futs)
        return await asyncio.gather(*futs)

    ys = asyncio.run(main())
    with torch.no_grad():
        for x, y in zip(xs, ys):
            torch.testing.assert_close(y, module(x.unsqueeze(0))[0], rtol=1e-5, atol=1e-6)


def test_results_arrive_on_the_loop_thread_with_details(cpu_server):
    s = cpu_server("linear")

    async def main():
        r = await s.infer_async("linear", torch.randn(4), details=True)
        return r, asyncio.get_running_loop()

    r, _ = asyncio.run(main())
    assert isinstance(r, symphony.InferResult) and r.outcome in ("ok", "late") and r.device == "cpu:0"


def test_errors_raise_at_the_call_or_the_await(cpu_server, emulated_server):
    s = cpu_server("raises")
    e = emulated_server(alpha_ms=0, beta_ms=200, slo_ms=300, max_batch=1, policy="eager")

    async def main():
        with pytest.raises(symphony.ModelNotFound):
            s.infer_async("nope", torch.randn(4))
        with pytest.raises(symphony.InvalidInput):
            s.infer_async("raises", torch.randn(3))
        with pytest.raises(symphony.ModelError, match="below -100"):
            await s.infer_async("raises", torch.full((4,), -500.0))
        futs = [e.infer_async("m", None) for _ in range(3)]
        outcomes = await asyncio.gather(*futs, return_exceptions=True)
        assert outcomes[0] is None
        assert all(isinstance(o, symphony.Dropped) for o in outcomes[1:])

    asyncio.run(main())


def test_cancelled_tasks_do_not_break_the_loop(emulated_server):
    s = emulated_server(alpha_ms=0, beta_ms=100, slo_ms=400)

    async def main():
        task = asyncio.ensure_future(s.infer_async("m", None))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await s.infer_async("m", None)

    assert asyncio.run(main()) is None


def test_needs_a_running_loop(emulated_server):
    s = emulated_server()
    with pytest.raises(RuntimeError, match="no running event loop"):
        s.infer_async("m", None)


def test_a_closed_loop_is_tolerated(emulated_server):
    s = emulated_server(alpha_ms=0, beta_ms=50, slo_ms=200)

    async def submit_and_leave():
        return s.infer_async("m", None)

    fut = asyncio.run(submit_and_leave())  # the loop closes before the outcome
    s.stop()
    assert not fut.done()
