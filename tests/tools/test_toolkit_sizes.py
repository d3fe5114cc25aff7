"""What a toolkit needs on disk, and the mounts that lack it (tools/toolkit_sizes.py)."""

from __future__ import annotations

import ast
from pathlib import Path

from tools.toolkit_sizes import RELEASE_NEEDS, Place, header_payload_bytes, needs_for, shortfalls

ROOT = Path(__file__).resolve().parents[2]


def test_the_header_the_release_and_the_size_in_that_order():
    header = b"#!/bin/sh\n# This script was generated using Makeself 2.4.5\n...\necho Uncompressed size: 8388608 KB\n"
    assert header_payload_bytes(header) == 8 * 2**30 and header_payload_bytes(b"#!/bin/sh\nexec python3") is None
    # the installer's own figures are never undercut by a smaller header
    assert needs_for("13.0", 2**30).tmp_bytes == RELEASE_NEEDS["13.0"][0]
    assert needs_for("13.0", 9 * 2**30).tmp_bytes == 9 * 2**30 and needs_for("13.0", 9 * 2**30).source == \
        "the runfile's header"
    assert needs_for("13.0").source == "NVIDIA's installer figures for CUDA 13.0"
    assert needs_for("12.9", None, 4 * 2**30).tmp_bytes == 8 * 2**30
    assert needs_for("12.9") is None


def test_shortfalls_sum_the_places_of_one_mount_and_pass_what_fits():
    places = [Place("/tmp", 3 * 2**30, "unpacks", "/", 5 * 2**30), Place("/usr/local", 3 * 2**30, "installs", "/",
                                                                          5 * 2**30),
              Place("/data", 2**30, "downloads", "/data", 2 * 2**30), Place("/x", 2**30, "unknown free", None, None)]
    assert shortfalls(places) == ["the filesystem mounted at / has 5.0 GiB free and needs 6.0 GiB: 3.0 GiB in /tmp "
                                  "(unpacks); 3.0 GiB in /usr/local (installs)"]


def test_the_table_says_what_the_sims_installer_asks():
    """The sim's installer models NVIDIA's: both name the same figures for each release."""
    tree = ast.parse((ROOT / "tools/sim/files/simhost/toolkit.py").read_text())
    sim = {}
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "Release"):
        kw = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
        version = ".".join(ast.literal_eval(call.args[0]).split(".")[:2])
        sim[version] = (kw["tmp_need_bytes"], kw["install_need_bytes"])
    assert sim == RELEASE_NEEDS
