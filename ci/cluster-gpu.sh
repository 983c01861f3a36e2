#!/bin/sh
# The cluster check on every GPU of one machine (POSIX sh), for a GPU machine when one is at hand:
#
#   ci/cluster-gpu.sh [OUT_DIR]          (run from the repository, in an environment with envcheck and a CUDA torch)
#
# 1. `envcheck verify` (the smoke suite, CUDA checks on every visible GPU), report in OUT_DIR/verify.json;
# 2. `torchrun --nproc-per-node=<GPUs> -m envcheck.cluster`: one rank per GPU (LOCAL_RANK picks it), each
#    snapshotting and running the suite on its GPU, then an exactly verified all-reduce, a barrier and an
#    all-reduce bandwidth test on Gloo and on NCCL; rank 0's report in OUT_DIR/cluster.json;
# 3. a short summary on stdout: each step's exit code, the NCCL and Gloo lines, the groups.
#
# Every step runs under coreutils' `timeout` (the cluster check also under its own --timeout), so the
# whole script ends within about 5 minutes. Exit code: the worst of the steps (0 clean, 1 findings,
# 2 usage or input error, 124 a step ran past its limit).
#
# Environment: PYTHON (default: python3), ENVCHECK_CLUSTER_TIMEOUT (default 180 s).
set -u

OUT=${1:-envcheck-cluster-gpu}
PY=${PYTHON:-python3}
T=${ENVCHECK_CLUSTER_TIMEOUT:-180}
mkdir -p "$OUT" || exit 2

if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "cluster-gpu.sh: no nvidia-smi: not a GPU machine" >&2
    exit 2
fi
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "$GPUS" -lt 1 ]; then
    echo "cluster-gpu.sh: nvidia-smi lists no GPU" >&2
    exit 2
fi
echo "GPUs: $GPUS"
nvidia-smi -L
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version() if torch.cuda.is_available() else None)'

worst=0
note() { [ "$1" -gt "$worst" ] && worst=$1; }

start=$(date +%s)
timeout 150 "$PY" -m envcheck verify --format json --output "$OUT/verify.json" --timeout 120 2>"$OUT/verify.err"
rc=$?
note $rc
echo "verify: exit $rc in $(( $(date +%s) - start )) s"
tail -3 "$OUT/verify.err"

start=$(date +%s)
timeout $((T + 60)) "$PY" -m torch.distributed.run --nproc-per-node="$GPUS" --standalone \
    -m envcheck.cluster --format json --output "$OUT/cluster.json" --timeout "$T" >"$OUT/cluster.log" 2>&1
rc=$?
note $rc
echo "cluster ($GPUS ranks): exit $rc in $(( $(date +%s) - start )) s"

"$PY" - "$OUT/cluster.json" <<'EOF'
import json, sys
try:
    report = json.load(open(sys.argv[1], encoding="utf-8"))
except (OSError, ValueError) as e:
    print(f"no report: {e}")
    sys.exit(0)
print(report["title"], "->", report["result"])
for g in report.get("groups", []):
    print("  group", g["name"], "identical" if g["identical_to_base"] else "differs")
for f in report["findings"]:
    if f["rule"].startswith("CLUSTER-") or f["severity"] != "info":
        print(f"  {f['severity']:7} {f['rule']} {f['machine'] or ''} {f['message'][:300]}")
EOF
tail -5 "$OUT/cluster.log"
exit "$worst"
