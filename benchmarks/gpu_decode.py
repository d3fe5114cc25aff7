"""Decode throughput of a small GPT-style transformer on the installed PyTorch.

    python3 benchmarks/gpu_decode.py [--batch 1] [--tokens 256] [--mode eager|compile] [--config gpt2-small]

The model is built from a config with random weights (nothing is downloaded): a decoder-only
transformer with learned positions, pre-norm blocks and a static KV cache, in bf16 on the first
CUDA device. One process prefills a random prompt, then decodes `--tokens` tokens greedily, once
to warm up (and, with `--mode compile`, to compile the decode step with torch.compile and capture
it in CUDA graphs), then `--repeats` more times, each timed and printed as one JSON line:

    {"decode_tok_s": 612.3, "batch": 1, "mode": "eager", "tokens": 256, "ms_per_step": 1.63, ...}

decode_tok_s counts generated tokens of the whole batch per second of the decode loop (prefill
excluded). `run_bench` reads it with the parser `json:decode_tok_s`; it runs the command several
times, so process-to-process noise is part of the spread it reports. The figures depend on the
GPU, the driver, the CUDA build of torch and on what else runs on the machine; docs/gpu.md has
the ones measured on an NVIDIA H200.

Decode of a model this small at batch 1 is bound by kernel launches, not by the GPU's arithmetic:
eager PyTorch launches some fifteen kernels per layer per token from Python, and a compiled,
graph-captured step launches one graph. That is what the two modes compare.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

CONFIGS = {
    # name: (layers, d_model, heads, vocab, max positions)
    "gpt2-small": (12, 768, 12, 50257, 1024),
    "gpt2-medium": (24, 1024, 16, 50257, 1024),
    "tiny": (2, 128, 4, 1024, 512),  # for a quick check that the script runs
}


def build_model(torch, layers: int, d_model: int, heads: int, vocab: int, max_pos: int, batch: int,
                max_seq: int, device, dtype):
    nn = torch.nn
    F = torch.nn.functional
    head_dim = d_model // heads

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(d_model)
            self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
            self.proj = nn.Linear(d_model, d_model, bias=False)
            self.ln2 = nn.LayerNorm(d_model)
            self.fc = nn.Linear(d_model, 4 * d_model, bias=False)
            self.out = nn.Linear(4 * d_model, d_model, bias=False)
            # A static cache: decode steps have the same shapes at every position, which is what
            # lets torch.compile capture one CUDA graph for all of them.
            self.register_buffer("k_cache", torch.zeros(batch, heads, max_seq, head_dim), persistent=False)
            self.register_buffer("v_cache", torch.zeros(batch, heads, max_seq, head_dim), persistent=False)

        def forward(self, x, pos, mask):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, heads, head_dim).permute(2, 0, 3, 1, 4)
            self.k_cache[:, :, pos] = k
            self.v_cache[:, :, pos] = v
            y = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache, attn_mask=mask)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, d_model))
            return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, d_model)
            self.pos = nn.Embedding(max_pos, d_model)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f = nn.LayerNorm(d_model)
            self.register_buffer("slots", torch.arange(max_seq), persistent=False)

        def forward(self, tokens, pos):
            """Logits of the last position; `pos` holds the positions of `tokens` (prefill or one step)."""
            x = self.tok(tokens) + self.pos(pos)
            mask = (self.slots[None, :] <= pos[:, None])[None, None]  # causal, over the whole cache
            for block in self.blocks:
                x = block(x, pos, mask)
            return self.ln_f(x[:, -1]) @ self.tok.weight.t()  # tied output embedding

    torch.manual_seed(0)
    with torch.device(device):
        model = Decoder()
    return model.to(dtype).eval()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", choices=sorted(CONFIGS), default="gpt2-small")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt", type=int, default=32, help="prompt length (tokens)")
    ap.add_argument("--tokens", type=int, default=256, help="tokens to decode per sequence")
    ap.add_argument("--mode", choices=["eager", "compile"], default="eager",
                    help="compile: torch.compile(mode='reduce-overhead') of the decode step (CUDA graphs)")
    ap.add_argument("--repeats", type=int, default=1, help="timed decodes after the warmup, one JSON line each")
    ap.add_argument("--device", default="cuda", help="cuda (the first GPU), or cpu to check the script without one")
    a = ap.parse_args(argv)
    if a.tokens < 2 or a.prompt < 1 or a.batch < 1 or a.repeats < 1:
        ap.error("--tokens must be at least 2; --prompt, --batch and --repeats at least 1")

    import torch

    on_gpu = a.device == "cuda"
    if on_gpu and not torch.cuda.is_available():
        print(f"error: torch {torch.__version__} sees no CUDA device (torch.version.cuda={torch.version.cuda})",
              file=sys.stderr)
        return 2
    layers, d_model, heads, vocab, max_pos = CONFIGS[a.config]
    max_seq = a.prompt + a.tokens
    if max_seq > max_pos:
        print(f"error: prompt + tokens = {max_seq} is more than the {max_pos} positions of {a.config}",
              file=sys.stderr)
        return 2
    device = torch.device("cuda", 0) if on_gpu else torch.device(a.device)
    dtype = torch.bfloat16
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    t0 = time.perf_counter()
    model = build_model(torch, layers, d_model, heads, vocab, max_pos, a.batch, max_seq, device, dtype)
    params = sum(p.numel() for p in model.parameters())

    def step(token, pos):
        return model(token, pos).argmax(dim=-1, keepdim=True)

    decode_step = step
    if a.mode == "compile":
        decode_step = torch.compile(step, mode="reduce-overhead", fullgraph=True)
    mark_step = getattr(torch.compiler, "cudagraph_mark_step_begin", lambda: None)

    generator = torch.Generator(device=device).manual_seed(1)
    prompt = torch.randint(0, vocab, (a.batch, a.prompt), device=device, generator=generator)
    prompt_pos = torch.arange(a.prompt, device=device)
    # One small tensor per decode position, made before the timing starts.
    step_pos = [torch.tensor([i], device=device) for i in range(a.prompt, max_seq - 1)]
    graphed = a.mode == "compile"

    @torch.no_grad()
    def generate() -> tuple[float, float, torch.Tensor]:
        sync()
        start = time.perf_counter()
        token = model(prompt, prompt_pos).argmax(dim=-1, keepdim=True)
        sync()
        prefill_s = time.perf_counter() - start
        out = [token]
        start = time.perf_counter()
        for pos in step_pos:
            if graphed:
                mark_step()
                # A captured graph writes its output into the same memory at every replay: keep a copy.
                token = decode_step(token, pos).clone()
            else:
                token = decode_step(token, pos)
            out.append(token)
        sync()
        return prefill_s, time.perf_counter() - start, torch.cat(out, dim=1)

    warm_start = time.perf_counter()
    _, _, first = generate()
    warmup_s = time.perf_counter() - warm_start
    setup_s = time.perf_counter() - t0
    if on_gpu:
        props = torch.cuda.get_device_properties(device)
        device_name, capability = torch.cuda.get_device_name(device), f"{props.major}.{props.minor}"
    else:
        device_name, capability = a.device, None
    for _ in range(a.repeats):
        prefill_s, decode_s, tokens = generate()
        steps = a.tokens - 1  # the first token comes from the prefill
        record = {
            "decode_tok_s": round(a.batch * steps / decode_s, 2),
            "batch": a.batch,
            "mode": a.mode,
            "tokens": a.tokens,
            "prompt": a.prompt,
            "config": a.config,
            "params_m": round(params / 1e6, 1),
            "ms_per_step": round(decode_s / steps * 1e3, 4),
            "prefill_ms": round(prefill_s * 1e3, 3),
            "warmup_s": round(warmup_s, 2),
            "setup_s": round(setup_s, 2),
            # Greedy decode of the same prompt: both decodes must agree, or something is off.
            "same_tokens_as_warmup": bool(torch.equal(tokens, first)),
            "device": device_name,
            "capability": capability,
            "torch": torch.__version__,
            "torch_cuda": torch.version.cuda,
            "dtype": str(dtype).removeprefix("torch."),
        }
        if not math.isfinite(record["decode_tok_s"]):
            print(f"error: decode took {decode_s} s", file=sys.stderr)
            return 1
        print(json.dumps(record), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
