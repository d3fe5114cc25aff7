"""What runs inside a simulated GPU host.

Standard library only. These modules are copied into every sim root (ROOT/.sim/lib/simhost) and
run by the sim's own commands: nvidia-smi, nvcc, df, lsmod, uname, the CUDA runfile, the fake
torch and the benchmarks. None of them may need this repository, so the same commands work
through the local transport and over SSH with nothing but PATH set.
"""
