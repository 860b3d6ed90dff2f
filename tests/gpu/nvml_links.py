#!/usr/bin/env python3
"""nvml_links.py: what NVML answers about every GPU's NVLinks, through each route that nvlprof's
topology without CUPTI (NVLPROF_CUPTI=lazy, cupti/topo.c) reads, so a GPU machine shows which of
them work there.

Per GPU and link (0..17): the state through nvmlDeviceGetNvLinkState and through the field
NVML_FI_DEV_NVLINK_GET_STATE (165, as NCCL reads it on sm_90+), the remote's type
(nvmlDeviceGetNvLinkRemoteDeviceType) and PCI address, the version (function and field 166), the
capabilities (P2P, sysmem, P2P atomics, sysmem atomics) and whether the link's traffic counter
(field 138) answers. Then one line per GPU: the links each route calls active, the links NVML
counts to NVSwitches (field 147) and in all (field 91). No nvml.h, no
pynvml: ctypes on libnvidia-ml.so.1 (NVML_LIB overrides the name).

    python3 tests/gpu/nvml_links.py            # prints; exit 0 unless NVML cannot be loaded
"""
import ctypes
import os
import sys

LINKS = 18
FI_STATE, FI_VERSION, FI_NVL_TX = 165, 166, 138
CAPS = ("p2p", "sysmem", "p2p_atomics", "sysmem_atomics")
TYPES = {0: "gpu", 1: "ibmnpu", 2: "switch", 255: "unknown"}


class PciInfo(ctypes.Structure):
    _fields_ = [("busIdLegacy", ctypes.c_char * 16), ("domain", ctypes.c_uint), ("bus", ctypes.c_uint),
                ("device", ctypes.c_uint), ("pciDeviceId", ctypes.c_uint), ("pciSubSystemId", ctypes.c_uint),
                ("busId", ctypes.c_char * 32)]


class Value(ctypes.Union):
    _fields_ = [("d", ctypes.c_double), ("ui", ctypes.c_uint), ("ul", ctypes.c_ulong),
                ("ull", ctypes.c_ulonglong), ("sll", ctypes.c_longlong)]


class FieldValue(ctypes.Structure):
    _fields_ = [("fieldId", ctypes.c_uint), ("scopeId", ctypes.c_uint), ("timestamp", ctypes.c_longlong),
                ("latencyUsec", ctypes.c_longlong), ("valueType", ctypes.c_int), ("nvmlReturn", ctypes.c_int),
                ("value", Value)]


def main():
    try:
        nv = ctypes.CDLL(os.environ.get("NVML_LIB", "libnvidia-ml.so.1"))
    except OSError as e:
        print(f"nvml_links: libnvidia-ml.so.1 not loadable: {e}")
        return 1
    nv.nvmlErrorString.restype = ctypes.c_char_p

    def err(r):
        return nv.nvmlErrorString(r).decode() if r else "ok"

    def fn(name):
        return getattr(nv, name, None)

    r = nv.nvmlInit_v2()
    if r:
        print(f"nvml_links: nvmlInit_v2: {err(r)}")
        return 1
    n = ctypes.c_uint(0)
    r = nv.nvmlDeviceGetCount_v2(ctypes.byref(n))
    print(f"nvml_links: {n.value} GPU(s) ({err(r)})")

    def field(h, fid, link, raw=False):
        fv = FieldValue(fieldId=fid, scopeId=link)
        r = nv.nvmlDeviceGetFieldValues(h, 1, ctypes.byref(fv))
        r = r or fv.nvmlReturn
        if r:
            return None, err(r)
        # raw: the value type too, and the 8 bytes as unsigned (the encoding is not documented)
        return ((fv.valueType, fv.value.ull) if raw else fv.value.ui), "ok"

    def call(name, h, *args):
        f = fn(name)
        if f is None:
            return None, "absent"
        out = ctypes.c_uint(0)
        r = f(h, *args, ctypes.byref(out))
        return (out.value, "ok") if not r else (None, err(r))

    for i in range(n.value):
        h = ctypes.c_void_p()
        r = nv.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h))
        if r:
            print(f"gpu {i}: nvmlDeviceGetHandleByIndex_v2: {err(r)}")
            continue
        name = ctypes.create_string_buffer(96)
        r = nv.nvmlDeviceGetName(h, name, 96)
        pci = PciInfo()
        rp = nv.nvmlDeviceGetPciInfo_v3(h, ctypes.byref(pci))
        print(f"gpu {i}: {name.value.decode() if not r else err(r)} at "
              f"{pci.busId.decode() if not rp else err(rp)}")
        active = {"api": [], "field": []}
        for link in range(LINKS):
            s_api, e_api = call("nvmlDeviceGetNvLinkState", h, link)
            s_fld, e_fld = field(h, FI_STATE, link)
            v_api, e_vapi = call("nvmlDeviceGetNvLinkVersion", h, link)
            v_fld, e_vfld = field(h, FI_VERSION, link, raw=True)
            ty, e_ty = call("nvmlDeviceGetNvLinkRemoteDeviceType", h, link)
            rp = PciInfo()
            f = fn("nvmlDeviceGetNvLinkRemotePciInfo_v2")
            r = f(h, link, ctypes.byref(rp)) if f else -1
            # the bus id and the numbers (cupti/topo.c matches on the numbers)
            remote = (f"{rp.busId.decode()}[{rp.domain:x}:{rp.bus:x}:{rp.device:x}]" if r == 0
                      else (err(r) if r > 0 else "absent"))
            caps = [c for k, c in enumerate(CAPS) if call("nvmlDeviceGetNvLinkCapability", h, link, k)[0]]
            tx, e_tx = field(h, FI_NVL_TX, link)
            if s_api == 1:
                active["api"].append(link)
            if s_fld == 1:
                active["field"].append(link)
            print(f"  link {link:2d}: state api={s_api if s_api is not None else e_api} "
                  f"field165={s_fld if s_fld is not None else e_fld} "
                  f"type={TYPES.get(ty, ty) if ty is not None else e_ty} remote={remote} "
                  f"version api={v_api if v_api is not None else e_vapi} "
                  f"field166={'type%d:%d' % v_fld if v_fld is not None else e_vfld} "
                  f"caps={','.join(caps) or '-'} "
                  f"tx_counter={'ok' if tx is not None else e_tx}")
        sw, e_sw = field(h, 147, 0)  # NVML_FI_DEV_NVSWITCH_CONNECTED_LINK_COUNT
        nl, e_nl = field(h, 91, 0)  # NVML_FI_DEV_NVLINK_LINK_COUNT
        print(f"gpu {i}: active by nvmlDeviceGetNvLinkState {active['api'] or 'none'}; "
              f"by field 165 {active['field'] or 'none'}; "
              f"NVSwitch-connected links (field 147) {sw if sw is not None else e_sw}; "
              f"links (field 91) {nl if nl is not None else e_nl}")
    nv.nvmlShutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
