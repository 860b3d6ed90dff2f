/* nvlp_trace.h: writer, reader and metadata tables of the trace format (shared by shim and CLI). */
#ifndef NVLP_TRACE_H
#define NVLP_TRACE_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint64_t */

#include "nvlp_format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- metadata generated from the X-macro lists ---- */
struct nvlp_kind_info {
	const char *name;         /* "nccl", "copy", ... (NULL for invalid kinds) */
	int has_blob;             /* 1 if records of this kind carry a blob */
	unsigned nfields;         /* number of uint64_t fields */
	const char *const *fields; /* field names */
	const unsigned char *types; /* enum nvlp_ftype per field */
};
/*! @return the description of a kind, or NULL if kind is not valid. */
const struct nvlp_kind_info *nvlp_kind_info(unsigned kind);
/*! @return "ncclAllReduce" etc., or "?" */
const char *nvlp_nccl_fn_name(unsigned fn);
/*! @return 'C','P','G','L','R','M' (see NVLP_NCCL_FUNCS) or '?' */
char nvlp_nccl_fn_class(unsigned fn);
/*! @return "cudaMemcpyAsync" etc., or "?" */
const char *nvlp_cuda_fn_name(unsigned fn);
/*! @return "cupti_unavailable" etc., or "?" */
const char *nvlp_note_name(unsigned code);
/*! Labels of coded values (the V lists of nvlp_format.h). @return the label, NULL if unknown */
const char *nvlp_end_reason_name(uint64_t v);
const char *nvlp_memcpy_kind_name(uint64_t v);
const char *nvlp_gpucopy_kind_name(uint64_t v);
const char *nvlp_um_counter_name(uint64_t v);
const char *nvlp_link_source_name(uint64_t v);
const char *nvlp_clock_source_name(uint64_t v);
/*! What the values of a coded field mean (NVLP_CODED_FIELDS), NULL if it is not coded. */
const char *nvlp_coded_field(unsigned kind, const char *field);
/*! What NCCL.aux (which 0) or NCCL.aux2 (which 1) holds for fn (NVLP_NCCL_AUX): "buf", ...;
 * "" when unused or fn is not listed. */
const char *nvlp_nccl_aux_name(unsigned fn, int which);
/*! The schema of this build, as written at the start of every trace ("nvlp-schema 2.0\nkind ...").
 * @return malloc'ed text (len set, no NUL counted), or NULL */
char *nvlp_schema_text(size_t *len);
/*! @return size in bytes of an ncclDataType_t value, 0 if unknown. */
unsigned nvlp_nccl_dtype_size(int dtype);
/*! @return "f32", "bf16", ... for an ncclDataType_t value, "?" if unknown. */
const char *nvlp_nccl_dtype_name(int dtype);
/*! @return "sum", "max", ... for an ncclRedOp_t value, "custom" for a job's own, "?" if < 0. */
const char *nvlp_nccl_op_name(int op);

/* Header keys (blob of NVLP_K_HEADER, "key=value\n" lines; values have no newline). */
#define NVLP_HDR_FORMAT "format"           /* format version */
#define NVLP_HDR_VERSION "version"         /* library version */
#define NVLP_HDR_HOST "host"
#define NVLP_HDR_BOOT_ID "boot_id"         /* the kernel's boot id: one per machine, shared by its
                                            * containers (absent when unreadable; older traces:
                                            * machine = host) */
#define NVLP_HDR_PID "pid"
#define NVLP_HDR_PPID "ppid"
#define NVLP_HDR_RANK "rank"               /* -1 if unknown */
#define NVLP_HDR_LOCAL_RANK "local_rank"   /* -1 if unknown */
#define NVLP_HDR_WORLD_SIZE "world_size"   /* -1 if unknown */
#define NVLP_HDR_CMDLINE "cmdline"         /* arguments joined by spaces */
#define NVLP_HDR_T_REAL "t_real"           /* CLOCK_REALTIME ns at start */
#define NVLP_HDR_T_MONO "t_mono"           /* CLOCK_MONOTONIC ns at start (same instant) */
#define NVLP_HDR_ENV_PREFIX "env."         /* env.NCCL_P2P_DISABLE=1, ... */
/* The OOM killer (cgroup v2): cgroup = the process's cgroup path ("0::PATH" of /proc/self/cgroup,
 * absent under v1); oom_watch = the memory.events file watched, or "none (why)"; oom_kill = its
 * oom_kill count when the trace began (absent when not watched). NOTE(OOM_KILL) records say when
 * it changed. A trace without END in a cgroup whose count rose: killed by the OOM killer. */
#define NVLP_HDR_CGROUP "cgroup"
#define NVLP_HDR_OOM_WATCH "oom_watch"
#define NVLP_HDR_OOM_KILL "oom_kill"
/* The capture settings in effect (defaults included), space-separated name=value pairs: what
 * `diff` compares so that two runs recorded differently are not taken for a change in the job. */
#define NVLP_HDR_CAPTURE "capture"

/* ---- writer: used by the shim's writer thread and by tests that make synthetic traces ---- */
typedef struct nvlp_writer nvlp_writer;

/*! Start a trace on an open fd (the writer owns it afterwards): writes the preamble and opens the
 * first frame with a HEADER record (header_kv: "key=value\n" lines, may be NULL).
 * @return the writer, or NULL (errno set) */
nvlp_writer *nvlp_writer_open_fd(int fd, const char *header_kv, uint64_t t_mono, uint64_t t_real);
/*! Same, creating path (O_CREAT|O_TRUNC). */
nvlp_writer *nvlp_writer_open(const char *path, const char *header_kv, uint64_t t_mono,
			      uint64_t t_real);
/*! Encode one record into the current frame. fields points to the kind's struct (nfields u64).
 * @return 0, or -1 if the kind is invalid or the blob too large */
int nvlp_writer_add(nvlp_writer *w, unsigned kind, const void *fields, const void *blob,
		    size_t blob_len);
/*! @return raw (uncompressed) bytes pending in the current frame */
size_t nvlp_writer_pending(const nvlp_writer *w);
/*! Compress the current frame and write it (no-op if empty). @return 0 or -1 (errno) */
int nvlp_writer_flush(nvlp_writer *w);
/*! Flush and close the fd; frees w. Does NOT add an END record (the caller decides). @return 0/-1 */
int nvlp_writer_close(nvlp_writer *w);
/*! Forget the fd without writing anything (fork child: the parent owns the file); frees w. */
void nvlp_writer_abandon(nvlp_writer *w);
/*! Records and raw bytes encoded so far, and compressed bytes written so far. */
void nvlp_writer_stats(const nvlp_writer *w, uint64_t *records, uint64_t *raw_bytes,
		       uint64_t *file_bytes);

/* ---- reader: streaming, one frame in memory at a time ---- */
typedef struct nvlp_reader nvlp_reader;

struct nvlp_record {
	unsigned kind;         /* enum nvlp_kind */
	const uint64_t *f;     /* nvlp_kind_info(kind)->nfields values in this build's order (0 for a
	                        * field the file lacks); cast to struct nvlp_rec_X */
	const uint8_t *blob;   /* NULL when the kind has no blob */
	uint32_t blob_len;
};

/*! Open a trace; reads the preamble (and the schema). On error returns NULL and writes a one-line
 * message naming the file and the problem into err (e.g. "x.nvlp: trace format version 7, this
 * nvlprof reads versions 1 to 2"). */
nvlp_reader *nvlp_reader_open(const char *path, char *err, size_t errlen);
/*! Next record. @return 1 record, 0 end of data, -1 error (see nvlp_reader_error).
 * A file cut short or with a corrupt frame ends at its last good frame: returns 0 and
 * nvlp_reader_truncated() is set, with nvlp_reader_error() saying why. */
int nvlp_reader_next(nvlp_reader *r, struct nvlp_record *rec);
/*! 1 if data ended before an END record (cut short, corrupt tail); valid once next returned 0. */
int nvlp_reader_truncated(const nvlp_reader *r);
/*! 1 if an END record was read. */
int nvlp_reader_complete(const nvlp_reader *r);
/*! Last error or truncation reason, one line naming the file ("" if none). */
const char *nvlp_reader_error(const nvlp_reader *r);
/*! Header value by key (after the HEADER record was read; the reader reads it on open). NULL if absent. */
const char *nvlp_reader_header(const nvlp_reader *r, const char *key);
/*! The header blob as written ("key=value\n" lines). */
const char *nvlp_reader_header_text(const nvlp_reader *r);
/*! String by id from STRING records read so far. NULL if unknown. */
const char *nvlp_reader_string(const nvlp_reader *r, uint64_t id);
/*! Where the record last handed out was: frame number (1 = first) and record number in the file
 * (1 = the header), for messages about a bad record. */
void nvlp_reader_position(const nvlp_reader *r, unsigned *frame, uint64_t *record);
/*! The file's format version: the major of its preamble, the minor of its schema (version 1: 0). */
void nvlp_reader_format(const nvlp_reader *r, unsigned *major, unsigned *minor);
/*! The schema the file is read with: its own (version 2 on), or the built-in one of version 1.
 * @return the text (len set; not NUL-terminated) */
const char *nvlp_reader_schema(const nvlp_reader *r, size_t *len);
/*! Records of kinds this build does not know, skipped so far (a newer writer's); what of the
 * file's schema this build does not know into *what ("kind" or "kind.field" words, "" if none). */
uint64_t nvlp_reader_unknown(const nvlp_reader *r, const char **what);
/*! Corrupt frames skipped so far (the reader resynchronised on the next valid frame after each). */
unsigned nvlp_reader_frames_skipped(const nvlp_reader *r);
/*! Bytes of the file consumed so far, and the file's size. */
void nvlp_reader_progress(const nvlp_reader *r, uint64_t *offset, uint64_t *size);
void nvlp_reader_close(nvlp_reader *r);

/* ---- small shared helpers ---- */
/*! 64-bit FNV-1a. */
uint64_t nvlp_hash64(const void *data, size_t len, uint64_t seed);
/*! crc32 (IEEE). */
uint32_t nvlp_crc32(const void *data, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* NVLP_TRACE_H */
