/* format.c: metadata tables generated from nvlp_format.h's X-macros, plus the format's hash and crc. */
#include <stddef.h> /* size_t */
#include <stdint.h> /* uint64_t */
#include <string.h> /* strcmp */

#include "nvlp_trace.h"

/* Per kind: the field names and types, generated from the one list in nvlp_format.h. */
#define F_NAME(type, field) #field,
#define F_TYPE(type, field) NVLP_FT_##type,
#define R_TABLES(NAME, name, blob, FIELDS)                                                         \
	static const char *const fields_##name[] = {FIELDS(F_NAME)};                               \
	static const unsigned char types_##name[] = {FIELDS(F_TYPE)};                              \
	_Static_assert(sizeof(struct nvlp_rec_##name) / sizeof(uint64_t) <= NVLP_MAX_FIELDS,       \
		       "too many fields in " #name);                                               \
	_Static_assert(sizeof(fields_##name) / sizeof(fields_##name[0]) ==                         \
			       sizeof(struct nvlp_rec_##name) / sizeof(uint64_t),                  \
		       "field table of " #name);
NVLP_RECORD_KINDS(R_TABLES)
#undef R_TABLES

static const struct nvlp_kind_info kind_table[NVLP_K_COUNT] = {
#define R_INFO(NAME, name, blob, FIELDS)                                                           \
	[NVLP_K_##NAME] = {#name, blob, sizeof(fields_##name) / sizeof(fields_##name[0]),          \
			   fields_##name, types_##name},
	NVLP_RECORD_KINDS(R_INFO)
#undef R_INFO
};

const struct nvlp_kind_info *nvlp_kind_info(unsigned kind)
{
	if (kind == NVLP_K_NONE || kind >= NVLP_K_COUNT)
		return NULL;
	return &kind_table[kind];
}

static const char *const nccl_fn_names[] = {
#define X_NAME(E, sym, cls) #sym,
	NVLP_NCCL_FUNCS(X_NAME)
#undef X_NAME
};
static const char nccl_fn_classes[] = {
#define X_CLS(E, sym, cls) (#cls)[0],
	NVLP_NCCL_FUNCS(X_CLS)
#undef X_CLS
};
static const char *const cuda_fn_names[] = {
#define X_NAME(E, sym) #sym,
	NVLP_CUDA_FUNCS(X_NAME)
#undef X_NAME
};
static const char *const note_names[] = {
#define X_NAME(E, name) #name,
	NVLP_NOTE_CODES(X_NAME)
#undef X_NAME
};

const char *nvlp_nccl_fn_name(unsigned fn)
{
	return fn < NVLP_NCCL_FN_COUNT ? nccl_fn_names[fn] : "?";
}

char nvlp_nccl_fn_class(unsigned fn)
{
	return fn < NVLP_NCCL_FN_COUNT ? nccl_fn_classes[fn] : '?';
}

const char *nvlp_cuda_fn_name(unsigned fn)
{
	return fn < NVLP_CUDA_FN_COUNT ? cuda_fn_names[fn] : "?";
}

const char *nvlp_note_name(unsigned code)
{
	return code < NVLP_NOTE_CODE_COUNT ? note_names[code] : "?";
}

/* The coded-field notes of nvlp_format.h, looked up by kind and field name. */
static const struct {
	unsigned kind;
	const char *field, *meaning;
} coded[] = {
#define C_ROW(KIND, field, meaning) {NVLP_K_##KIND, #field, meaning},
	NVLP_CODED_FIELDS(C_ROW)
#undef C_ROW
};

const char *nvlp_coded_field(unsigned kind, const char *field)
{
	for (size_t i = 0; i < sizeof coded / sizeof coded[0]; i++)
		if (coded[i].kind == kind && !strcmp(coded[i].field, field))
			return coded[i].meaning;
	return NULL;
}

static const struct {
	unsigned fn;
	const char *aux[2];
} nccl_aux[] = {
#define A_ROW(E, aux, aux2) {NVLP_NCCL_##E, {aux, aux2}},
	NVLP_NCCL_AUX(A_ROW)
#undef A_ROW
};

const char *nvlp_nccl_aux_name(unsigned fn, int which)
{
	for (size_t i = 0; i < sizeof nccl_aux / sizeof nccl_aux[0]; i++)
		if (nccl_aux[i].fn == fn)
			return nccl_aux[i].aux[which != 0];
	return "";
}

/* ncclDataType_t of nccl.h 2.28 (values are ABI: ncclInt8 = 0 ... ncclFloat8e5m2 = 11). Kept as a
 * local table so the trace code does not depend on nccl.h. */
static const struct {
	const char *name;
	unsigned size;
} nccl_dtypes[] = {
	{"int8", 1}, {"uint8", 1}, {"int32", 4}, {"uint32", 4}, {"int64", 8},     {"uint64", 8},
	{"f16", 2},  {"f32", 4},   {"f64", 8},   {"bf16", 2},   {"f8e4m3", 1}, {"f8e5m2", 1},
};
#define N_DTYPES (int)(sizeof(nccl_dtypes) / sizeof(nccl_dtypes[0]))

unsigned nvlp_nccl_dtype_size(int dtype)
{
	return dtype >= 0 && dtype < N_DTYPES ? nccl_dtypes[dtype].size : 0;
}

const char *nvlp_nccl_dtype_name(int dtype)
{
	return dtype >= 0 && dtype < N_DTYPES ? nccl_dtypes[dtype].name : "?";
}

/* ncclRedOp_t of nccl.h (ABI: ncclSum = 0 ... ncclAvg = 4; from ncclNumOps on, ops the job made
 * with ncclRedOpCreatePreMulSum) */
const char *nvlp_nccl_op_name(int op)
{
	static const char *const ops[] = {"sum", "prod", "max", "min", "avg"};
	return op < 0 ? "?" : op < (int)(sizeof ops / sizeof ops[0]) ? ops[op] : "custom";
}

/* FNV-1a; the seed is folded into the offset basis so that seed 0 gives standard FNV-1a. */
uint64_t nvlp_hash64(const void *data, size_t len, uint64_t seed)
{
	const unsigned char *p = data;
	uint64_t h = 0xcbf29ce484222325ull ^ seed;
	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* IEEE 802.3 crc32 (reflected, poly 0xEDB88320): a constant table, so there is no init race. */
static const uint32_t crc_table[256] = {
	0x00000000u, 0x77073096u, 0xee0e612cu, 0x990951bau, 0x076dc419u, 0x706af48fu,
	0xe963a535u, 0x9e6495a3u, 0x0edb8832u, 0x79dcb8a4u, 0xe0d5e91eu, 0x97d2d988u,
	0x09b64c2bu, 0x7eb17cbdu, 0xe7b82d07u, 0x90bf1d91u, 0x1db71064u, 0x6ab020f2u,
	0xf3b97148u, 0x84be41deu, 0x1adad47du, 0x6ddde4ebu, 0xf4d4b551u, 0x83d385c7u,
	0x136c9856u, 0x646ba8c0u, 0xfd62f97au, 0x8a65c9ecu, 0x14015c4fu, 0x63066cd9u,
	0xfa0f3d63u, 0x8d080df5u, 0x3b6e20c8u, 0x4c69105eu, 0xd56041e4u, 0xa2677172u,
	0x3c03e4d1u, 0x4b04d447u, 0xd20d85fdu, 0xa50ab56bu, 0x35b5a8fau, 0x42b2986cu,
	0xdbbbc9d6u, 0xacbcf940u, 0x32d86ce3u, 0x45df5c75u, 0xdcd60dcfu, 0xabd13d59u,
	0x26d930acu, 0x51de003au, 0xc8d75180u, 0xbfd06116u, 0x21b4f4b5u, 0x56b3c423u,
	0xcfba9599u, 0xb8bda50fu, 0x2802b89eu, 0x5f058808u, 0xc60cd9b2u, 0xb10be924u,
	0x2f6f7c87u, 0x58684c11u, 0xc1611dabu, 0xb6662d3du, 0x76dc4190u, 0x01db7106u,
	0x98d220bcu, 0xefd5102au, 0x71b18589u, 0x06b6b51fu, 0x9fbfe4a5u, 0xe8b8d433u,
	0x7807c9a2u, 0x0f00f934u, 0x9609a88eu, 0xe10e9818u, 0x7f6a0dbbu, 0x086d3d2du,
	0x91646c97u, 0xe6635c01u, 0x6b6b51f4u, 0x1c6c6162u, 0x856530d8u, 0xf262004eu,
	0x6c0695edu, 0x1b01a57bu, 0x8208f4c1u, 0xf50fc457u, 0x65b0d9c6u, 0x12b7e950u,
	0x8bbeb8eau, 0xfcb9887cu, 0x62dd1ddfu, 0x15da2d49u, 0x8cd37cf3u, 0xfbd44c65u,
	0x4db26158u, 0x3ab551ceu, 0xa3bc0074u, 0xd4bb30e2u, 0x4adfa541u, 0x3dd895d7u,
	0xa4d1c46du, 0xd3d6f4fbu, 0x4369e96au, 0x346ed9fcu, 0xad678846u, 0xda60b8d0u,
	0x44042d73u, 0x33031de5u, 0xaa0a4c5fu, 0xdd0d7cc9u, 0x5005713cu, 0x270241aau,
	0xbe0b1010u, 0xc90c2086u, 0x5768b525u, 0x206f85b3u, 0xb966d409u, 0xce61e49fu,
	0x5edef90eu, 0x29d9c998u, 0xb0d09822u, 0xc7d7a8b4u, 0x59b33d17u, 0x2eb40d81u,
	0xb7bd5c3bu, 0xc0ba6cadu, 0xedb88320u, 0x9abfb3b6u, 0x03b6e20cu, 0x74b1d29au,
	0xead54739u, 0x9dd277afu, 0x04db2615u, 0x73dc1683u, 0xe3630b12u, 0x94643b84u,
	0x0d6d6a3eu, 0x7a6a5aa8u, 0xe40ecf0bu, 0x9309ff9du, 0x0a00ae27u, 0x7d079eb1u,
	0xf00f9344u, 0x8708a3d2u, 0x1e01f268u, 0x6906c2feu, 0xf762575du, 0x806567cbu,
	0x196c3671u, 0x6e6b06e7u, 0xfed41b76u, 0x89d32be0u, 0x10da7a5au, 0x67dd4accu,
	0xf9b9df6fu, 0x8ebeeff9u, 0x17b7be43u, 0x60b08ed5u, 0xd6d6a3e8u, 0xa1d1937eu,
	0x38d8c2c4u, 0x4fdff252u, 0xd1bb67f1u, 0xa6bc5767u, 0x3fb506ddu, 0x48b2364bu,
	0xd80d2bdau, 0xaf0a1b4cu, 0x36034af6u, 0x41047a60u, 0xdf60efc3u, 0xa867df55u,
	0x316e8eefu, 0x4669be79u, 0xcb61b38cu, 0xbc66831au, 0x256fd2a0u, 0x5268e236u,
	0xcc0c7795u, 0xbb0b4703u, 0x220216b9u, 0x5505262fu, 0xc5ba3bbeu, 0xb2bd0b28u,
	0x2bb45a92u, 0x5cb36a04u, 0xc2d7ffa7u, 0xb5d0cf31u, 0x2cd99e8bu, 0x5bdeae1du,
	0x9b64c2b0u, 0xec63f226u, 0x756aa39cu, 0x026d930au, 0x9c0906a9u, 0xeb0e363fu,
	0x72076785u, 0x05005713u, 0x95bf4a82u, 0xe2b87a14u, 0x7bb12baeu, 0x0cb61b38u,
	0x92d28e9bu, 0xe5d5be0du, 0x7cdcefb7u, 0x0bdbdf21u, 0x86d3d2d4u, 0xf1d4e242u,
	0x68ddb3f8u, 0x1fda836eu, 0x81be16cdu, 0xf6b9265bu, 0x6fb077e1u, 0x18b74777u,
	0x88085ae6u, 0xff0f6a70u, 0x66063bcau, 0x11010b5cu, 0x8f659effu, 0xf862ae69u,
	0x616bffd3u, 0x166ccf45u, 0xa00ae278u, 0xd70dd2eeu, 0x4e048354u, 0x3903b3c2u,
	0xa7672661u, 0xd06016f7u, 0x4969474du, 0x3e6e77dbu, 0xaed16a4au, 0xd9d65adcu,
	0x40df0b66u, 0x37d83bf0u, 0xa9bcae53u, 0xdebb9ec5u, 0x47b2cf7fu, 0x30b5ffe9u,
	0xbdbdf21cu, 0xcabac28au, 0x53b39330u, 0x24b4a3a6u, 0xbad03605u, 0xcdd70693u,
	0x54de5729u, 0x23d967bfu, 0xb3667a2eu, 0xc4614ab8u, 0x5d681b02u, 0x2a6f2b94u,
	0xb40bbe37u, 0xc30c8ea1u, 0x5a05df1bu, 0x2d02ef8du,
};

uint32_t nvlp_crc32(const void *data, size_t len)
{
	const unsigned char *p = data;
	uint32_t c = 0xffffffffu;
	for (size_t i = 0; i < len; i++)
		c = crc_table[(c ^ p[i]) & 0xff] ^ (c >> 8);
	return c ^ 0xffffffffu;
}

/* Labels of the coded value lists: a switch per list, generated from it. */
#define NVLP_V_CASE(NAME, v, label)                                                                \
	case v:                                                                                    \
		return label;
#define NVLP_V_NAMER(fn, LIST)                                                                     \
	const char *fn(uint64_t v)                                                                 \
	{                                                                                          \
		switch (v) {                                                                       \
			LIST(NVLP_V_CASE)                                                          \
		default:                                                                           \
			return NULL;                                                               \
		}                                                                                  \
	}
NVLP_V_NAMER(nvlp_end_reason_name, NVLP_END_REASONS)
NVLP_V_NAMER(nvlp_memcpy_kind_name, NVLP_MEMCPY_KINDS)
NVLP_V_NAMER(nvlp_gpucopy_kind_name, NVLP_GPUCOPY_KINDS)
NVLP_V_NAMER(nvlp_um_counter_name, NVLP_UM_COUNTERS)
NVLP_V_NAMER(nvlp_link_source_name, NVLP_LINK_SOURCES)
NVLP_V_NAMER(nvlp_clock_source_name, NVLP_CLOCK_SOURCES)
#undef NVLP_V_NAMER
#undef NVLP_V_CASE
