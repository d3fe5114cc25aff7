"""python -m sglang.launch_server: the OpenAI-compatible HTTP server of the simulated host.

It brings the stack up as the real one does (torch, CUDA, sgl_kernel, flashinfer's JIT with CUDA_HOME's
toolkit), so a broken upgrade keeps it from serving, then answers /health, /v1/models, /get_model_info,
/v1/completions, /v1/chat/completions and /generate with greedy text (_sim_outputs). The simulated host
starts one for a command that names its port, inside that command's namespaces.
"""

import argparse
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch

from . import _sim_outputs, model_loader


def _args(argv):
    p = argparse.ArgumentParser(prog="python -m sglang.launch_server")
    p.add_argument("--model-path", "--model", dest="model_path", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--tp-size", "--tp", dest="tp_size", type=int, default=None)
    p.add_argument("--quantization", default=None)
    args, _unknown = p.parse_known_args(argv)  # --mem-fraction-static, ...: taken as given
    return args


def _installed_torch_cuda():
    """The CUDA torch is built for, as installed now: a running server answers with what it serves after an
    upgrade, as one restarted for it would (the sim has no service manager to restart it)."""
    try:
        from importlib import metadata

        local = metadata.version("torch").partition("+cu")[2]  # "130"
        return "%s.%s" % (local[:-1], local[-1]) if local else torch.version.cuda
    except Exception:  # noqa: BLE001 - no metadata: what was imported
        return torch.version.cuda


def _handler(model, state):
    class Handler(BaseHTTPRequestHandler):
        server_version = "uvicorn"
        sys_version = ""

        def log_message(self, *a):  # the real server logs to its own stream, not the client's
            pass

        def _send(self, code, body):
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self):
            try:
                return json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            except ValueError:
                return None

        def do_GET(self):
            if self.path in ("/health", "/health_generate"):
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif self.path == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": model, "object": "model", "created": int(time.time()),
                                                             "owned_by": "sglang", "root": model}]})
            elif self.path == "/get_model_info":
                self._send(200, {"model_path": model, "tokenizer_path": model, "is_generation": True})
            else:
                self._send(404, {"detail": "Not Found"})

        def do_POST(self):
            drift = _sim_outputs.drifting(state, _installed_torch_cuda())
            body = self._body()
            if body is None:
                self._send(400, {"object": "error", "message": "the body is not JSON", "code": 400})
                return
            limit = int(body.get("max_tokens") or body.get("max_completion_tokens")
                        or (body.get("sampling_params") or {}).get("max_new_tokens") or 16)
            if self.path == "/v1/completions":
                prompts = body.get("prompt", "")
                prompts = prompts if isinstance(prompts, list) else [prompts]
                choices = [{"index": i, "text": _sim_outputs.complete(str(p), limit, drift), "logprobs": None,
                            "finish_reason": "length"} for i, p in enumerate(prompts)]
                self._send(200, {"id": "cmpl-sim", "object": "text_completion", "created": int(time.time()),
                                 "model": body.get("model") or model, "choices": choices,
                                 "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}})
            elif self.path == "/v1/chat/completions":
                messages = body.get("messages") or [{}]
                text = _sim_outputs.complete(str(messages[-1].get("content", "")), limit, drift).strip()
                self._send(200, {"id": "chatcmpl-sim", "object": "chat.completion", "created": int(time.time()),
                                 "model": body.get("model") or model, "choices": [
                                     {"index": 0, "message": {"role": "assistant", "content": text},
                                      "finish_reason": "length"}]})
            elif self.path == "/generate":
                self._send(200, {"text": _sim_outputs.complete(str(body.get("text", "")), limit, drift),
                                 "meta_info": {"finish_reason": {"type": "length", "length": limit}}})
            else:
                self._send(404, {"detail": "Not Found"})

    return Handler


def main(argv=None):
    args = _args(sys.argv[1:] if argv is None else argv)
    # As its service unit would, the server names the toolkit its torch was built for (the JIT needs it).
    own = "/usr/local/cuda-%s" % torch.version.cuda
    if "CUDA_HOME" not in os.environ and os.path.isdir(own):
        os.environ["CUDA_HOME"] = own
    # the stack as a real server brings it up: a broken upgrade fails here, as there
    model_loader.start(args.model_path, args.tp_size, args.quantization)
    st = torch._sim_host.state()
    model = args.served_model_name or args.model_path
    server = ThreadingHTTPServer((args.host, args.port), _handler(model, st))
    print("The server is fired up and ready to roll!", file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
