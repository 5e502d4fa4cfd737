"""Writes the small TorchScript models the server and binding tests serve.

Usage: make_test_models.py OUTDIR

  linear.pt      float32[4] -> float32[3]: a fixed linear layer (seeded)
  tuple_out.pt   float32[4] -> (x * 2, x.sum(-1))
  raises.pt      float32[4] -> x + 1, but raises when any value is below -100
  two_inputs.pt  (float32[2], int64[3]) -> a.sum(-1) + b.sum(-1)
  sleepy.pt      float32[4] -> x, after busy work that grows with the batch
  busy.pt        float32[4] -> x, after 1500 64x64 matrix products (~200 ms on one core) whatever the batch
  varlen.pt      float32[-1] -> [x.sum(-1), its length]: samples of any length up to 50 (more raises)
"""
import os
import sys

import torch


class Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(7)
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x)


class TupleOut(torch.nn.Module):
    def forward(self, x):
        return x * 2, x.sum(-1)


class Raises(torch.nn.Module):
    def forward(self, x):
        if bool((x < -100).any()):
            raise RuntimeError("input below -100 is not allowed")
        return x + 1


class TwoInputs(torch.nn.Module):
    def forward(self, a, b):
        return a.sum(-1) + b.sum(-1).to(torch.float32)


class Sleepy(torch.nn.Module):
    def forward(self, x):
        m = torch.ones(64, 64)
        for _ in range(int(x.size(0)) * 4):
            m = torch.tanh(m @ m)
        return x + m.mean() * 0


class Busy(torch.nn.Module):
    def forward(self, x):
        m = torch.ones(64, 64)
        for _ in range(1500):
            m = torch.tanh(m @ m)
        return x + m.mean() * 0


class VarLen(torch.nn.Module):
    def forward(self, x):
        if x.size(1) > 50:
            raise RuntimeError("at most 50 values per sample")
        return torch.stack([x.sum(-1), torch.ones_like(x[:, 0]) * x.size(1)], -1)


class Identity(torch.nn.Module):
    # Answers its input itself: its output is a view of the batch it was given.
    def forward(self, x):
        return x


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, module in [("linear", Linear()), ("tuple_out", TupleOut()), ("raises", Raises()),
                         ("two_inputs", TwoInputs()), ("sleepy", Sleepy()), ("busy", Busy()),
                         ("varlen", VarLen()), ("identity", Identity())]:
        torch.jit.script(module.eval()).save(os.path.join(out, name + ".pt"))


if __name__ == "__main__":
    main()
