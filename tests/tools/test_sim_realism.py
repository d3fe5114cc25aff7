"""What a careful reader of a simulated host's results checks against each other: benchmark figures
against the real time a run took, the server a benchmark measures against `ps`, df and uname against
the machine the sim describes, the GPU model against its driver, the compiler on PATH and the
packages dpkg lists against the sim's state and its OS, and /tmp's mode against any Linux host's.

The sim's df and uname are held to this machine's GNU df and uname: the same headings for the same
options, the same complaints for the same mistakes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from agent.goal import GoalError, load_goal
from agent.host_specs import host_spec
from tools.base import ArtifactStore, ToolContext
from tools.hosts import HostPool, HostSpec, SimHost
from tools.inspect_host import InspectHost
from tools.run_bench import RunBench
from tools.sim import GPU_MODELS, build_sim, gpu_model_key
from tools.sim.files.simhost.compiler import is_compiler_name

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "tests" / "data" / "gpu" / "h200"
SERVING = ("/opt/venv/bin/python -m sglang.bench_serving --backend sglang --dataset-name random --num-prompts 200 "
           "--random-input-len 1024 --random-output-len 1024 --max-concurrency 1")


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    return build_sim(tmp_path_factory.mktemp("realism") / "gpu", free_space_mb={"/tmp": 500, "/var/tmp": 3000})


@pytest.fixture(scope="module")
def host(sim):
    return SimHost(sim.host_spec())


def run(host, command: str, ok: bool = True):
    r = host.run(command, timeout=120)
    if ok:
        assert r.exit_code == 0, f"{command}\nstdout: {r.stdout[-2000:]}\nstderr: {r.stderr[-2000:]}"
    return r


def notes(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("simulated host: ")]


# --------------------------------------------------------------------------- benchmark time and server


def test_serving_benchmarks_say_their_time_is_simulated_and_where_their_server_ran(host):
    r = run(host, SERVING)
    duration = float(re.search(r"^Benchmark duration \(s\):\s+([\d.]+)", r.stdout, re.M).group(1))
    assert duration > 100 * r.duration_s  # minutes of simulated serving, well under a second of real time
    server, timing = notes(r.stdout)
    assert r.stdout.rstrip().endswith(timing)  # where the end of the output (all a model may see) shows it
    assert "SGLang server was brought up inside this benchmark process" in server
    assert "not the host's own server on port 30000 (another process)" in server
    # It says what it timed (its own process), so it cannot be read as the whole command's time.
    m = re.fullmatch(r"simulated host: durations, throughputs and latencies above are simulated time on "
                     r"8x NVIDIA RTX PRO 6000 Blackwell Workstation Edition; the benchmark's own process took "
                     r"([\d.]+) s of real time to this line; starting the command that ran it is not included",
                     timing)
    assert m, timing
    assert 0 < float(m.group(1)) <= r.duration_s + 0.01
    # What `ps` shows after it agrees: no server.
    assert "sglang" not in run(host, "ps -eo args").stdout

    vllm = run(host, "vllm bench serve --model m --num-prompts 20 --max-concurrency 1")
    assert [n.split(" server ")[0] for n in notes(vllm.stdout)][:1] == ["simulated host: the vLLM"]
    assert len(notes(vllm.stdout)) == 2
    one_batch = run(host, "/opt/venv/bin/python -m sglang.bench_one_batch --model-path m --batch-size 1 "
                          "--input-len 512 --output-len 32")
    # bench_one_batch runs the model in its own process on a real host too: only its time is simulated.
    only_time, = notes(one_batch.stdout)
    assert only_time.startswith("simulated host: durations, throughputs and latencies above are simulated time")


def test_run_bench_on_a_sim_labels_its_durations_as_real_time(sim, tmp_path):
    pool = HostPool([sim.host_spec()])
    ctx = ToolContext(hosts=pool, artifacts=ArtifactStore(tmp_path / "a"), call_id="call_1")
    tool = RunBench()
    try:
        result = tool.run(ctx, tool.parse_args({"host": "sim", "command": SERVING, "parser": "sglang_bench_serving",
                                                "runs": 2, "warmup": 0, "label": "before"}))
    finally:
        pool.close()
    assert result.simulated_host is True
    shown = tool.render(result)
    assert "run durations (s of real time; sim is a simulated host, whose benchmarks report simulated GPU time): " \
        in shown
    assert "simulated time on 8x NVIDIA RTX PRO 6000" in result.output_tail
    whole = (tmp_path / result.artifacts[0]).read_text()  # the whole output of the first run
    assert re.search(r"^# host sim, exit code 0, [\d.]+s of real time on a simulated host$", whole, re.M), whole[:300]


def test_run_bench_on_a_real_host_keeps_its_plain_label(tmp_path):
    script = tmp_path / "bench.sh"
    script.write_text("printf '%s\\n' '============ Serving Benchmark Result ============' "
                      "'Output token throughput (tok/s):         90.00' '" + "=" * 50 + "'\n")
    hosts = HostPool([HostSpec(name="local", transport="local")])
    ctx = ToolContext(hosts=hosts, artifacts=ArtifactStore(None))
    tool = RunBench()
    try:
        result = tool.run(ctx, tool.parse_args({"host": "local", "command": f"sh {script}", "runs": 1, "warmup": 0,
                                                "parser": "sglang_bench_serving", "label": "x"}))
    finally:
        hosts.close()
    assert result.simulated_host is False
    assert "\nrun durations (s): " in tool.render(result)


def test_run_bench_says_what_a_workload_needs_and_what_a_sim_does_instead():
    text = " ".join(RunBench.description().split())
    assert "must already be running" not in text
    assert "what the workload needs must be up before, or be started by the command itself" in text
    assert "On a simulated host the serving benchmarks bring their server up inside the benchmark process" in text
    assert "the run durations this tool reports there are real time" in text


def test_the_sims_server_answers_on_its_port_as_sglangs_does(host):
    """A command that names 127.0.0.1:30000 finds sglang's server there (the venv's own launch_server), as
    on a serving box; ps shows it beside the command, and nothing of how the sim started it."""
    r = run(host, "curl -s http://127.0.0.1:30000/v1/models; echo; curl -s -o /dev/null -w '%{http_code}\\n' "
                  "http://127.0.0.1:30000/health; ps -eo pid=,args=")
    models, health, *ps = r.stdout.splitlines()
    assert json.loads(models)["data"][0]["id"] == "moonshotai/Kimi-K2.5" and health == "200", r.stdout
    assert any("-m sglang.launch_server --model-path moonshotai/Kimi-K2.5" in line for line in ps), ps
    assert not any("/dev/tcp/" in line or "exec bash" in line for line in ps), ps  # the sim's start-up shows nowhere
    answer = run(host, "curl -s localhost:30000/v1/completions -d '{\"prompt\": \"Q: What is 7 * 8?\\nA:\", "
                       "\"max_tokens\": 4}'").stdout
    assert json.loads(answer)["choices"][0]["text"] == " 56", answer


# --------------------------------------------------------------------------- df


def df_rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()[1:]]


def test_df_without_a_path_lists_only_the_sims_filesystems(host):
    for options in ("", "-h", "-T", "-P", "-i", "--total"):
        mounts = [row[-1] for row in df_rows(run(host, f"df {options}").stdout)]
        assert mounts == ["/", "/tmp", "/var/tmp"] + (["-"] if options == "--total" else []), (options, mounts)
    free = {row[-1]: int(row[3]) for row in df_rows(run(host, "df -P -m").stdout)}
    assert free == {"/": 512_000, "/tmp": 500, "/var/tmp": 3000}
    # Each path answers from its own filesystem, the same figures as the listing.
    assert df_rows(run(host, "df -P -m /var/tmp/. /root").stdout) == \
        [row for row in df_rows(run(host, "df -P -m").stdout) if row[-1] in ("/var/tmp", "/")][::-1]
    assert [row[1] for row in df_rows(run(host, "df -T").stdout)] == ["ext4"] * 3


def real(program: str, args: str) -> subprocess.CompletedProcess:
    """This machine's own program, in the locale the sim's commands run in."""
    return subprocess.run(f"{program} {args}", shell=True, capture_output=True, text=True,
                          env={"PATH": os.environ["PATH"], "LANG": "C.UTF-8"})


def shape(line: str, human: bool) -> list[str]:
    """A df row's cells as kinds: numbers with their unit suffix; a human size's unit may differ."""
    out = []
    for cell in line.split()[1:-1]:
        kind = re.sub(r"[\d.]+", "N", cell) if cell[0].isdigit() else "word"
        out.append(re.sub(r"N[KMGTkP]$", "N<unit>", kind) if human else kind)
    return out


@pytest.mark.skipif(shutil.which("df") is None, reason="needs GNU df")
@pytest.mark.parametrize("options", ["", "-h", "-H", "-k", "-m", "-P", "-P -h", "-P -m", "-T", "-hT", "-i", "-i -h",
                                     "-B1", "-P -B1", "-BM", "-BG", "-B 1000", "-BKB", "--total", "--output",
                                     "--output=target,size,avail", "-h --output=ipcent,itotal"])
def test_df_headings_and_units_are_gnu_dfs(host, options):
    sim_lines = run(host, f"df {options} /tmp").stdout.splitlines()
    real_lines = real("df", f"{options} /").stdout.splitlines()
    assert sim_lines[0].split() == real_lines[0].split()
    if "-i" not in options and "--output" not in options:  # inode counts vary with this machine's filesystem
        human = "-h" in options or "-H" in options
        assert shape(sim_lines[1], human) == shape(real_lines[1], human)
    # Numbers are right-aligned under their headings, as df aligns them.
    for cell in re.finditer(r"\S+", sim_lines[1]):
        if cell.group()[0].isdigit():
            assert sim_lines[0][cell.end() - 1] != " ", (options, sim_lines[0], sim_lines[1])


@pytest.mark.skipif(shutil.which("df") is None, reason="needs GNU df")
@pytest.mark.parametrize("args", ["-z", "--foo", "--output=foo", "--output=size,size", "-i --output", "-P --output",
                                  "-B foo", "--block-size=0", "-B", "/no/such/path", "-t nfs", "--tot=1"])
def test_df_refuses_what_gnu_df_refuses_in_its_words(host, args):
    r = run(host, f"df {args}", ok=False)
    theirs = real("df", args)
    assert (r.exit_code, r.stderr) == (theirs.returncode, theirs.stderr)


# --------------------------------------------------------------------------- uname and /proc/version

UNAME_A = ("Linux sim 6.8.0-60-generic #63-Ubuntu SMP PREEMPT_DYNAMIC Tue Apr 15 19:04:15 UTC 2025 "
           "x86_64 x86_64 x86_64 GNU/Linux")


def test_uname_and_proc_version_report_the_sims_kernel(host, sim):
    assert run(host, "uname -a").stdout == UNAME_A + "\n"
    assert run(host, "uname --all").stdout == UNAME_A + "\n"
    for args, expected in [("", "Linux"), ("-r", "6.8.0-60-generic"), ("--kernel-release", "6.8.0-60-generic"),
                           ("--kernel-r", "6.8.0-60-generic"), ("-srm", "Linux 6.8.0-60-generic x86_64"),
                           ("-s -n -m -v -o", "Linux sim #63-Ubuntu SMP PREEMPT_DYNAMIC Tue Apr 15 19:04:15 UTC 2025 "
                                              "x86_64 GNU/Linux"), ("-o -s", "Linux GNU/Linux")]:
        assert run(host, f"uname {args}").stdout == expected + "\n", args
    if os.path.islink("/bin"):  # merged /usr: /bin/uname is the sim's /usr/bin/uname too
        assert run(host, "/bin/uname -r").stdout == "6.8.0-60-generic\n"
    version = run(host, "cat /proc/version").stdout
    assert version.startswith("Linux version 6.8.0-60-generic (buildd@") and version.rstrip().endswith(
        "#63-Ubuntu SMP PREEMPT_DYNAMIC Tue Apr 15 19:04:15 UTC 2025"), version
    assert run(host, "cat /proc/sys/kernel/osrelease").stdout == "6.8.0-60-generic\n"
    # Python's own view of the kernel (uname(2) is this machine's), and the C library ldd names, are the sim's.
    said = run(host, "python3 -c 'import os, platform; print(os.uname().release, os.uname().version, "
                     "platform.release(), sep=\"|\")'").stdout
    assert said == "6.8.0-60-generic|#63-Ubuntu SMP PREEMPT_DYNAMIC Tue Apr 15 19:04:15 UTC 2025|6.8.0-60-generic\n"
    libc = run(host, "dpkg-query -W -f '${Version}' libc-bin").stdout
    assert run(host, "ldd --version").stdout.splitlines()[0] == f"ldd (Ubuntu GLIBC {libc}) {libc.split('-')[0]}"
    assert "libc.so.6 => " in run(host, "ldd /bin/ls").stdout  # what a program links against: listed as ever
    env = run(host, "/opt/venv/bin/python -m torch.utils.collect_env").stdout.splitlines()
    assert "OS: Ubuntu 24.04.3 LTS (x86_64)" in env
    assert any(line.startswith("Python platform: Linux-6.8.0-60-generic-x86_64-with-") for line in env), env
    # inspect_host reads the kernel with `uname -srm`: the sim's, with the sim's OS.
    pool = HostPool([sim.host_spec()])
    try:
        report = InspectHost().run(ToolContext(hosts=pool, artifacts=ArtifactStore(None)),
                                   InspectHost.parse_args({"host": "sim"}))
    finally:
        pool.close()
    assert report.kernel == "Linux 6.8.0-60-generic x86_64" and report.os == "Ubuntu 24.04.3 LTS"


@pytest.mark.skipif(shutil.which("uname") is None, reason="needs GNU uname")
@pytest.mark.parametrize("args", ["-x", "--foo", "--kern", "extra", "--all=1"])
def test_uname_refuses_what_gnu_uname_refuses_in_its_words(host, args):
    r = run(host, f"uname {args}", ok=False)
    theirs = real("uname", args)
    assert (r.exit_code, r.stderr) == (theirs.returncode, theirs.stderr)


def test_a_sim_built_with_another_kernel_reports_it(tmp_path):
    host = SimHost(build_sim(tmp_path / "gpu", kernel="6.11.0-29-generic").host_spec())
    assert run(host, "uname -r; cat /proc/sys/kernel/osrelease").stdout == "6.11.0-29-generic\n" * 2
    assert run(host, "uname -v").stdout.startswith("#29-Ubuntu SMP PREEMPT_DYNAMIC ")
    assert run(host, "cat /proc/version").stdout.startswith("Linux version 6.11.0-29-generic ")


# --------------------------------------------------------------------------- GPU models


@pytest.mark.parametrize("key", list(GPU_MODELS))
def test_nvidia_smi_and_torch_report_the_gpu_model(tmp_path, key):
    model = GPU_MODELS[key]
    host = SimHost(build_sim(tmp_path / "gpu", gpu_model=key, gpus=2).host_spec())
    fields = "name,memory.total,compute_cap,power.limit,power.min_limit,ecc.mode.current,mig.mode.current,fan.speed"
    rows = run(host, f"nvidia-smi --query-gpu={fields} --format=csv,noheader,nounits").stdout.splitlines()
    assert rows == [", ".join([model["name"], str(model["memory_total_mib"]), model["compute_cap"],
                               f"{model['power_limit_w']:.2f}", f"{model['power_min_w']:.2f}",
                               "Enabled" if model["ecc"] else "Disabled", "Disabled" if model["mig"] else "[N/A]",
                               "[N/A]" if model["fan_percent"] is None else str(model["fan_percent"])])] * 2
    table = run(host, "nvidia-smi").stdout
    assert f"/ {model['power_limit_w']:>4}W |" in table and f"/ {model['memory_total_mib']:>6}MiB |" in table
    assert all(len(line) == 91 for line in table.splitlines()[1:] if line)
    probe = ("import torch; p = torch.cuda.get_device_properties(0); "
             "print(p.name, p.major, p.minor, p.total_memory >> 20, p.multi_processor_count, sep='|')")
    assert run(host, f"/opt/venv/bin/python -c \"{probe}\"").stdout.strip().split("|") == \
        [model["name"], *model["compute_cap"].split("."), str(model["memory_total_mib"]), str(model["sm_count"])]
    q = run(host, "nvidia-smi -q -d INFO").stdout
    assert re.search(rf"Product Architecture\s+: {model['architecture']}$", q, re.M)


def test_an_h200_sim_prints_what_a_real_h200_printed(tmp_path):
    """tests/data/gpu/h200/ holds a real H200's nvidia-smi: the sim's H200 on that driver matches it but
    for the readings that change from minute to minute (clock, temperature, power draw) and the slot."""
    host = SimHost(build_sim(tmp_path / "gpu", gpu_model="H200", gpus=1, driver_version="580.159.04").host_spec())
    sim_lines = run(host, "nvidia-smi").stdout.splitlines()
    real_lines = (H200 / "nvidia-smi.txt").read_text().splitlines()
    readings = lambda line: re.sub(r"\d\dC|\d+W / |[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.\d", "#", line)  # noqa: E731
    assert [readings(s) for s in sim_lines[1:]] == [readings(r) for r in real_lines[1:]]
    header, row = (H200 / "nvidia-smi-query.csv").read_text().strip().splitlines()
    sim_row = run(host, f"nvidia-smi --query-gpu={header.replace(' [MiB]', '').replace(' ', '')} "
                        "--format=csv,noheader").stdout.strip()
    assert sim_row.split(", ")[1:5] == row.split(", ")[1:5]  # name, compute_cap, driver, memory.total


def test_gpu_models_are_named_as_people_write_them():
    assert gpu_model_key("h100 80gb hbm3") == gpu_model_key("NVIDIA H100 80GB HBM3") == "H100 80GB HBM3"
    assert gpu_model_key("A100") == "A100-SXM4-80GB" and gpu_model_key("rtx pro 6000") == "RTX PRO 6000 Blackwell"
    with pytest.raises(ValueError, match=r"unknown GPU model 'B200'; the sim has: RTX PRO 6000 Blackwell, H100"):
        gpu_model_key("B200")
    with pytest.raises(ValueError, match="unknown GPU model 'H'"):  # H100 or H200: which one is not said
        gpu_model_key("H")


def test_a_driver_older_than_the_gpu_is_refused_before_anything_is_built(tmp_path):
    with pytest.raises(ValueError, match=r"driver 550\.144\.03 is too old for the NVIDIA RTX PRO 6000 Blackwell "
                                         r"Workstation Edition, which needs the 570 branch or newer"):
        build_sim(tmp_path / "gpu", driver_version="550.144.03")
    assert not (tmp_path / "gpu").exists()
    goal = tmp_path / "goal.yaml"
    goal.write_text("goal: g\nhosts:\n  - name: box\n    transport: sim\n"
                    "    sim: {gpu_model: RTX PRO 6000 Blackwell, driver: \"550.144.03\"}\n")
    with pytest.raises(GoalError) as refused:
        load_goal(goal)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"{goal}:5: hosts[0].sim: driver 550.144.03 is too old")
    assert "choose a driver of 570 or newer, or a GPU model it supports (H100 80GB HBM3, H200, A100-SXM4-80GB, " \
           "L40S)" in message
    goal.write_text("goal: g\nhosts:\n  - name: box\n    transport: sim\n    sim: {gpu_model: B200}\n")
    with pytest.raises(GoalError, match=r"goal.yaml:5: hosts\[0\]\.sim\.gpu_model: unknown GPU model 'B200'"):
        load_goal(goal)


def test_the_driver_too_old_rehearsal_is_a_machine_that_exists(tmp_path):
    """Its point stands (the 550 driver cannot run CUDA 13) on GPUs that driver supports."""
    entry = load_goal(ROOT / "goals" / "driver-too-old.yaml").hosts[0]
    spec, sim = host_spec(entry, sim_dir=tmp_path / "sims")
    host = SimHost(spec)
    rows = run(host, "nvidia-smi --query-gpu=name,driver_version --format=csv,noheader").stdout.splitlines()
    assert rows == ["NVIDIA H100 80GB HBM3, 550.144.03"] * 4
    assert GPU_MODELS[sim.state()["gpu_model"]]["min_driver"] <= 550
    assert "CUDA Version: 12.4" in run(host, "nvidia-smi").stdout


# --------------------------------------------------------------------------- compiler, packages, /tmp

GCC_13 = "gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04) "  # the seed's, as `gcc -v` ends
COMPILER_NAMES = ("gcc", "cc", "c++", "g++", "cpp", "c89", "c99", "gcc-12", "gcc-13", "g++-13", "x86_64-linux-gnu-gcc",
                  "x86_64-linux-gnu-gcc-12", "x86_64-linux-gnu-gcc-13", "x86_64-linux-gnu-g++-13")


def installed(host, pattern: str = "") -> dict[str, str]:
    """Package -> version of every package dpkg-query lists as installed (matching a pattern)."""
    out = run(host, "dpkg-query -W -f='${db:Status-Abbrev} ${Package} ${Version}\\n' " + pattern, ok=False).stdout
    return {name: version for status, name, version in (line.split() for line in out.splitlines())
            if status == "ii"}


def test_a_sim_without_gcc_has_no_compiler_on_its_path_nor_in_its_packages(tmp_path):
    host = SimHost(build_sim(tmp_path / "gpu", gcc=None).host_spec())
    for name in COMPILER_NAMES:
        assert run(host, f"command -v {name}", ok=False).exit_code == 1, name
    listed = run(host, "ls /usr/bin /usr/sbin /bin /usr/local/bin 2>/dev/null", ok=False).stdout.split()
    assert [name for name in listed if is_compiler_name(name)] == []
    assert "gcc: command not found" in run(host, "gcc --version", ok=False).stderr
    assert "ld" in listed  # binutils stay, as on a host without gcc
    status = run(host, "dpkg -s gcc", ok=False)
    assert status.exit_code == 1 and "package 'gcc' is not installed" in status.stderr
    assert [p for p in installed(host) if re.match(r"(gcc|g\+\+|cpp)(-\d+)?$|build-essential", p)] == []
    assert "Missing gcc" in run(host, "sh /srv/nvidia/compute/cuda/13.0.1/local_installers/"
                                      "cuda_13.0.1_580.82.07_linux.run --silent --toolkit; "
                                      "cat /var/log/cuda-installer.log", ok=False).stdout


def test_the_sims_gcc_reports_the_configured_version(host):
    assert run(host, "command -v gcc").stdout == "/usr/bin/gcc\n"
    assert run(host, "readlink /usr/bin/gcc /usr/bin/gcc-13").stdout == "gcc-13\nx86_64-linux-gnu-gcc-13\n"
    version = run(host, "gcc --version").stdout.splitlines()
    assert version[0] == "gcc (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0"
    assert version[1] == "Copyright (C) 2023 Free Software Foundation, Inc."
    if shutil.which("gcc"):  # the rest of the banner reads as this machine's gcc does
        assert version[2:] == real("gcc", "--version").stdout.splitlines()[2:]
    for name in ("cc", "g++", "c++", "cpp", "gcc-13", "x86_64-linux-gnu-gcc-13"):
        assert run(host, f"{name} --version").stdout.splitlines()[0] == f"{name} (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0"
    assert run(host, "gcc -dumpversion; cc -dumpfullversion").stdout == "13\n13.3.0\n"
    verbose = run(host, "gcc -v")
    assert verbose.stdout == "" and verbose.stderr.splitlines()[-1] == GCC_13
    assert "--with-pkgversion='Ubuntu 13.3.0-6ubuntu2~24.04'" in verbose.stderr
    assert "/13/lto-wrapper" in verbose.stderr
    for other in ("gcc-12", "g++-12", "x86_64-linux-gnu-gcc-12", "gcc-14"):  # this machine's versions stay out
        assert run(host, f"command -v {other}", ok=False).exit_code == 1, other
    # dpkg knows the same compiler.
    packages = installed(host, "'gcc*' 'g++*' 'cpp*' build-essential")
    assert {name: packages.get(name) for name in ("gcc", "gcc-13", "g++-13", "cpp-13", "build-essential")} == {
        "gcc": "4:13.2.0-7ubuntu1", "gcc-13": "13.3.0-6ubuntu2~24.04", "g++-13": "13.3.0-6ubuntu2~24.04",
        "cpp-13": "13.3.0-6ubuntu2~24.04", "build-essential": "12.10ubuntu1"}
    owner = run(host, "dpkg -S /usr/bin/gcc /usr/bin/x86_64-linux-gnu-gcc-13")
    assert owner.stdout == "gcc: /usr/bin/gcc\ngcc-13-x86-64-linux-gnu: /usr/bin/x86_64-linux-gnu-gcc-13\n"
    assert owner.stderr == ""


@pytest.mark.skipif(shutil.which("gcc") is None, reason="compiling needs a gcc on this machine")
def test_the_sims_gcc_compiles_with_this_machines_compiler(host):
    run(host, "printf '#include <stdio.h>\\nint main(void) { puts(\"built\"); return 0; }\\n' > /tmp/hello.c")
    assert run(host, "gcc -O2 -o /tmp/hello /tmp/hello.c && /tmp/hello").stdout == "built\n"


def test_a_sim_built_with_another_gcc_has_that_one(tmp_path):
    host = SimHost(build_sim(tmp_path / "gpu", gcc="gcc version 14.2.0 (Ubuntu 14.2.0-4ubuntu2~24.04) ").host_spec())
    assert run(host, "gcc --version").stdout.splitlines()[0] == "gcc (Ubuntu 14.2.0-4ubuntu2~24.04) 14.2.0"
    assert run(host, "gcc-14 -dumpversion").stdout == "14\n"
    assert run(host, "command -v gcc-13", ok=False).exit_code == 1
    packages = installed(host, "'gcc*'")
    assert packages.get("gcc-14") == "14.2.0-4ubuntu2~24.04" and "gcc-13" not in packages
    with pytest.raises(ValueError, match=r"gcc 'the newest' names no compiler version: give the last line of `gcc -v`"):
        build_sim(tmp_path / "bad", gcc="the newest")
    assert not (tmp_path / "bad").exists()


def test_dpkg_lists_the_sims_ubuntu_packages_and_none_of_this_machines(host, sim):
    packages = installed(host)
    assert packages["base-files"] == "13ubuntu10.3"  # Ubuntu 24.04.3, as /etc/os-release says
    assert "PRETTY_NAME=\"Ubuntu 24.04.3 LTS\"" in run(host, "cat /etc/os-release").stdout
    kernel = sim.state()["kernel"]["release"]
    assert packages[f"linux-image-{kernel}"] == "6.8.0-60.63"  # uname -r and -v: 6.8.0-60-generic, #63
    # The driver and the toolkits came from runfiles, which dpkg does not know, as on such a host.
    listing = run(host, "dpkg -l").stdout
    assert not re.search(r"(?im)^ii\s+\S*(cuda|nvidia)", listing)
    assert run(host, "dpkg -S /usr/local/cuda-12.8/bin/nvcc", ok=False).exit_code == 1
    assert packages["bash"] == "5.2.21-2ubuntu4" and packages["dpkg"] == "1.22.6ubuntu6.1"
    assert run(host, "dpkg --version").stdout.startswith("Debian 'dpkg' package management program version 1.22.6 ")
    if shutil.which("dpkg-query"):  # this machine's own packages are not the sim's
        mine = dict(line.split(" ", 1) for line in real("dpkg-query", "-W -f='${Package} ${Version}\\n'").stdout
                    .splitlines())
        only_mine = sorted(set(mine) - set(packages))[:5]
        assert only_mine and all(run(host, f"dpkg -s {p}", ok=False).exit_code == 1 for p in only_mine), only_mine
    assert "/usr/bin/gcc-13" in run(host, "dpkg -L gcc-13").stdout.splitlines()


@pytest.mark.parametrize("command", ["dpkg -i /tmp/x.deb", "dpkg --configure -a", "dpkg -r gcc",
                                     "dpkg-query --admindir=/var/lib/dpkg -l", "dpkg --root=/ -l"])
def test_dpkg_refuses_what_would_change_or_leave_the_sims_database(host, command):
    r = run(host, command, ok=False)
    prog = command.split()[0]
    assert r.exit_code == 2 and r.stdout == ""
    assert re.fullmatch(rf"{prog}: error: \S+ is not answered on this simulated host: its {prog} reads the package "
                        r"database \([^)]*\) and installs, removes or configures nothing; software comes to this "
                        r"host from runfiles and pip\n", r.stderr), r.stderr


def test_tmp_and_var_tmp_are_world_writable_and_sticky(host):
    assert run(host, "stat -c '%a %n' /tmp /var/tmp").stdout == "1777 /tmp\n1777 /var/tmp\n"


def test_each_script_of_the_venv_is_what_its_record_says(sim):
    """A sim's venv is a copy of a template built elsewhere, its scripts' shebangs rewritten: their RECORD lines
    held the template's hash and size, so two sims built from two caches differed, and pip's record told that
    the scripts had been changed after their install."""
    import base64
    import csv
    import hashlib

    venv = sim.root / "opt" / "venv"
    checked = 0
    for record in venv.glob("lib/python*/site-packages/*.dist-info/RECORD"):
        for row in csv.reader(record.read_text().splitlines()):
            script = record.parent.parent / row[0]  # relative to site-packages
            if row[0].startswith("../../../bin/") and len(row) == 3 and row[1] and script.is_file():
                data = script.read_bytes()
                digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                assert row[1:] == [f"sha256={digest}", str(len(data))], (record, row)
                checked += 1
    assert checked >= 3  # pip, pip3, pip3.11 at least


def test_a_sim_built_from_a_cache_at_a_long_path_has_the_same_scripts(sim, tmp_path):
    """pip writes a /bin/sh wrapper for an interpreter whose path is too long for a shebang; a template venv
    cached at such a path gave its sims a `pip` whose first line was `#!$0`, which runs nothing."""
    far = build_sim(tmp_path / "gpu", cache_dir=tmp_path / ("a-cache-" + "x" * 120))
    for script in ("pip", "pip3", "vllm"):
        ours, theirs = (s.root / "opt" / "venv" / "bin" / script for s in (far, sim))
        assert ours.read_bytes() == theirs.read_bytes(), script
    r = SimHost(far.host_spec()).run("/opt/venv/bin/pip --version", timeout=120)
    assert r.ok and r.stdout.startswith("pip "), r.stderr


def test_the_sims_name_is_the_same_everywhere_a_program_reads_it(sim):
    """`hostname` said the sim's name while /etc/hostname, read-only from this machine, said this machine's."""
    named = SimHost(sim.host_spec("gpu-a7"))
    said = run(named, "hostname; cat /etc/hostname; uname -n; /opt/venv/bin/python -c 'import socket; "
                      "print(socket.gethostname())'").stdout.split()
    assert said == ["gpu-a7"] * 4, said


def test_df_mount_and_findmnt_name_one_device_per_filesystem_and_never_the_sims_folder(host, sim):
    """`df` named /dev/nvme0n1p5 for /usr/local while `mount` and `findmnt` listed this machine's mounts, and
    findmnt showed the folder the sim lies in."""
    df = {row[-1]: row[0] for row in df_rows(run(host, "df -P").stdout)}
    mounted = {}
    for line in run(host, "mount").stdout.splitlines():
        source, _, rest = line.partition(" on ")
        mounted[rest.split(" type ")[0]] = source
    assert {t: s for t, s in mounted.items() if s.startswith("/dev/")} == df
    on = df_rows(run(host, "df -P /usr/local/cuda-12.8").stdout)[0][0]
    assert run(host, "findmnt -n -o SOURCE --target /usr/local/cuda-12.8").stdout.strip() == on
    tree = run(host, "findmnt").stdout
    assert all(d in tree for d in df.values())
    for text in (tree, run(host, "mount").stdout, run(host, "findmnt -D").stdout):
        assert str(sim.root) not in text and "/dev/vda" not in text


def test_a_toolkit_installed_takes_its_room_from_its_filesystem_and_gives_it_back_when_removed(tmp_path):
    """A played model saw /usr/local keep exactly its free space after a 6.7 GiB toolkit was installed there."""
    built = build_sim(tmp_path / "gpu", free_space_mb={"/usr/local": 10000})
    box = SimHost(built.host_spec())

    def usr_local() -> tuple[int, int, int]:
        size, used, avail = df_rows(run(box, "df -m /usr/local").stdout)[0][1:4]
        return int(size), int(used), int(avail)

    before = usr_local()
    run(box, "sh /srv/nvidia/compute/cuda/13.0.1/local_installers/cuda_13.0.1_*_linux.run --silent --toolkit")
    size, used, avail = usr_local()
    assert size == before[0] and before[2] - avail == 7_152_115_712 // 2**20 and used - before[1] == before[2] - avail
    assert run(box, "df -m /tmp").stdout == run(SimHost(build_sim(tmp_path / "other").host_spec()), "df -m /tmp").stdout
    run(box, "rm -rf /usr/local/cuda-13.0")
    assert usr_local() == before


# --------------------------------------------------------------------------- the machine the benchmark runs on


def test_benchmarks_follow_the_gpus_and_a_model_that_does_not_fit_fails_to_load(tmp_path):
    """A 4x H100 box serves what fits its 320 GB, decodes at its own speed, and cannot load the story's 1T model."""
    from tools.sim.files.simcommands import serving
    from tools.sim.files.simhost.machine import gpu_table

    hopper = build_sim(tmp_path / "h100x4", gpu_model="H100 80GB HBM3", gpus=4, bench_noise=0)
    small = build_sim(tmp_path / "l40s", gpu_model="L40S", gpus=1, bench_noise=0)
    h, s = SimHost(hopper.host_spec("h")), SimHost(small.host_spec("s"))
    served = {name: json.loads(run(host, "/opt/venv/bin/python -c 'import torch, json; "
                                         "print(json.dumps(torch._sim_host.state()[\"bench\"]))'").stdout)["model"]
              for name, host in (("h", h), ("s", s))}
    assert served == {"h": "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "s": "Qwen/Qwen3-8B"}
    figures = {}
    for name, host in (("h", h), ("s", s)):
        out = run(host, SERVING).stdout
        figures[name] = float(re.search(r"^Output token throughput \(tok/s\):\s+([\d.]+)", out, re.M).group(1))
        assert served[name] in out  # the model it measured is the one it serves
    reference = serving.step_seconds(*serving.REFERENCE)
    want = {name: round(89.5 * reference / serving.step_seconds(key, n, served[name]), 2)
            for name, key, n in (("h", "H100 80GB HBM3", 4), ("s", "L40S", 1))}
    assert figures == pytest.approx(want, abs=0.02) and figures["h"] > 89.5 > figures["s"], figures
    too_big = run(h, "/opt/venv/bin/python -m sglang.bench_one_batch --model-path moonshotai/Kimi-K2.5", ok=False)
    assert too_big.exit_code != 0 and "torch.OutOfMemoryError: CUDA out of memory" in too_big.stderr, too_big.stderr
    assert "Load weight begin. avail mem=79.04 GB" in too_big.stderr and "GPU 0 has a total capacity of 79.65 GiB" \
        in too_big.stderr and "/.sim/" not in too_big.stderr  # what a loading server says, and nothing of the sim
    assert serving.served_model_for(gpu_table(8)) == "moonshotai/Kimi-K2.5"  # the story's box keeps its own


def test_a_server_told_its_tensor_parallel_size_and_quantization_loads_what_fits_there(tmp_path):
    """A played model asked two L40S to benchmark Llama-3.1-70B (131.5 GiB in BF16): it tried --tp-size 2
    --quantization fp8, which fits 90 GB on a real box, and the sim ignored both and failed as before."""
    from tools.sim.files.simcommands import serving

    box = SimHost(build_sim(tmp_path / "l40s", gpu_model="L40S", gpus=2, bench_noise=0).host_spec("s"))
    bench = "/opt/venv/bin/python -m sglang.bench_one_batch --model-path meta-llama/Llama-3.1-70B-Instruct "

    def decode(extra):
        out = run(box, bench + extra, ok=False)
        found = re.search(r"Decode\.  median latency: [\d.]+ s, median throughput:\s+([\d.]+)", out.stdout)
        return out, float(found.group(1)) if found else None

    for extra in ("", "--tp-size 2", "--tp-size 1 --quantization fp8"):  # BF16 on both; 68 GiB on one 46 GiB card
        out, tok_s = decode(extra)
        assert tok_s is None and "torch.OutOfMemoryError: CUDA out of memory" in out.stderr, (extra, out)
    out, both = decode("--tp-size 2 --quantization fp8")
    assert out.exit_code == 0 and both == pytest.approx(
        89.5 * serving.step_seconds(*serving.REFERENCE)
        / serving.step_seconds("L40S", 2, "meta-llama/Llama-3.1-70B-Instruct", "fp8"), rel=0.01), out
    # a checkpoint made for the method is needed; more GPUs than the host has is torch's device error
    out, _ = decode("--quantization awq")
    assert out.exit_code != 0 and "ValueError: Cannot find the config file for awq" in out.stderr, out
    assert "/.sim/" not in out.stderr and "simcommands" not in out.stderr, out.stderr  # a traceback of sglang's
    out, _ = decode("--tp-size 4 --quantization fp8")
    assert out.exit_code != 0 and "invalid device ordinal" in out.stderr, out
    # an 8-bit checkpoint stays as it is: fp8 on the FP8 Qwen changes neither its size nor its speed
    assert serving.weights_gib("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "fp8") == \
        serving.weights_gib("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8")
    # one of two GPUs serves the small model, slower than both
    small = "/opt/venv/bin/python -m sglang.bench_one_batch --model-path Qwen/Qwen3-8B "
    rates = [float(re.search(r"median throughput:\s+([\d.]+)", run(box, small + tp).stdout).group(1))
             for tp in ("--tp-size 1", "--tp-size 2")]
    assert rates[0] < rates[1], rates


def test_nvidia_smi_dmon_samples_each_gpu_as_the_real_one_prints_it(host, sim):
    out = run(host, "nvidia-smi dmon -c 2 -d 1").stdout.splitlines()
    assert out[0].split() == ["#", "gpu", "pwr", "gtemp", "mtemp", "sm", "mem", "enc", "dec", "jpg", "ofa", "mclk",
                              "pclk"] and out[1].startswith("# Idx")
    rows = [line.split() for line in out[2:]]
    assert [r[0] for r in rows] == [str(i) for i in range(8)] * 2  # every GPU, each sample
    assert all(r[3] == "-" and r[4:10] == ["0"] * 6 for r in rows)  # GDDR7 has no memory temperature; idle
    assert [line.split()[0] for line in run(host, "nvidia-smi dmon -c 1 -i 3").stdout.splitlines()[2:]] == ["3"]
    bad = run(host, "nvidia-smi dmon -x", ok=False)
    assert bad.exit_code == 2 and "Option -x is not recognized" in bad.stdout


def test_du_counts_a_toolkit_at_the_size_df_takes_for_it(tmp_path):
    """A played model found du giving 132K for the toolkit where df counted gigabytes used."""
    from tools.sim.files.simhost import toolkit

    sim = build_sim(tmp_path / "gpu", toolkits=("12.8", "13.0"))
    host = SimHost(sim.host_spec("gpu"))
    need = {key: toolkit.RELEASES[key].install_need_bytes for key in ("12.8", "13.0")}
    listed = run(host, "du -s -B1 /usr/local/cuda-12.8 /usr/local/cuda-13.0").stdout
    sizes = dict(reversed(line.split("\t")) for line in listed.splitlines())
    for key in ("12.8", "13.0"):
        assert int(sizes[f"/usr/local/cuda-{key}"]) >= need[key], sizes
    human = run(host, "du -shc /usr/local/cuda-12.8 /usr/local/cuda-13.0").stdout.splitlines()
    assert human[0].split("\t") == ["7.1G", "/usr/local/cuda-12.8"] and human[-1].split("\t")[1] == "total", human
    assert run(host, "cd /usr/local && du -s cuda-13.0").stdout.split("\t")[0] == str(
        -(-(need["13.0"] + int(run(host, "/.host/usr/bin/du -s -B1 /usr/local/cuda-13.0").stdout.split()[0]))
          // 1024))
    assert "/usr/local" in run(host, "du --inodes -s /usr/local").stdout  # what it does not read goes to du as is
