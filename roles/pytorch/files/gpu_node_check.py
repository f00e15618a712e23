# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu-node-check: can this node train with PyTorch DDP? Installed by gpufleet.node.pytorch.

Checks that torch imports, is built for the expected CUDA release, sees every GPU, has NCCL, multiplies
matrices correctly on every GPU, and runs a DDP all-reduce across all local GPUs (NCCL) through torchrun,
reporting its bus bandwidth. Without GPUs (or with a CPU build of torch) the DDP path runs on the CPU with gloo.
Several nodes join one all-reduce with --nnodes/--node-rank/--rdzv-endpoint.

Prints a readable summary, or JSON with --json. Exit status 0 when every check passes, 1 otherwise.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

DEFAULT_CONFIG = "/etc/gpufleet/gpu-node-check.json"


def check(name, ok, detail, skipped=False):
    return {"name": name, "ok": bool(ok), "skipped": skipped, "detail": detail}


def local_checks(torch, expect):
    """Everything that runs in this process: import, CUDA build, devices, NCCL, matmul on every device."""
    results = [check("torch imports", True, "torch %s" % torch.__version__)]
    want_cuda = expect.get("cuda_version") or ""
    built = torch.version.cuda or ""
    if want_cuda:
        results.append(check("torch built for CUDA %s" % want_cuda, built == want_cuda,
                             "torch.version.cuda is %s" % (built or "None (a CPU build)")))
    else:
        results.append(check("torch is a CPU build", not built, "torch.version.cuda is %s" % (built or "None")))
    gpus = 0
    if want_cuda:
        available = torch.cuda.is_available()
        gpus = torch.cuda.device_count() if available else 0
        expected = expect.get("gpu_count")
        results.append(check("CUDA available", available, "%d devices visible" % gpus))
        if expected is not None:
            results.append(check("device count equals gpu_facts", gpus == expected,
                                 "torch sees %d, gpu_facts counted %d" % (gpus, expected)))
        nccl = torch.distributed.is_available() and torch.distributed.is_nccl_available()
        version = ".".join(str(p) for p in torch.cuda.nccl.version()) if nccl and available else None
        results.append(check("NCCL available", nccl, "NCCL %s" % version if version else "not in this build"))
    devices = ["cuda:%d" % i for i in range(gpus)] or ["cpu"]
    generator = torch.Generator().manual_seed(1234)
    a = torch.randn(512, 512, generator=generator, dtype=torch.float64)
    b = torch.randn(512, 512, generator=generator, dtype=torch.float64)
    reference = a @ b
    for device in devices:
        try:
            product = (a.float().to(device) @ b.float().to(device)).double().cpu()
            error = float((product - reference).abs().max())
            results.append(check("matmul on %s" % device, error < 1e-2, "max abs error %.2e" % error))
        except Exception as exc:  # a lost GPU raises here: report it as a failed check
            results.append(check("matmul on %s" % device, False, "%s: %s" % (type(exc).__name__, exc)))
    return results, gpus


def worker(size_mb, iterations, result_path):
    """One DDP rank (started by torchrun): all-reduce a tensor, check the sum, time it."""
    import torch
    import torch.distributed as dist

    backend = os.environ["GPUFLEET_BACKEND"]
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if backend == "nccl" else torch.device("cpu")
    if backend == "nccl":
        torch.cuda.set_device(device)
    dist.init_process_group(backend=backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    elements = size_mb * (1 << 20) // 4
    tensor = torch.full((elements,), float(rank + 1), device=device)
    dist.all_reduce(tensor)                              # warm-up, and the correctness check
    expected = world * (world + 1) / 2
    correct = bool(torch.all(tensor == expected).item())
    dist.barrier()
    if backend == "nccl":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _iteration in range(iterations):
        dist.all_reduce(tensor)
    if backend == "nccl":
        torch.cuda.synchronize()
    elapsed = (time.perf_counter() - start) / iterations
    algbw = elements * 4 / elapsed / 1e9
    busbw = algbw * 2 * (world - 1) / world if world > 1 else 0.0
    summary = torch.tensor([1.0 if correct else 0.0, busbw], dtype=torch.float64, device=device)
    dist.all_reduce(summary, op=dist.ReduceOp.MIN)      # the slowest rank and any wrong sum decide
    if rank == 0:
        with open(result_path, "w") as stream:
            json.dump({"backend": backend, "world_size": world, "correct": summary[0].item() == 1.0,
                       "size_mb": size_mb, "time_ms": round(elapsed * 1000, 3),
                       "busbw_gbps": round(summary[1].item(), 3)}, stream)
    dist.destroy_process_group()


def ddp_check(args, gpus):
    """Runs the DDP all-reduce through torchrun; returns the check and the measurement."""
    backend = "nccl" if gpus > 0 else "gloo"
    nproc = gpus if gpus > 0 else args.cpu_procs
    env = dict(os.environ, GPUFLEET_BACKEND=backend, OMP_NUM_THREADS="1")
    if args.socket_ifname:
        env.update(GLOO_SOCKET_IFNAME=args.socket_ifname, NCCL_SOCKET_IFNAME=args.socket_ifname)
    with tempfile.TemporaryDirectory(prefix="gpu-node-check-") as scratch:
        result_path = os.path.join(scratch, "result.json")
        command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(args.nnodes),
                   "--nproc-per-node", str(nproc), "--node-rank", str(args.node_rank)]
        # The address the workers reach this node's agent at; without it torchrun resolves the hostname,
        # and waits forever where that name does not resolve. One node: loopback.
        local_addr = args.local_addr or ("127.0.0.1" if args.nnodes == 1 else "")
        if local_addr:
            command += ["--local-addr", local_addr]
        if args.nnodes > 1:
            command += ["--rdzv-backend", "c10d", "--rdzv-endpoint", args.rdzv_endpoint, "--rdzv-id", args.rdzv_id]
        else:
            command += ["--standalone"]
        command += [os.path.abspath(__file__), "--worker", "--size-mb", str(args.size_mb),
                    "--iterations", str(args.iterations), "--result", result_path]
        try:
            run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.timeout, check=False)
        except subprocess.TimeoutExpired:
            return check("DDP all-reduce (%s)" % backend, False, "torchrun did not finish in %d s" % args.timeout), None
        if run.returncode != 0:
            tail = (run.stderr or run.stdout).strip().splitlines()[-3:]
            return check("DDP all-reduce (%s)" % backend, False, "torchrun failed: %s" % " | ".join(tail)), None
        if not os.path.exists(result_path):     # ranks of other nodes: rank 0 reports
            return check("DDP all-reduce (%s)" % backend, True, "joined as node %d of %d" % (args.node_rank, args.nnodes)), {
                "backend": backend, "nnodes": args.nnodes, "node_rank": args.node_rank, "nproc_per_node": nproc}
        with open(result_path) as stream:
            measured = json.load(stream)
    measured.update(nnodes=args.nnodes, node_rank=args.node_rank, nproc_per_node=nproc)
    detail = "%d ranks on %d node(s), %d MB: %s GB/s bus bandwidth%s" % (
        measured["world_size"], args.nnodes, args.size_mb, measured["busbw_gbps"],
        "" if measured["correct"] else ", WRONG SUM")
    return check("DDP all-reduce (%s)" % backend, measured["correct"], detail), measured


def summary(report):
    lines = ["gpu-node-check on %s: %s" % (report["host"], "PASS" if report["ok"] else "FAIL")]
    for item in report["checks"]:
        mark = "skip" if item["skipped"] else ("ok" if item["ok"] else "FAIL")
        lines.append("  [%-4s] %-34s %s" % (mark, item["name"], item["detail"]))
    return "\n".join(lines)


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="gpu-node-check", description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--config", default=DEFAULT_CONFIG, help="expected CUDA release and GPU count (JSON)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the summary")
    parser.add_argument("--ddp-only", action="store_true", help="only the DDP all-reduce (multi-node smoke test)")
    parser.add_argument("--skip-ddp", action="store_true", help="no DDP all-reduce")
    parser.add_argument("--nnodes", type=int, default=1)
    parser.add_argument("--node-rank", type=int, default=0)
    parser.add_argument("--rdzv-endpoint", default="127.0.0.1:29400")
    parser.add_argument("--rdzv-id", default="gpu-node-check")
    parser.add_argument("--cpu-procs", type=int, default=2, help="gloo ranks on a node without GPUs")
    parser.add_argument("--size-mb", type=int, default=64)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--socket-ifname", default="", help="network interface for gloo and NCCL's sockets")
    parser.add_argument("--local-addr", default="",
                        help="this node's address for the other nodes (default: 127.0.0.1 alone, else the hostname)")
    parser.add_argument("--timeout", type=int, default=300)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        worker(args.size_mb, args.iterations, args.result)
        return 0
    expect = {}
    if os.path.exists(args.config):
        with open(args.config) as stream:
            expect = json.load(stream)
    report = {"host": os.uname().nodename, "checks": [], "ddp": None}
    try:
        import torch
    except Exception as exc:
        report["checks"].append(check("torch imports", False, "%s: %s" % (type(exc).__name__, exc)))
        torch = None
    gpus = 0
    if torch is not None:
        report["torch"] = torch.__version__
        report["torch_cuda"] = torch.version.cuda
        if not args.ddp_only:
            checks, gpus = local_checks(torch, expect)
            report["checks"].extend(checks)
        elif expect.get("cuda_version") and torch.cuda.is_available():
            gpus = torch.cuda.device_count()
        if not args.skip_ddp:
            ddp, measured = ddp_check(args, gpus)
            report["checks"].append(ddp)
            report["ddp"] = measured
    report["backend"] = "nccl" if gpus else "gloo"
    report["ok"] = all(item["ok"] or item["skipped"] for item in report["checks"])
    print(json.dumps(report, indent=2, sort_keys=True) if args.json else summary(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
