"""Python version probes: `python3 -c 'import torch; print(torch.__version__, torch.version.cuda)'`.

Careful engineers check an environment with one-liners like that, and refusing them teaches
nobody anything. A one-liner is read-only when Python's own parser (`ast`) shows that it does
nothing but import known packages and print what they are: versions, build settings, devices.

What the code may contain:
- imports of the packages below (importing runs their own installed code, which is what the
  probe is about; a package planted in the working directory is excluded by the caller);
- assignments to plain names, `if`, `for` over those values, `try`/`except`, comprehensions;
- reads of attributes and subscripts, literals, f-strings, arithmetic and comparisons;
- calls only of the functions listed in PROBE_CALLS (by their full dotted name, however the
  module was imported), of a few pure builtins, and of pure string and dict methods.

Everything else (any other call, `open`, `exec`, `__import__`, `def`, `lambda`, `with`, `while`,
attribute or subscript assignment, a keyword such as `key=` that hands a function to a builtin) makes
the code not a probe, and the general rules for `python -c` apply.
"""

from __future__ import annotations

import ast
import re

PROBE_MODULES = frozenset(
    {
        "torch", "torchvision", "torchaudio", "sglang", "sgl_kernel", "vllm", "flashinfer", "transformers", "triton",
        "numpy", "xformers", "flash_attn", "deepspeed", "accelerate", "tensorrt", "tensorrt_llm", "cupy", "jax",
        "jaxlib", "onnxruntime", "safetensors", "tokenizers", "huggingface_hub", "pydantic", "nvidia", "pynvml",
        "cuda", "scipy", "pandas", "sentencepiece", "outlines", "xgrammar", "bitsandbytes", "apex", "timm",
        "importlib", "sys", "platform", "os", "sysconfig", "site", "json", "struct", "ctypes", "pprint",
    }
)
PROBE_CALLS = frozenset(
    {
        # torch: versions, build and devices
        "torch.cuda.is_available", "torch.cuda.device_count", "torch.cuda.get_device_name",
        "torch.cuda.get_device_capability", "torch.cuda.get_device_properties", "torch.cuda.current_device",
        "torch.cuda.get_arch_list", "torch.cuda.is_bf16_supported", "torch.cuda.mem_get_info",
        "torch.cuda.nccl.version", "torch.cuda.get_sync_debug_mode", "torch.cuda.is_initialized",
        "torch.backends.cudnn.version", "torch.backends.cudnn.is_available", "torch.backends.mps.is_available",
        "torch.backends.cuda.is_built", "torch.backends.mkldnn.is_available", "torch.backends.openmp.is_available",
        "torch.distributed.is_available", "torch.distributed.is_nccl_available", "torch.get_num_threads",
        "torch.__config__.show", "torch.__config__.parallel_info", "torch.version.cuda", "torch.is_tensor",
        "torch.utils.collect_env.get_pretty_env_info", "torch.utils.collect_env.main", "torch.utils.cpp_extension.CUDA_HOME",
        "torch._C._cuda_getCompiledVersion", "torch._C._GLIBCXX_USE_CXX11_ABI",
        "numpy.show_config", "triton.runtime.driver.active.get_current_target",
        "pynvml.nvmlInit", "pynvml.nvmlSystemGetDriverVersion", "pynvml.nvmlDeviceGetCount",
        "tensorrt.__version__", "ctypes.util.find_library",
        # CUDA's initialisation and the caching allocator's counters: a context on the device, as
        # get_device_properties and mem_get_info make (redteam-2026-12c's doubtful.tsv), nothing more
        "torch.cuda.init", "torch.cuda.memory_summary", "torch.cuda.memory_allocated", "torch.cuda.memory_reserved",
        "torch.cuda.max_memory_allocated", "torch.compiled_with_cxx11_abi",
        "torch.backends.cuda.flash_sdp_enabled", "torch.backends.cuda.mem_efficient_sdp_enabled",
        "torch.backends.cuda.math_sdp_enabled", "torch.backends.cuda.cudnn_sdp_enabled",
        "pynvml.nvmlShutdown", "cuda.cuda.cuDriverGetVersion", "cuda.bindings.driver.cuDriverGetVersion",
        "cupy.show_config", "cupy.cuda.runtime.runtimeGetVersion", "cupy.cuda.runtime.driverGetVersion",
        "cupy.cuda.runtime.getDeviceCount", "json.load", "json.loads",
        # the interpreter and its packages
        "importlib.metadata.version", "importlib.metadata.metadata", "importlib.metadata.requires",
        "importlib.metadata.packages_distributions", "importlib.metadata.distributions",
        "importlib.metadata.distribution", "importlib.util.find_spec", "importlib.import_module",
        "platform.python_version", "platform.python_implementation", "platform.platform", "platform.machine",
        "platform.system", "platform.release", "platform.uname", "platform.libc_ver", "platform.node",
        "platform.version", "platform.processor", "sys.getrecursionlimit", "sys.getdefaultencoding",
        "sysconfig.get_paths", "sysconfig.get_path", "sysconfig.get_config_var", "sysconfig.get_platform",
        "sysconfig.get_python_version", "site.getsitepackages", "site.getusersitepackages",
        "os.cpu_count", "os.getcwd", "os.getenv", "os.environ.get", "os.uname", "os.path.exists",
        "os.path.isdir", "os.path.isfile", "os.path.dirname", "os.path.basename", "os.path.join",
        "os.path.realpath", "os.path.abspath", "os.listdir", "os.getpid", "os.getuid", "os.sched_getaffinity",
        "json.dumps", "pprint.pprint", "struct.calcsize",
    }
)
# CUDA's own libraries loaded by ctypes, and the version and device queries a probe calls on them
# (`ctypes.CDLL('libcuda.so.1').cuDriverGetVersion(ctypes.byref(v))`); any other library or function is not a probe.
_CUDA_LIBRARY = re.compile(r"lib(cuda|cudart|nvidia-ml)\.so(\.\d+)*")
_CUDA_LIBRARY_QUERIES = frozenset({"cuInit", "cuDriverGetVersion", "cuDeviceGetCount", "cuDeviceGetName",
                                   "cudaRuntimeGetVersion", "cudaDriverGetVersion", "cudaGetDeviceCount",
                                   "nvmlInit_v2", "nvmlSystemGetDriverVersion"})
_CTYPES_VALUES = frozenset({"ctypes.c_int", "ctypes.c_uint", "ctypes.byref", "ctypes.create_string_buffer",
                            "ctypes.util.find_library"})
# NVML's queries: everything it sets, resets, clears, registers or creates is named otherwise.
_NVML_QUERY = re.compile(r"pynvml\.nvml(System|Device|Unit|Vgpu|Gpu)Get\w+")
# Probe calls that open and read the file an argument names (`platform.libc_ver("/dev/watchdog")` reads
# it, arming the watchdog): allowed only without arguments, where they read the interpreter itself.
_OPENS_ITS_ARGUMENT = {"platform.libc_ver"}
# importlib.import_module imports by name: only names of the probe packages.
_IMPORTING_CALLS = {"importlib.import_module", "importlib.util.find_spec"}
PURE_BUILTINS = frozenset(
    {"print", "len", "str", "repr", "int", "float", "bool", "range", "list", "tuple", "dict", "set", "sorted",
     "min", "max", "sum", "any", "all", "enumerate", "zip", "isinstance", "type", "hasattr", "getattr", "format",
     "round", "abs", "hex", "divmod", "reversed", "frozenset", "bytes", "ord", "chr", "vars", "dir", "id",
     "callable", "Exception", "ImportError", "ModuleNotFoundError", "AttributeError", "RuntimeError",
     "BaseException", "OSError", "ValueError", "KeyError", "True", "False", "None"}
)
# Builtins that may call a function handed to them (`sorted(x, key=os.system)`); their keywords are refused.
_CALLBACK_KEYWORDS = frozenset({"key", "default"})
PURE_METHODS = frozenset(
    {"split", "rsplit", "strip", "lstrip", "rstrip", "join", "format", "startswith", "endswith", "upper", "lower",
     "replace", "partition", "rpartition", "keys", "values", "items", "get", "count", "index", "find", "splitlines",
     "zfill", "ljust", "rjust", "center", "title", "casefold", "isdigit", "decode", "encode", "copy"}
)
_MAX_NODES = 2000


class _NotAProbe(Exception):
    pass


def probe_problem(code: str) -> str | None:
    """None when code only imports probe packages and prints what they are; else why it is not a probe."""
    try:
        tree = ast.parse(code, mode="exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "it is not valid Python"
    if sum(1 for _ in ast.walk(tree)) > _MAX_NODES:
        return "it is too long to be a probe"
    checker = _Checker()
    try:
        checker.statements(tree.body)
    except _NotAProbe as refusal:
        return str(refusal)
    except RecursionError:
        return "it nests too deeply"
    return None  # `python3 -c 'import torch'` is a probe too: its exit status says whether torch imports


class _Checker:
    def __init__(self) -> None:
        self.names: dict[str, str] = {}  # local name -> dotted name of the module or function it is bound to
        self.values: set[str] = set()  # local names bound to values computed here (not modules)
        self.libraries: set[str] = set()  # local names bound to one of CUDA's libraries (ctypes.CDLL)

    # -- statements

    def statements(self, body: list[ast.stmt]) -> None:
        for statement in body:
            self.statement(statement)

    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                self.module(alias.name)
                if alias.asname:
                    self.names[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    self.names[top] = top
        elif isinstance(node, ast.ImportFrom):
            if node.level or node.module is None:
                raise _NotAProbe("it imports relative to the working directory")
            self.module(node.module)
            for alias in node.names:
                if alias.name == "*":
                    raise _NotAProbe("`import *` hides what it brings in")
                self.names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Expr):
            self.expression(node.value)
        elif isinstance(node, ast.Assign):
            self.expression(node.value)
            for target in node.targets:
                self.bind(target)
                if isinstance(target, ast.Name) and self.cuda_library(node.value):
                    self.libraries.add(target.id)
        elif isinstance(node, ast.If):
            self.expression(node.test)
            self.statements(node.body)
            self.statements(node.orelse)
        elif isinstance(node, ast.For):
            self.expression(node.iter)
            self.bind(node.target)
            self.statements(node.body)
            self.statements(node.orelse)
        elif isinstance(node, ast.Try):
            self.statements(node.body)
            for handler in node.handlers:
                if handler.type is not None:
                    self.expression(handler.type)
                if handler.name:
                    self.values.add(handler.name)
                self.statements(handler.body)
            self.statements(node.orelse)
            self.statements(node.finalbody)
        elif isinstance(node, (ast.Pass, ast.Break, ast.Continue)):
            pass
        else:
            raise _NotAProbe(f"it uses `{type(node).__name__}`, which a probe does not need")

    def module(self, name: str) -> None:
        if not any(name == m or name.startswith(m + ".") for m in PROBE_MODULES):
            raise _NotAProbe(f"it imports `{name}`, which is not a package a probe looks at")

    def bind(self, target: ast.expr) -> None:
        if isinstance(target, ast.Name):
            self.names.pop(target.id, None)
            self.libraries.discard(target.id)
            self.values.add(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.bind(element)
        else:
            raise _NotAProbe("it assigns to an attribute or item, which changes state")

    # -- expressions

    def dotted(self, node: ast.expr) -> str | None:
        """The full dotted name an expression refers to (`t.cuda.is_available` -> torch.cuda.is_available)."""
        if isinstance(node, ast.Name):
            if node.id in self.names:
                return self.names[node.id]
            return None
        if isinstance(node, ast.Attribute):
            base = self.dotted(node.value)
            return f"{base}.{node.attr}" if base is not None else None
        return None

    def expression(self, node: ast.expr) -> None:
        if isinstance(node, ast.Call):
            self.call(node)
            return
        if isinstance(node, ast.Name):
            if node.id not in self.names and node.id not in self.values and node.id not in PURE_BUILTINS:
                raise _NotAProbe(f"it uses `{node.id}`, which a probe does not need")
            return
        if isinstance(node, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom, ast.Starred)):
            if isinstance(node, ast.Starred):
                self.expression(node.value)
                return
            raise _NotAProbe(f"it uses `{type(node).__name__}`, which a probe does not need")
        if isinstance(node, ast.Attribute) and node.attr.startswith("__") and node.attr not in (
                "__version__", "__file__", "__path__", "__name__", "__config__", "__spec__", "__doc__"):
            raise _NotAProbe(f"it reads `{node.attr}`, which a probe does not need")
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            for generator in node.generators:  # the loop variables are bound before the element is read
                self.expression(generator.iter)
                self.bind(generator.target)
                for condition in generator.ifs:
                    self.expression(condition)
            for element in (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,):
                self.expression(element)
            return
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expression(child)
            elif isinstance(child, (ast.expr_context, ast.operator, ast.cmpop, ast.boolop, ast.unaryop)):
                pass
            elif isinstance(child, ast.keyword):
                self.expression(child.value)
            else:
                raise _NotAProbe(f"it uses `{type(child).__name__}`, which a probe does not need")

    def call(self, node: ast.Call) -> None:
        for argument in node.args:
            self.expression(argument)
        for keyword in node.keywords:
            self.expression(keyword.value)
        function = node.func
        if isinstance(function, ast.Name) and function.id not in self.names:
            # `print = os.system; print("reboot")`: a builtin's name bound to anything else is not that builtin
            if function.id not in PURE_BUILTINS or function.id in self.values:
                raise _NotAProbe(f"it calls `{function.id}`, which is not a call a probe needs")
            if any(k.arg in _CALLBACK_KEYWORDS for k in node.keywords):
                raise _NotAProbe(f"it hands `{function.id}` a function to call")
            if function.id == "getattr" and not (len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)):
                raise _NotAProbe("it reads an attribute whose name is computed")
            return
        name = self.dotted(function)
        if name == "ctypes.CDLL":
            if not self.cuda_library(node):
                raise _NotAProbe("`ctypes.CDLL` loads a library that is not one of CUDA's by a literal name")
            return
        if isinstance(function, ast.Attribute) and function.attr in _CUDA_LIBRARY_QUERIES and (
                self.cuda_library(function.value)
                or isinstance(function.value, ast.Name) and function.value.id in self.libraries):
            return  # a version or device query of CUDA's library (its arguments were checked above)
        if name is not None:
            if name not in PROBE_CALLS and name not in _CTYPES_VALUES and not _NVML_QUERY.fullmatch(name):
                raise _NotAProbe(f"it calls `{name}`, which is not a version or device query")
            if name in _OPENS_ITS_ARGUMENT and (node.args or node.keywords):
                raise _NotAProbe(f"`{name}` with an argument opens the file it names, which may be a device; "
                                 f"call it without arguments")
            if name in _IMPORTING_CALLS:
                argument = node.args[0] if node.args else None
                if not (isinstance(argument, ast.Constant) and isinstance(argument.value, str)):
                    raise _NotAProbe(f"`{name}` imports a module whose name is computed")
                self.module(argument.value)
            return
        if isinstance(function, ast.Attribute) and function.attr in PURE_METHODS:
            self.expression(function.value)  # a method of a value: `torch.__version__.split("+")`
            return
        raise _NotAProbe(f"it calls `{ast.unparse(function)[:40]}`, which is not a call a probe needs")

    def cuda_library(self, node: ast.expr) -> bool:
        """`ctypes.CDLL('libcuda.so.1')`: one of CUDA's libraries, named literally, and nothing else."""
        return (isinstance(node, ast.Call) and self.dotted(node.func) == "ctypes.CDLL" and len(node.args) == 1
                and not node.keywords and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str) and bool(_CUDA_LIBRARY.fullmatch(node.args[0].value)))
