/* det_split_host.c: the nccl_split_host finding: ranks of one machine that NCCL counts as separate
 * nodes, so their collectives go over its network transport. */
#include <stdlib.h> /* calloc */
#include <string.h> /* strcmp */

#include "findings/findings_int.h"
#include "nvlp_trace.h"

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

/* The split communicator with the most collective time (one pass over every call); -1 none, -2
 * out of memory */
static int sh_busiest(const struct an_job *job, const char *split)
{
	double *ns = calloc(job->ncomms ? job->ncomms : 1, sizeof *ns);
	if (!ns)
		return -2;
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

static int sh_report(const struct an_job *job, const double *th, const struct sh_rank *s,
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
		return -1;
	x->comm = b->ci;
	if (sh_evidence(x, job, s, b, w, nsplit) >= th[AN_TH_split_host_critical])
		x->sev = AN_SEV_CRITICAL;
	an_f_advice(x, AN_ADV_PLAIN);
	return 0;
}

int an_detect_nccl_split_host(const struct an_detect_ctx *ctx, struct an_findings *out)
{
	const struct an_job *job = ctx->job;
	const double *th = ctx->th;
	if (job->nranks < 2 || !job->ncomms)
		return 0;
	size_t n = job->nranks;
	struct sh_rank *s = sh_ranks(job);
	struct sh_members mb = {0};
	struct sh_scratch w = {calloc(n, sizeof(size_t)), calloc(n, sizeof(size_t)), 0,
	                       calloc(n, sizeof(int)), calloc(n, sizeof(size_t))};
	char *split = calloc(job->ncomms, 1);
	int rc = -1;
	if (!s || !split || !w.mstamp || !w.istamp || !w.mident || !w.mfirst ||
	    sh_members(job, &mb) < 0)
		goto done;
	struct sh_comm m;
	rc = 0;
	int nsplit = 0;
	for (size_t ci = 0; ci < job->ncomms; ci++) {
		if (job->comms[ci].nranks < 2 || mb.start[ci + 1] - mb.start[ci] < 2)
			continue;
		sh_judge(job, s, &mb, &w, (int)ci, &m);
		split[ci] = m.split != 0;
		nsplit += split[ci];
	}
	int best = nsplit ? sh_busiest(job, split) : -1;
	if (best == -2)
		rc = -1;
	else if (best >= 0) {
		sh_judge(job, s, &mb, &w, best,
		         &m); /* again: its machines' first members (mfirst) */
		rc = sh_report(job, th, s, &m, &w, nsplit, out);
	}
done:
	free(s);
	sh_members_free(&mb);
	free(w.mstamp);
	free(w.istamp);
	free(w.mident);
	free(w.mfirst);
	free(split);
	return rc;
}
