/* argparse.h: the option-table parser of the nvlprof commands: a command declares its options as
 * a table of struct an_opt and its messages in a struct an_cmdline; an_parse_args walks its argv
 * against that table and the shared options (opts.c). */
#ifndef NVLP_ARGPARSE_H
#define NVLP_ARGPARSE_H
#include <stdio.h> /* FILE */

/* A message about one argument, on stderr: pre, the argument (none for a message about no
 * argument), post and a newline; then the command's usage when usage is set. */
struct an_argmsg {
	const char *pre, *post;
	int usage;
};

enum an_opt_kind {
	AN_OPT_FLAG,  /* no value: ptr is an int set to 1, or fn is called with val NULL */
	AN_OPT_VALUE, /* a value, the next argument: ptr is a const char * set to it, or fn's */
};
enum {
	AN_OPT_EQ = 1,       /* the value may also be given as name=VALUE (name only, not alias) */
	AN_OPT_NONEMPTY = 2, /* an empty next argument counts as no value */
	AN_OPT_USAGE = 4,    /* the usage after the no-value message */
};

/* One option of a command's table (ended by an entry without a name). */
struct an_opt {
	const char *name, *alias; /* as typed: "--json", "-j"; alias may be NULL */
	enum an_opt_kind kind;
	void *ptr;
	int flags; /* AN_OPT_* */
	/* VALUE without one: "PREFIX OPTION needs NEEDS" said (PREFIX the command's, "nvlprof: "
	 * for a shared option); NULL: taken as an unknown option */
	const char *needs;
	int (*fn)(void *ptr, const char *val); /* set, it takes the option instead of ptr:
	                                        * -1 to go on, else the exit status (said) */
};

/* A command's command line: what it accepts and says; an_parse_args fills args and nargs. */
struct an_cmdline {
	const struct an_opt *opts; /* the command's table */
	double *th;                /* set: the shared options too (opts.c), tried first, into th */
	int *threads;              /* and -j's thread count (with th) */
	int leading; /* options only before the first argument, "--" ends them and "-" is one;
	              * else options and arguments mix, and "-" is an argument */
	int maxargs; /* > 0: one more argument is refused with extra */
	void (*help)(FILE *o);    /* -h, --help: to stdout, exit status 0 */
	void (*usage)(FILE *o);   /* after a message with usage set, to stderr */
	const char *prefix;       /* of the no-value messages: "nvlprof: report: " */
	struct an_argmsg unknown; /* an option not in the table */
	struct an_argmsg extra;   /* the argument after maxargs */
	struct an_argmsg none;    /* no argument at all (pre NULL: the command checks itself) */
	char **args;              /* the arguments, in argv (moved to its front when mixed) */
	int nargs;
};

/*! Walk argv[1..argc) against c's table (options take effect in their order): the arguments
 * into c->args[0..c->nargs), NULL after them. @return -1 to go on, else the exit status
 * (0 after --help, 2 after a message on stderr) */
int an_parse_args(struct an_cmdline *c, int argc, char **argv);

/*! The shared options (--threshold NAME=VALUE, --all-ranks, --symbols DIR, -j N) as a table into
 * th and threads, in t (5 entries, the last ending it) (cli/opts.c) */
void an_shared_opts(struct an_opt t[5], double *th, int *threads);

#endif
