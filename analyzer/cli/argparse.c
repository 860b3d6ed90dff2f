/* argparse.c: an_parse_args, the one walk of a command's argv against its option table and the
 * shared options (argparse.h), with the messages the command gave it. */
#include <string.h> /* strcmp */

#include "cli/argparse.h"

/* The option a names in t (NULL: none), and in *val the VALUE of a name=VALUE */
static const struct an_opt *find_opt(const struct an_opt *t, const char *a, const char **val)
{
	for (; t && t->name; t++) {
		size_t n = strlen(t->name);
		if (!strcmp(a, t->name) || (t->alias && !strcmp(a, t->alias)))
			return t;
		if ((t->flags & AN_OPT_EQ) && !strncmp(a, t->name, n) && a[n] == '=') {
			*val = a + n + 1;
			return t;
		}
	}
	return NULL;
}

/* m about arg (NULL: none) on stderr, then the usage if m says so. @return 2, the exit status */
static int say(const struct an_cmdline *c, const struct an_argmsg *m, const char *arg)
{
	fprintf(stderr, "%s%s%s\n", m->pre, arg ? arg : "", m->post ? m->post : "");
	if (m->usage && c->usage)
		c->usage(stderr);
	return 2;
}

/* The option o at argv[*i] (val: its name=VALUE part, else NULL) taken. @return -1 to go on, -2
 * to say it as unknown (no value, none said), else the exit status */
static int take(const struct an_cmdline *c, const struct an_opt *o, const char *prefix, int argc,
                char **argv, int *i, const char *val)
{
	if (o->kind == AN_OPT_VALUE && !val) {
		if (*i + 1 < argc && !((o->flags & AN_OPT_NONEMPTY) && !argv[*i + 1][0]))
			val = argv[++*i];
		else if (!o->needs)
			return -2;
		else {
			fprintf(stderr, "%s%s needs %s\n", prefix, argv[*i], o->needs);
			if ((o->flags & AN_OPT_USAGE) && c->usage)
				c->usage(stderr);
			return 2;
		}
	}
	if (o->fn)
		return o->fn(o->ptr, val);
	if (o->kind == AN_OPT_FLAG)
		*(int *)o->ptr = 1;
	else
		*(const char **)o->ptr = val;
	return -1;
}

/* argv[*i]: an option of shared or c's table, help, or an unknown option. @return -1 to go on,
 * -3 an argument, else the exit status */
static int one_arg(const struct an_cmdline *c, const struct an_opt *shared, int argc, char **argv,
                   int *i)
{
	const char *a = argv[*i], *val = NULL;
	const struct an_opt *o = find_opt(shared, a, &val);
	const char *prefix = "nvlprof: ";
	if (!o) {
		o = find_opt(c->opts, a, &val);
		prefix = c->prefix;
	}
	int rc = o ? take(c, o, prefix, argc, argv, i, val) : -2;
	if (rc != -2)
		return rc;
	if (!o && c->help && (!strcmp(a, "-h") || !strcmp(a, "--help"))) {
		c->help(stdout);
		return 0;
	}
	if (a[0] == '-' && (a[1] || c->leading))
		return say(c, &c->unknown, a);
	return -3;
}

int an_parse_args(struct an_cmdline *c, int argc, char **argv)
{
	struct an_opt shared[5];
	if (c->th)
		an_shared_opts(shared, c->th, c->threads);
	int i = 1, n = 0;
	for (; i < argc; i++) {
		if (c->leading && !strcmp(argv[i], "--")) {
			i++;
			break;
		}
		int rc = one_arg(c, c->th ? shared : NULL, argc, argv, &i);
		if (rc == -3 && c->leading)
			break;
		if (rc == -3 && c->maxargs > 0 && n == c->maxargs)
			return say(c, &c->extra, argv[i]);
		if (rc == -3)
			argv[1 + n++] = argv[i]; /* a slot already walked */
		else if (rc >= 0)
			return rc;
	}
	c->args = c->leading ? argv + i : argv + 1;
	c->nargs = c->leading ? argc - i : n;
	c->args[c->nargs] = NULL;
	if (!c->nargs && c->none.pre)
		return say(c, &c->none, NULL);
	return -1;
}
