"""torch.backends.cudnn: the cuDNN this build bundles."""

from .. import version as _version

enabled = True
benchmark = False
deterministic = False


def is_available() -> bool:
    from .. import cuda

    return cuda._init_error() is None


def version():
    return _version._cudnn if is_available() else None
