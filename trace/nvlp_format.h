/* nvlp_format.h: the nvlprof trace format, the one header both the shim and the analyzer compile against. */
#ifndef NVLP_FORMAT_H
#define NVLP_FORMAT_H

#include <stdint.h> /* uint64_t */

/*
 * File layout (all integers little-endian):
 *   preamble  : 8 bytes "NVLPROF\0", u32 format version (the major), u32 0x01020304 (endianness)
 *   frames    : repeated { u32 'NVLF' magic, u32 compressed size, u32 raw size, u32 crc32 of the
 *               previous 12 bytes } followed by one zstd frame (with zstd's content checksum).
 * A frame's raw bytes are a sequence of encoded records:
 *   varint kind code, then for each field the file's schema lists for that code a zigzag varint of
 *   (value - value of the same field in the previous record of that code in this frame), then,
 *   for codes that carry a blob, varint length + bytes. Delta state is reset at every frame, so
 *   each frame decodes alone.
 * Version 2: the first record of the first frame is the schema (code 0, no fields, blob = the
 * schema text, see below), the second NVLP_K_HEADER. Version 1 (every trace written before the
 * schema existed): no schema; the first record is NVLP_K_HEADER and the layout is the built-in
 * schema of version 1 (trace/schema_v1.c), which never changes.
 * A file whose last record is NVLP_K_END is complete; anything else was cut short (kill -9,
 * crash) and is read up to its last whole frame.
 *
 * The schema text (ASCII, one line each, '\n'-terminated):
 *   "nvlp-schema MAJOR.MINOR"                         first line
 *   "kind NAME CODE BLOB FIELD:TYPE FIELD:TYPE ..."   one per record kind; BLOB is "blob" or "-",
 *                                                     TYPE one of U I X T S (enum nvlp_ftype)
 * Lines starting with another word are for later versions and skipped. A reader matches kinds and
 * fields by name: a kind it does not know is read and skipped (its records are counted), a field
 * it does not know is skipped, a field the file lacks reads as 0. Every field is a uint64_t
 * stored as a zigzag delta varint; a different encoding of a field needs a new major.
 */
#define NVLP_MAGIC "NVLPROF"
/* The version window: this build reads majors NVLP_FORMAT_OLDEST..NVLP_FORMAT_VERSION and writes
 * NVLP_FORMAT_VERSION.NVLP_FORMAT_MINOR. The minor grows when a kind or a field is added (older
 * readers of the same major skip it); the major only when an encoding changes. */
#define NVLP_FORMAT_OLDEST 1u
#define NVLP_FORMAT_VERSION 2u
#define NVLP_FORMAT_MINOR 2u
#define NVLP_SCHEMA_CODE 0u    /* kind code of the schema record (first record of a version 2 file) */
#define NVLP_MAX_FILE_KINDS 256 /* kind codes a schema may declare: 1..255 */
#define NVLP_MAX_FILE_FIELDS 64 /* fields a schema may declare for one kind */
#define NVLP_ENDIAN_MARK 0x01020304u
#define NVLP_FRAME_MAGIC 0x464c564eu /* "NVLF" */
#define NVLP_PREAMBLE_SIZE 16
#define NVLP_FRAME_HEADER_SIZE 16
#define NVLP_MAX_FIELDS 32 /* fields of one kind of this build (struct nvlp_rec_*) */
#define NVLP_MAX_BLOB 65535
#define NVLP_MAX_FRAME (64u << 20) /* largest raw or compressed frame size a reader accepts */

/* Field types, for printing only: every field is stored as a uint64_t. */
enum nvlp_ftype {
	NVLP_FT_U, /* unsigned integer */
	NVLP_FT_I, /* signed integer (two's complement in the u64) */
	NVLP_FT_X, /* hex: pointers, hashes, addresses */
	NVLP_FT_T, /* time, ns, CLOCK_MONOTONIC of the recording host */
	NVLP_FT_S, /* string id (NVLP_K_STRING), 0 = none */
};

/*
 * The record kinds: R(NAME, name, has_blob, FIELDS). FIELDS(F) lists F(type, field).
 * Adding a kind or a field here is all it takes for writer, reader and dump: add a kind at the
 * end of NVLP_RECORD_KINDS and a field at the end of its list, and bump NVLP_FORMAT_MINOR (the
 * schema each trace carries tells older readers what to skip). Never rename or remove a kind or a
 * field: readers match them by name (a renamed field is an unknown one to every other build).
 * Coded fields: name their values below (a V list, NVLP_NCCL_AUX, NVLP_CODED_FIELDS).
 */

/* Process header: blob = "key=value\n" lines (see NVLP_HDR_* keys in nvlp_trace.h). */
#define NVLP_FIELDS_HEADER(F) F(T, t_mono) F(U, t_real)

/* Interned string: blob = the text (no NUL). Ids are per file, start at 1. */
#define NVLP_FIELDS_STRING(F) F(U, id)

/* One intercepted NCCL call (fn is enum nvlp_nccl_fn). bytes follows nccl-tests' S.
 * A collective or point-to-point call that failed (rc not ncclSuccess/ncclInProgress) has aux2 =
 * NVLP_NCCL_AUX2_FAILED and seq = the sequence number it was issued at (traces before this rule
 * wrote seq 0). Only errors NCCL returns after the operation was attempted (system, internal,
 * remote, CUDA errors) use the number up; a rejected call (invalid argument or usage) does not, so
 * the next call carries the same seq. */
#define NVLP_FIELDS_NCCL(F)                                                                        \
	F(U, fn) F(T, t_enter) F(U, dur) F(U, tid) F(I, device) F(X, stream) F(U, cupti_stream)      \
	F(U, count) F(I, dtype) F(U, bytes) F(I, op) F(I, peer) F(U, group_depth) F(I, rc)         \
	F(X, comm) F(I, rank) F(I, nranks) F(U, seq) F(U, call_id) F(X, aux) F(X, aux2)

/* One intercepted cudaMemcpy* that crossed devices or touched managed memory (fn: nvlp_cuda_fn). */
#define NVLP_FIELDS_COPY(F)                                                                        \
	F(U, fn) F(T, t_enter) F(U, dur) F(U, tid) F(I, device) F(I, src_device) F(I, dst_device)    \
	F(U, bytes) F(U, copy_kind) F(X, stream) F(U, cupti_stream) F(I, peer_enabled)             \
	F(U, managed) F(I, rc) F(U, stack) F(X, dst) F(X, src) F(U, call_id)

/* Managed memory: cudaMallocManaged, cudaFree of a managed block, cudaMemPrefetchAsync,
 * cudaMemAdvise. flags: attach flags or advice; target: prefetch/advise device (-1 = CPU). */
#define NVLP_FIELDS_MANAGED(F)                                                                     \
	F(U, fn) F(T, t_enter) F(U, dur) F(U, tid) F(I, device) F(X, ptr) F(U, bytes) F(U, flags)    \
	F(I, target) F(I, rc) F(U, stack) F(X, stream)

/* cudaDeviceEnablePeerAccess / cudaDeviceDisablePeerAccess. */
#define NVLP_FIELDS_PEER(F)                                                                        \
	F(U, fn) F(T, t_enter) F(U, dur) F(U, tid) F(I, device) F(I, peer_device) F(U, flags) F(I, rc)

/* Call stack: blob = array of uint64_t return addresses, innermost first. */
#define NVLP_FIELDS_STACK(F) F(U, id)

/* A loaded object, for offline symbolization: blob = its path. */
#define NVLP_FIELDS_MODULE(F) F(X, base) F(X, start) F(X, end)

/* Records lost because a per-thread buffer was full (cumulative count for that thread). */
#define NVLP_FIELDS_DROPS(F) F(U, tid) F(U, dropped) F(T, t)

/* Last record of a complete file. */
#define NVLP_FIELDS_END(F) F(T, t) F(U, records) F(U, dropped) F(U, reason)

/* A status / collection note (code: enum nvlp_note_code); blob = human-readable message. */
#define NVLP_FIELDS_NOTE(F) F(U, code) F(T, t) F(I, device) F(U, value)

/* ---- GPU side (CUPTI), all times converted to the API records' clock ---- */
#define NVLP_FIELDS_KERNEL(F)                                                                      \
	F(T, start) F(U, dur) F(I, device) F(U, context) F(U, stream) F(U, correlation) F(S, name)   \
	F(U, grid_x) F(U, grid_y) F(U, grid_z) F(U, block_x) F(U, block_y) F(U, block_z)            \
	F(U, nccl_call) F(U, flags)

/* CUPTI MEMCPY and MEMCPY2 (peer) records. copy_kind: CUpti_ActivityMemcpyKind. */
#define NVLP_FIELDS_GPUCOPY(F)                                                                     \
	F(T, start) F(U, dur) F(U, copy_kind) F(U, src_kind) F(U, dst_kind) F(I, device)             \
	F(I, src_device) F(I, dst_device) F(U, context) F(U, stream) F(U, bytes) F(U, correlation)  \
	F(U, flags) F(U, call_id)

/* CUPTI unified-memory counter record. counter: CUpti_ActivityUnifiedMemoryCounterKind. */
#define NVLP_FIELDS_UM(F)                                                                          \
	F(U, counter) F(T, start) F(U, dur) F(X, address) F(U, value) F(I, src) F(I, dst)           \
	F(U, flags) F(U, stream) F(U, process)

/* NVLink topology record (CUPTI NVLINK). dev0/dev1: CUPTI device ids or -1; type: CUpti_DevType. */
#define NVLP_FIELDS_NVLINK(F)                                                                      \
	F(U, version) F(U, type0) F(U, type1) F(I, dev0) F(I, dev1) F(U, bandwidth)                  \
	F(U, links) F(X, ports0) F(X, ports1) F(U, flags) F(X, id0) F(X, id1)

/* A device seen by CUPTI: blob = name. */
#define NVLP_FIELDS_DEVICE(F)                                                                      \
	F(I, device) F(U, pci_domain) F(U, pci_bus) F(U, pci_dev) F(X, uuid_hi) F(X, uuid_lo)       \
	F(U, sm_count) F(U, global_mem) F(U, cc_major) F(U, cc_minor)

/* Link byte counters over [start, start+dur] on one GPU. source: 1 = CUPTI PM sampling, 2 = NVML.
 * Values are bytes in the interval; flags bit 0 = gap before this sample, bit 1 = overflow. */
#define NVLP_FIELDS_LINKSAMPLE(F)                                                                  \
	F(I, device) F(U, source) F(T, start) F(U, dur) F(U, nvl_tx) F(U, nvl_rx) F(U, nvl_tx_user) \
	F(U, nvl_rx_user) F(U, pcie_rd) F(U, pcie_wr) F(U, flags)

/* Clock pair, for checking or converting a foreign clock (source 1 = CUPTI timestamp). */
#define NVLP_FIELDS_CLOCK(F) F(U, source) F(T, mono) F(U, other)

/* What NCCL chose for one collective, from its profiler plugin interface (ncclProfiler_v5, served
 * by the shim): comm = the shim's communicator hash (0 if not known yet), nccl_comm = NCCL's own
 * commHash (the same for every record of one communicator in a process), seq = NCCL's sequence
 * number, start = when NCCL started the event (host; 0 from shims of 2026-12 on when the thread
 * was inside an NCCL call the shim recorded: its NCCL record has the time), dur = 0 (not
 * measured). */
#define NVLP_FIELDS_NCCLPROF(F)                                                                    \
	F(X, comm) F(U, seq) F(U, fn) F(S, algo) F(S, proto) F(U, channels) F(T, start) F(U, dur)    \
	F(U, warps) F(U, count) F(X, nccl_comm) F(I, rank) F(I, nranks)

/* The GNU build-id of the MODULE with the same base (written right after that MODULE): blob = the
 * raw build-id bytes (usually 20). The analyzer never symbolizes from a file whose id differs. */
#define NVLP_FIELDS_BUILDID(F) F(X, base)

/* A function symbol of the MODULE with the same base, saved at record time for the frames that
 * trace's stacks hold (so symbols travel with the trace): offset = the symbol's address relative
 * to the module's load bias (st_value), size = st_size; blob = the symbol name as in the file. */
#define NVLP_FIELDS_SYMBOL(F) F(X, base) F(X, offset) F(U, size)

/* One channel of one NCCL collective, from NCCL's profiler plugin (KernelCh events): the GPU
 * globaltimer (ns) when the channel's work started and stopped, as NCCL's kernel wrote them; host =
 * the shim's clock when NCCL's proxy thread reported the stop (an upper bound on the stop time).
 * comm/nccl_comm/seq as in NCCLPROF. flags: NVLP_KCH_* below. */
#define NVLP_FIELDS_KCH(F)                                                                         \
	F(X, comm) F(U, seq) F(U, channel) F(U, gpu_start) F(U, gpu_stop) F(T, host) F(U, flags)    \
	F(X, nccl_comm) F(U, fn)

/* One NCCL collective's kernel channels, folded by the shim as NCCL's proxy thread reports them
 * (written since format 2.1 by default; NVLPROF_KCH=channels writes one KCH per channel instead):
 * one record stands for chans channels, of which zero, reversed and nostop had no usable stamps
 * (what KCH's flags of those names say of one channel); gpu_start / gpu_stop = the earliest start
 * and the latest stop of the others (GPU globaltimer, ns; 0 when none); host = the shim's clock
 * when the last of them was reported (when the record was written if none). part: 0 for the first
 * record of one execution of the collective (a CUDA graph replays it: one more execution), k for
 * its k-th record written later (channels reported after the first was written), 128 + the
 * channel for a channel whose collective's handle NCCL had already reused. comm, nccl_comm, seq
 * and fn as in KCH. A collective is usually one record, written when its nChannels channels are
 * in, when the communicator's next collective reports its first channel, or at the end.
 * noparent: channels without a parent collective (NCCL gives point-to-point channels none when
 * only collective events are asked for), counted on a record of their own (seq 0, fn 0, chans =
 * noparent) every 4096 and at the end, instead of one KCH record each. */
#define NVLP_FIELDS_KCOLL(F)                                                                       \
	F(X, comm) F(U, seq) F(U, fn) F(U, chans) F(U, gpu_start) F(U, gpu_stop) F(T, host)         \
	F(U, zero) F(U, reversed) F(U, nostop) F(U, part) F(X, nccl_comm) F(U, noparent)
/* KCOLL.part of a channel whose collective handle was reused: this + its channel id (< 128) */
#define NVLP_KCOLL_PART_ALONE 128u
/* A channel longer than this is not a real stamp pair (counted reversed, by the shim folding
 * KCOLL and by the analyzer reading KCH alike). */
#define NVLP_KCH_MAX_NS 60000000000ull

/* A window of CUPTI kernel and copy tracing (NVLPROF_KERNELS=window:ON/PERIOD): [start, start+dur]
 * had kernels traced; period = the configured period (ns); kinds = how many activity kinds. */
#define NVLP_FIELDS_KWINDOW(F) F(T, start) F(U, dur) F(U, period) F(U, kinds)

/* A CUDA graph call (op: NVLP_GRAPH_OPS): stream capture begun/ended (capture_id = the runtime's
 * capture sequence id, graph = the graph it made), a graph instantiated (graph -> exec), an exec
 * launched on stream (one replay of everything captured into its graph). */
#define NVLP_FIELDS_GRAPH(F)                                                                       \
	F(U, op) F(T, t_enter) F(U, dur) F(U, tid) F(X, stream) F(U, capture_id) F(X, graph)        \
	F(X, exec) F(I, rc) F(U, call_id)

/* The NCCL or COPY record with this call_id (kind = its record kind) was issued on a stream that
 * was capturing: it was recorded into capture capture_id, not executed; each launch of the graph
 * made from that capture executes it once. */
#define NVLP_FIELDS_CAPTURED(F) F(U, call_id) F(U, capture_id) F(X, stream) F(U, kind)

/* Follows the KERNEL or GPUCOPY record (kind) of work a CUDA graph launch ran: CUPTI's graph id
 * and node id; correlation = the graph launch's (the same for every node of one execution);
 * start/dur/device/stream as in that record; flags: that record's flags. */
#define NVLP_FIELDS_GPUGRAPH(F)                                                                    \
	F(U, kind) F(U, graph_id) F(U, node_id) F(U, correlation) F(T, start) F(U, dur)            \
	F(I, device) F(U, stream) F(U, flags)

/* A name the job gave a communicator (NCCL's ncclConfig_t.commName at init or split, or the one
 * NCCL hands its profiler plugin): comm = the shim's communicator hash (as in NCCL.comm). */
#define NVLP_FIELDS_COMMNAME(F) F(X, comm) F(S, name)

/* A Python call chain, deduplicated like STACK (id = a hash of the text, never 0; written once per
 * file before the first PYREF naming it): blob = "file:line:function\n" per frame, innermost
 * first. Read only from a thread holding the GIL (a thread that released it around the call, as
 * torch does around most CUDA and NCCL calls, has none). */
#define NVLP_FIELDS_PYSTACK(F) F(U, id)

/* Attaches a PYSTACK to earlier records (records cannot gain fields): the record of kind `kind`
 * written by thread tid whose t_enter is t; call_id = its call_id where the kind has one (COPY,
 * NCCL), else 0. COPY and MANAGED: that one record. NCCL: that collective/p2p call and every later
 * one of the same thread until the thread's next NCCL PYREF (written only when the chain changes;
 * pystack 0 = no Python location from there on), so a rank's last call has its location even when
 * the rank was killed. kind 0 (NVLP_K_NONE): a sample, not an attachment: the chain thread tid was
 * in at time t, read by the shim's own thread (call_id 0), written only when it changed since that
 * thread's previous sample (pystack 0: no Python frames from then on). */
#define NVLP_FIELDS_PYREF(F) F(U, kind) F(U, tid) F(T, t) F(U, call_id) F(U, pystack)

/* A mark the job made (kind: NVLP_MARK_* below): cudaProfilerStart/Stop, an NVTX range push/pop
 * or instant mark; name = the NVTX message (0 for the profiler API and for pops); tid = the
 * thread (ranges nest per thread). */
#define NVLP_FIELDS_MARK(F) F(T, t) F(U, kind) F(S, name) F(U, tid)

/* How the process ended, written just before END when known: reason as END.reason, signal = the
 * signal number that ended it (0 none), status = the exit status passed to exit/_exit (-1 unknown). */
#define NVLP_FIELDS_EXITINFO(F) F(T, t) F(U, reason) F(I, signal) F(I, status)

/* What NCCL told its profiler plugin when it set a communicator up (init, once per communicator):
 * nccl_comm = its commHash (as in NCCLPROF), nnodes = the nodes it counted among the ranks (one per
 * distinct host hash: NCCL_HOSTID, else host name + boot id), nranks and rank = this one's. Ranks
 * of one machine that NCCL counts as several nodes talk over the network transport. */
#define NVLP_FIELDS_NCCLCOMM(F) F(X, nccl_comm) F(I, nnodes) F(I, nranks) F(I, rank)

/* A call the thread had not returned from when this was written: by the writer for a call in
 * progress for more than 1 s (each such call once, a few per second at most), and by the end of the
 * trace for every call still in progress (a rank killed inside ncclCommInitRank, a blocking group
 * end or a synchronising copy says where). kind = the record kind the call would have written
 * (NCCL or COPY), fn = its fn there; the NCCL fields as in NVLP_FIELDS_NCCL (peer = root for
 * rooted collectives), 0 where the kind has none; t = when this was written. Written in a frame of
 * its own (a reader older than this kind loses that frame only). */
#define NVLP_FIELDS_INFLIGHT(F)                                                                    \
	F(T, t) F(U, tid) F(U, kind) F(U, fn) F(T, t_enter) F(I, device) F(X, stream) F(X, comm)     \
	F(U, seq) F(U, count) F(I, dtype) F(I, op) F(I, peer) F(I, rank) F(I, nranks)               \
	F(U, call_id) F(U, bytes)

/* A fatal signal (SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL) the process received: tid = the
 * thread it was delivered to (the one that raised it), code = siginfo's si_code, addr = si_addr
 * (faults), main = 1 when that thread is the process's main thread; blob = the thread's name
 * (/proc/self/task/TID/comm); stack = the id of the STACK record of that thread's native stack when
 * the signal came (innermost first: the interrupted instruction, then the callers), written just
 * before it with its MODULE records; 0 when not taken (NVLPROF_STACKS=0, or a trace before 2.2).
 * Written before EXITINFO (reason signal) and END, in a frame of its own; then the job's own
 * handler or the default action runs unchanged. */
#define NVLP_FIELDS_FATAL(F)                                                                       \
	F(T, t) F(I, signal) F(U, tid) F(I, code) F(X, addr) F(U, main) F(U, stack)

/* What recording cost the process so far (cumulative since the trace opened; written every 10 s
 * and at the end, each in a frame of its own): wall = ns since the trace opened; proc_cpu = the
 * process's CPU time (CLOCK_PROCESS_CPUTIME_ID); own_cpu = CPU time of nvlprof's own threads
 * (writer, CUPTI flush, link sampler, Python sampler; ended ones included); hook_ns = time the
 * job's threads spent in nvlprof's code around the calls it intercepts (wrappers, CUPTI and NCCL
 * plugin callbacks), estimated from one call in hook_every timed (hook_samples timed so far);
 * mem / mem_peak = bytes of memory nvlprof holds now / at most (ring pages written, CUPTI
 * buffers, the NCCL plugin's handle rings); file_bytes / raw_bytes = trace bytes written
 * compressed / before compression; records = records written. */
#define NVLP_FIELDS_COST(F)                                                                        \
	F(T, t) F(U, wall) F(U, proc_cpu) F(U, own_cpu) F(U, writer_cpu) F(U, flush_cpu)           \
	F(U, sampler_cpu) F(U, pysample_cpu) F(U, hook_ns) F(U, hook_samples) F(U, hook_every)     \
	F(U, mem) F(U, mem_peak) F(U, file_bytes) F(U, raw_bytes) F(U, records)

#define NVLP_RECORD_KINDS(R)                                                                       \
	R(HEADER, header, 1, NVLP_FIELDS_HEADER)                                                   \
	R(STRING, string, 1, NVLP_FIELDS_STRING)                                                   \
	R(NCCL, nccl, 0, NVLP_FIELDS_NCCL)                                                         \
	R(COPY, copy, 0, NVLP_FIELDS_COPY)                                                         \
	R(MANAGED, managed, 0, NVLP_FIELDS_MANAGED)                                                \
	R(PEER, peer, 0, NVLP_FIELDS_PEER)                                                         \
	R(STACK, stack, 1, NVLP_FIELDS_STACK)                                                      \
	R(MODULE, module, 1, NVLP_FIELDS_MODULE)                                                   \
	R(DROPS, drops, 0, NVLP_FIELDS_DROPS)                                                      \
	R(END, end, 0, NVLP_FIELDS_END)                                                            \
	R(NOTE, note, 1, NVLP_FIELDS_NOTE)                                                         \
	R(KERNEL, kernel, 0, NVLP_FIELDS_KERNEL)                                                    \
	R(GPUCOPY, gpucopy, 0, NVLP_FIELDS_GPUCOPY)                                                \
	R(UM, um, 0, NVLP_FIELDS_UM)                                                               \
	R(NVLINK, nvlink, 0, NVLP_FIELDS_NVLINK)                                                   \
	R(DEVICE, device, 1, NVLP_FIELDS_DEVICE)                                                   \
	R(LINKSAMPLE, linksample, 0, NVLP_FIELDS_LINKSAMPLE)                                       \
	R(CLOCK, clock, 0, NVLP_FIELDS_CLOCK)                                                      \
	R(NCCLPROF, ncclprof, 0, NVLP_FIELDS_NCCLPROF)                                             \
	R(BUILDID, buildid, 1, NVLP_FIELDS_BUILDID)                                                \
	R(SYMBOL, symbol, 1, NVLP_FIELDS_SYMBOL)                                                   \
	R(KCH, kch, 0, NVLP_FIELDS_KCH)                                                            \
	R(KWINDOW, kwindow, 0, NVLP_FIELDS_KWINDOW)                                                \
	R(GRAPH, graph, 0, NVLP_FIELDS_GRAPH)                                                      \
	R(CAPTURED, captured, 0, NVLP_FIELDS_CAPTURED)                                             \
	R(GPUGRAPH, gpugraph, 0, NVLP_FIELDS_GPUGRAPH)                                              \
	R(COMMNAME, commname, 0, NVLP_FIELDS_COMMNAME)                                             \
	R(PYSTACK, pystack, 1, NVLP_FIELDS_PYSTACK)                                                \
	R(PYREF, pyref, 0, NVLP_FIELDS_PYREF)                                                      \
	R(MARK, mark, 0, NVLP_FIELDS_MARK)                                                         \
	R(EXITINFO, exitinfo, 0, NVLP_FIELDS_EXITINFO)                                             \
	R(NCCLCOMM, ncclcomm, 0, NVLP_FIELDS_NCCLCOMM)                                             \
	R(INFLIGHT, inflight, 0, NVLP_FIELDS_INFLIGHT)                                             \
	R(FATAL, fatal, 1, NVLP_FIELDS_FATAL)                                                      \
	R(COST, cost, 0, NVLP_FIELDS_COST)                                                         \
	R(KCOLL, kcoll, 0, NVLP_FIELDS_KCOLL)

/* enum nvlp_kind: NVLP_K_HEADER = 1, ... (0 is never a valid kind). */
enum nvlp_kind {
	NVLP_K_NONE = 0,
#define NVLP_R_ENUM(NAME, name, blob, FIELDS) NVLP_K_##NAME,
	NVLP_RECORD_KINDS(NVLP_R_ENUM)
#undef NVLP_R_ENUM
	NVLP_K_COUNT
};

/* struct nvlp_rec_nccl etc.: the fixed part of each record, all uint64_t. */
#define NVLP_F_MEMBER(type, field) uint64_t field;
#define NVLP_R_STRUCT(NAME, name, blob, FIELDS) struct nvlp_rec_##name { FIELDS(NVLP_F_MEMBER) };
NVLP_RECORD_KINDS(NVLP_R_STRUCT)
#undef NVLP_R_STRUCT
#undef NVLP_F_MEMBER

/* NCCL functions: X(enum suffix, symbol name, class). class: C = collective, P = point-to-point,
 * G = group, L = communicator lifecycle, R = registration, M = memory/misc. */
#define NVLP_NCCL_FUNCS(X)                                                                         \
	X(GET_UNIQUE_ID, ncclGetUniqueId, L)                                                       \
	X(COMM_INIT_RANK, ncclCommInitRank, L)                                                     \
	X(COMM_INIT_RANK_CONFIG, ncclCommInitRankConfig, L)                                        \
	X(COMM_INIT_ALL, ncclCommInitAll, L)                                                       \
	X(COMM_INIT_RANK_SCALABLE, ncclCommInitRankScalable, L)                                    \
	X(COMM_SPLIT, ncclCommSplit, L)                                                            \
	X(COMM_SHRINK, ncclCommShrink, L)                                                          \
	X(COMM_FINALIZE, ncclCommFinalize, L)                                                      \
	X(COMM_DESTROY, ncclCommDestroy, L)                                                        \
	X(COMM_ABORT, ncclCommAbort, L)                                                            \
	X(COMM_REVOKE, ncclCommRevoke, L)                                                          \
	X(ALL_REDUCE, ncclAllReduce, C)                                                            \
	X(BROADCAST, ncclBroadcast, C)                                                             \
	X(BCAST, ncclBcast, C)                                                                     \
	X(REDUCE, ncclReduce, C)                                                                   \
	X(ALL_GATHER, ncclAllGather, C)                                                            \
	X(REDUCE_SCATTER, ncclReduceScatter, C)                                                    \
	X(ALL_TO_ALL, ncclAlltoAll, C)                                                             \
	X(GATHER, ncclGather, C)                                                                   \
	X(SCATTER, ncclScatter, C)                                                                 \
	X(SEND, ncclSend, P)                                                                       \
	X(RECV, ncclRecv, P)                                                                       \
	X(GROUP_START, ncclGroupStart, G)                                                          \
	X(GROUP_END, ncclGroupEnd, G)                                                              \
	X(GROUP_SIMULATE_END, ncclGroupSimulateEnd, G)                                             \
	X(COMM_REGISTER, ncclCommRegister, R)                                                      \
	X(COMM_DEREGISTER, ncclCommDeregister, R)                                                  \
	X(COMM_WINDOW_REGISTER, ncclCommWindowRegister, R)                                         \
	X(COMM_WINDOW_DEREGISTER, ncclCommWindowDeregister, R)                                     \
	X(MEM_ALLOC, ncclMemAlloc, M)                                                              \
	X(MEM_FREE, ncclMemFree, M)

enum nvlp_nccl_fn {
#define NVLP_X_ENUM(E, sym, cls) NVLP_NCCL_##E,
	NVLP_NCCL_FUNCS(NVLP_X_ENUM)
#undef NVLP_X_ENUM
	NVLP_NCCL_FN_COUNT
};

/* CUDA runtime functions recorded in COPY / MANAGED / PEER records. */
#define NVLP_CUDA_FUNCS(X)                                                                         \
	X(MEMCPY, cudaMemcpy)                                                                      \
	X(MEMCPY_ASYNC, cudaMemcpyAsync)                                                           \
	X(MEMCPY_PEER, cudaMemcpyPeer)                                                             \
	X(MEMCPY_PEER_ASYNC, cudaMemcpyPeerAsync)                                                  \
	X(MEMCPY_PTDS, cudaMemcpy_ptds)                                                            \
	X(MEMCPY_ASYNC_PTSZ, cudaMemcpyAsync_ptsz)                                                 \
	X(MEMCPY_PEER_PTDS, cudaMemcpyPeer_ptds)                                                   \
	X(MEMCPY_PEER_ASYNC_PTSZ, cudaMemcpyPeerAsync_ptsz)                                        \
	X(MALLOC_MANAGED, cudaMallocManaged)                                                       \
	X(FREE, cudaFree)                                                                          \
	X(MEM_PREFETCH_ASYNC, cudaMemPrefetchAsync)                                                \
	X(MEM_ADVISE, cudaMemAdvise)                                                               \
	X(ENABLE_PEER_ACCESS, cudaDeviceEnablePeerAccess)                                          \
	X(DISABLE_PEER_ACCESS, cudaDeviceDisablePeerAccess)                                         \
	X(CU_MEM_ALLOC_MANAGED, cuMemAllocManaged)                                                 \
	X(CU_MEM_FREE, cuMemFree)                                                                  \
	X(CU_MEM_PREFETCH_ASYNC, cuMemPrefetchAsync)                                               \
	X(CU_MEM_ADVISE, cuMemAdvise)                                                              \
	X(CU_CTX_ENABLE_PEER_ACCESS, cuCtxEnablePeerAccess)                                        \
	X(CU_CTX_DISABLE_PEER_ACCESS, cuCtxDisablePeerAccess)                                      \
	X(CU_MEMCPY, cuMemcpy)                                                                     \
	X(CU_MEMCPY_ASYNC, cuMemcpyAsync)                                                          \
	X(CU_MEMCPY_HTOD, cuMemcpyHtoD)                                                            \
	X(CU_MEMCPY_HTOD_ASYNC, cuMemcpyHtoDAsync)                                                 \
	X(CU_MEMCPY_DTOH, cuMemcpyDtoH)                                                            \
	X(CU_MEMCPY_DTOH_ASYNC, cuMemcpyDtoHAsync)                                                 \
	X(CU_MEMCPY_DTOD, cuMemcpyDtoD)                                                            \
	X(CU_MEMCPY_DTOD_ASYNC, cuMemcpyDtoDAsync)                                                 \
	X(CU_MEMCPY_PEER, cuMemcpyPeer)                                                            \
	X(CU_MEMCPY_PEER_ASYNC, cuMemcpyPeerAsync)

enum nvlp_cuda_fn {
#define NVLP_X_ENUM(E, sym) NVLP_CUDA_##E,
	NVLP_CUDA_FUNCS(NVLP_X_ENUM)
#undef NVLP_X_ENUM
	NVLP_CUDA_FN_COUNT
};

/* The runtime function a driver function's record stands for (cu* rows above are recorded by the
 * driver-API callbacks, cupti/callbacks.c, for calls no runtime hook saw): the analyzer treats a
 * cuMemAllocManaged like a cudaMallocManaged, a synchronous cuMemcpy* like a cudaMemcpy. */
static inline unsigned nvlp_cuda_fn_base(uint64_t fn)
{
	switch (fn) {
	case NVLP_CUDA_CU_MEM_ALLOC_MANAGED: return NVLP_CUDA_MALLOC_MANAGED;
	case NVLP_CUDA_CU_MEM_FREE: return NVLP_CUDA_FREE;
	case NVLP_CUDA_CU_MEM_PREFETCH_ASYNC: return NVLP_CUDA_MEM_PREFETCH_ASYNC;
	case NVLP_CUDA_CU_MEM_ADVISE: return NVLP_CUDA_MEM_ADVISE;
	case NVLP_CUDA_CU_CTX_ENABLE_PEER_ACCESS: return NVLP_CUDA_ENABLE_PEER_ACCESS;
	case NVLP_CUDA_CU_CTX_DISABLE_PEER_ACCESS: return NVLP_CUDA_DISABLE_PEER_ACCESS;
	case NVLP_CUDA_CU_MEMCPY:
	case NVLP_CUDA_CU_MEMCPY_HTOD:
	case NVLP_CUDA_CU_MEMCPY_DTOH:
	case NVLP_CUDA_CU_MEMCPY_DTOD: return NVLP_CUDA_MEMCPY;
	case NVLP_CUDA_CU_MEMCPY_ASYNC:
	case NVLP_CUDA_CU_MEMCPY_HTOD_ASYNC:
	case NVLP_CUDA_CU_MEMCPY_DTOH_ASYNC:
	case NVLP_CUDA_CU_MEMCPY_DTOD_ASYNC: return NVLP_CUDA_MEMCPY_ASYNC;
	case NVLP_CUDA_CU_MEMCPY_PEER: return NVLP_CUDA_MEMCPY_PEER;
	case NVLP_CUDA_CU_MEMCPY_PEER_ASYNC: return NVLP_CUDA_MEMCPY_PEER_ASYNC;
	default: return (unsigned)fn;
	}
}

/* NOTE codes: what was or was not collected, and why. */
#define NVLP_NOTE_CODES(X)                                                                         \
	X(INFO, info)                                                                              \
	X(CUPTI_UNAVAILABLE, cupti_unavailable)                                                    \
	X(CUPTI_VERSION, cupti_version)                                                            \
	X(NO_DRIVER, no_driver)                                                                    \
	X(ACTIVITY_ON, activity_on)                                                                \
	X(ACTIVITY_LOST, activity_lost)                                                            \
	X(ACTIVITY_DROPPED, activity_dropped)                                                      \
	X(PM_SAMPLING_ON, pm_sampling_on)                                                          \
	X(PM_SAMPLING_UNAVAILABLE, pm_sampling_unavailable)                                        \
	X(NVML_ON, nvml_on)                                                                        \
	X(NVML_UNAVAILABLE, nvml_unavailable)                                                      \
	X(SHARED_CUPTI, shared_cupti)                                                              \
	X(FOREIGN_TOOL, foreign_tool)                                                              \
	X(UM_ON, um_on)                                                                            \
	X(UNRESOLVED, unresolved)                                                                  \
	X(CONFIG, config)                                                                          \
	X(FORK_CHILD, fork_child)                                                                  \
	X(NCCL_PLUGIN, nccl_plugin)                                                                \
	X(OOM_KILL, oom_kill) /* value = the cgroup's memory.events oom_kill count, when it changed */ \
	X(CUPTI_DETACHED, cupti_detached) /* NVLPROF_CUPTI=startup: value = ms after CUPTI attached */ \
	X(CUPTI_REATTACHED, cupti_reattached) /* the same, attached again for managed memory */

enum nvlp_note_code {
#define NVLP_X_ENUM(E, name) NVLP_NOTE_##E,
	NVLP_NOTE_CODES(NVLP_X_ENUM)
#undef NVLP_X_ENUM
	NVLP_NOTE_CODE_COUNT
};
/* How a CONFIG note begins when NVLPROF_CUPTI=startup kept CUPTI attached on CUPTI 13.0, whose
 * cuptiFinalize corrupts the heap (cupti/detach.c writes it, the analyzer counts it). */
#define NVLP_NOTE_FINALIZE_UNSAFE "CUPTI not detached (NVLPROF_CUPTI=startup): cuptiFinalize of"
/* How CONFIG notes begin when NVLPROF_CUPTI=lazy left CUPTI out at start (cupti/cupti.c), or
 * attached it all the same because something needed it from the start (the analyzer counts both) */
#define NVLP_NOTE_CUPTI_LAZY "CUPTI not attached (NVLPROF_CUPTI=lazy):"
#define NVLP_NOTE_CUPTI_LAZY_NEEDED "CUPTI attached at start despite NVLPROF_CUPTI=lazy: needed by"
/* How the CUPTI_UNAVAILABLE note begins when managed memory came under NVLPROF_CUPTI=lazy */
#define NVLP_NOTE_CUPTI_LAZY_UM "managed memory allocated under NVLPROF_CUPTI=lazy:"
/* How the notes of lazy's topology (cupti/linksample.c) begin: the CONFIG note of what the driver
 * and NVML gave ("... N device(s), P NVLink pair(s); NVML link state: A active, I inactive, U
 * unanswered"), the NVML_UNAVAILABLE note of why NVML gave none (the analyzer reads both) */
#define NVLP_NOTE_TOPO_LAZY "topology from the driver and NVML (NVLPROF_CUPTI=lazy):"
#define NVLP_NOTE_TOPO_LAZY_NONE "no NVLink topology (NVLPROF_CUPTI=lazy):"
#define NVLP_NOTE_TOPO_LAZY_STATE "NVML link state:"

/* KCH flags: what was wrong with a channel's stamps (the analyzer drops flagged ones). */
#define NVLP_KCH_FLAGS(X)                                                                          \
	X(ZERO, 0x1, zero)         /* a start or stop stamp was 0 */                               \
	X(REVERSED, 0x2, reversed) /* stop before start */                                         \
	X(NOSTOP, 0x4, nostop)     /* never stopped (stop event missing at finalize/exit) */        \
	X(NOPARENT, 0x8, noparent) /* parent collective unknown (handle recycled or none) */

enum nvlp_kch_flag {
#define NVLP_X_ENUM(E, v, name) NVLP_KCH_##E = v,
	NVLP_KCH_FLAGS(NVLP_X_ENUM)
#undef NVLP_X_ENUM
};

/*
 * Coded field values, each list once: V(NAME, value, label). Writers and readers use the names;
 * dump prints the labels (nvlp_value_label in nvlp_trace.h).
 */

/* END.reason: why the trace ended. */
#define NVLP_END_REASONS(V)                                                                        \
	V(EXIT, 0, "exit")    /* atexit / destructor */                                          \
	V(SIGNAL, 1, "signal") /* SIGTERM / SIGINT handler */                                    \
	V(UEXIT, 2, "_exit")  /* _exit / _Exit (os._exit) */                                     \
	V(EXEC, 3, "exec")    /* before exec* */
enum nvlp_end_reason {
#define NVLP_V_ENUM(NAME, v, label) NVLP_END_##NAME = v,
	NVLP_END_REASONS(NVLP_V_ENUM)
#undef NVLP_V_ENUM
};

/* GRAPH.op. */
#define NVLP_GRAPH_OPS(V)                                                                          \
	V(BEGIN_CAPTURE, 1, "begin_capture")                                                       \
	V(END_CAPTURE, 2, "end_capture")                                                           \
	V(INSTANTIATE, 3, "instantiate")                                                           \
	V(LAUNCH, 4, "launch")
enum nvlp_graph_op {
#define NVLP_V_ENUM(NAME, v, label) NVLP_GRAPH_##NAME = v,
	NVLP_GRAPH_OPS(NVLP_V_ENUM)
#undef NVLP_V_ENUM
};

/* MARK.kind. */
#define NVLP_MARK_KINDS(V)                                                                         \
	V(PROFILER_START, 1, "cudaProfilerStart")                                                  \
	V(PROFILER_STOP, 2, "cudaProfilerStop")                                                    \
	V(RANGE_PUSH, 3, "range_push")   /* nvtxRangePush* / nvtxDomainRangePushEx */             \
	V(RANGE_POP, 4, "range_pop")     /* nvtxRangePop / nvtxDomainRangePop */                  \
	V(RANGE_START, 5, "range_start") /* nvtxRangeStart* (not nested; name = message) */       \
	V(RANGE_END, 6, "range_end")                                                               \
	V(INSTANT, 7, "mark")            /* nvtxMark* */                                         \
	V(USER_RANGE, 8, "user_range")   /* outermost CUPTI external correlation push of kind      \
	                                  * CUSTOM1 on its thread: torch.profiler's ProfilerStep#N \
	                                  * (no name) */
enum nvlp_mark_kind {
#define NVLP_V_ENUM(NAME, v, label) NVLP_MARK_##NAME = v,
	NVLP_MARK_KINDS(NVLP_V_ENUM)
#undef NVLP_V_ENUM
};

/* COPY.copy_kind: the cudaMemcpyKind of the call. */
#define NVLP_MEMCPY_KINDS(V)                                                                       \
	V(HOST_TO_HOST, 0, "HostToHost")                                                           \
	V(HOST_TO_DEVICE, 1, "HostToDevice")                                                       \
	V(DEVICE_TO_HOST, 2, "DeviceToHost")                                                       \
	V(DEVICE_TO_DEVICE, 3, "DeviceToDevice")                                                   \
	V(DEFAULT, 4, "Default")
enum nvlp_memcpy_kind {
#define NVLP_V_ENUM(NAME, v, label) NVLP_MEMCPY_##NAME = v,
	NVLP_MEMCPY_KINDS(NVLP_V_ENUM)
#undef NVLP_V_ENUM
};

/* GPUCOPY.copy_kind: CUpti_ActivityMemcpyKind (PTOP: peer to peer, e.g. over NVLink). */
#define NVLP_GPUCOPY_KINDS(V)                                                                      \
	V(UNKNOWN, 0, "UNKNOWN")                                                                   \
	V(HTOD, 1, "HTOD")                                                                         \
	V(DTOH, 2, "DTOH")                                                                         \
	V(HTOA, 3, "HTOA")                                                                         \
	V(ATOH, 4, "ATOH")                                                                         \
	V(ATOA, 5, "ATOA")                                                                         \
	V(ATOD, 6, "ATOD")                                                                         \
	V(DTOA, 7, "DTOA")                                                                         \
	V(DTOD, 8, "DTOD")                                                                         \
	V(HTOH, 9, "HTOH")                                                                         \
	V(PTOP, 10, "PTOP")
enum nvlp_gpucopy_kind {
#define NVLP_V_ENUM(NAME, v, label) NVLP_GPUCOPY_##NAME = v,
	NVLP_GPUCOPY_KINDS(NVLP_V_ENUM)
#undef NVLP_V_ENUM
};

/* UM.counter: CUpti_ActivityUnifiedMemoryCounterKind. */
#define NVLP_UM_COUNTERS(V)                                                                        \
	V(UNKNOWN, 0, "UNKNOWN")                                                                   \
	V(BYTES_TRANSFER_HTOD, 1, "BYTES_TRANSFER_HTOD")                                           \
	V(BYTES_TRANSFER_DTOH, 2, "BYTES_TRANSFER_DTOH")                                           \
	V(CPU_PAGE_FAULT_COUNT, 3, "CPU_PAGE_FAULT_COUNT")                                         \
	V(GPU_PAGE_FAULT, 4, "GPU_PAGE_FAULT")                                                     \
	V(THRASHING, 5, "THRASHING")                                                               \
	V(THROTTLING, 6, "THROTTLING")                                                             \
	V(REMOTE_MAP, 7, "REMOTE_MAP")                                                             \
	V(BYTES_TRANSFER_DTOD, 8, "BYTES_TRANSFER_DTOD")
enum nvlp_um_counter {
#define NVLP_V_ENUM(NAME, v, label) NVLP_UM_##NAME = v,
	NVLP_UM_COUNTERS(NVLP_V_ENUM)
#undef NVLP_V_ENUM
};

/* NVLINK.type0/type1: CUpti_DevType. */
#define NVLP_DEV_TYPES(V) V(INVALID, 0, "invalid") V(GPU, 1, "gpu") V(NPU, 2, "npu")
enum nvlp_dev_type {
#define NVLP_V_ENUM(NAME, v, label) NVLP_DEV_TYPE_##NAME = v,
	NVLP_DEV_TYPES(NVLP_V_ENUM)
#undef NVLP_V_ENUM
};

/* LINKSAMPLE.source and CLOCK.source. */
#define NVLP_LINK_SOURCES(V) V(PM_SAMPLING, 1, "pm_sampling") V(NVML, 2, "nvml")
enum nvlp_link_source {
#define NVLP_V_ENUM(NAME, v, label) NVLP_LINK_##NAME = v,
	NVLP_LINK_SOURCES(NVLP_V_ENUM)
#undef NVLP_V_ENUM
};
/* CLOCK.source: CUPTI: other = cuptiGetTimestamp(); REALTIME: other = CLOCK_REALTIME ns (the GPU
 * globaltimer's time base); KCH: other = a KernelCh GPU stop stamp, mono = when the host got it (an
 * upper bound on the stamp's host time, from ncclprof.c); FOREIGN: other = another CUPTI client's
 * timestamp callback (e.g. torch.profiler's TSC ticks), which stamped GPU activity while installed
 * (the shim already converted those records with a fit of these pairs); HEARTBEAT: other =
 * CLOCK_REALTIME ns, written by the writer thread at least once a second while the trace is open,
 * so a trace cut short (kill -9) still tells when its process was last alive. */
#define NVLP_CLOCK_SOURCES(V)                                                                      \
	V(CUPTI, 1, "cupti") V(REALTIME, 2, "realtime") V(KCH, 3, "kch") V(FOREIGN, 4, "foreign")  \
	V(HEARTBEAT, 5, "heartbeat")
enum nvlp_clock_source {
#define NVLP_V_ENUM(NAME, v, label) NVLP_CLOCK_##NAME = v,
	NVLP_CLOCK_SOURCES(NVLP_V_ENUM)
#undef NVLP_V_ENUM
};

/* Flag bits our writers set on top of (or instead of) CUPTI's own flags. */
#define NVLP_KERNEL_F_NCCL 0x1ull        /* KERNEL.flags: the kernel's name starts with "nccl" */
#define NVLP_GPUCOPY_F_PEER 0x100ull     /* GPUCOPY.flags: from a MEMCPY2 (peer) record */
#define NVLP_NVLINK_F_NVSWITCH (1ull << 16) /* NVLINK.flags: connected through an NVSwitch */
#define NVLP_LINKSAMPLE_F_GAP 0x1ull     /* LINKSAMPLE.flags: samples were lost before this one */
#define NVLP_LINKSAMPLE_F_OVERFLOW 0x2ull /* LINKSAMPLE.flags: a counter wrapped */

#define NVLP_NCCL_AUX2_FAILED 0x1ull /* NCCL.aux2 of a failed collective / p2p call */

/*
 * NCCL.aux and NCCL.aux2 by fn (hooks_nccl.c fills them): A(fn enum suffix, aux, aux2), each a
 * short name of what the field holds, "" when unused (0). Communicator hashes are the shim's (as
 * NCCL.comm); pointers and handles are the job's. Collectives and point-to-point calls (class C
 * and P) have aux 0 and aux2 = flags (NVLP_NCCL_AUX2_FAILED).
 */
#define NVLP_NCCL_AUX(A)                                                                           \
	A(GET_UNIQUE_ID, "comm_hash", "")  /* the hash a communicator made from this id will have */ \
	A(COMM_INIT_RANK, "comm_hash", "")                                /* = comm */            \
	A(COMM_INIT_RANK_CONFIG, "comm_hash", "")                         /* = comm */            \
	A(COMM_INIT_RANK_SCALABLE, "comm_hash", "")                       /* = comm */            \
	A(COMM_INIT_ALL, "comm_hash", "")                                 /* = comm */            \
	A(COMM_SPLIT, "child_comm_hash", "color")   /* the new communicator's hash; color as given */ \
	A(COMM_SHRINK, "child_comm_hash", "nexcl")  /* nexcl: how many ranks were excluded */      \
	A(COMM_REVOKE, "", "flags")                                       /* as given */          \
	A(COMM_REGISTER, "buf", "handle")             /* handle: what NCCL returned (0 on error) */ \
	A(COMM_DEREGISTER, "", "handle")                                                          \
	A(COMM_WINDOW_REGISTER, "buf", "window")      /* window: what NCCL returned (0 on error) */ \
	A(COMM_WINDOW_DEREGISTER, "", "window")                                                   \
	A(MEM_ALLOC, "ptr", "")                       /* the pointer NCCL returned (0 on error) */  \
	A(MEM_FREE, "ptr", "")

/*
 * Where the values of every other coded field are named: C(KIND, field, meaning). dump --schema
 * prints these beside the schema; docs/FORMAT.md lists them.
 */
#define NVLP_CODED_FIELDS(C)                                                                       \
	C(NCCL, fn, "NVLP_NCCL_FUNCS (enum nvlp_nccl_fn)")                                         \
	C(NCCL, dtype, "ncclDataType_t (-1: none)")                                                \
	C(NCCL, op, "ncclRedOp_t (-1: none; from 5: the job's own)")                               \
	C(NCCL, rc, "ncclResult_t")                                                                \
	C(NCCL, aux, "by fn: NVLP_NCCL_AUX")                                                       \
	C(NCCL, aux2, "by fn: NVLP_NCCL_AUX; collectives: bit 0 = failed (NVLP_NCCL_AUX2_FAILED)")   \
	C(COPY, fn, "NVLP_CUDA_FUNCS (enum nvlp_cuda_fn)")                                         \
	C(COPY, copy_kind, "NVLP_MEMCPY_KINDS (cudaMemcpyKind)")                                   \
	C(COPY, rc, "cudaError_t")                                                                 \
	C(MANAGED, fn, "NVLP_CUDA_FUNCS")                                                          \
	C(MANAGED, flags, "cudaMallocManaged attach flags, or the cudaMemoryAdvise value")         \
	C(MANAGED, rc, "cudaError_t")                                                              \
	C(PEER, fn, "NVLP_CUDA_FUNCS")                                                             \
	C(PEER, flags, "the flags argument (0)")                                                   \
	C(PEER, rc, "cudaError_t (704: already enabled)")                                          \
	C(END, reason, "NVLP_END_REASONS")                                                         \
	C(NOTE, code, "NVLP_NOTE_CODES (enum nvlp_note_code)")                                     \
	C(KERNEL, flags, "bit 0 = NCCL kernel (NVLP_KERNEL_F_NCCL)")                               \
	C(GPUCOPY, copy_kind, "NVLP_GPUCOPY_KINDS (CUpti_ActivityMemcpyKind)")                      \
	C(GPUCOPY, src_kind, "CUpti_ActivityMemoryKind")                                           \
	C(GPUCOPY, dst_kind, "CUpti_ActivityMemoryKind")                                           \
	C(GPUCOPY, flags, "CUpti_ActivityFlag, plus NVLP_GPUCOPY_F_PEER")                          \
	C(UM, counter, "NVLP_UM_COUNTERS (CUpti_ActivityUnifiedMemoryCounterKind)")                 \
	C(UM, flags, "CUPTI's unified-memory record flags")                                        \
	C(NVLINK, type0, "NVLP_DEV_TYPES (CUpti_DevType)")                                         \
	C(NVLINK, type1, "NVLP_DEV_TYPES (CUpti_DevType)")                                         \
	C(NVLINK, flags, "CUpti_LinkFlag bits, plus NVLP_NVLINK_F_NVSWITCH")                       \
	C(LINKSAMPLE, source, "NVLP_LINK_SOURCES")                                                 \
	C(LINKSAMPLE, flags, "NVLP_LINKSAMPLE_F_GAP, NVLP_LINKSAMPLE_F_OVERFLOW")                  \
	C(CLOCK, source, "NVLP_CLOCK_SOURCES")                                                     \
	C(NCCLPROF, fn, "NVLP_NCCL_FUNCS")                                                         \
	C(KCH, flags, "NVLP_KCH_FLAGS")                                                            \
	C(KCH, fn, "NVLP_NCCL_FUNCS")                                                              \
	C(GRAPH, op, "NVLP_GRAPH_OPS")                                                             \
	C(GRAPH, rc, "cudaError_t")                                                                \
	C(CAPTURED, kind, "a record kind (enum nvlp_kind): NCCL or COPY")                          \
	C(GPUGRAPH, kind, "a record kind: KERNEL or GPUCOPY")                                      \
	C(GPUGRAPH, flags, "that record's flags")                                                  \
	C(PYREF, kind, "a record kind (NCCL, COPY, MANAGED), or 0: a sample")                      \
	C(MARK, kind, "NVLP_MARK_KINDS")                                                           \
	C(EXITINFO, reason, "NVLP_END_REASONS")                                                    \
	C(INFLIGHT, kind, "a record kind: NCCL or COPY")                                           \
	C(INFLIGHT, fn, "NVLP_NCCL_FUNCS or NVLP_CUDA_FUNCS, by kind")                             \
	C(FATAL, code, "siginfo si_code")                                                          \
	C(KCOLL, fn, "NVLP_NCCL_FUNCS")

/* cudaError_t values the analyzer reads in rc fields. */
#define NVLP_CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED 704

#endif /* NVLP_FORMAT_H */
