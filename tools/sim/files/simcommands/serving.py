"""What the simulated host serves, and how fast, given its GPUs.

simhost/perf.py has the story's figures: single-stream decode of 89.5 tok/s with torch built for CUDA 12.8,
96.1 for CUDA 13, for Kimi-K2.5 on eight RTX PRO 6000 cards over PCIe. Another machine scales them by one decode
step's time there (`step_seconds`: the weights read per token over the GPUs' memory bandwidth, a fixed cost per
layer, and two all-reduces per layer whose latency is PCIe's or NVLink's). A machine serves the largest model of
SERVED_MODELS that fits its GPUs' memory with room for the KV cache, so a 4x H100 box does not claim to hold a
model only eight 96 GB cards can; a benchmark told a model that does not fit fails as loading it does. A server
told a tensor-parallel size uses that many of the GPUs (`--tp-size`), and one told to quantize a BF16 checkpoint to 8
bits when loading it (`--quantization fp8`) holds and reads about half its weights; an 8-bit or 4-bit checkpoint
stays as it is, and a method that needs a checkpoint quantized for it fails as it does in sglang.
"""

from __future__ import annotations

# name: (weights GiB, GiB read per decoded token, layers), largest first. The published checkpoints' sizes: the
# MoE models read their active experts per token, the dense ones every weight.
SERVED_MODELS = {
    "moonshotai/Kimi-K2.5": (554.0, 16.0, 61),  # 1T parameters, 32B active, INT4
    "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8": (221.0, 20.5, 94),
    "meta-llama/Llama-3.1-70B-Instruct": (131.5, 131.5, 80),  # BF16, dense
    "Qwen/Qwen3-32B": (61.0, 61.0, 64),
    "Qwen/Qwen3-8B": (15.3, 15.3, 36),
}
BF16_CHECKPOINTS = {"meta-llama/Llama-3.1-70B-Instruct", "Qwen/Qwen3-32B", "Qwen/Qwen3-8B"}
# --quantization methods that quantize a BF16 checkpoint while loading it (8 bits: about half the bytes; the
# embedding, norms and head stay in BF16), and those that need a checkpoint made for them.
ONLINE_8BIT = {"fp8": 0.52, "w8a8_fp8": 0.52, "w8a8_int8": 0.52}
PREQUANTIZED = {"awq", "awq_marlin", "gptq", "gptq_marlin", "marlin", "compressed-tensors", "modelopt", "modelopt_fp4"}
FIT_SHARE = 0.90  # of the GPUs' memory the weights may take; the rest is the KV cache and activations
# Per GPU model (simhost/machine.py's keys): peak memory bandwidth in GB/s, and whether its cards talk over NVLink.
CARDS = {"RTX PRO 6000 Blackwell": (1792, False), "H100 80GB HBM3": (3352, True), "H200": (4800, True),
         "A100-SXM4-80GB": (2039, True), "L40S": (864, False)}
REFERENCE = ("RTX PRO 6000 Blackwell", 8, "moonshotai/Kimi-K2.5")  # the story's machine and model
_BANDWIDTH_USED = 0.7  # of the memory's peak bandwidth a decode step reaches
_LAYER_S = 25e-6  # launch and small-kernel cost per layer per token
_ALLREDUCE_S = {False: 65e-6, True: 20e-6}  # one all-reduce's latency over PCIe, over NVLink


class DoesNotFit(Exception):
    """The model's weights do not fit the GPUs' memory: the server fails while loading them."""

    def __init__(self, message: str, log: list[str]):
        super().__init__(message)
        self.log = log


def served_model_for(gpus: list[dict]) -> str:
    """The largest model whose weights fit these GPUs (the smallest when none does)."""
    total_gib = sum(g["memory_total_mib"] for g in gpus) / 1024
    fitting = [name for name, (weights, _, _) in SERVED_MODELS.items() if weights <= FIT_SHARE * total_gib]
    return fitting[0] if fitting else list(SERVED_MODELS)[-1]


def served_model(root) -> str:
    from simhost import perf  # here: the sim's build reads the tables above without the sim's lib on its path

    return perf.served_model(root)


def known_model(asked: str | None) -> str | None:
    """The SERVED_MODELS name a --model-path means (a hub id, or a local folder named after one), or None."""
    if not asked:
        return None
    tail = asked.rstrip("/").lower()
    for name in SERVED_MODELS:
        short = name.split("/")[-1].lower()
        if tail in (name.lower(), short) or tail.endswith("/" + short):
            return name
    return None


def weights_gib(model: str, quantization: str | None = None) -> tuple[float, float]:
    """(GiB the weights take in GPU memory, GiB read per decoded token) of `model` loaded with `quantization`.
    ValueError, in sglang's words, for a method it cannot apply to this checkpoint."""
    weights, read, _ = SERVED_MODELS[model]
    if not quantization or model not in BF16_CHECKPOINTS:
        return weights, read  # already 8-bit or 4-bit: its own quantization config wins
    if quantization in ONLINE_8BIT:
        share = ONLINE_8BIT[quantization]
        return weights * share, read * share
    if quantization in PREQUANTIZED:
        raise ValueError(f"Cannot find the config file for {quantization}")
    raise ValueError(f"Unknown quantization method: {quantization}. Must be one of "
                     f"{sorted(set(ONLINE_8BIT) | PREQUANTIZED)}.")


def step_seconds(gpu_model: str, gpus: int, model: str, quantization: str | None = None) -> float:
    """One decode step's time for one sequence, tensor parallel over `gpus` GPUs."""
    bandwidth, nvlink = CARDS[gpu_model]
    _, read_gib = weights_gib(model, quantization)
    layers = SERVED_MODELS[model][2]
    memory = read_gib * 2**30 / (gpus * bandwidth * 1e9 * _BANDWIDTH_USED)
    allreduce = 2 * layers * _ALLREDUCE_S[nvlink] if gpus > 1 else 0.0
    return memory + layers * _LAYER_S + allreduce


def tp_gpus(st: dict, tp_size: int | None) -> int:
    """The GPUs a server told `--tp-size` uses: all of them when not told. ValueError, as torch's device check
    words it, for more than the host has."""
    count = len(st.get("gpus") or [1])
    if tp_size is None:
        return count
    if tp_size < 1 or tp_size > count:
        raise ValueError(f"--tp-size {tp_size}: CUDA error: invalid device ordinal (the host has {count} GPUs)")
    return tp_size


def check_fits(st: dict, model: str, gpus_used: int | None = None, quantization: str | None = None) -> None:
    """DoesNotFit when the weights need more than the GPUs used hold: the log lines a server prints while loading
    them (as far as they got), and the error torch raises, in their words."""
    gpus = st.get("gpus") or []
    if not gpus or model not in SERVED_MODELS:
        return
    used = gpus_used or len(gpus)
    weights, _ = weights_gib(model, quantization)
    per_gpu = gpus[0]["memory_total_mib"] / 1024
    if weights <= FIT_SHARE * per_gpu * used:
        return
    import time

    shards = max(8, int(weights // 8))
    loaded = max(1, int(shards * FIT_SHARE * per_gpu * used / weights))
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    log = [f"[{stamp} TP0] Load weight begin. avail mem={per_gpu - 0.61:.2f} GB",
           f"Loading safetensors checkpoint shards: {100 * loaded // shards:3d}% Completed | {loaded}/{shards}"]
    raise DoesNotFit(f"CUDA out of memory. Tried to allocate 1.75 GiB. GPU 0 has a total capacity of {per_gpu:.2f} GiB "
                     f"of which 1.12 GiB is free. Including non-PyTorch memory, this process has {per_gpu - 1.12:.2f} "
                     f"GiB memory in use. Of the allocated memory {per_gpu - 2.3:.2f} GiB is allocated by PyTorch, and "
                     "210.45 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large "
                     "try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
                     "documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html"
                     "#environment-variables)", log)


def load(root, torch, model: str | None = None, tp_size: int | None = None, quantization: str | None = None) -> float:
    """What a server's start does with the weights: the decode tok/s of `model` once loaded, or, where they do not
    fit, the lines it printed while loading and torch's OutOfMemoryError (`torch` is the fake package's)."""
    import sys

    try:
        return decode_tok_s(root, torch.version.cuda, model=model, tp_size=tp_size, quantization=quantization)
    except DoesNotFit as e:
        print("\n".join(e.log), file=sys.stderr, flush=True)
        raise torch.OutOfMemoryError(str(e)) from None


def decode_tok_s(root, torch_cuda: str, model: str | None = None, tp_size: int | None = None,
                 quantization: str | None = None) -> float:
    """Single-stream decode tok/s of `model` (default: the one the host serves) on this machine, over `tp_size` of
    its GPUs (default: all) with `quantization`, with the story's noise scaled alike. DoesNotFit when its weights do
    not fit those GPUs; ValueError for a tensor-parallel size or a quantization the server refuses."""
    from simhost import perf
    from simhost import state as host_state

    st = host_state.load(root)
    model = known_model(model) or served_model(root)
    used = tp_gpus(st, tp_size)
    check_fits(st, model, used, quantization)
    story = perf.decode_tok_s(root, torch_cuda)
    card = st.get("gpu_model")
    if card not in CARDS or model not in SERVED_MODELS:
        return story
    return story * step_seconds(*REFERENCE) / step_seconds(card, used, model, quantization)
