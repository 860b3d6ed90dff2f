#!/usr/bin/env bash
# fetch_cuda12.sh DIR: Debian trixie's CUDA 12.4 runtime and CUPTI (libcudart12, libcupti12) and NCCL 2.22 (libnccl2) unpacked into DIR/lib, without touching the system's apt sources (~12 s, needs the archive).
set -eu
D=$(mkdir -p "$1" && cd "$1" && pwd)
mkdir -p "$D/lists/partial" "$D/debs" "$D/root"
uri=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${uri:-http://deb.debian.org/debian} trixie main contrib non-free" >"$D/side.list"
A=(-o "Dir::Etc::sourcelist=$D/side.list" -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$D/lists")
apt-get "${A[@]}" update >/dev/null
(cd "$D/debs" && apt-get "${A[@]}" download libcudart12 libcupti12 ${NCCL:+libnccl2} >/dev/null)
for f in "$D"/debs/*.deb; do dpkg -x "$f" "$D/root"; done
mkdir -p "$D/lib"
cp -L "$D"/root/usr/lib/x86_64-linux-gnu/lib{cudart.so.12,cupti.so.12} "$D/lib/"
[ -z "${NCCL:-}" ] || cp -L "$D/root/usr/lib/x86_64-linux-gnu/libnccl.so.2" "$D/lib/"
ls "$D/lib"
