#!/usr/bin/env python3
"""Read a model exported by `voxspec export` with the `safetensors` package (numpy only).

Usage: python tools/load_export.py <export dir>

Prints the config and every tensor's name, dtype and shape, and checks the layout of an AR
("mtp") or draft model: the embedding has text_vocab + 1 + codebook_size rows (text, SEP, codes)
and head 0 maps d_model to codebook_size + 1 classes (codes + end-of-speech). Burn stores linear
weights as [in, out]: PyTorch's nn.Linear wants the transpose.
"""
import json
import sys
from pathlib import Path

from safetensors.numpy import load_file


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    root = Path(sys.argv[1])
    config = json.loads((root / "config.json").read_text())
    tensors = load_file(str(root / "model.safetensors"))
    print(f"kind: {config['kind']}  voxspec {config.get('voxspec_version', '?')}")
    total = 0
    for name in sorted(tensors):
        array = tensors[name]
        total += array.size
        print(f"{name:60s} {str(array.dtype):8s} {list(array.shape)}")
    print(f"{len(tensors)} tensors, {total / 1e6:.2f}M parameters")
    if config["kind"] in ("mtp", "draft"):
        model = config["model"]
        rows = model["text_vocab"] + 1 + model["codebook_size"]
        emb = tensors["embedding.weight"]
        assert emb.shape == (rows, model["transformer"]["d_model"]), emb.shape
        head = tensors["heads.0.out.weight"]  # [d_model, codebook_size + 1]
        print(f"embedding rows: text {model['text_vocab']}, SEP 1, codes {model['codebook_size']}")
        print(f"head 0 maps d_model {head.shape[0]} to {head.shape[1]} classes (codes + EOS)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
