/* convert.c: CUPTI activity records (CUDA 12.x and 13.x layouts) -> nvlprof GPU records; pure, no I/O. */
#include <string.h> /* memset, memcpy, strncmp */

#include "cupti_int.h"

/*
 * Layouts: the structs named below are the ones cupti_activity.h of CUDA 13.0 (CUPTI_API_VERSION
 * 130001) defines for these kinds. CUPTI only appends fields within a major version, so reading
 * the prefix of a newer 13.x record is safe. CUDA 12.4's CUPTI (API version 22) produces
 * Kernel9, Memcpy5, MemcpyPtoP4, UnifiedMemoryCounter2, NvLink4 and Device5 for the same kinds:
 * every field read below sits at the same offset with the same size there (measured from the
 * 12.4 headers of Debian's libcupti-dev 12.4.127; the asserts below pin those offsets against
 * the headers we build with), and the activity kind values we enable are the same. So one
 * reader serves both; cupti.c refuses other versions (NOTE CUPTI_VERSION).
 */
#include <stddef.h> /* offsetof */
#define AT(T, f, off) _Static_assert(offsetof(T, f) == (off), #T "." #f " moved from CUDA 12.4's offset");
AT(CUpti_ActivityKernel10, start, 16) AT(CUpti_ActivityKernel10, end, 24)
AT(CUpti_ActivityKernel10, deviceId, 40) AT(CUpti_ActivityKernel10, contextId, 44)
AT(CUpti_ActivityKernel10, streamId, 48) AT(CUpti_ActivityKernel10, gridX, 52)
AT(CUpti_ActivityKernel10, blockZ, 72) AT(CUpti_ActivityKernel10, correlationId, 92)
AT(CUpti_ActivityKernel10, name, 104)
AT(CUpti_ActivityMemcpy6, copyKind, 4) AT(CUpti_ActivityMemcpy6, flags, 7)
AT(CUpti_ActivityMemcpy6, bytes, 8) AT(CUpti_ActivityMemcpy6, start, 16)
AT(CUpti_ActivityMemcpy6, deviceId, 32) AT(CUpti_ActivityMemcpy6, streamId, 40)
AT(CUpti_ActivityMemcpy6, correlationId, 44)
AT(CUpti_ActivityMemcpyPtoP4, srcDeviceId, 44) AT(CUpti_ActivityMemcpyPtoP4, dstDeviceId, 52)
AT(CUpti_ActivityMemcpyPtoP4, correlationId, 60)
AT(CUpti_ActivityUnifiedMemoryCounter3, value, 8) AT(CUpti_ActivityUnifiedMemoryCounter3, address, 32)
AT(CUpti_ActivityUnifiedMemoryCounter3, srcId, 40) AT(CUpti_ActivityUnifiedMemoryCounter3, streamId, 48)
AT(CUpti_ActivityUnifiedMemoryCounter3, flags, 56)
AT(CUpti_ActivityNvLink4, idDev0, 16) AT(CUpti_ActivityNvLink4, bandwidth, 120)
AT(CUpti_ActivityNvLink4, nvswitchConnected, 128)
AT(CUpti_ActivityDevice5, globalMemorySize, 16) AT(CUpti_ActivityDevice5, id, 112)
AT(CUpti_ActivityDevice5, uuid, 120) AT(CUpti_ActivityDevice5, name, 136)
AT(CUpti_ActivityKernel10, graphNodeId, 144) AT(CUpti_ActivityKernel10, graphId, 156)
AT(CUpti_ActivityMemcpy6, graphNodeId, 64) AT(CUpti_ActivityMemcpy6, graphId, 72)
AT(CUpti_ActivityMemcpyPtoP4, graphId, 80)
#undef AT

int nvlp_cupti_kind_is_ours(int kind)
{
	switch (kind) {
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_MEMCPY:
	case CUPTI_ACTIVITY_KIND_MEMCPY2:
	case CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER:
	case CUPTI_ACTIVITY_KIND_NVLINK:
	case CUPTI_ACTIVITY_KIND_DEVICE:
		return 1;
	default:
		return 0;
	}
}

static uint64_t dur(uint64_t start, uint64_t end)
{
	return end > start ? end - start : 0;
}

/* Device ordinal as a signed field: CUPTI uses ~0u for "none". */
static uint64_t dev_field(uint32_t id)
{
	return id == 0xffffffffu ? (uint64_t)-1 : (uint64_t)id;
}

/* For a MEMCPY record (single device): which ends are device memory, by copy kind. */
static void memcpy_ends(unsigned copy_kind, uint32_t dev, uint64_t *src, uint64_t *dst)
{
	uint64_t d = dev_field(dev), host = (uint64_t)-1;
	switch (copy_kind) {
	case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
	case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
		*src = host, *dst = d;
		break;
	case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
	case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
		*src = d, *dst = host;
		break;
	case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
		*src = host, *dst = host;
		break;
	default: /* DtoD, AtoA, AtoD, DtoA, PtoP reported on one device */
		*src = d, *dst = d;
		break;
	}
}

static int devmap_find(const struct nvlp_cupti_devmap *map, const uint8_t *uuid)
{
	if (!map)
		return -1;
	for (int i = 0; i < map->n; i++)
		if (memcmp(map->dev[i].uuid, uuid, 16) == 0)
			return map->dev[i].id;
	return -1;
}

static void devmap_add(struct nvlp_cupti_devmap *map, const uint8_t *uuid, int id)
{
	if (!map || devmap_find(map, uuid) >= 0 || map->n >= NVLP_CUPTI_MAX_DEV)
		return;
	memcpy(map->dev[map->n].uuid, uuid, 16);
	map->dev[map->n].id = id;
	map->n++;
}

/* NVLink port list -> bit mask of port numbers (ports are -1 terminated/filled). */
static uint64_t port_mask(const int8_t *ports)
{
	uint64_t m = 0;
	for (int i = 0; i < CUPTI_MAX_NVLINK_PORTS; i++)
		if (ports[i] >= 0 && ports[i] < 64)
			m |= 1ull << ports[i];
	return m;
}

/* NVLINK endpoint: GPU -> (device id via UUID, first 8 UUID bytes); NPU -> (-1, domain:index). */
static void nvlink_end(int type, const uint8_t *id, const struct nvlp_cupti_devmap *map,
                       uint64_t *dev, uint64_t *ident)
{
	if (type == CUPTI_DEV_TYPE_GPU) {
		*dev = (uint64_t)(int64_t)devmap_find(map, id);
		*ident = nvlp_be64(id);
	} else {
		uint32_t index, domain;
		memcpy(&index, id, 4);
		memcpy(&domain, id + 4, 4);
		*dev = (uint64_t)-1;
		*ident = (uint64_t)domain << 32 | index;
	}
}

int nvlp_cupti_graph_node(const CUpti_Activity *a, const union nvlp_cupti_rec *rec, unsigned kind,
                           struct nvlp_rec_gpugraph *out)
{
	uint64_t graph = 0, node = 0;
	switch (a->kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
		graph = ((const CUpti_ActivityKernel10 *)a)->graphId;
		node = ((const CUpti_ActivityKernel10 *)a)->graphNodeId;
		break;
	case CUPTI_ACTIVITY_KIND_MEMCPY:
		graph = ((const CUpti_ActivityMemcpy6 *)a)->graphId;
		node = ((const CUpti_ActivityMemcpy6 *)a)->graphNodeId;
		break;
	case CUPTI_ACTIVITY_KIND_MEMCPY2:
		graph = ((const CUpti_ActivityMemcpyPtoP4 *)a)->graphId;
		node = ((const CUpti_ActivityMemcpyPtoP4 *)a)->graphNodeId;
		break;
	default:
		return 0;
	}
	if (!graph)
		return 0;
	memset(out, 0, sizeof *out);
	out->kind = kind;
	out->graph_id = graph;
	out->node_id = node;
	if (kind == NVLP_K_KERNEL) {
		const struct nvlp_rec_kernel *k = &rec->kernel;
		out->correlation = k->correlation, out->start = k->start, out->dur = k->dur;
		out->device = k->device, out->stream = k->stream, out->flags = k->flags;
	} else {
		const struct nvlp_rec_gpucopy *c = &rec->gpucopy;
		out->correlation = c->correlation, out->start = c->start, out->dur = c->dur;
		out->device = c->device, out->stream = c->stream, out->flags = c->flags;
	}
	return 1;
}

/* One converter per activity kind family: static inline so the per-record switch below
 * compiles to the same straight-line code as one function. */
static inline unsigned conv_kernel(const CUpti_Activity *a, const struct nvlp_cupti_clock *clk,
                                   union nvlp_cupti_rec *out, const char **text)
{
	const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)a;
	struct nvlp_rec_kernel *o = &out->kernel;
	o->start = nvlp_cupti_ts(clk, k->start);
	o->dur = dur(k->start, k->end);
	o->device = dev_field(k->deviceId);
	o->context = k->contextId;
	o->stream = k->streamId;
	o->correlation = k->correlationId;
	o->grid_x = (uint32_t)k->gridX;
	o->grid_y = (uint32_t)k->gridY;
	o->grid_z = (uint32_t)k->gridZ;
	o->block_x = (uint32_t)k->blockX;
	o->block_y = (uint32_t)k->blockY;
	o->block_z = (uint32_t)k->blockZ;
	/* nccl_call stays 0: the analyzer matches NCCL kernels to calls by stream and
	 * order. */
	o->flags = (k->name && strncmp(k->name, "nccl", 4) == 0) ? 1 : 0;
	*text = k->name;
	return NVLP_K_KERNEL;
}

static inline unsigned conv_memcpy(const CUpti_Activity *a, const struct nvlp_cupti_clock *clk,
                                   union nvlp_cupti_rec *out)
{
	const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)a;
	struct nvlp_rec_gpucopy *o = &out->gpucopy;
	o->start = nvlp_cupti_ts(clk, m->start);
	o->dur = dur(m->start, m->end);
	o->copy_kind = m->copyKind;
	o->src_kind = m->srcKind;
	o->dst_kind = m->dstKind;
	o->device = dev_field(m->deviceId);
	memcpy_ends(m->copyKind, m->deviceId, &o->src_device, &o->dst_device);
	o->context = m->contextId;
	o->stream = m->streamId;
	o->bytes = m->bytes;
	o->correlation = m->correlationId;
	o->flags = m->flags; /* CUpti_ActivityFlag (bit 0: async) */
	return NVLP_K_GPUCOPY;
}

static inline unsigned conv_memcpy2(const CUpti_Activity *a, const struct nvlp_cupti_clock *clk,
                                    union nvlp_cupti_rec *out)
{
	const CUpti_ActivityMemcpyPtoP4 *m = (const CUpti_ActivityMemcpyPtoP4 *)a;
	struct nvlp_rec_gpucopy *o = &out->gpucopy;
	o->start = nvlp_cupti_ts(clk, m->start);
	o->dur = dur(m->start, m->end);
	o->copy_kind = m->copyKind;
	o->src_kind = m->srcKind;
	o->dst_kind = m->dstKind;
	o->device = dev_field(m->deviceId);
	o->src_device = dev_field(m->srcDeviceId);
	o->dst_device = dev_field(m->dstDeviceId);
	o->context = m->contextId;
	o->stream = m->streamId;
	o->bytes = m->bytes;
	o->correlation = m->correlationId;
	/* bit 8 marks a MEMCPY2 (peer) record; the low bits are CUPTI's flags */
	o->flags = (uint64_t)m->flags | NVLP_GPUCOPY_F_PEER;
	return NVLP_K_GPUCOPY;
}

static inline unsigned conv_um(const CUpti_Activity *a, const struct nvlp_cupti_clock *clk,
                               union nvlp_cupti_rec *out)
{
	const CUpti_ActivityUnifiedMemoryCounter3 *u =
	    (const CUpti_ActivityUnifiedMemoryCounter3 *)a;
	struct nvlp_rec_um *o = &out->um;
	o->counter = u->counterKind;
	o->start = nvlp_cupti_ts(clk, u->start);
	o->dur = dur(u->start, u->end);
	o->address = u->address;
	o->value = u->value;
	o->src = dev_field(u->srcId);
	o->dst = dev_field(u->dstId);
	o->flags = u->flags;
	o->stream = u->streamId;
	o->process = u->processId;
	return NVLP_K_UM;
}

static inline unsigned conv_nvlink(const CUpti_Activity *a, struct nvlp_cupti_devmap *map,
                                   union nvlp_cupti_rec *out)
{
	const CUpti_ActivityNvLink4 *n = (const CUpti_ActivityNvLink4 *)a;
	struct nvlp_rec_nvlink *o = &out->nvlink;
	o->version = n->nvlinkVersion;
	o->type0 = n->typeDev0;
	o->type1 = n->typeDev1;
	nvlink_end(n->typeDev0, (const uint8_t *)&n->idDev0, map, &o->dev0, &o->id0);
	nvlink_end(n->typeDev1, (const uint8_t *)&n->idDev1, map, &o->dev1, &o->id1);
	o->bandwidth = n->bandwidth;
	o->links = n->physicalNvLinkCount;
	o->ports0 = port_mask(n->portDev0);
	o->ports1 = port_mask(n->portDev1);
	/* bit 16: connected through NVSwitch; low bits: CUpti_LinkFlag */
	o->flags = (uint64_t)n->flag | (n->nvswitchConnected ? NVLP_NVLINK_F_NVSWITCH : 0);
	return NVLP_K_NVLINK;
}

static inline unsigned conv_device(const CUpti_Activity *a, struct nvlp_cupti_devmap *map,
                                   union nvlp_cupti_rec *out, const char **text)
{
	const CUpti_ActivityDevice5 *d = (const CUpti_ActivityDevice5 *)a;
	struct nvlp_rec_device *o = &out->device;
	const uint8_t *uuid = (const uint8_t *)&d->uuid;
	o->device = dev_field(d->id);
	/* pci_*: not in the record; cupti.c fills them from the driver */
	o->uuid_hi = nvlp_be64(uuid);
	o->uuid_lo = nvlp_be64(uuid + 8);
	o->sm_count = d->numMultiprocessors;
	o->global_mem = d->globalMemorySize;
	o->cc_major = d->computeCapabilityMajor;
	o->cc_minor = d->computeCapabilityMinor;
	devmap_add(map, uuid, (int)d->id);
	*text = d->name;
	return NVLP_K_DEVICE;
}

unsigned nvlp_cupti_convert(const CUpti_Activity *a, const struct nvlp_cupti_clock *clk,
                            struct nvlp_cupti_devmap *map, union nvlp_cupti_rec *out,
                            const char **text)
{
	memset(out, 0, sizeof *out);
	*text = NULL;
	switch (a->kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
		return conv_kernel(a, clk, out, text);
	case CUPTI_ACTIVITY_KIND_MEMCPY:
		return conv_memcpy(a, clk, out);
	case CUPTI_ACTIVITY_KIND_MEMCPY2:
		return conv_memcpy2(a, clk, out);
	case CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER:
		return conv_um(a, clk, out);
	case CUPTI_ACTIVITY_KIND_NVLINK:
		return conv_nvlink(a, map, out);
	case CUPTI_ACTIVITY_KIND_DEVICE:
		return conv_device(a, map, out, text);
	default:
		return 0;
	}
}
