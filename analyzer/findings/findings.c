/* findings.c: turns an analyzed job into findings (stable id, severity, title, evidence,
 * advice). */
#include "findings/findings.h"
#include "model/ending.h"   /* how each rank ended */
#include "findings/findings_int.h"
#include "load/kernelch.h" /* window coverage */
#include "model/places.h"   /* where a rank's threads were (the Python sampler) */
#include "model/stages.h"   /* an_job_time */
#include "util/util.h"     /* an_fmt_value */

#include <math.h>   /* fabs */
#include <stdarg.h> /* va_list */
#include <stdlib.h> /* calloc */
#include <string.h> /* strcmp */

#include "nvlp_trace.h"

#define MIB (1024.0 * 1024.0)

/* Large-message GPU bandwidth per (comm, fn): sum of S x busbw factor and of transfer time (a
 * matched collective's shortest GPU time across ranks: see an_call_xfer_ns). */
struct big {
	double sbus, salg, ns;
	uint64_t calls;
};

/* Environment settings that push NCCL off NVLink. */
static void env_causes(const struct an_job *job, char *out, size_t len)
{
	static const char *const keys[] = {"NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE",
	                                   "NCCL_P2P_USE_CUDA_MEMCPY"};
	out[0] = 0;
	for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
		char key[64], buf[64];
		snprintf(key, sizeof key, "%s%s", NVLP_HDR_ENV_PREFIX, keys[k]);
		for (size_t f = 0; f < job->nranks; f++) {
			const char *v = job->ranks[f].ok
			                    ? an_header_get(&job->ranks[f], key, buf, sizeof buf)
			                    : NULL;
			if (!v)
				continue;
			int bad =
			    k == 1 ? (!strcmp(v, "LOC") || !strcmp(v, "0")) : strcmp(v, "0") != 0;
			/* SHM_DISABLE alone keeps NVLink P2P; it matters only together with P2P
			 * off */
			if (bad && k == 2 && !strstr(out, "NCCL_P2P"))
				bad = 0;
			if (bad) {
				size_t l = strlen(out);
				snprintf(out + l, len - l, "%s%s=%s", l ? " " : "", keys[k], v);
			}
			break;
		}
	}
}

/* @return the index of the communicator judged to fall back, -1 if none */
/* The busiest single-host multi-rank communicator (collective bytes in *bytes); -1 if none */
static int busiest_local_comm(const struct an_job *job, double *bytes)
{
	int best = -1;
	*bytes = 0;
	for (size_t a = 0; a < job->naggs; a++) {
		const struct an_agg *g = &job->aggs[a];
		const struct an_comm *c = &job->comms[g->comm];
		if (c->nranks < 2 || !c->single_host || an_coll_of_fn(g->fn) == AN_C_NONE)
			continue;
		if ((double)g->bytes > *bytes) {
			*bytes = (double)g->bytes;
			best = g->comm;
		}
	}
	return best;
}

/* NVLink and PCIe bytes of every device while collectives ran */
static void coll_link_bytes(const struct an_job *job, uint64_t *nvl, uint64_t *pcie)
{
	*nvl = *pcie = 0;
	for (size_t f = 0; f < job->nranks; f++)
		for (size_t d = 0; d < job->ranks[f].ndevs; d++) {
			*nvl += job->ranks[f].devs[d].nvl_coll;
			*pcie += job->ranks[f].devs[d].pcie_coll;
		}
}

/* Bus bandwidth of communicator comm over all its collective types, GB/s (0: no time) */
static double comm_busbw(const struct big *big, int comm)
{
	double sbus = 0, ns = 0;
	for (int fn = 0; fn < NVLP_NCCL_FN_COUNT; fn++) {
		sbus += big[comm * NVLP_NCCL_FN_COUNT + fn].sbus;
		ns += big[comm * NVLP_NCCL_FN_COUNT + fn].ns;
	}
	return ns > 0 ? sbus / ns : 0; /* bytes per ns = GB/s */
}

/* The pcie_fallback finding's evidence and advice */
static void fallback_evidence(struct an_finding *x, const struct an_job *job,
                              const struct an_comm *c, uint64_t nvl, uint64_t pcie, double busbw,
                              const char *cause)
{
	if (cause[0])
		an_f_str(x, "env", "%s", cause);
	an_f_str(x, "comm", "%016llx", (unsigned long long)c->hash);
	an_f_num(x, "nranks", c->nranks, NULL);
	if (job->have_links) {
		an_f_num(x, "nvlink_bytes_during_collectives", (double)nvl, "B");
		an_f_num(x, "pcie_bytes_during_collectives", (double)pcie, "B");
	}
	if (busbw > 0)
		an_f_num(x, "busbw_gbps", busbw, "GB/s");
	if (c->peak_Bps > 0) {
		an_f_peak(x, c->peak_Bps / 1e9);
		if (busbw > 0)
			an_f_num(x, "share_of_peak", busbw * 1e9 / c->peak_Bps, NULL);
	} else
		an_f_str(x, "topology", "no NVLink topology records: NVLink presence not confirmed");
	an_f_advise(
	    x,
	    cause[0]
	        ? "Unset the variables above (NCCL_P2P_DISABLE, NCCL_P2P_LEVEL=LOC, "
	          "NCCL_SHM_DISABLE) so NCCL uses "
	          "P2P over NVLink; check with NCCL_DEBUG=INFO that channels say P2P/CUMEM or NVLS."
	        : "NCCL did not use P2P over NVLink: check NCCL_DEBUG=INFO transport lines, "
	          "container IPC/"
	          "peer-access limits (--ipc=host), CUDA_VISIBLE_DEVICES and NCCL_P2P_LEVEL.");
}

static int fallback(const struct an_job *job, const double *th, struct big *big,
                    struct an_findings *out)
{
	char cause[256];
	env_causes(job, cause, sizeof cause);
	/* the busiest single-host multi-rank communicator with NVLink */
	double best_bytes;
	int best = busiest_local_comm(job, &best_bytes);
	if (best < 0)
		return -1;
	const struct an_comm *c = &job->comms[best];
	double per_rank = best_bytes / (c->nmembers ? c->nmembers : 1);
	uint64_t nvl, pcie;
	coll_link_bytes(job, &nvl, &pcie);
	double busbw = comm_busbw(big, best);
	int counters = job->have_links && pcie > 0 &&
	               (double)pcie > th[AN_TH_fallback_pcie_ratio] * (double)nvl &&
	               (double)pcie >= th[AN_TH_fallback_min_mib] * MIB;
	int low =
	    c->peak_Bps > 0 && busbw > 0 && busbw * 1e9 < th[AN_TH_low_busbw_share] * c->peak_Bps;
	int has_nvl = c->peak_Bps > 0;
	if (per_rank < th[AN_TH_fallback_min_mib] * MIB)
		return -1;
	if (!(has_nvl && counters) && !(cause[0] && (has_nvl || !job->have_topo)))
		return -1;
	int sev = (counters || low) ? AN_SEV_CRITICAL : AN_SEV_WARNING;
	struct an_finding *x =
	    an_f_add(out, AN_F_pcie_fallback, sev,
	        "NCCL traffic between NVLink-connected GPUs went over PCIe/host memory%s%s%s",
	        cause[0] ? " (" : "", cause, cause[0] ? ")" : "");
	x->comm = best;
	fallback_evidence(x, job, c, nvl, pcie, busbw, cause);
	return x ? best : -1;
}

/* ---- nccl_split_host: ranks of one machine that NCCL counts as separate nodes ----
 * NCCL counts one node per distinct host hash: NCCL_HOSTID when set, else the host name with the
 * kernel's boot id. Ranks of one machine with different NCCL_HOSTID values (Kubernetes sets it to
 * the pod name) or in containers with their own host names get different hashes, so NCCL connects
 * them through its network transport (sockets or IB loopback) instead of NVLink P2P or shared
 * memory. A machine here is a boot id (one per kernel, shared by its containers), else a host
 * name (traces before boot ids were recorded). Every pass is linear in the processes, their
 * communicators and their calls (a job of thousands of ranks and communicators stays cheap). */
struct sh_rank {
	int machine, ident; /* ids of its machine and of its NCCL host identity (equal keys) */
	int boot;           /* a boot id is in the header */
	char hostid[64];    /* env NCCL_HOSTID ("" unset) */
	/* the keys: machine "boot:" id or "host:" name; identity "id:" NCCL_HOSTID, else "host:"
	 * name and machine */
	char key[2][300];
	/* its NCCLCOMM records tied to the shim's communicator hash (0: not tied) */
	uint64_t nc_hash[AN_MAX_NCCLCOMMS];
};

struct sh_sort {
	const struct sh_rank *s;
	int which;
};
static int sh_cmp(const void *a, const void *b, void *arg)
{
	const struct sh_sort *o = arg;
	return strcmp(o->s[*(const size_t *)a].key[o->which],
	              o->s[*(const size_t *)b].key[o->which]);
}

/* Equal keys get equal ids (sorted, not compared pairwise). @return 0, or -1 (memory) */
static int sh_ids(struct sh_rank *s, size_t n, int which)
{
	size_t *ix = malloc((n ? n : 1) * sizeof *ix);
	if (!ix)
		return -1;
	for (size_t f = 0; f < n; f++)
		ix[f] = f;
	struct sh_sort o = {s, which};
	qsort_r(ix, n, sizeof *ix, sh_cmp, &o);
	int id = -1;
	for (size_t i = 0; i < n; i++) {
		if (!i || strcmp(s[ix[i]].key[which], s[ix[i - 1]].key[which]))
			id++;
		*(which ? &s[ix[i]].ident : &s[ix[i]].machine) = id;
	}
	free(ix);
	return 0;
}

/* Process r's NCCLCOMM records tied to the shim's communicators: by the NCCLPROF records' pairs
 * (as model.c's build_choices ties choices), else to the one communicator of that rank and size */
static void sh_tie(const struct an_rank *r, struct sh_rank *s)
{
	for (unsigned i = 0; i < r->nncclcomms; i++) {
		const struct an_ncclcomm *x = &r->ncclcomms[i];
		uint64_t h = 0;
		for (size_t k = 0; k < r->nchoices && !h; k++)
			if (r->choices[k].nccl_comm == x->nccl_comm)
				h = r->choices[k].comm;
		int fit = 0; /* (hash, rank) pairs are unique in r->comms */
		for (size_t k = 0; !h && k < r->ncomms && fit < 2; k++)
			if (r->comms[k].rank == x->rank && r->comms[k].nranks == x->nranks)
				fit++;
		for (size_t k = 0; !h && fit == 1 && k < r->ncomms; k++)
			if (r->comms[k].rank == x->rank && r->comms[k].nranks == x->nranks)
				h = r->comms[k].hash;
		s->nc_hash[i] = h;
	}
}

/* Each rank's machine, NCCL identity and tied NCCLCOMM records. @return the table or NULL */
static struct sh_rank *sh_ranks(const struct an_job *job)
{
	struct sh_rank *s = calloc(job->nranks ? job->nranks : 1, sizeof *s);
	if (!s)
		return NULL;
	for (size_t f = 0; f < job->nranks; f++) {
		const struct an_rank *r = &job->ranks[f];
		char buf[64];
		const char *b = r->ok ? an_header_get(r, NVLP_HDR_BOOT_ID, buf, sizeof buf) : NULL;
		s[f].boot = b && *b;
		snprintf(s[f].key[0], sizeof s[f].key[0], "%s%s",
		         s[f].boot ? "boot:" : "host:", s[f].boot ? b : r->host);
		const char *h = r->ok ? an_header_get(r, NVLP_HDR_ENV_PREFIX "NCCL_HOSTID",
		                                      s[f].hostid, sizeof s[f].hostid)
		                      : NULL;
		if (!h)
			s[f].hostid[0] = 0;
		if (h)
			snprintf(s[f].key[1], sizeof s[f].key[1], "id:%s", h);
		else
			snprintf(s[f].key[1], sizeof s[f].key[1], "host:%.128s %.160s", r->host,
			         s[f].key[0]);
		sh_tie(r, &s[f]);
	}
	if (sh_ids(s, job->nranks, 0) || sh_ids(s, job->nranks, 1)) {
		free(s);
		return NULL;
	}
	return s;
}

/* The job's communicators' member processes: those of ci are mem[start[ci] .. start[ci + 1]),
 * a process once however many of ci's ranks it holds; ranks[ci]: ranks of ci the traces hold */
struct sh_members {
	size_t *start, *mem, *last;
	int *ranks;
};

static int sh_members(const struct an_job *job, struct sh_members *m)
{
	size_t nc = job->ncomms, total = 0;
	m->start = calloc(nc + 1, sizeof *m->start);
	m->last = calloc(nc + 1, sizeof *m->last);
	m->ranks = calloc(nc + 1, sizeof *m->ranks);
	for (size_t f = 0; f < job->nranks; f++)
		total += job->ranks[f].ok ? job->ranks[f].ncomms : 0;
	m->mem = malloc((total ? total : 1) * sizeof *m->mem);
	if (!m->start || !m->last || !m->ranks || !m->mem)
		return -1;
	for (int pass = 0; pass < 2; pass++) { /* count, then place */
		memset(m->last, 0, (nc + 1) * sizeof *m->last);
		for (size_t f = 0; f < job->nranks; f++) {
			const struct an_rank *r = &job->ranks[f];
			for (size_t k = 0; r->ok && k < r->ncomms; k++) {
				size_t ci = r->comms[k].job_comm;
				if (ci >= nc)
					continue; /* beyond AN_MAX_COMMS */
				if (pass)
					m->ranks[ci]++;
				if (m->last[ci] == f + 1)
					continue;
				m->last[ci] = f + 1;
				if (!pass)
					m->start[ci + 1]++;
				else
					m->mem[m->start[ci]++] = f;
			}
		}
		if (!pass) /* start[ci + 1] = end of ci; start[ci] = where the next of ci goes */
			for (size_t ci = 0; ci < nc; ci++)
				m->start[ci + 1] += m->start[ci];
		else /* each start moved to its end: shift back */
			for (size_t ci = nc; ci > 0; ci--)
				m->start[ci] = m->start[ci - 1];
	}
	m->start[0] = 0;
	return 0;
}

static void sh_members_free(struct sh_members *m)
{
	free(m->start);
	free(m->mem);
	free(m->last);
	free(m->ranks);
}

/* What one communicator shows: its member processes, their machines and NCCL identities. */
struct sh_comm {
	int ci, nmembers, nmachines, nnodes, nidents;
	int split; /* 0 no, 1 by NCCL's node count, 2 by the host identities */
	const size_t *mem;
	double ns; /* collective time, all members */
};

/* Scratch per machine / identity id (both < nranks): a stamp is the epoch that saw it last (one
 * epoch per pass over a communicator's members: nothing to clear between them) */
struct sh_scratch {
	size_t *mstamp, *istamp, epoch;
	int *mident;    /* the identity of the machine's first member */
	size_t *mfirst; /* the machine's first member */
};

/* Is job communicator ci split? m gets what was found. */
static void sh_judge(const struct an_job *job, const struct sh_rank *s, const struct sh_members *mb,
                     struct sh_scratch *w, int ci, struct sh_comm *m)
{
	memset(m, 0, sizeof *m);
	m->ci = ci;
	m->mem = mb->mem + mb->start[ci];
	m->nmembers = (int)(mb->start[ci + 1] - mb->start[ci]);
	uint64_t hash = job->comms[ci].hash;
	int shared = 0, ids_differ = 0;
	size_t st = ++w->epoch;
	for (int i = 0; i < m->nmembers; i++) {
		size_t f = m->mem[i];
		int mc = s[f].machine, id = s[f].ident;
		if (w->mstamp[mc] != st) {
			w->mstamp[mc] = st;
			w->mident[mc] = id;
			w->mfirst[mc] = f;
			m->nmachines++;
		} else {
			shared = 1;
			ids_differ |= w->mident[mc] != id;
		}
		if (w->istamp[id] != st) {
			w->istamp[id] = st;
			m->nidents++;
		}
		const struct an_rank *r = &job->ranks[f];
		for (unsigned k = 0; k < r->nncclcomms; k++)
			if (s[f].nc_hash[k] == hash && r->ncclcomms[k].nnodes > m->nnodes)
				m->nnodes = r->ncclcomms[k].nnodes;
	}
	int nranks = job->comms[ci].nranks;
	if (!shared || m->nmembers < 2 || nranks < 2)
		return;
	/* ranks without a trace may each be on a machine of their own */
	int untraced = nranks > mb->ranks[ci] ? nranks - mb->ranks[ci] : 0;
	if (m->nnodes)
		m->split = m->nnodes > m->nmachines + untraced ? 1 : 0;
	else
		m->split = ids_differ ? 2 : 0;
}

/* Appends " item" to buf. @return 0 once full ("..." then ends it) */
static int sh_cat(char *buf, size_t len, const char *item)
{
	size_t l = strlen(buf);
	if (l >= 3 && !strcmp(buf + l - 3, "..."))
		return 0;
	if (l + strlen(item) + 5 >= len) {
		snprintf(buf + l, len - l, "%s...", l ? " " : "");
		return 0;
	}
	snprintf(buf + l, len - l, "%s%s", l ? " " : "", item);
	return 1;
}

/* The comm rank of process r in ci (its first), -1 */
static int sh_comm_rank(const struct an_rank *r, int ci)
{
	for (size_t k = 0; k < r->ncomms; k++)
		if (r->comms[k].job_comm == (uint32_t)ci)
			return r->comms[k].rank;
	return -1;
}

/* Collective time of process r on ci, ns: GPU time where a call has one, else its host time */
static double sh_rank_ns(const struct an_rank *r, int ci, size_t *timed, size_t *untimed)
{
	double ns = 0;
	for (size_t k = 0; k < r->ncalls; k++) {
		const struct an_call *c = &r->calls[k];
		if (c->comm != ci)
			continue;
		ns += c->gpu_start ? c->gpu_dur : c->host_dur;
		++*(c->gpu_start ? timed : untimed);
	}
	return ns;
}

/* "host: r,r; host: r" for the members, machine by machine in the order met, into per */
static void sh_per_machine(const struct an_job *job, const struct sh_rank *s,
                           const struct sh_comm *m, struct sh_scratch *w, char *per, size_t len)
{
	size_t st = ++w->epoch;
	for (int i = 0; i < m->nmembers; i++) {
		int mc = s[m->mem[i]].machine;
		if (w->mstamp[mc] == st)
			continue;
		w->mstamp[mc] = st;
		char list[120] = "", item[200];
		for (int j = i; j < m->nmembers && strlen(list) < sizeof list - 16; j++)
			if (s[m->mem[j]].machine == mc)
				snprintf(list + strlen(list), sizeof list - strlen(list), "%s%d",
				         list[0] ? "," : "",
				         sh_comm_rank(&job->ranks[m->mem[j]], m->ci));
		snprintf(item, sizeof item, "%s: %s;", job->ranks[m->mem[i]].host, list);
		if (!sh_cat(per, len, item))
			break;
	}
	size_t l = strlen(per);
	if (l && per[l - 1] == ';')
		per[l - 1] = 0;
}

/* The evidence; @return the largest share of a member's wall time in collectives on it */
static double sh_evidence(struct an_finding *x, const struct an_job *job, const struct sh_rank *s,
                          const struct sh_comm *m, struct sh_scratch *w, int ncomms)
{
	an_f_str(x, "comm", "%016llx", (unsigned long long)job->comms[m->ci].hash);
	an_f_num(x, "nranks", job->comms[m->ci].nranks, NULL);
	if (m->nnodes)
		an_f_num(x, "nccl_nnodes", m->nnodes, NULL);
	else
		an_f_num(x, "host_hashes", m->nidents, NULL);
	an_f_num(x, "machines", m->nmachines, NULL);
	char per[240] = "", ids[240] = "", hosts[240] = "", tms[240] = "", item[160];
	int any_id = 0, hosts_differ = 0;
	double worst_share = 0;
	size_t timed = 0, untimed = 0;
	sh_per_machine(job, s, m, w, per, sizeof per);
	for (int i = 0; i < m->nmembers; i++) {
		size_t f = m->mem[i];
		const struct an_rank *r = &job->ranks[f];
		int rk = sh_comm_rank(r, m->ci);
		any_id |= s[f].hostid[0] != 0;
		snprintf(item, sizeof item, "%d:%s", rk, s[f].hostid[0] ? s[f].hostid : "(unset)");
		sh_cat(ids, sizeof ids, item);
		/* containers: one kernel, several host names (mfirst: set by sh_judge for m) */
		hosts_differ |=
		    s[f].boot && strcmp(job->ranks[w->mfirst[s[f].machine]].host, r->host);
		snprintf(item, sizeof item, "%d:%s", rk, r->host);
		sh_cat(hosts, sizeof hosts, item);
		double ns = sh_rank_ns(r, m->ci, &timed, &untimed), wall = (double)an_rank_wall(r);
		snprintf(item, sizeof item, "%d:%.2f", rk, ns / 1e6);
		sh_cat(tms, sizeof tms, item);
		if (wall > 0 && ns / wall > worst_share)
			worst_share = ns / wall;
	}
	an_f_str(x, "ranks_per_machine", "%s", per);
	if (any_id)
		an_f_str(x, "nccl_hostid", "%s", ids);
	if (hosts_differ)
		an_f_str(x, "hostnames", "%s", hosts);
	an_f_str(x, "collective_ms_per_rank", "%s", tms);
	an_f_str(x, "time_source", "%s",
	       !untimed ? "gpu"
	       : !timed ? "host"
	                : "gpu, host for calls without GPU time");
	an_f_num(x, "collective_share_of_wall", worst_share, NULL);
	if (ncomms > 1)
		an_f_num(x, "communicators", ncomms, NULL);
	an_f_str(x, "basis", "%s",
	       m->split == 1
	           ? "NCCL's node count (profiler plugin) above the machines"
	           : "different NCCL host identities (NCCL_HOSTID / host name) on one machine");
	return worst_share;
}

/* The split communicator with the most collective time (one pass over every call); -1 none */
static int sh_busiest(const struct an_job *job, const char *split)
{
	double *ns = calloc(job->ncomms ? job->ncomms : 1, sizeof *ns);
	if (!ns)
		return -1;
	for (size_t f = 0; f < job->nranks; f++)
		for (size_t k = 0; k < job->ranks[f].ncalls; k++) {
			const struct an_call *c = &job->ranks[f].calls[k];
			if ((size_t)c->comm < job->ncomms && split[c->comm])
				ns[c->comm] += c->gpu_start ? c->gpu_dur : c->host_dur;
		}
	int best = -1;
	for (size_t ci = 0; ci < job->ncomms; ci++)
		if (split[ci] && (best < 0 || ns[ci] > ns[best]))
			best = (int)ci;
	free(ns);
	return best;
}

static void sh_report(const struct an_job *job, const double *th, const struct sh_rank *s,
                      const struct sh_comm *b, struct sh_scratch *w, int nsplit,
                      struct an_findings *out)
{
	char where[32];
	if (b->nmachines == 1)
		snprintf(where, sizeof where, "one machine");
	else
		snprintf(where, sizeof where, "%d machines", b->nmachines);
	struct an_finding *x =
	    an_f_add(out, AN_F_nccl_split_host, AN_SEV_WARNING,
	        "NCCL took the %d ranks of %s for %d nodes: their collectives go over the network, "
	        "not NVLink or shared memory",
	        b->nmembers, where, b->nnodes ? b->nnodes : b->nidents);
	if (!x)
		return;
	x->comm = b->ci;
	if (sh_evidence(x, job, s, b, w, nsplit) >= th[AN_TH_split_host_critical])
		x->sev = AN_SEV_CRITICAL;
	an_f_advise(x, "Give the ranks of one machine the same NCCL_HOSTID (or unset it), or run them in "
	          "one container or with the host's UTS and IPC namespaces (docker --ipc=host "
	          "--uts=host, Kubernetes hostIPC); then check that NCCL_DEBUG=INFO shows P2P or SHM "
	          "channels, not NET.");
}

static void split_host(const struct an_job *job, const double *th, struct an_findings *out)
{
	if (job->nranks < 2 || !job->ncomms)
		return;
	size_t n = job->nranks;
	struct sh_rank *s = sh_ranks(job);
	struct sh_members mb = {0};
	struct sh_scratch w = {calloc(n, sizeof(size_t)), calloc(n, sizeof(size_t)), 0,
	                       calloc(n, sizeof(int)), calloc(n, sizeof(size_t))};
	char *split = calloc(job->ncomms, 1);
	if (!s || !split || !w.mstamp || !w.istamp || !w.mident || !w.mfirst ||
	    sh_members(job, &mb) < 0)
		goto done;
	struct sh_comm m;
	int nsplit = 0;
	for (size_t ci = 0; ci < job->ncomms; ci++) {
		if (job->comms[ci].nranks < 2 || mb.start[ci + 1] - mb.start[ci] < 2)
			continue;
		sh_judge(job, s, &mb, &w, (int)ci, &m);
		split[ci] = m.split != 0;
		nsplit += split[ci];
	}
	int best = nsplit ? sh_busiest(job, split) : -1;
	if (best >= 0) {
		sh_judge(job, s, &mb, &w, best,
		         &m); /* again: its machines' first members (mfirst) */
		sh_report(job, th, s, &m, &w, nsplit, out);
	}
done:
	free(s);
	sh_members_free(&mb);
	free(w.mstamp);
	free(w.istamp);
	free(w.mident);
	free(w.mfirst);
	free(split);
}

/* NVLink between two GPUs of r's host: any process on that host may have recorded the topology. */
static int nvlink_pair(const struct an_job *job, const struct an_rank *r, int a, int b, int *known)
{
	*known = 0;
	for (size_t p = job->host_at[r->host_ix]; p < job->host_at[r->host_ix + 1]; p++) {
		const struct an_rank *x = &job->ranks[job->by_host[p]];
		if (job->by_host[p] >= job->nranks || !x->ok || !x->nlinks)
			continue;
		*known = 1;
		if (an_nvlink_between(x, a, b))
			return 1;
	}
	return 0;
}

/* What the staged copies of pair p cost against a peer copy: at the NVLink rate measured in
 * this job (its peer copies), else at the NVLink peak */
static void staged_cost(struct an_finding *x, const struct an_job *job, const struct an_rank *r,
                        const struct an_pair *p, int nvl)
{
	double peak = nvl ? an_dev_peak(job, r, p->src) / 1e9 : 0, rate = 0;
	const char *rate_src = "";
	for (size_t k = 0; k < r->npairs; k++)
		if (r->pairs[k].p2p_gpu_ns && r->pairs[k].p2p_bytes) {
			rate = (double)r->pairs[k].p2p_bytes / (double)r->pairs[k].p2p_gpu_ns;
			rate_src = "measured";
		}
	if (rate <= 0 && peak > 0) {
		rate = peak;
		rate_src = "nvlink_peak";
	}
	if (nvl)
		an_f_peak(x, peak);
	if (rate > 0 && p->staged_ns) {
		double peer_ms = (double)p->staged_bytes / rate / 1e6;
		double took_ms = (double)p->staged_ns / 1e6;
		an_f_num(x, "staged_ms", took_ms, "ms");
		an_f_num(x, "peer_copy_ms", peer_ms, "ms");
		an_f_str(x, "peer_copy_rate", "%s %.0f GB/s", rate_src, rate);
		an_f_num(x, "lost_ms", took_ms > peer_ms ? took_ms - peer_ms : 0, "ms");
	}
}

/* peer_access_disabled for pair p of trace f, whose copies went through host memory */
static void staged_pair(const struct an_job *job, size_t f, const struct an_pair *p, int nvl,
                        double gbps, struct an_findings *out)
{
	const struct an_rank *r = &job->ranks[f];
	struct an_finding *x = an_f_add(
	    out, AN_F_peer_access_disabled, AN_SEV_WARNING,
	    "Copies GPU%d->GPU%d staged through host memory although the GPUs %s",
	    p->src, p->dst, nvl ? "share NVLink" : "can likely reach each other");
	x->rank = an_f_rank_id(job, f);
	x->device = p->src;
	an_f_num(x, "rank", an_f_rank_id(job, f), NULL);
	an_f_num(x, "device", p->src, NULL);
	an_f_num(x, "dst_device", p->dst, NULL);
	an_f_num(x, "copies", (double)p->staged_copies, NULL);
	an_f_num(x, "bytes", (double)p->staged_bytes, "B");
	/* achieved: the staged bytes over the host time in those calls (their GPU records are
	 * only the chunks' first pieces) */
	double sg = p->staged_ns ? (double)p->staged_bytes / (double)p->staged_ns : 0;
	if (sg > 0)
		an_f_num(x, "achieved_gbps", sg, "GB/s");
	else if (gbps > 0)
		an_f_num(x, "achieved_gbps", gbps, "GB/s");
	staged_cost(x, job, r, p, nvl);
	if (r->peer_enable_fail)
		an_f_num(x, "peer_enable_failures", (double)r->peer_enable_fail, NULL);
	/* the first of the pair's first staged copies that has one */
	uint64_t py = 0;
	for (int k = 0; k < 4 && !py && p->staged_call[k]; k++)
		py = an_f_py_of_record(r, NVLP_K_COPY, 0, p->staged_call[k]);
	an_f_python(x, "python", "copied at", r, py);
	an_f_native(x, "copied_at", r, p->staged_stack);
	an_f_advise(x, "Call cudaDeviceEnablePeerAccess(dst, 0) on the source device "
	          "(and the reverse) before cross-device copies: they then go GPU to "
	          "GPU over NVLink instead of twice over PCIe through host memory "
	          "(examples/p2p_copy: 393 vs 35 GB/s on 2 x H200).");
}

static void staged(const struct an_job *job, const double *th, struct an_findings *out)
{
	for (size_t f = 0; f < job->nranks; f++) {
		const struct an_rank *r = &job->ranks[f];
		for (size_t i = 0; i < r->npairs; i++) {
			const struct an_pair *p = &r->pairs[i];
			int known, nvl = nvlink_pair(job, r, p->src, p->dst, &known);
			double gbps = p->p2p_gpu_ns ? (double)p->p2p_bytes / (double)p->p2p_gpu_ns
			              : p->sync_ns  ? (double)p->sync_bytes / (double)p->sync_ns
			                            : 0;
			int slow = gbps > 0 && gbps < th[AN_TH_staged_max_gbps];
			if ((double)p->staged_bytes < th[AN_TH_staged_min_mib] * MIB)
				continue;
			if (!nvl && !(!known && slow))
				continue;
			staged_pair(job, f, p, nvl, gbps, out);
		}
	}
}

static void thrashing(const struct an_job *job, const double *th, struct an_findings *out)
{
	for (size_t f = 0; f < job->nranks; f++) {
		const struct an_rank *r = &job->ranks[f];
		for (size_t i = 0; i < r->nallocs; i++) {
			const struct an_alloc *a = &r->allocs[i];
			double moved = (double)(a->htod + a->dtoh + a->dtod);
			if (moved < th[AN_TH_thrash_min_mib] * MIB ||
			    ((double)a->flips < th[AN_TH_thrash_min_flips] && !a->thrash_events))
				continue;
			char size[32];
			struct an_finding *x =
			    an_f_add(out, AN_F_uma_thrashing, AN_SEV_WARNING,
			        "Managed allocation of %s migrates back and forth (%llu "
			        "direction changes)",
			        an_fmt_value(size, sizeof size, (double)a->bytes, "B"),
			        (unsigned long long)a->flips);
			x->rank = an_f_rank_id(job, f);
			x->device = a->device;
			an_f_num(x, "rank", an_f_rank_id(job, f), NULL);
			an_f_num(x, "device", a->device, NULL);
			an_f_str(x, "address", "0x%llx", (unsigned long long)a->ptr);
			an_f_num(x, "size", (double)a->bytes, "B");
			an_f_num(x, "bytes_migrated", moved, "B");
			an_f_num(x, "htod_bytes", (double)a->htod, "B");
			an_f_num(x, "dtoh_bytes", (double)a->dtoh, "B");
			an_f_num(x, "dtod_bytes", (double)a->dtod, "B");
			an_f_num(x, "migrations", (double)a->migrations, NULL);
			an_f_num(x, "direction_changes", (double)a->flips, NULL);
			an_f_num(x, "gpu_page_faults", (double)a->gpu_faults, NULL);
			an_f_num(x, "cpu_page_faults", (double)a->cpu_faults, NULL);
			an_f_num(x, "time_lost_ms", (double)a->migrate_ns / 1e6, "ms");
			an_f_python(x, "python", "allocated at", r,
			          an_f_py_of_record(r, NVLP_K_MANAGED, a->t, 0));
			an_f_native(x, "allocated_at", r, a->stack);
			an_f_advise(x, a->advised || a->prefetched
			              ? "Advice/prefetch is present but pages still bounce: give "
			                "each phase its own buffer or "
			                "use cudaMemAdviseSetReadMostly for shared read-only data."
			              : "Prefetch before each phase (cudaMemPrefetchAsync to the "
			                "GPU that uses it next) or set "
			                "cudaMemAdviseSetPreferredLocation + "
			                "cudaMemAdviseSetAccessedBy; avoid touching it "
			                "from the CPU between GPU kernels.");
		}
	}
}

/* The share of [t0, t1] the main thread of r spent in chain id (the chain's id is a hash of its
 * text: the same in every process). @return -1 when r has no samples there */
static double place_share(const struct an_rank *r, uint64_t id, uint64_t t0, uint64_t t1)
{
	struct an_place_top top[16];
	uint64_t total = 0;
	size_t n = an_places_top(r, AN_PLACE_MAIN, t0, t1, top, 16, &total);
	if (!total)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (top[i].pystack == id)
			return (double)top[i].ns / (double)total;
	return 0;
}

/* What the late rank's main thread did over the steps (the whole trace without steps), from the
 * Python sampler: its top locations by time, each against the other ranks' share of it */
static void straggler_places(struct an_finding *y, const struct an_job *job, size_t f)
{
	uint64_t t0 = job->win1 > job->win0 ? job->win0 : job->t0;
	uint64_t t1 = job->win1 > job->win0 ? job->win1 : job->t1;
	struct an_place_top top[3];
	uint64_t total = 0;
	size_t n = an_places_top(&job->ranks[f], AN_PLACE_MAIN, t0, t1, top, 3, &total);
	for (size_t i = 0; i < n && total; i++) {
		double others = 0;
		int no = 0;
		for (size_t g = 0; g < job->nranks; g++) {
			double sh = g == f || !job->ranks[g].ok ? -1 : place_share(&job->ranks[g],
			                                                           top[i].pystack, t0, t1);
			if (sh >= 0)
				others += sh, no++;
		}
		struct an_place p = {.pystack = top[i].pystack, .text = top[i].text};
		char key[32], buf[256], oth[48] = "";
		an_place_text(&p, buf, sizeof buf);
		if (no)
			snprintf(oth, sizeof oth, "; other ranks %.0f%%", others / no * 100);
		snprintf(key, sizeof key, "place_%zu", i + 1);
		/* an_place_text starts with the time held since the sample: the share says it here */
		const char *in = strstr(buf, " in ");
		an_f_str(y, key, "%.0f%% of its time in%s%s",
		       (double)top[i].ns / (double)total * 100, in ? in + 3 : buf, oth);
	}
}

static void stragglers(const struct an_job *job, const double *th, struct an_findings *out)
{
	for (size_t f = 0; f < job->nranks; f++) {
		const struct an_rank_x *x = &job->rx[f];
		if (!x->colls || !x->last_count)
			continue;
		double share = (double)x->last_count / (double)x->colls;
		double lead = x->median_lead_ns / 1e6;
		if (share < th[AN_TH_straggler_share] || lead < th[AN_TH_straggler_min_ms])
			continue;
		/* DDP's own asymmetry reaches ~12% of a fast step (shipped ddp_killed: 0.56 ms of
		 * 4.9 ms); milliseconds lost in every longer step are a straggler too */
		int share_ok = lead * 1e6 >= th[AN_TH_straggler_step_share] * job->step_ns;
		int long_ok = lead >= th[AN_TH_straggler_long_ms] &&
		              lead * 1e6 >= th[AN_TH_straggler_long_share] * job->step_ns;
		if (job->step_ns > 0 && !share_ok && !long_ok)
			continue;
		struct an_finding *y = an_f_add(out, AN_F_straggler, AN_SEV_WARNING,
		                           "Rank %d arrives last at %.0f%% of collectives, "
		                           "typically %.2f ms after the others",
		                           an_f_rank_id(job, f), share * 100, lead);
		y->rank = an_f_rank_id(job, f);
		an_f_num(y, "rank", an_f_rank_id(job, f), NULL);
		an_f_str(y, "host", "%s", job->ranks[f].host);
		an_f_num(y, "collectives", (double)x->colls, NULL);
		an_f_num(y, "last_arrivals", (double)x->last_count, NULL);
		an_f_num(y, "median_lead_ms", lead, "ms");
		an_f_num(y, "mean_lead_ms", x->lead_ns_sum / (double)x->last_count / 1e6, "ms");
		/* What the job lost, not a sum over collectives: once the others have waited for
		 * the late rank in a step, its later collectives in that step find them in step
		 * with it, so a step loses about one lead. Never more than the waiting the rank
		 * caused any one other rank, nor the wall time. */
		int others = 0;
		for (size_t g = 0; g < job->nranks; g++)
			others += g != f && job->rx[g].colls;
		double caused_each = others ? x->caused_wait_ns / others / 1e6 : 0;
		double wall = (double)(job->t1 - job->t0) / 1e6;
		double lost;
		if (job->step_ns > 0) {
			double per = lead < job->step_ns / 1e6 ? lead : job->step_ns / 1e6;
			lost = per * (double)job->steps;
			an_f_num(y, "lost_per_step_ms", per, "ms");
		} else {
			lost = caused_each;
		}
		if (lost > caused_each)
			lost = caused_each;
		if (lost > wall)
			lost = wall;
		an_f_num(y, "wait_caused_ms", lost, "ms");
		if (job->step_ns > 0)
			an_f_num(y, "lead_step_share", lead * 1e6 / job->step_ns, NULL);
		straggler_places(y, job, f);
		an_f_advise(y, "Others wait for this rank in every collective: look at what it does "
		          "before them "
		          "(data loading, uneven batch or shard sizes, CPU contention, a slower "
		          "GPU or host).");
	}
}

/* ncclResult_t as NCCL names it */
static const char *nccl_result_name(int rc)
{
	static const char *const n[] = {"ncclSuccess",        "ncclUnhandledCudaError",
	                                "ncclSystemError",    "ncclInternalError",
	                                "ncclInvalidArgument", "ncclInvalidUsage",
	                                "ncclRemoteError",    "ncclInProgress"};
	return rc >= 0 && rc < (int)(sizeof n / sizeof n[0]) ? n[rc] : "an NCCL error";
}

/* The ranks (ascending) as "0,2,3"; past AN_LIST_PLAIN of them, runs as ranges
 * ("0-699,701-1023"); what does not fit in len ends the list as "... and N more". */
#define AN_LIST_PLAIN 16
static void rank_list(char *buf, size_t len, const int *ranks, int n)
{
	size_t at = 0;
	buf[0] = 0;
	for (int k = 0; k < n;) {
		int e = k;
		while (n > AN_LIST_PLAIN && e + 1 < n && ranks[e + 1] == ranks[e] + 1)
			e++;
		char item[32], more[32];
		if (e - k >= 2)
			snprintf(item, sizeof item, "%s%d-%d", k ? "," : "", ranks[k], ranks[e]);
		else
			snprintf(item, sizeof item, "%s%d", k ? "," : "", ranks[k]), e = k;
		int left = n - e - 1;
		snprintf(more, sizeof more, " and %d more", n - k);
		if (at + strlen(item) + (left ? strlen(more) : 0) >= len) {
			snprintf(buf + at, len - at, "%s", more);
			return;
		}
		at += (size_t)snprintf(buf + at, len - at, "%s", item);
		k = e + 1;
	}
}

/* The hang_suspect finding of h with its title: who never entered and who waited */
static struct an_finding *hang_add(const struct an_job *job, const struct an_hang *h,
                                   const char *miss, struct an_findings *out)
{
	char failed[96] = "", cname[80] = "", waited[32];
	an_fmt_value(waited, sizeof waited, h->wait_ms, "ms");
	if (h->failed_rank >= 0 && h->failed_seq != h->seq)
		snprintf(failed, sizeof failed, " (rank %d's next call, #%u, failed: %s)",
		         h->failed_rank, h->failed_seq, nccl_result_name(h->failed_rc));
	else if (h->failed_rank >= 0)
		snprintf(failed, sizeof failed, " (rank %d's call failed: %s)", h->failed_rank,
		         nccl_result_name(h->failed_rc));
	if (job->comms[h->comm].name[0])
		snprintf(cname, sizeof cname, " (\"%s\")", job->comms[h->comm].name);
	char count[24] = "", list[128];
	if (h->nmissing > AN_LIST_PLAIN) { /* the title names them in short: ranges, a count */
		snprintf(count, sizeof count, " (%d)", h->nmissing);
		rank_list(list, 72, h->missing, h->nmissing);
		miss = list;
	}
	return an_f_add(out, AN_F_hang_suspect, AN_SEV_CRITICAL,
	           "%s #%u on comm %016llx%s never entered by rank%s %s%s; others waited %s%s",
	           nvlp_nccl_fn_name(h->fn), h->seq, (unsigned long long)job->comms[h->comm].hash,
	           cname, h->nmissing > 1 ? "s" : "", miss, count, waited, failed);
}

/* Where each rank's last NCCL call came from: the missing ones stopped after it (all named),
 * the waiting ones are blocked in it (the first two) */
static void hang_python(struct an_finding *x, const struct an_job *job, const struct an_hang *h)
{
	for (int pass = 0, waiting = 0; pass < 2; pass++)
		for (size_t f = 0; f < job->nranks; f++) {
			const struct an_rank *r = &job->ranks[f];
			int id = an_f_rank_id(job, f);
			int in = an_hang_member(h, id) == (pass ? AN_HANG_PRESENT : AN_HANG_MISSING);
			if (!in || !r->ok || !r->npyrefs || (pass && waiting >= 2))
				continue;
			char key[32];
			snprintf(key, sizeof key, "python_rank%d", id);
			int n = x ? x->nev : 0;
			an_f_python(x, key, pass ? "waits in NCCL at" : "last NCCL call at", r,
			          an_f_py_last_nccl(r));
			waiting += pass && x && x->nev > n;
		}
}

/* Where the main thread of each missing rank (all) and waiting rank (the first two) was at its
 * end, from the Python sampler: "31.2 s in load_next_batch (train.py:23) <- main (train.py:40)" */
static void hang_samples(struct an_finding *x, const struct an_job *job, const struct an_hang *h)
{
	for (int pass = 0; pass < 2; pass++)
		for (int k = 0; k < (pass ? h->npresent : h->nmissing) && k < (pass ? 2 : AN_LIST_PLAIN);
		     k++) {
			int id = pass ? h->present[k] : h->missing[k], fi = an_f_file_of(job, id);
			struct an_place p;
			if (fi < 0 || !job->ranks[fi].ok)
				continue;
			const struct an_rank *r = &job->ranks[fi];
			if (!an_place_at(r, AN_PLACE_MAIN, an_job_time(r, r->t_alive), &p) || !p.pystack)
				continue;
			char key[32], buf[256];
			snprintf(key, sizeof key, "place_rank%d", id);
			an_place_text(&p, buf, sizeof buf);
			an_f_str(x, key, "%s", buf);
		}
}

/* Where rank id was when it ended (the call in flight) and what its GPU still ran (kernel
 * channels that never stopped: the collective was running there) */
static void hang_place(struct an_finding *x, const struct an_job *job, const struct an_rank *r,
                       int id)
{
	char key[32], buf[192];
	const struct an_inflight *fl = an_end_inflight(r);
	if (fl) {
		an_inflight_text(job, r, fl, buf, sizeof buf);
		snprintf(key, sizeof key, "rank_%d_in_flight", id);
		an_f_str(x, key, "%s", buf);
	}
	if (r->kch_nostop) {
		snprintf(key, sizeof key, "rank_%d_gpu", id);
		an_f_str(x, key,
		       "%llu NCCL kernel channel(s) of %s (NCCL's #%u) started and never stopped: the "
		       "collective was still running on the GPU",
		       (unsigned long long)r->kch_nostop, nvlp_nccl_fn_name(r->kch_nostop_fn),
		       r->kch_nostop_seq);
	}
}

/* How the missing ranks ended, and then the waiting ones (stopped while waiting) */
static void hang_endings(struct an_finding *x, const struct an_job *job, const struct an_hang *h,
                         const struct an_oom_rise *rises, size_t nrises)
{
	for (int pass = 0; pass < 2; pass++) /* each list's first ranks (the evidence is bounded) */
		for (int k = 0; k < (pass ? h->npresent : h->nmissing) && k < AN_LIST_PLAIN; k++) {
			int id = pass ? h->present[k] : h->missing[k], fi = an_f_file_of(job, id);
			char how[160], step[120], key[32];
			uint64_t in;
			if (fi < 0 || !job->ranks[fi].ok)
				continue;
			hang_place(x, job, &job->ranks[fi], id);
			if (!an_f_end_of(job, &job->ranks[fi], rises, nrises, how, sizeof how, step,
			            sizeof step, &in))
				continue;
			snprintf(key, sizeof key, "rank_%d_ended", id);
			an_f_str(x, key, "%s%s", how, step);
		}
}

/* A hang is told when the ranks waited long enough for it to be more than the job stopping as
 * a whole, and always when a member's trace ended abnormally (a rank killed before a collective
 * the others entered is the hang's cause however short their traces run after), unless every
 * member ended so within hang_min_ms of the others, or every member's trace was cut short (no END
 * record) within killed_together_ms of the others after a wait shorter than that: a job killed as
 * a whole (a time limit's SIGKILL of the tree finds some ranks one collective ahead of the rest,
 * and each trace loses what it had not written yet: up to a frame period, 500 ms) */
static int hang_shown(const struct an_job *job, const double *th, const struct an_hang *h)
{
	int abnormal = 0, all = 1, cut = 1;
	uint64_t lo = UINT64_MAX, hi = 0;
	for (int pass = 0; pass < 2; pass++)
		for (int k = 0; k < (pass ? h->npresent : h->nmissing); k++) {
			int fi = an_f_file_of(job, pass ? h->present[k] : h->missing[k]);
			if (fi < 0 || !job->ranks[fi].ok)
				continue;
			const struct an_rank *r = &job->ranks[fi];
			int a = an_end_abnormal(r);
			abnormal |= a;
			all &= a;
			cut &= r->end_reason < 0 && !r->fatal.signal;
			uint64_t e = an_job_time(r, r->t_alive);
			lo = e < lo ? e : lo;
			hi = e > hi ? e : hi;
		}
	double spread_ms = lo <= hi ? (double)(hi - lo) / 1e6 : 0;
	if (cut && spread_ms < th[AN_TH_killed_together_ms] && h->wait_ms < th[AN_TH_killed_together_ms])
		return 0;
	if (h->wait_ms >= th[AN_TH_hang_min_ms])
		return 1;
	return abnormal && !(all && spread_ms < th[AN_TH_hang_min_ms]);
}

static void hangs(const struct an_job *job, const double *th, struct an_findings *out)
{
	size_t nrises = 0;
	struct an_oom_rise *rises = job->nhangs ? an_oom_rises(job, &nrises) : NULL;
	for (size_t i = 0; i < job->nhangs; i++) {
		const struct an_hang *h = &job->hangs[i];
		if (!hang_shown(job, th, h))
			continue;
		char miss[200], pres[200];
		rank_list(miss, sizeof miss, h->missing, h->nmissing);
		rank_list(pres, sizeof pres, h->present, h->npresent);
		struct an_finding *x = hang_add(job, h, miss, out);
		if (h->failed_rank >= 0) {
			an_f_num(x, "failed_rank", h->failed_rank, NULL);
			an_f_str(x, "failed_with", "%s", nccl_result_name(h->failed_rc));
			if (h->failed_seq != h->seq)
				an_f_num(x, "failed_seq", h->failed_seq, NULL);
		}
		x->comm = h->comm;
		if (h->nmissing == 1) {
			x->rank = h->missing[0];
			an_f_num(x, "rank", h->missing[0], NULL);
		}
		an_f_str(x, "missing_ranks", "%s", miss);
		an_f_str(x, "waiting_ranks", "%s", pres);
		an_f_str(x, "comm", "%016llx", (unsigned long long)job->comms[h->comm].hash);
		if (job->comms[h->comm].name[0])
			an_f_str(x, "comm_name", "%s", job->comms[h->comm].name);
		an_f_num(x, "seq", h->seq, NULL);
		an_f_str(x, "collective", "%s", nvlp_nccl_fn_name(h->fn));
		an_f_num(x, "wait_ms", h->wait_ms, "ms");
		hang_python(x, job, h);
		hang_samples(x, job, h);
		hang_endings(x, job, h, rises, nrises);
		an_f_advise(x, "The missing ranks stopped (crash, kill, exception or a diverging code "
		          "path) before this "
		          "collective; check their logs. Set TORCH_NCCL_ASYNC_ERROR_HANDLING / a "
		          "process-group timeout "
		          "so a hang fails fast.");
	}
	free(rises);
}

static void exposed(const struct an_job *job, const double *th, struct an_findings *out)
{
	if (!job->have_gpu)
		return;
	double e = 0, w = 0, c = 0;
	int worst = -1, win = 0, n = 0;
	double worst_share = 0;
	for (size_t f = 0; f < job->nranks; f++) {
		const struct an_rank *r = &job->ranks[f];
		if (!r->ok || !r->kind_count[NVLP_K_KERNEL])
			continue;
		double re, rw, rc;
		win = an_rank_exposure(job, r, &re, &rw, &rc);
		e += re;
		w += rw;
		c += rc;
		n++;
		if (rw > 0 && re / rw > worst_share) {
			worst_share = re / rw;
			worst = an_f_rank_id(job, f);
		}
	}
	double share = w > 0 ? e / w : 0;
	if (share < th[AN_TH_exposed_share] || !n)
		return;
	struct an_finding *x =
	    an_f_add(out, AN_F_exposed_communication,
	        share >= th[AN_TH_exposed_critical] ? AN_SEV_CRITICAL : AN_SEV_WARNING,
	        "%.0f%% of %s is communication not hidden behind compute", share * 100,
	        win ? "the training steps' time" : "wall time");
	an_f_num(x, "exposed_share", share, NULL);
	an_f_str(x, "measured_over", "%s", win ? "steps" : "whole trace");
	an_f_num(x, "exposed_ms_per_rank", e / 1e6 / n, "ms");
	/* the same communication time the summary line gives for the span measured over */
	an_f_num(x, win ? "comm_in_steps_ms_per_rank" : "communication_ms_per_rank",
	       c / 1e6 / n, "ms");
	an_f_num(x, "hidden_share_of_communication", c > 0 ? 1 - e / c : 0, NULL);
	/* its cost: the exposed time itself (time the GPUs waited on communication, part of the
	 * wall time by construction), per step and over the run */
	if (win && job->steps)
		an_f_num(x, "lost_per_step_ms", e / 1e6 / n / (double)job->steps, "ms");
	an_f_num(x, "lost_ms", e / 1e6 / n, "ms");
	if (worst >= 0)
		an_f_num(x, "worst_rank", worst, NULL);
	/* explain() replaces this when a root cause explains the finding */
	an_f_advise(x, "Overlap communication with compute: DDP bucket_cap_mb / "
	          "gradient_as_bucket_view, FSDP "
	          "prefetch, fewer and larger collectives; or make it cheaper (check "
	          "pcie_fallback and "
	          "low_bus_bandwidth first).");
}

static void low_bw(const struct an_job *job, const double *th, struct big *big,
                   struct an_findings *out)
{
	for (size_t ci = 0; ci < job->ncomms; ci++) {
		const struct an_comm *c = &job->comms[ci];
		if (c->peak_Bps <= 0 || c->nranks < 2)
			continue;
		/* one finding per communicator: the collective losing the most GPU time, others
		 * named */
		int worst = -1;
		char others[160] = "";
		for (int fn = 0; fn < NVLP_NCCL_FN_COUNT; fn++) {
			struct big *b = &big[ci * NVLP_NCCL_FN_COUNT + fn];
			if (!b->calls || b->ns <= 0 ||
			    b->sbus / b->ns * 1e9 >= th[AN_TH_low_busbw_share] * c->peak_Bps ||
			    (double)b->calls <
			        th[AN_TH_low_busbw_min_calls] * (c->nmembers ? c->nmembers : 1))
				continue;
			if (worst < 0 || b->ns > big[ci * NVLP_NCCL_FN_COUNT + worst].ns) {
				if (worst >= 0)
					snprintf(others + strlen(others),
					         sizeof others - strlen(others), "%s%s",
					         others[0] ? "," : "",
					         nvlp_nccl_fn_name((unsigned)worst));
				worst = fn;
			} else
				snprintf(others + strlen(others), sizeof others - strlen(others),
				         "%s%s", others[0] ? "," : "",
				         nvlp_nccl_fn_name((unsigned)fn));
		}
		if (worst < 0)
			continue;
		struct big *b = &big[ci * NVLP_NCCL_FN_COUNT + worst];
		double busbw = b->sbus / b->ns;
		struct an_finding *x = an_f_add(out, AN_F_low_bus_bandwidth, AN_SEV_WARNING,
		                           "%s on %d ranks reaches %.1f GB/s bus bandwidth, %.0f%% "
		                           "of the %.0f GB/s NVLink peak",
		                           nvlp_nccl_fn_name((unsigned)worst), c->nranks, busbw,
		                           busbw * 1e11 / c->peak_Bps, c->peak_Bps / 1e9);
		x->comm = (int)ci;
		an_f_str(x, "comm", "%016llx", (unsigned long long)c->hash);
		an_f_str(x, "collective", "%s", nvlp_nccl_fn_name((unsigned)worst));
		an_f_num(x, "calls", (double)b->calls, NULL);
		an_f_num(x, "min_message_mib", th[AN_TH_low_busbw_min_mib], "MiB");
		an_f_num(x, "algbw_gbps", b->salg / b->ns, "GB/s");
		an_f_num(x, "busbw_gbps", busbw, "GB/s");
		an_f_peak(x, c->peak_Bps / 1e9);
		if (others[0])
			an_f_str(x, "also_low", "%s", others);
		/* no straggler advice: bandwidths use transfer time, not waiting; explain() gives
		 * the pcie_fallback advice when the fallback is on this communicator */
		an_f_advise(x, "Large messages should reach 60-80% of the link: check "
		          "NCCL_ALGO/NCCL_PROTO "
		          "overrides, channel counts (NCCL_MIN_NCHANNELS) and "
		          "NCCL_DEBUG=INFO transports.");
	}
}

/* Ranks a hang explains: missing from a hang (its root) or waiting in one (stopped while
 * waiting, usually by the launcher): their end is told by the hang_suspect finding, when that
 * is printed. */
static int in_hang(const struct an_job *job, const uint8_t *shown, int id, int *missing)
{
	for (size_t h = 0; h < job->nhangs; h++) {
		int m = shown && shown[h] ? an_hang_member(&job->hangs[h], id) : 0;
		if (m)
			return *missing = m == AN_HANG_MISSING, 1;
	}
	return 0;
}

/* The thread a fatal signal hit, and the call the process was in when it ended */
static void ended_fatal(struct an_finding *x, const struct an_job *job, const struct an_rank *r)
{
	if (r->fatal.signal) {
		an_f_num(x, "thread", (double)r->fatal.tid, NULL);
		if (r->fatal.thread[0])
			an_f_str(x, "thread_name", "%s", r->fatal.thread);
		an_f_num(x, "main_thread", r->fatal.main, NULL);
	}
	const struct an_inflight *fl = an_end_inflight(r);
	if (fl) {
		char buf[192];
		an_inflight_text(job, r, fl, buf, sizeof buf);
		an_f_str(x, "in_flight", "%s", buf);
	}
}

/* Abnormal ends only (a signal, no END record, or an exit status > 0), and then the step it was
 * in: a finding of their own, unless a printed hang explains them. */
static void ended(const struct an_job *job, const double *th, struct an_findings *out)
{
	size_t nrises = 0;
	struct an_oom_rise *rises = an_oom_rises(job, &nrises);
	uint8_t *shown = malloc(job->nhangs ? job->nhangs : 1); /* once, not per rank */
	for (size_t h = 0; shown && h < job->nhangs; h++)
		shown[h] = (uint8_t)hang_shown(job, th, &job->hangs[h]);
	for (size_t f = 0; f < job->nranks; f++) {
		const struct an_rank *r = &job->ranks[f];
		char how[160], step[120];
		uint64_t in;
		int missing;
		if (!r->ok || !an_f_end_of(job, r, rises, nrises, how, sizeof how, step, sizeof step, &in) ||
		    in_hang(job, shown, an_f_rank_id(job, f), &missing))
			continue;
		struct an_finding *x = an_f_add(out, AN_F_rank_ended, AN_SEV_WARNING, "Rank %d (pid %d on %s) %s%s",
		                           an_f_rank_id(job, f), r->pid, r->host, how, step);
		x->rank = an_f_rank_id(job, f);
		an_f_num(x, "rank", an_f_rank_id(job, f), NULL);
		an_f_num(x, "pid", r->pid, NULL);
		an_f_str(x, "ended", "%s", r->fatal.signal                    ? "signal"
		                         : r->end_reason < 0                ? "no END record"
		                         : r->end_reason == NVLP_END_SIGNAL ? "signal"
		                                                            : "exit status");
		if (r->fatal.signal || r->end_signal)
			an_f_num(x, "signal", r->fatal.signal ? r->fatal.signal : r->end_signal, NULL);
		ended_fatal(x, job, r);
		if (r->have_exitinfo && r->end_reason != NVLP_END_SIGNAL && r->end_status >= 0)
			an_f_num(x, "exit_status", r->end_status, NULL);
		if (in)
			an_f_num(x, "step", (double)in, NULL);
		if (r->end_step)
			an_f_num(x, "steps_completed", (double)r->steps_done, NULL);
		an_f_num(x, "last_record_ms", an_end_ms(job, r), "ms");
		if (r->npyrefs)
			an_f_python(x, "python", "last NCCL call at", r, an_f_py_last_nccl(r));
		if (r->end_reason == NVLP_END_SIGNAL)
			an_f_advise(x, "A SIGTERM usually comes from the launcher (torchrun and mp.spawn stop "
			          "the other ranks when one fails) or a scheduler's time limit: look for "
			          "the rank that failed first.");
		else
			an_f_advise(x, "Look at this rank's own log (stderr; dmesg for the OOM killer) for why "
			          "it stopped; the other ranks' waits follow from it.");
	}
	free(rises);
	free(shown);
}

/* Records lost in a burst (a full per-thread buffer): that process's figures are partial. */
static void dropped(const struct an_job *job, struct an_findings *out)
{
	for (size_t f = 0; f < job->nranks; f++) {
		const struct an_rank *r = &job->ranks[f];
		if (!r->ok || !r->dropped)
			continue;
		struct an_finding *x =
		    an_f_add(out, AN_F_dropped_records, AN_SEV_WARNING,
		        "Rank %d (pid %d on %s) lost %llu records: its trace buffers were full",
		        an_f_rank_id(job, f), r->pid, r->host, (unsigned long long)r->dropped);
		x->rank = an_f_rank_id(job, f);
		an_f_num(x, "rank", an_f_rank_id(job, f), NULL);
		an_f_num(x, "pid", r->pid, NULL);
		an_f_str(x, "host", "%s", r->host);
		an_f_num(x, "dropped_records", (double)r->dropped, NULL);
		an_f_num(x, "recorded", (double)r->records, NULL);
		an_f_advise(x, "This process's figures are partial. Give each thread a larger buffer "
		          "(NVLPROF_BUFFER_KB) or record fewer kinds.");
	}
}

/* The collection_gaps finding, added at its first piece of evidence (*x NULL until then) */
static struct an_finding *gap_finding(struct an_findings *out, struct an_finding **x)
{
	if (!*x)
		*x = an_f_add(out, AN_F_collection_gaps, AN_SEV_INFO,
		         "Some data was not collected; related figures are partial");
	return *x;
}
#define GAP(...) an_f_str(gap_finding(out, x), __VA_ARGS__)

/* Traces that mix jobs, cannot be read, were cut short, or are missing */
static void gaps_traces(const struct an_job *job, struct an_findings *out, struct an_finding **x)
{
	if (job->several_jobs[0])
		GAP("several_jobs", "%s: figures mix those jobs; give each run its own directory",
		    job->several_jobs);
	for (size_t f = 0; f < job->nranks; f++) {
		const struct an_rank *r = &job->ranks[f];
		if (!r->ok)
			GAP("unreadable", "%s", r->err);
		else if (r->truncated)
			GAP("truncated", "rank %d: %s", r->rank, r->err);
	}
	for (size_t ci = 0; ci < job->ncomms; ci++) /* a rank without a trace cannot be judged */
		if (job->comms[ci].nranks > job->comms[ci].nmembers)
			GAP("missing_traces", "comm %016llx has %d ranks, traces hold %d of them",
			    (unsigned long long)job->comms[ci].hash, job->comms[ci].nranks,
			    job->comms[ci].nmembers);
}

/* 1 if a host has two GPUs (over its processes' devices): an NVLink peer to find. A single
 * GPU per host, one process or several sharing it, has no NVLink topology to record. */
static int has_gpu_peer(const struct an_job *job)
{
	for (size_t h = 0; h < job->nhosts; h++) /* pairs of one host's processes only */
		for (size_t p = job->host_at[h]; p < job->host_at[h + 1]; p++)
			for (size_t q = p; q < job->host_at[h + 1]; q++) {
				size_t f = job->by_host[p], g = job->by_host[q];
				if (f >= job->nranks || g >= job->nranks)
					continue;
				const struct an_rank *a = &job->ranks[f], *b = &job->ranks[g];
				if (!a->ok || !b->ok)
					continue;
				for (size_t i = 0; i < a->ndevs; i++)
					for (size_t k = 0; k < b->ndevs; k++)
						if (a->devs[i].device != b->devs[k].device)
							return 1;
			}
	return 0;
}

/* GPU activity, link counters and topology that were not recorded */
static void gaps_gpu(const struct an_job *job, struct an_findings *out, struct an_finding **x)
{
	if (!job->have_gpu_any && job->kch && job->kch->windows)
		GAP("gpu_activity",
		    "no GPU activity records: kernels and copies were traced only in %llu window(s) "
		    "(%.2f%% of the run, NVLPROF_KERNELS), none fell inside; %s "
		    "(NVLPROF_KERNELS=all: every kernel)",
		    (unsigned long long)job->kch->windows,
		    job->kch->span_ns ? 100.0 * (double)job->kch->window_ns / (double)job->kch->span_ns
		                      : 0.0,
		    job->have_kch_gpu ? "collectives timed by NCCL's kernel channels, compute overlap "
		                        "unknown"
		                      : "communication times are host call times");
	else if (!job->have_gpu_any)
		GAP("gpu_activity", "no GPU activity records (CUPTI off or no driver): %s",
		    job->have_kch_gpu ? "collectives timed by NCCL's kernel channels, compute overlap "
		                        "unknown"
		                      : "communication times are host call times");
	else if (!job->have_gpu && job->ncomms)
		GAP("gpu_activity", "no KERNEL records: %s",
		    job->have_kch_gpu ? "collectives timed by NCCL's kernel channels, compute overlap "
		                        "unknown"
		                      : "communication times are host call times");
	if (job->have_gpu_any && !job->have_links)
		GAP("link_counters", "no LINKSAMPLE records: NVLink/PCIe bytes unknown");
	if (job->have_gpu_any && !job->have_topo && has_gpu_peer(job))
		GAP("topology",
		    "no NVLINK topology records: link peak unknown, bandwidth not judged");
}

/* NCCL kernels that never finished or could not be matched to their calls */
static void gaps_kernels(const struct an_job *job, struct an_findings *out, struct an_finding **x)
{
	uint64_t unmatched = 0, resync = 0;
	for (size_t f = 0; f < job->nranks; f++) {
		unmatched += job->ranks[f].gpu_unmatched_kernels;
		resync += job->ranks[f].gpu_resync;
	}
	uint64_t unfinished = 0;
	for (size_t f = 0; f < job->nranks; f++)
		unfinished += job->ranks[f].gpu_unfinished;
	if (unfinished)
		GAP("unfinished_kernels",
		    "%llu NCCL kernels never finished (the job hung or was killed)",
		    (unsigned long long)unfinished);
	if (unmatched || resync)
		GAP("kernel_matching",
		    "%llu NCCL kernels without a call, %llu calls skipped to resynchronise",
		    (unsigned long long)unmatched, (unsigned long long)resync);
}

/* A note that says what was collected, not what is missing */
static int note_is_status(unsigned code)
{
	return code == NVLP_NOTE_INFO || code == NVLP_NOTE_ACTIVITY_ON ||
	       code == NVLP_NOTE_PM_SAMPLING_ON || code == NVLP_NOTE_NVML_ON ||
	       code == NVLP_NOTE_UM_ON || code == NVLP_NOTE_CONFIG || code == NVLP_NOTE_NCCL_PLUGIN;
}

/* A GPU sampled by another process of this job (the NOTE's value is its pid): its counters
 * are in the job */
static int note_sampled_elsewhere(const struct an_job *job, size_t f, const struct an_note *n)
{
	const struct an_rank *r = &job->ranks[f];
	int sampled_here = 0;
	if (n->code == NVLP_NOTE_PM_SAMPLING_UNAVAILABLE && n->value) /* r's host's processes */
		for (size_t p = job->host_at[r->host_ix]; p < job->host_at[r->host_ix + 1] && !sampled_here; p++) {
			size_t g = job->by_host[p];
			sampled_here = g < job->nranks && g != f && job->ranks[g].ok &&
			               (uint64_t)job->ranks[g].pid == n->value;
		}
	return sampled_here;
}

/* The same (code, message) came earlier: in an earlier trace or before note i of trace f */
static int note_seen_before(const struct an_job *job, size_t f, size_t i)
{
	const struct an_note *n = &job->ranks[f].notes[i];
	for (size_t g = 0; g <= f; g++)
		for (size_t j = 0; j < (g == f ? i : job->ranks[g].nnotes); j++)
			if (job->ranks[g].notes[j].code == n->code &&
			    !strcmp(job->ranks[g].notes[j].msg, n->msg))
				return 1;
	return 0;
}

/* Notes of what could not be collected: each distinct (code, message) once */
/* Each (code, message) the first time it comes, by a hash of both (at[]: where each came
 * first); a hash met again with another message falls back to the scan. @return 1 if note i of
 * trace f came before */
struct notes_seen {
	struct an_index ix;
	struct note_at {
		size_t f, i;
	} *at;
	size_t n, cap;
};
static int note_seen(struct notes_seen *s, const struct an_job *job, size_t f, size_t i)
{
	const struct an_note *n = &job->ranks[f].notes[i];
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (const char *c = n->msg; *c; c++)
		h = (h ^ (uint8_t)*c) * 1099511628211ull;
	long e = an_index_get(&s->ix, n->code, h);
	if (e >= 0) {
		const struct note_at *o = &s->at[e];
		return !strcmp(job->ranks[o->f].notes[o->i].msg, n->msg) || note_seen_before(job, f, i);
	}
	struct note_at *x = PUSH(s->at, s->n, s->cap);
	if (!x || an_index_put(&s->ix, n->code, h, (uint32_t)(s->n - 1)))
		return note_seen_before(job, f, i); /* out of memory: as it always was */
	*x = (struct note_at){f, i};
	return 0;
}

static void gaps_notes(const struct an_job *job, struct an_findings *out, struct an_finding **x)
{
	struct notes_seen seen = {0};
	for (size_t f = 0; f < job->nranks; f++) {
		const struct an_rank *r = &job->ranks[f];
		for (size_t i = 0; i < r->nnotes; i++) {
			const struct an_note *n = &r->notes[i];
			int before = note_seen(&seen, job, f, i); /* every note is remembered */
			if (note_is_status(n->code) || note_sampled_elsewhere(job, f, n) || before)
				continue;
			GAP(nvlp_note_name(n->code), "%s", n->msg);
		}
	}
	an_index_free(&seen.ix);
	free(seen.at);
}
#undef GAP

static void gaps(const struct an_job *job, struct an_findings *out)
{
	struct an_finding *x = NULL;
	gaps_traces(job, out, &x);
	gaps_gpu(job, out, &x);
	gaps_kernels(job, out, &x);
	gaps_notes(job, out, &x);
	an_f_advise(x, "Collection notes say what was missing and why; see `nvlprof info` per trace.");
}

/* Mark y as a consequence of root x: y drops to info (its own severity kept in evidence), x rises
 * to y's former severity (the root cause carries the cost of what it explains), and y's advice
 * points at x. share < 0: not a measured share. */
static void demote(struct an_finding *x, struct an_finding *y, double share, const char *advice)
{
	y->explained_by = x->id;
	y->sev_before = y->sev;
	an_f_str(y, "explained_by", "%s", x->id);
	if (share >= 0)
		an_f_num(y, "explained_share", share > 1 ? 1 : share, NULL);
	an_f_str(y, "severity_alone", "%s", an_sev_name(y->sev));
	int k = 0;
	while (k < x->nev && strcmp(x->ev[k].key, "explains"))
		k++;
	if (k < x->nev) {
		size_t l = strlen(x->ev[k].str);
		snprintf(x->ev[k].str + l, sizeof x->ev[k].str - l, ",%s", y->id);
	} else
		an_f_str(x, "explains", "%s", y->id);
	if (y->sev > x->sev)
		x->sev = y->sev;
	y->sev = AN_SEV_INFO;
	an_f_advise(y, advice);
}

/* Root causes and the findings they explain (see REPORT_JSON.md "explained findings"):
 * - pcie_fallback explains low_bus_bandwidth on the same communicator;
 * - straggler explains exposed_communication when the others' waiting for it is at least
 *   explained_share of the exposed time: the straggler arrives last and barely waits, so the other
 *   ranks' exposed time beyond its own is time their NCCL kernels sat waiting for it
 *   (sum over ranks r != s of max(0, exposed_r - exposed_s) / sum of exposed_r, same window as
 *   exposed_share);
 * - otherwise pcie_fallback explains exposed_communication when the fallback communicator's calls
 *   hold at least explained_share of the exposed time (an_comm_exposed_ns).
 * The straggler is tried first: waiting is measured directly, and a fallback communicator is
 * often the only one, which would claim every exposed nanosecond. */
static void explain_exposed(const struct an_job *job, const double *th, int fb_comm,
                            struct an_findings *out, struct an_finding *fb, struct an_finding *exp);
static void explain(const struct an_job *job, const double *th, int fb_comm,
                    struct an_findings *out)
{
	struct an_finding *fb = NULL, *exp = NULL;
	for (size_t i = 0; i < out->n; i++) {
		if (out->v[i].fid == AN_F_pcie_fallback)
			fb = &out->v[i];
		else if (out->v[i].fid == AN_F_exposed_communication)
			exp = &out->v[i];
	}
	explain_exposed(job, th, fb_comm, out, fb, exp); /* first: its root lists it first */
	if (fb && fb_comm >= 0) {
		for (size_t i = 0; i < out->n; i++) {
			struct an_finding *y = &out->v[i];
			if (y->fid == AN_F_low_bus_bandwidth && !y->explained_by && y->comm == fb_comm)
				demote(fb, y, -1,
				       "See pcie_fallback: the traffic is not on NVLink; fix that "
				       "first.");
		}
	}
}

static void explain_exposed(const struct an_job *job, const double *th, int fb_comm,
                            struct an_findings *out, struct an_finding *fb, struct an_finding *exp)
{
	if (!exp)
		return;
	/* straggler: the others' exposed time beyond the straggler's own */
	struct an_finding *best = NULL;
	double best_share = 0;
	for (size_t i = 0; i < out->n; i++) {
		struct an_finding *x = &out->v[i];
		if (x->fid != AN_F_straggler)
			continue;
		int rk = x->rank;
		double es = -1, tot = 0, excess = 0;
		for (size_t f = 0; f < job->nranks; f++)
			if (an_f_rank_id(job, f) == rk && job->ranks[f].ok) {
				double sp;
				an_rank_exposure(job, &job->ranks[f], &es, &sp, NULL);
			}
		if (es < 0)
			continue;
		for (size_t f = 0; f < job->nranks; f++) {
			const struct an_rank *r = &job->ranks[f];
			if (!r->ok || !r->kind_count[NVLP_K_KERNEL])
				continue;
			double e, sp;
			an_rank_exposure(job, r, &e, &sp, NULL);
			tot += e;
			if (an_f_rank_id(job, f) != rk && e > es)
				excess += e - es;
		}
		double share = tot > 0 ? excess / tot : 0;
		if (share > best_share) {
			best_share = share;
			best = x;
		}
	}
	if (best && best_share >= th[AN_TH_explained_share]) {
		exp->root_rank = best->rank;
		demote(
		    best, exp, best_share,
		    "See straggler: the other ranks' NCCL kernels wait for the late rank and that "
		    "waiting counts as exposed communication; fix the straggler first.");
		return;
	}
	if (fb && fb_comm >= 0) {
		double all = 0, mine = an_comm_exposed_ns(job, fb_comm, &all);
		double share = all > 0 ? mine / all : 0;
		if (share >= th[AN_TH_explained_share])
			demote(
			    fb, exp, share,
			    "See pcie_fallback: collectives over PCIe/host memory are too slow to "
			    "hide; fix that first.");
	}
}

/* Within a severity, causes before their consequences: a fallback or a straggler explains low
 * bandwidth and exposed communication, so it is read first. */
static int cmp_find(const void *a, const void *b)
{
	const struct an_finding *x = a, *y = b;
	if (x->sev != y->sev)
		return y->sev - x->sev;
	if (x->fid != y->fid) /* the list's order: causes first */
		return x->fid < y->fid ? -1 : 1;
	return strcmp(x->id, y->id);
}

/* Bytes, bus bytes and transfer time of the large GPU-timed calls per (communicator, NCCL
 * function); NULL if out of memory */
static struct big *big_calls(const struct an_job *job, const double *th)
{
	size_t nb = job->ncomms * NVLP_NCCL_FN_COUNT;
	struct big *big = calloc(nb ? nb : 1, sizeof *big);
	if (!big || job->calls_gpu_none)
		return big;
	double minb = th[AN_TH_low_busbw_min_mib] * MIB;
	for (size_t f = 0; f < job->nranks; f++) {
		const struct an_rank *r = &job->ranks[f];
		for (size_t k = 0; k < r->ncalls; k++) {
			const struct an_call *c = &r->calls[k];
			if (!c->gpu_start || !c->gpu_dur || (double)c->bytes < minb)
				continue;
			struct big *b = &big[(size_t)c->comm * NVLP_NCCL_FN_COUNT + c->fn];
			b->salg += (double)c->bytes;
			b->sbus +=
			    (double)c->bytes * an_busbw_factor(c->fn, job->comms[c->comm].nranks);
			b->ns += an_call_xfer_ns(job, c);
			b->calls++;
		}
	}
	return big;
}

/* Stable order: severity, then id (qsort is not stable: ties broken by id only, and same-id
 * findings were added in rank order, kept by this insertion sort) */
static void sort_findings(struct an_findings *out)
{
	for (size_t i = 1; i < out->n; i++) {
		struct an_finding t = out->v[i];
		size_t j = i;
		while (j > 0 && cmp_find(&out->v[j - 1], &t) > 0) {
			out->v[j] = out->v[j - 1];
			j--;
		}
		out->v[j] = t;
	}
}

/* Each explained finding right after its root (diagnosis order: cause, then what it
 * explains); out of memory keeps the plain order */
static void group_explained(struct an_findings *out)
{
	struct an_finding *v = malloc((out->n ? out->n : 1) * sizeof *v);
	char *used = calloc(out->n ? out->n : 1, 1);
	if (!v || !used) {
		free(v);
		free(used);
		return;
	}
	size_t n = 0;
	for (size_t i = 0; i < out->n; i++) {
		const struct an_finding *x = &out->v[i];
		if (x->explained_by)
			continue;
		v[n++] = *x;
		used[i] = 1;
		for (size_t k = 0; k < out->n; k++) {
			const struct an_finding *y = &out->v[k];
			if (!used[k] && y->explained_by && !strcmp(y->explained_by, x->id) &&
			    (y->root_rank < 0 || y->root_rank == x->rank)) {
				v[n++] = *y;
				used[k] = 1;
			}
		}
	}
	for (size_t k = 0; k < out->n; k++) /* a root not found: keep the finding anyway */
		if (!used[k])
			v[n++] = out->v[k];
	free(used);
	free(out->v);
	out->v = v;
}

int an_findings_compute(const struct an_job *job, const double *th, struct an_findings *out)
{
	memset(out, 0, sizeof *out);
	struct big *big = big_calls(job, th);
	if (!big)
		return -1;
	int fb_comm = fallback(job, th, big, out);
	split_host(job, th, out);
	staged(job, th, out);
	thrashing(job, th, out);
	stragglers(job, th, out);
	hangs(job, th, out);
	an_mismatch_findings(job, out);
	ended(job, th, out);
	exposed(job, th, out);
	low_bw(job, th, big, out);
	dropped(job, out);
	gaps(job, out);
	free(big);
	explain(job, th, fb_comm, out);
	sort_findings(out);
	group_explained(out);
	return 0;
}

void an_findings_free(struct an_findings *f)
{
	free(f->v);
	f->v = NULL;
	f->n = 0;
}

const struct an_finding *an_findings_find(const struct an_findings *f, enum an_fid fid)
{
	for (size_t i = 0; i < f->n; i++)
		if (f->v[i].fid == fid)
			return &f->v[i];
	return NULL;
}

const struct an_finding *an_findings_get(const struct an_findings *f, const char *id)
{
	for (size_t i = 0; i < f->n; i++)
		if (!strcmp(f->v[i].id, id))
			return &f->v[i];
	return NULL;
}

const char *an_findings_env_cause(const struct an_findings *f)
{
	const struct an_finding *x = an_findings_find(f, AN_F_pcie_fallback);
	if (!x)
		return "";
	for (int i = 0; i < x->nev; i++)
		if (!strcmp(x->ev[i].key, "env"))
			return x->ev[i].str;
	return "link counters";
}
