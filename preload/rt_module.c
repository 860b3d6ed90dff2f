/* rt_module.c: the table of registered modules, and the core's walks over it (init, end, fork child) in the order nvlp_module.h gives. */
#include "nvlp_module.h"
#include "rt_internal.h"

static struct {
	const struct nvlp_module *at[NVLP_MOD_COUNT];
	const struct nvlp_config *inited; /* set once the init walk ran (not under disable) */
} module_table;

void nvlp_module_register(enum nvlp_module_id id, const struct nvlp_module *m)
{
	if ((unsigned)id >= NVLP_MOD_COUNT)
		return;
	__atomic_store_n(&module_table.at[id], m, __ATOMIC_RELEASE);
	const struct nvlp_config *cfg = __atomic_load_n(&module_table.inited, __ATOMIC_ACQUIRE);
	if (cfg && m->init)
		m->init(cfg); /* registered after nvlp_init ran: late, but not never */
}

/* Each walk goes top to bottom through NVLP_MODULES. */
#define EACH_HOOK(m, hook)                                                                         \
	for (unsigned i_ = 0; i_ < NVLP_MOD_COUNT; i_++)                                           \
		if (((m) = __atomic_load_n(&module_table.at[i_], __ATOMIC_ACQUIRE)) && (m)->hook)

void nvlp_modules_init(const struct nvlp_config *cfg)
{
	const struct nvlp_module *m;
	EACH_HOOK(m, init)
		m->init(cfg);
	__atomic_store_n(&module_table.inited, cfg, __ATOMIC_RELEASE);
}

void nvlp_modules_flush(void)
{
	const struct nvlp_module *m;
	EACH_HOOK(m, flush)
		m->flush();
}

void nvlp_modules_stop(void)
{
	const struct nvlp_module *m;
	EACH_HOOK(m, stop)
		m->stop();
}

void nvlp_modules_atfork_child(void)
{
	const struct nvlp_module *m;
	EACH_HOOK(m, atfork_child)
		m->atfork_child();
}
