/* test_cupti_convert.c: synthetic CUPTI 13.0 records -> KERNEL/GPUCOPY/UM/NVLINK/DEVICE. */
#include <string.h> /* memset */

#include "check.h"
#include "cupti_int.h"

static const struct nvlp_cupti_clock ident = {1, 0};

static void kernel(void)
{
	CUpti_ActivityKernel10 k;
	memset(&k, 0, sizeof k);
	k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	k.start = 5000, k.end = 7500, k.deviceId = 1, k.contextId = 3, k.streamId = 13;
	k.correlationId = 99, k.gridX = 132, k.gridY = 2, k.gridZ = 1, k.blockX = 640, k.blockY = 1;
	k.blockZ = 1, k.name = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL";
	union nvlp_cupti_rec r;
	const char *text;
	unsigned kind = nvlp_cupti_convert((CUpti_Activity *)&k, &ident, NULL, &r, &text);
	CHECK(kind == NVLP_K_KERNEL, "kernel: kind");
	CHECK(r.kernel.start == 5000 && r.kernel.dur == 2500, "kernel: start, dur");
	CHECK(r.kernel.device == 1 && r.kernel.context == 3 && r.kernel.stream == 13 &&
	          r.kernel.correlation == 99,
	      "kernel: device, context, stream, correlation");
	CHECK(r.kernel.grid_x == 132 && r.kernel.grid_y == 2 && r.kernel.block_x == 640,
	      "kernel: grid, block");
	CHECK(r.kernel.flags == 1 && r.kernel.nccl_call == 0 && text == k.name,
	      "kernel: NCCL flag, name handed back for interning, nccl_call 0");
	k.name = "gemm", k.end = 4000; /* end before start: clock hiccup */
	nvlp_cupti_convert((CUpti_Activity *)&k, &ident, NULL, &r, &text);
	CHECK(r.kernel.flags == 0 && r.kernel.dur == 0,
	      "kernel: other name unflagged, no negative dur");
	k.name = NULL;
	nvlp_cupti_convert((CUpti_Activity *)&k, &ident, NULL, &r, &text);
	CHECK(text == NULL && r.kernel.flags == 0, "kernel: NULL name");
	/* converted clock: mono = cupti + offset */
	struct nvlp_cupti_clock off = {0, -1000};
	k.start = 5000, k.end = 6000;
	nvlp_cupti_convert((CUpti_Activity *)&k, &off, NULL, &r, &text);
	CHECK(r.kernel.start == 4000 && r.kernel.dur == 1000, "kernel: clock offset applied");
}

static void memcpys(void)
{
	CUpti_ActivityMemcpy6 m;
	memset(&m, 0, sizeof m);
	m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
	m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
	m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, m.flags = CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC;
	m.bytes = 1 << 26, m.start = 100, m.end = 300, m.deviceId = 1, m.contextId = 2;
	m.streamId = 9, m.correlationId = 17;
	union nvlp_cupti_rec r;
	const char *text;
	unsigned kind = nvlp_cupti_convert((CUpti_Activity *)&m, &ident, NULL, &r, &text);
	const struct nvlp_rec_gpucopy *c = &r.gpucopy;
	CHECK(kind == NVLP_K_GPUCOPY, "memcpy: kind");
	CHECK(c->bytes == 1 << 26 && c->start == 100 && c->dur == 200 && c->stream == 9 &&
	          c->correlation == 17 && c->context == 2,
	      "memcpy: bytes, times, stream, correlation");
	CHECK(c->copy_kind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD && c->src_kind == 2 &&
	          c->dst_kind == 3,
	      "memcpy: copy and memory kinds");
	CHECK((int64_t)c->src_device == -1 && c->dst_device == 1 && c->device == 1,
	      "memcpy HtoD: host -> device 1");
	CHECK(c->flags == CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC, "memcpy: flags, not peer");
	m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
	nvlp_cupti_convert((CUpti_Activity *)&m, &ident, NULL, &r, &text);
	CHECK(c->src_device == 1 && (int64_t)c->dst_device == -1, "memcpy DtoH: device 1 -> host");

	CUpti_ActivityMemcpyPtoP4 p;
	memset(&p, 0, sizeof p);
	p.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
	p.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP, p.bytes = 256ull << 20, p.start = 1000;
	p.end = 691000, p.deviceId = 0, p.srcDeviceId = 0, p.dstDeviceId = 1, p.streamId = 7;
	p.correlationId = 5;
	kind = nvlp_cupti_convert((CUpti_Activity *)&p, &ident, NULL, &r, &text);
	CHECK(kind == NVLP_K_GPUCOPY && c->copy_kind == 10 && c->bytes == 256ull << 20 &&
	          c->dur == 690000,
	      "memcpy2: peer copy kind, bytes, dur");
	CHECK(c->src_device == 0 && c->dst_device == 1 && (c->flags & 0x100),
	      "memcpy2: src/dst devices, peer flag");
}

static void um(void)
{
	CUpti_ActivityUnifiedMemoryCounter3 u;
	memset(&u, 0, sizeof u);
	u.kind = CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER;
	u.counterKind = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOD;
	u.value = 2 << 20, u.start = 10, u.end = 90, u.address = 0x7f1234560000ull, u.srcId = 0;
	u.dstId = 1, u.streamId = 4, u.processId = 4242, u.flags = 3;
	union nvlp_cupti_rec r;
	const char *text;
	unsigned kind = nvlp_cupti_convert((CUpti_Activity *)&u, &ident, NULL, &r, &text);
	CHECK(kind == NVLP_K_UM && r.um.counter == 8 && r.um.value == 2 << 20 && r.um.dur == 80,
	      "um: counter, value, dur");
	CHECK(r.um.address == 0x7f1234560000ull && r.um.src == 0 && r.um.dst == 1 &&
	          r.um.stream == 4 && r.um.process == 4242 && r.um.flags == 3,
	      "um: address, src, dst, stream, process, flags");
	u.counterKind = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT;
	u.srcId = 0xffffffffu, u.end = 0;
	nvlp_cupti_convert((CUpti_Activity *)&u, &ident, NULL, &r, &text);
	CHECK(r.um.counter == 3 && (int64_t)r.um.src == -1 && r.um.dur == 0,
	      "um: CPU fault, no source device, instantaneous");
}

static void topology(void)
{
	struct nvlp_cupti_devmap map;
	memset(&map, 0, sizeof map);
	CUpti_ActivityDevice5 d;
	union nvlp_cupti_rec r;
	const char *text;
	for (int i = 0; i < 2; i++) {
		memset(&d, 0, sizeof d);
		d.kind = CUPTI_ACTIVITY_KIND_DEVICE;
		d.id = (uint32_t)i, d.numMultiprocessors = 132,
		d.globalMemorySize = 150754820096ull;
		d.computeCapabilityMajor = 9, d.computeCapabilityMinor = 0, d.name = "NVIDIA H200";
		for (int b = 0; b < 16; b++)
			d.uuid.bytes[b] = (char)(0x10 * (i + 1) + b);
		unsigned kind = nvlp_cupti_convert((CUpti_Activity *)&d, &ident, &map, &r, &text);
		CHECK(kind == NVLP_K_DEVICE && r.device.device == (uint64_t)i &&
		          r.device.sm_count == 132 && r.device.global_mem == 150754820096ull &&
		          r.device.cc_major == 9 && r.device.cc_minor == 0,
		      "device %d: id, SMs, memory, compute capability", i);
		CHECK(text && !strcmp(text, "NVIDIA H200"), "device %d: name for the blob", i);
	}
	CHECK(r.device.uuid_hi == 0x2021222324252627ull &&
	          r.device.uuid_lo == 0x28292a2b2c2d2e2full,
	      "device: uuid as two big-endian halves");
	CHECK(map.n == 2, "device: UUID map filled (%d)", map.n);

	CUpti_ActivityNvLink4 n;
	memset(&n, 0, sizeof n);
	n.kind = CUPTI_ACTIVITY_KIND_NVLINK;
	n.nvlinkVersion = 4, n.typeDev0 = CUPTI_DEV_TYPE_GPU, n.typeDev1 = CUPTI_DEV_TYPE_GPU;
	for (int b = 0; b < 16; b++) {
		n.idDev0.uuidDev.bytes[b] = (char)(0x20 + b); /* device 1 */
		n.idDev1.uuidDev.bytes[b] = (char)(0x10 + b); /* device 0 */
	}
	memset(n.portDev0, -1, sizeof n.portDev0);
	memset(n.portDev1, -1, sizeof n.portDev1);
	n.portDev0[0] = 2, n.portDev0[1] = 17, n.portDev1[0] = 0;
	n.physicalNvLinkCount = 18, n.bandwidth = 26562500000ull, n.flag = 1;
	n.nvswitchConnected = 1;
	unsigned kind = nvlp_cupti_convert((CUpti_Activity *)&n, &ident, &map, &r, &text);
	const struct nvlp_rec_nvlink *l = &r.nvlink;
	CHECK(kind == NVLP_K_NVLINK && l->version == 4 && l->links == 18 &&
	          l->bandwidth == 26562500000ull,
	      "nvlink: version, links, bandwidth");
	CHECK(l->dev0 == 1 && l->dev1 == 0, "nvlink: endpoints mapped to device ids by UUID");
	CHECK(l->ports0 == ((1ull << 2) | (1ull << 17)) && l->ports1 == 1,
	      "nvlink: port lists as bit masks");
	CHECK(l->flags == (1 | 1ull << 16) && l->id0 == 0x2021222324252627ull,
	      "nvlink: flags with NVSwitch bit, id = UUID head");
	n.typeDev1 = CUPTI_DEV_TYPE_NPU;
	memset(&n.idDev1, 0, sizeof n.idDev1);
	n.idDev1.npu.index = 3, n.idDev1.npu.domainId = 7;
	nvlp_cupti_convert((CUpti_Activity *)&n, &ident, NULL, &r, &text);
	CHECK((int64_t)l->dev1 == -1 && l->id1 == (7ull << 32 | 3) && (int64_t)l->dev0 == -1,
	      "nvlink: NPU endpoint as domain:index; unknown GPU without a map is -1");
}

static void others(void)
{
	CUpti_ActivityAPI a;
	memset(&a, 0, sizeof a);
	a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
	union nvlp_cupti_rec r;
	const char *text;
	CHECK(nvlp_cupti_convert((CUpti_Activity *)&a, &ident, NULL, &r, &text) == 0,
	      "runtime API record is not converted");
	CHECK(nvlp_cupti_kind_is_ours(CUPTI_ACTIVITY_KIND_MEMCPY2) &&
	          !nvlp_cupti_kind_is_ours(CUPTI_ACTIVITY_KIND_RUNTIME),
	      "kind_is_ours");
	struct nvlp_cupti_clock c = {0, 123};
	CHECK(nvlp_cupti_ts(&c, 0) == 0 && nvlp_cupti_ts(&c, 1000) == 1123,
	      "clock: 0 stays 0 (no time), others shifted");
}

/* Work a graph launch ran: a GPUGRAPH record beside its KERNEL / GPUCOPY; none otherwise. */
static void graph_nodes(void)
{
	CUpti_ActivityKernel10 k;
	memset(&k, 0, sizeof k);
	k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	k.start = 1000, k.end = 1800, k.deviceId = 0, k.streamId = 7, k.correlationId = 41;
	k.name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
	union nvlp_cupti_rec r;
	const char *text;
	struct nvlp_rec_gpugraph g;
	unsigned kind = nvlp_cupti_convert((CUpti_Activity *)&k, &ident, NULL, &r, &text);
	CHECK(!nvlp_cupti_graph_node((CUpti_Activity *)&k, &r, kind, &g), "graph: eager kernel: none");
	k.graphId = 5, k.graphNodeId = 0x100000003ull;
	kind = nvlp_cupti_convert((CUpti_Activity *)&k, &ident, NULL, &r, &text);
	CHECK(nvlp_cupti_graph_node((CUpti_Activity *)&k, &r, kind, &g) && g.kind == NVLP_K_KERNEL &&
	          g.graph_id == 5 && g.node_id == 0x100000003ull && g.correlation == 41 &&
	          g.start == 1000 && g.dur == 800 && g.stream == 7 && (g.flags & NVLP_KERNEL_F_NCCL),
	      "graph: kernel node: graph, node, launch correlation, time, NCCL flag");
	CUpti_ActivityMemcpy6 m;
	memset(&m, 0, sizeof m);
	m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
	m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, m.bytes = 64, m.start = 10, m.end = 30;
	m.correlationId = 42, m.graphId = 6, m.graphNodeId = 9;
	kind = nvlp_cupti_convert((CUpti_Activity *)&m, &ident, NULL, &r, &text);
	CHECK(nvlp_cupti_graph_node((CUpti_Activity *)&m, &r, kind, &g) && g.kind == NVLP_K_GPUCOPY &&
	          g.graph_id == 6 && g.node_id == 9 && g.correlation == 42 && g.dur == 20,
	      "graph: copy node");
}

int main(void)
{
	kernel();
	graph_nodes();
	memcpys();
	um();
	topology();
	others();
	return CHECK_DONE();
}
