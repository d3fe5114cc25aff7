"""The network: downloads."""

from __future__ import annotations

from agent.safety.classifier.command import MUTATING, Analysis, _Cmd
from agent.safety.classifier.options import _getopt
from agent.safety.classifier.registry import _handles


@_handles("wget", "curl")
def _download(an: Analysis, cmd: _Cmd) -> None:
    if cmd.prog == "wget":
        opts = _getopt(cmd.args, short_value="OoaPeUtTwQlABDIXRY", long_value={"--output-document", "--output-file"},
                       permute=True)
        targets = [v for v in opts.values("-O", "--output-document") if v.text != "-"]
    else:
        opts = _getopt(cmd.args, short_value="oXdHuFTAeEKrwmxyYzCbcD", long_value={"--output", "--data", "--header",
                                                                                    "--user", "--request"}, permute=True)
        targets = opts.values("-o", "--output")
    for target in targets:
        an.write(target, f"`{cmd.prog}`", cmd.prog)
    an.add(MUTATING, f"download:{cmd.prog}", f"`{cmd.prog}` fetches from the network and can save files")
