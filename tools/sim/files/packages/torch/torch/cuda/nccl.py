from .. import version as _version


def version() -> tuple:
    return tuple(int(x) for x in _version._nccl.split("."))
