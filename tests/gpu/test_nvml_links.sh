#!/usr/bin/env bash
# test_nvml_links.sh: tests/gpu/nvml_links.py (the GPU machine's probe of NVML's NVLink routes) against the fake libnvidia-ml.so.1: two GPUs joined by 4 links whose state only the field answers (as a one-GPU H100 VM did for the function), then an NVSwitch; its ctypes layouts read what the fake (and cupti/topo.c) declare.
source "$(dirname "$0")/../lib.sh"
NVML="$FAKES/nvml/libnvidia-ml.so.1"
[ -e "$NVML" ] || { fail "missing $NVML (build first)"; exit 1; }
command -v python3 >/dev/null || { skip "nvml_links: no python3"; exit 0; }
probe() { env NVML_LIB="$NVML" "$@" python3 "$ROOT/tests/gpu/nvml_links.py" >"$T/out" 2>&1; echo $? >"$T/rc"; }

probe FAKE_NVML_TOPO=pair:4 FAKE_NVML_STATE=field FAKE_CUDA_PCI_DOMAIN=2
check_eq "pair, state by the field only: exit 0" 0 "$(cat "$T/rc")"
check "pair: two GPUs enumerated, named, at their PCI addresses" grep -q "^gpu 1: Fake GPU 1 at 00000002:19:00.0$" "$T/out"
check "pair: link 0 of GPU 0, every route read" grep -Eq "^  link  0: state api=Not Supported field165=1 type=gpu remote=00000002:19:00.0\[2:19:0\] version api=6 field166=type1:6 caps=p2p,p2p_atomics tx_counter=ok$" "$T/out"
check "pair: link 4 inactive (field 0), NVML gives no remote for it" grep -Eq "^  link  4: state api=Not Supported field165=0 type=Not Supported remote=Not Supported" "$T/out"
check "pair: the summary says which route saw the links" grep -q "^gpu 0: active by nvmlDeviceGetNvLinkState none; by field 165 \[0, 1, 2, 3\]; NVSwitch-connected links (field 147) Not Supported; links (field 91) Not Supported$" "$T/out"

probe FAKE_NVML_TOPO=switch:18 FAKE_NVML_NOVERSION=1 FAKE_NVML_NVLINK_VERSION=7
check "switch: both routes see 18 links" grep -q "^gpu 1: active by nvmlDeviceGetNvLinkState \[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17\]; by field 165 \[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17\];" "$T/out"
check "switch: remote type switch, version from the field only" grep -Eq "^  link 17: state api=1 field165=1 type=switch remote=00000000:80:00.0\[0:80:0\] version api=Not Supported field166=type1:7 " "$T/out"

probe NVML_LIB=/nonexistent/libnvidia-ml.so.1
check_eq "no NVML: exit 1" 1 "$(cat "$T/rc")"
check "no NVML: one line says so" grep -q "^nvml_links: libnvidia-ml.so.1 not loadable" "$T/out"
exit $((FAILED > 0))
