#!/bin/sh
# hostid_rank.sh SCRIPT ARGS...: python3 SCRIPT with NCCL_HOSTID set per local rank before the interpreter
# starts, as a container runtime gives each pod its own host name (torchrun --no-python runs this per rank).
NCCL_HOSTID=share-rank${LOCAL_RANK:-0}
export NCCL_HOSTID
exec python3 "$@"
