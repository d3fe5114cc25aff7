"""A small OpenAI-compatible server of benchmarks/gpu_decode.py's model, for check_outputs on a real GPU.

    python3 benchmarks/gpu_serve.py [--port 30100] [--config gpt2-small] [--dtype bfloat16|float16]

The model is gpu_decode.py's (random weights, seed 0, nothing downloaded) on the first CUDA device. A prompt
becomes token ids from its UTF-8 bytes; /v1/completions decodes `max_tokens` tokens greedily and answers
them as words ("t1234 t88 ..."), so two servers answer the same text exactly when their greedy tokens are
the same. /v1/models and /health answer as a serving engine's do. `--dtype float16` serves the same weights
in another precision: a numerics change on purpose, which greedy decoding shows within a few tokens.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_decode import CONFIGS, build_model  # noqa: E402

MAX_PROMPT = 256


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=30100)
    ap.add_argument("--config", choices=sorted(CONFIGS), default="gpt2-small")
    ap.add_argument("--dtype", choices=["bfloat16", "float16"], default="bfloat16")
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args(argv)

    import torch

    layers, d_model, heads, vocab, max_pos = CONFIGS[a.config]
    device = torch.device("cuda", 0) if a.device == "cuda" else torch.device(a.device)
    model = build_model(torch, layers, d_model, heads, vocab, max_pos, 1, max_pos, device, getattr(torch, a.dtype))
    # The benchmark's output embedding is tied to its input one, and with random weights a token's own row
    # wins every step (greedy text is one token repeated, whatever the precision). A head of its own, seeded,
    # makes each prompt's greedy text depend on every logit, as a trained model's does.
    torch.manual_seed(1)
    head = torch.randn(d_model, vocab, device=device).to(getattr(torch, a.dtype)) / d_model ** 0.5

    def logits(tokens, pos):
        x = model.tok(tokens) + model.pos(pos)
        mask = (model.slots[None, :] <= pos[:, None])[None, None]
        for block in model.blocks:
            x = block(x, pos, mask)
        return model.ln_f(x[:, -1]) @ head
    lock = threading.Lock()  # one model, one static cache: one request at a time
    name = f"gpu-decode-{a.config}"

    @torch.no_grad()
    def complete(prompt: str, max_tokens: int) -> str:
        ids = list(prompt.encode("utf-8"))[-MAX_PROMPT:] or [0]
        max_tokens = max(1, min(max_tokens, max_pos - len(ids)))
        with lock:
            tokens = torch.tensor([ids], device=device)
            token = logits(tokens, torch.arange(len(ids), device=device)).argmax(dim=-1, keepdim=True)
            out = [int(token)]
            for pos in range(len(ids), len(ids) + max_tokens - 1):
                token = logits(token, torch.tensor([pos], device=device)).argmax(dim=-1, keepdim=True)
                out.append(int(token))
        return " " + " ".join(f"t{t}" for t in out)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/health":
                self._send(200, {})
            elif self.path == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": name, "object": "model"}]})
            else:
                self._send(404, {"detail": "Not Found"})

        def do_POST(self):
            if self.path != "/v1/completions":
                self._send(404, {"detail": "Not Found"})
                return
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            prompts = body.get("prompt", "")
            prompts = prompts if isinstance(prompts, list) else [prompts]
            limit = int(body.get("max_tokens") or 16)
            self._send(200, {"object": "text_completion", "model": name, "choices": [
                {"index": i, "text": complete(str(p), limit), "finish_reason": "length"}
                for i, p in enumerate(prompts)]})

    server = ThreadingHTTPServer((a.host, a.port), Handler)
    print(json.dumps({"serving": name, "port": a.port, "dtype": a.dtype, "torch": torch.__version__,
                      "torch_cuda": torch.version.cuda}), flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
