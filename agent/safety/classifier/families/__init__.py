"""The program families, one file each: the specs and rules of the programs they know.

Importing this package registers every family's handlers. The order is the registration order:
a later family may take over a name an earlier one registered (xargs is a wrapper, judged by the
interpreters family because it may run a shell).
"""

from agent.safety.classifier.families import (  # noqa: F401  (imported to register their handlers)
    containers,
    files,
    find,
    git,
    interpreters,
    network,
    nvidia,
    os_packages,
    python_packages,
    sed_awk,
    services,
    system,
    text,
    wrappers,
)


def all_specs() -> list:
    """Every family's option specs (each family module lists its own in SPECS)."""
    found = []
    for family in (wrappers, files, interpreters, nvidia, python_packages, os_packages, services, git, find,
                   sed_awk, text, system, network, containers):
        found.extend(getattr(family, "SPECS", ()))
    return found
