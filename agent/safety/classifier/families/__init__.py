"""The program families, one file each: the specs and rules of the programs they know.

Importing this package registers every family's handlers. Each program name is registered by one
family only (the registry refuses a second), so the order of these imports does not matter.
"""

from agent.safety.classifier.families import (  # noqa: F401  (imported to register their handlers)
    binaries,
    containers,
    files,
    find,
    git,
    hardware,
    interpreters,
    inventory,
    network,
    nvidia,
    os_packages,
    python_packages,
    python_probes,
    sed_awk,
    services,
    slurm,
    system,
    text,
    wrappers,
)


def all_specs() -> list:
    """Every family's option specs (each family module lists its own in SPECS)."""
    found = []
    for family in (wrappers, files, interpreters, nvidia, python_packages, os_packages, services, git, find,
                   sed_awk, text, system, inventory, network, containers, python_probes, slurm, binaries):
        found.extend(getattr(family, "SPECS", ()))
    return found
