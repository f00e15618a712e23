"""Stand-in all_reduce_perf (gpufleet.node tests): the real output format, with a bus bandwidth that saturates
at the figure in /etc/gpufleet-emulator/nccl_busbw (default 231.0 GB/s, an 8x A100 NVSwitch node)."""
import argparse
import socket
import sys

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def size(text):
    text = text.upper()
    unit = text[-1] if text[-1] in UNITS else ""
    return int(float(text[:-1] if unit else text) * UNITS[unit])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("-b", "--minbytes", type=size, default=32 << 20)
    parser.add_argument("-e", "--maxbytes", type=size, default=32 << 20)
    parser.add_argument("-f", "--stepfactor", type=int, default=2)
    parser.add_argument("-g", "--ngpus", type=int, default=1)
    args = parser.parse_args()
    try:
        with open("/etc/gpufleet-emulator/nccl_busbw") as stream:
            peak = float(stream.read().strip())
    except OSError:
        peak = 231.0
    n = args.ngpus
    print("# nThread 1 nGpus %d minBytes %d maxBytes %d step: %d(factor) warmup iters: 5 iters: 20 agg iters: 1 "
          "validation: 1 graph: 0" % (n, args.minbytes, args.maxbytes, args.stepfactor))
    print("#\n# Using devices")
    for rank in range(n):
        print("#  Rank %2d Group  0 Pid   4242 on %10s device %2d [0x%02x] NVIDIA A100-SXM4-80GB"
              % (rank, socket.gethostname(), rank, 7 + rank))
    print("#\n#                                                              out-of-place                       in-place          ")
    print("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong")
    print("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       ")
    factor = 2.0 * (n - 1) / n if n > 1 else 1.0
    sizes, current = [], args.minbytes
    while current <= args.maxbytes:
        sizes.append(current)
        current *= args.stepfactor
    total = 0.0
    for nbytes in sizes:
        busbw = peak * nbytes / (nbytes + (8 << 20)) if n > 1 else 0.0
        algbw = busbw / factor if n > 1 else nbytes / 1e9 / 1e-5
        time_us = nbytes / (algbw * 1e9) * 1e6 if algbw else 0.0
        total += busbw
        row = "%12d  %12d     float     sum      -1  %7.1f  %6.2f  %6.2f      0  %7.1f  %6.2f  %6.2f      0"
        print(row % (nbytes, nbytes // 4, time_us, algbw, busbw, time_us, algbw, busbw))
    print("# Out of bounds values : 0 OK")
    print("# Avg bus bandwidth    : %g " % round(total / len(sizes), 3))
    print("#")
    return 0


if __name__ == "__main__":
    sys.exit(main())
