#!/usr/bin/env python3
"""Peer for `voxspec bench forward`: the same decoder shape in PyTorch + transformers.

Optional evaluation tool (never part of training or inference). Run it right before or after
`voxspec bench forward` on the same shape and hand its report to voxspec, so the two are
measured side by side on the same machine:

    python3 tools/bench_forward_peer.py --preset base --threads 2 --out peer-base.json
    voxspec --threads 2 bench forward --preset base --engine native --weights f32,bf16 \
        --peer peer-base.json

Model: transformers' LlamaForCausalLM with random weights, the architecture of voxspec's AR
model (RMSNorm, rotary positions, SwiGLU of width d_ff, no biases), in float32 (or bfloat16
with `--dtype bfloat16`: weights and activations, the peer of `--weights bf16`), eval mode,
without gradients. Measured, as voxspec does:
- forward: the median time of one cached forward over k new tokens (k = 1..max_k) after a
  `context`-token prompt; the cache is cropped back to the prompt after each;
- generate: greedy `model.generate` of `--generate` new tokens after the same prompt, minus a
  one-token generate (the prompt's prefill), per new token; the median of `--repeat-generate`.
Needs `torch` and `transformers` (PyPI).
"""

import argparse
import json
import statistics
import time
import warnings

PRESETS = {
    # voxspec-mtp's presets: d_model, layers, heads, d_ff
    "tiny": (32, 2, 4, 64),
    "small": (256, 4, 4, 1024),
    "base": (1024, 12, 16, 4096),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--preset", choices=sorted(PRESETS), help="a voxspec training preset's shape")
    ap.add_argument("--d-model", type=int, default=512)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--d-ff", type=int, help="default 4 * d-model")
    ap.add_argument("--codebook", type=int, default=1024, help="codes (the head has codebook + 1)")
    ap.add_argument("--context", type=int, default=200)
    ap.add_argument("--max-k", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--generate", type=int, default=32)
    ap.add_argument("--repeat-generate", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="torch device: cpu, cuda or cuda:N")
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32",
                    help="parameter and activation type")
    ap.add_argument("--out", default="peer-forward.json")
    args = ap.parse_args()

    warnings.simplefilter("ignore", FutureWarning)  # transformers 5 renames past_key_values
    import torch
    import transformers
    from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

    if args.preset:
        d, layers, heads, d_ff = PRESETS[args.preset]
    else:
        d, layers, heads = args.d_model, args.layers, args.heads
        d_ff = args.d_ff or 4 * d
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    # voxspec's AR input vocabulary: 16 text ids (its random models), SEP, the codes and EOS.
    vocab = 16 + 1 + args.codebook + 1
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=d,
        intermediate_size=d_ff,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=max(2048, args.context + args.max_k + args.generate + 16),
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        tie_word_embeddings=False,
        attention_bias=False,
        mlp_bias=False,
    )
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype)
    model = LlamaForCausalLM(config).eval().to(device=device, dtype=dtype)
    params = sum(p.numel() for p in model.parameters())
    prompt = torch.randint(0, vocab, (1, args.context)).to(device)

    def sync() -> None:  # a GPU runs asynchronously: wait for its work before reading the clock
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    forward = []
    with torch.inference_mode():
        cache = DynamicCache()
        model(prompt, past_key_values=cache, use_cache=True)
        times = {k: [] for k in range(1, args.max_k + 1)}
        for rep in range(args.repeat + 2):
            for k in range(1, args.max_k + 1):
                block = torch.randint(0, vocab, (1, k)).to(device)
                sync()
                t = time.perf_counter()
                model(block, past_key_values=cache, use_cache=True)
                sync()
                elapsed = (time.perf_counter() - t) * 1e3
                cache.crop(-k)  # drop the block: back to the prompt (transformers 4.x and 5.x)
                if rep >= 2:
                    times[k].append(elapsed)
        for k in range(1, args.max_k + 1):
            forward.append({"k": k, "median_ms": statistics.median(times[k])})

        def generate(n: int) -> float:
            sync()
            t = time.perf_counter()
            model.generate(
                prompt,
                attention_mask=torch.ones_like(prompt),
                max_new_tokens=n,
                min_new_tokens=n,
                do_sample=False,
                pad_token_id=0,
            )
            sync()
            return (time.perf_counter() - t) * 1e3

        generate(2)  # warm-up
        per_token = []
        for _ in range(args.repeat_generate):
            one = generate(1)
            many = generate(args.generate + 1)
            per_token.append((many - one) / args.generate)
    report = {
        "framework": f"pytorch {torch.__version__} + transformers {transformers.__version__}"
        + ("" if args.dtype == "float32" else f" ({args.dtype})"),
        "config": {
            "layers": layers,
            "d_model": d,
            "d_ff": d_ff,
            "n_heads": heads,
            "context": args.context,
            "vocab": vocab,
            "threads": args.threads,
            "device": str(device),
            "dtype": args.dtype,
        },
        "parameters": params,
        "forward": forward,
        "generate_tokens": args.generate,
        "generate_ms_per_token": statistics.median(per_token),
    }
    with open(args.out, "w") as f:
        json.dump(report, f, indent=2)
    one = forward[0]["median_ms"]
    print(f"{report['framework']} on {device}, {params / 1e6:.1f}M parameters, {args.threads} threads")
    for p in forward:
        print(f"k={p['k']}: {p['median_ms']:.3f} ms (cost {p['median_ms'] / one:.2f})")
    print(f"generate: {report['generate_ms_per_token']:.3f} ms/token; wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
