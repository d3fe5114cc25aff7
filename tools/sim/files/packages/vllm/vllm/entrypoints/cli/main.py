"""The `vllm` command: `vllm --version` and `vllm bench serve`."""

import argparse
import sys


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["--version"], ["-v"]):
        from vllm.version import __version__

        print(__version__)
        return 0
    if argv[:2] == ["bench", "serve"]:
        from vllm.benchmarks import serve

        args = serve.parser().parse_args(argv[2:])
        serve.main(args)
        return 0
    parser = argparse.ArgumentParser(prog="vllm", description="vLLM CLI")
    parser.add_argument("command", choices=["bench"], help="only `vllm bench serve` is available on this host")
    parser.parse_args(argv[:1])
    parser.error(f"unsupported: vllm {' '.join(argv)}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
