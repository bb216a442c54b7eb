#!/usr/bin/env python3
"""Peer for `voxspec bench train`: the same GPT-2-like causal LM trained with PyTorch.

Optional evaluation tool (never part of training or inference). Run it right before or after
`voxspec bench train` with the same flags and hand its report to voxspec, so that the ratio
compares two measurements taken side by side on the same machine:

    python3 tools/bench_train_peer.py --threads 2 --out peer.json
    voxspec bench train --peer peer.json

On a GPU, `--device cuda` (or `cuda:N`) beside `voxspec --device wgpu:N bench train`.

Model: pre-norm LayerNorm blocks, learned positions, GELU MLP of width 4·d, biases, no dropout,
tied nothing; AdamW (lr 3e-4) (weight decay 0.01) with global-norm clipping at 1.0; random tokens, seq_len + 1 per row
(seq_len inputs, seq_len targets). Throughput is
tokens per second over the median timed step, after warm-up steps. Needs `torch` (PyPI).

`--profile` adds, after the timed steps, the median of each phase over the timed steps
(data, forward, backward, optimizer; the device synchronised between them, as
`voxspec bench train --profile` does) and, from torch.profiler over `--profile-steps` more
steps' forward and backward, each operation family's self time per step (CPU time on the CPU,
kernel time on CUDA), which `voxspec bench train --profile --peer FILE` prints beside its own.
"""

import argparse
import collections
import json
import statistics
import time

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class Lm(nn.Module):
    def __init__(self, vocab, d, heads, layers, seq_len):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq_len, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.out = nn.Linear(d, vocab)

    def forward(self, ids):
        t = ids.shape[1]
        mask = torch.triu(torch.full((t, t), float("-inf"), device=ids.device), diagonal=1)
        x = self.tok(ids) + self.pos(torch.arange(t, device=ids.device))
        for b in self.blocks:
            x = b(x, mask)
        return self.out(self.ln(x))


# aten operator → family, for the profile; anything else is "other".
FAMILIES = [
    ("matmul (linear layers, attention's if unfused)", ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")),
    ("attention kernels (fused)", ("aten::_scaled_dot_product", "aten::_flash_attention", "aten::_efficient_attention")),
    ("softmax (unfused attention)", ("aten::_softmax", "aten::_softmax_backward_data")),
    ("LayerNorm", ("aten::native_layer_norm",)),
    ("GELU", ("aten::gelu",)),
    ("loss: log-softmax, NLL", ("aten::_log_softmax", "aten::nll_loss")),
    ("embedding", ("aten::embedding", "aten::index_select", "aten::embedding_dense_backward")),
    ("elementwise (add, mul, masks)", ("aten::add", "aten::mul", "aten::sub", "aten::div", "aten::masked_fill", "aten::where", "aten::fill_")),
    ("copies and layout", ("aten::copy_", "aten::clone", "aten::contiguous", "aten::_unsafe_view", "aten::transpose", "aten::permute")),
    ("reductions", ("aten::sum", "aten::mean")),
]


def family_of(name):
    for family, prefixes in FAMILIES:
        if any(name.startswith(p) for p in prefixes):
            return family
    return "other"


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def profile(model, forward, opt, loss_fn, a, device):
    """Phase medians over a.steps steps, then family self times per step from torch.profiler."""
    phases = collections.defaultdict(list)
    for _ in range(a.steps):
        sync(device)
        t0 = time.perf_counter()
        ids = torch.randint(0, a.vocab, (a.batch, a.seq_len + 1), device=device)
        sync(device)
        t1 = time.perf_counter()
        logits = forward(ids[:, :-1])
        loss = loss_fn(logits.float().reshape(-1, a.vocab), ids[:, 1:].reshape(-1))
        loss.item()
        t2 = time.perf_counter()
        opt.zero_grad()
        loss.backward()
        sync(device)
        t3 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sync(device)
        t4 = time.perf_counter()
        for key, value in (("data", t1 - t0), ("forward", t2 - t1), ("backward", t3 - t2), ("optimizer", t4 - t3)):
            phases[key].append(value)
    from torch.profiler import ProfilerActivity, profile as torch_profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with torch_profile(activities=activities) as prof:
        for _ in range(a.profile_steps):
            ids = torch.randint(0, a.vocab, (a.batch, a.seq_len + 1), device=device)
            logits = forward(ids[:, :-1])
            loss = loss_fn(logits.float().reshape(-1, a.vocab), ids[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            sync(device)
    totals = collections.Counter()
    for event in prof.key_averages():
        if device.type == "cuda":
            micros = getattr(event, "self_device_time_total", None)
            if micros is None:
                micros = getattr(event, "self_cuda_time_total", 0.0)
        else:
            micros = event.self_cpu_time_total
        if micros > 0 and event.key.startswith("aten::"):
            totals[family_of(event.key)] += micros
    families = [
        {"family": family, "seconds": micros / 1e6 / a.profile_steps}
        for family, micros in totals.most_common()
    ]
    return {
        "phases": {key: statistics.median(values) for key, values in phases.items()},
        "families": families,
        "time": "kernel time (CUDA)" if device.type == "cuda" else "self CPU time",
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--vocab", type=int, default=1024)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="cpu", help="torch device: cpu, cuda or cuda:N")
    p.add_argument("--profile", action="store_true", help="also profile phases and operation families")
    p.add_argument("--profile-steps", type=int, default=3)
    p.add_argument("--dtype", choices=["f32", "bf16", "f16"], default="f32",
                   help="compute type: f32, or autocast to bf16/f16 (f32 weights; f16 with a grad scaler is not used)")
    p.add_argument("--out", default="bench-train-peer.json")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    device = torch.device(a.device)
    model = Lm(a.vocab, a.d_model, a.heads, a.layers, a.seq_len).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    loss_fn = nn.CrossEntropyLoss()
    times = []
    dtype = {"f32": None, "bf16": torch.bfloat16, "f16": torch.float16}[a.dtype]
    forward = model
    if dtype is not None:
        def forward(x):
            with torch.autocast(device_type=device.type, dtype=dtype):
                return model(x)
    for step in range(a.warmup + a.steps):
        ids = torch.randint(0, a.vocab, (a.batch, a.seq_len + 1), device=device)
        start = time.perf_counter()
        logits = forward(ids[:, :-1])
        loss = loss_fn(logits.float().reshape(-1, a.vocab), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)  # kernels run asynchronously
        if step >= a.warmup:
            times.append(time.perf_counter() - start)
    step_s = statistics.median(times)
    report = {
        "framework": f"pytorch {torch.__version__}",
        "config": {
            "layers": a.layers, "d_model": a.d_model, "heads": a.heads, "vocab": a.vocab,
            "batch": a.batch, "seq_len": a.seq_len, "norm": "layer", "positions": "learned",
            "mlp": "gelu", "optimizer": "adamw",
        },
        "threads": a.threads,
        "device": a.device,
        "parameters": sum(p.numel() for p in model.parameters()),
        "median_step_seconds": step_s,
        "tokens_per_second": a.batch * a.seq_len / step_s,
        "dtype": a.dtype,
    }
    if a.profile:
        report["profile"] = profile(model, forward, opt, loss_fn, a, device)
    with open(a.out, "w") as f:
        json.dump(report, f, indent=2)
    print(f"pytorch: {report['tokens_per_second']:.0f} tokens/s → {a.out}")


if __name__ == "__main__":
    main()
