/* test_argparse.c: the commands' option-table parser (analyzer/cli/argparse.c): "--x V" and
 * "--x=V", flags, arguments among the options or after them, and the exact message and exit
 * status of an unknown option, a missing value and one argument too many. */
#include <math.h>   /* INFINITY */
#include <string.h> /* strcmp */
#include <unistd.h> /* dup2 */

#include "check.h"
#include "cli/argparse.h"
#include "model/model.h" /* AN_TH_COUNT */

static void usage(FILE *o)
{
	fprintf(o, "usage: t [opts] FILE...\n");
}

/* --help: said here, not printed */
static int helped;
static void help(FILE *o)
{
	(void)o;
	helped = 1;
}

static int json, quiet, threads;
static const char *out, *fmt;
static double th[AN_TH_COUNT];

/* A command line of the test: --json, --quiet/-q, -o FILE, --format/-f FMT (also --format=FMT),
 * and the shared options when shared is set */
static struct an_cmdline cmdline(int shared, int leading)
{
	static const struct an_opt opts[] = {
	    {"--json", NULL, AN_OPT_FLAG, &json},
	    {"--quiet", "-q", AN_OPT_FLAG, &quiet},
	    {"-o", NULL, AN_OPT_VALUE, &out, 0, "a file name"},
	    {"--format", "-f", AN_OPT_VALUE, &fmt, AN_OPT_EQ, NULL}, /* no value: unknown */
	    {NULL},
	};
	json = quiet = threads = helped = 0;
	out = fmt = NULL;
	memcpy(th, an_threshold_defaults, sizeof th);
	return (struct an_cmdline){
	    .opts = opts,
	    .prefix = "t: ",
	    .th = shared ? th : NULL,
	    .threads = &threads,
	    .leading = leading,
	    .maxargs = 3,
	    .help = help,
	    .usage = usage,
	    .unknown = {"t: unknown option ", " (see --help)", 1},
	    .extra = {"t: '", "' is one too many"},
	    .none = {"t: no input", NULL, 0},
	};
}

/* an_parse_args of c over the words of line (argv[0] "t"), what it printed on stderr in err */
static int parse(struct an_cmdline *c, const char *line, char *err, size_t len)
{
	static char buf[512];
	static char *argv[32];
	int argc = 0;
	snprintf(buf, sizeof buf, "t %s", line);
	for (char *w = strtok(buf, " "); w && argc < 31; w = strtok(NULL, " "))
		argv[argc++] = w;
	argv[argc] = NULL;
	FILE *e = tmpfile();
	fflush(stderr);
	int saved = dup(2);
	dup2(fileno(e), 2);
	int rc = an_parse_args(c, argc, argv);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(e);
	size_t n = fread(err, 1, len - 1, e);
	err[n] = 0;
	fclose(e);
	return rc;
}

/* One command line and what it must give: the exit status (-1: go on) and stderr exactly */
struct tcase {
	int shared, leading;
	const char *line;
	int rc;
	const char *err;
	const char *name;
};

static const struct tcase cases[] = {
    {0, 0, "a --bogus", 2, "t: unknown option --bogus (see --help)\nusage: t [opts] FILE...\n",
     "an unknown option: its message and the usage, exit status 2"},
    {0, 0, "a -o", 2, "t: -o needs a file name\n", "-o without its value"},
    {0, 0, "a --format", 2, "t: unknown option --format (see --help)\nusage: t [opts] FILE...\n",
     "no value and no needs message: said as an unknown option"},
    {0, 0, "-f=x", 2, "t: unknown option -f=x (see --help)\nusage: t [opts] FILE...\n",
     "\"alias=V\" is no form: an unknown option"},
    {1, 0, "a -j", 2, "nvlprof: -j needs a thread count, 0 to 256 (0: the default)\n",
     "a shared option without its value: the shared message"},
    {1, 0, "a -j x", 2, "nvlprof: -j needs a thread count, 0 to 256 (0: the default), not 'x'\n",
     "-j x: its handler refuses it"},
    {0, 0, "-j 2", 2, "t: unknown option -j (see --help)\nusage: t [opts] FILE...\n",
     "without th: no shared options"},
    {0, 0, "a b c d", 2, "t: 'd' is one too many\n", "maxargs: one more refused"},
    {0, 0, "--json", 2, "t: no input\n", "no argument: the none message"},
    {0, 1, "-", 2, "t: unknown option - (see --help)\nusage: t [opts] FILE...\n",
     "leading: \"-\" is an option"},
    {0, 0, "--bogus --help", 2, "t: unknown option --bogus (see --help)\nusage: t [opts] FILE...\n",
     "in order: the unknown option before --help"},
    {0, 0, "--help --bogus", 0, "", "in order: --help first, exit status 0"},
    {0, 0, "-o a.txt --format=chrome --json x", -1, "", "\"-o V\", \"--format=V\", a flag"},
    {0, 0, "-f perfetto -q x", -1, "", "aliases: \"-f V\", -q"},
    {1, 0, "-j 3 --threshold=hang_min_ms=7 --all-ranks x", -1, "", "the shared options"},
    {0, 0, "a --json - b", -1, "", "arguments among the options, \"-\" one of them"},
    {0, 1, "--json a --quiet", -1, "", "leading: the options end at the first argument"},
    {0, 1, "-q -- -o", -1, "", "leading: \"--\" ends the options"},
};

/* What the cases that go on set: the options' values and the arguments */
static void values(const struct an_cmdline *c, int k)
{
	const char *const *a = (const char *const *)c->args;
	if (k == 12)
		CHECK(!strcmp(out, "a.txt") && !strcmp(fmt, "chrome") && json && c->nargs == 1,
		      "-o, --format= and --json: their values");
	if (k == 13)
		CHECK(!strcmp(fmt, "perfetto") && quiet && !json, "-f and -q: their values");
	if (k == 14)
		CHECK(threads == 3 && th[AN_TH_hang_min_ms] == 7 &&
		          th[AN_TH_ranks_shown] == INFINITY,
		      "-j, --threshold= and --all-ranks: their values");
	if (k == 15)
		CHECK(c->nargs == 3 && !strcmp(a[0], "a") && !strcmp(a[1], "-") &&
		          !strcmp(a[2], "b") && !a[3] && json,
		      "the arguments in order, NULL after");
	if (k == 16)
		CHECK(c->nargs == 2 && !strcmp(a[1], "--quiet") && json && !quiet,
		      "leading: --quiet after the first argument is one");
	if (k == 17)
		CHECK(c->nargs == 1 && !strcmp(a[0], "-o") && quiet, "leading: -o after -- is one");
	if (k == 11)
		CHECK(helped, "--help: the command's help");
}

int main(void)
{
	for (int k = 0; k < (int)(sizeof cases / sizeof cases[0]); k++) {
		const struct tcase *t = &cases[k];
		struct an_cmdline c = cmdline(t->shared, t->leading);
		char err[512];
		int rc = parse(&c, t->line, err, sizeof err);
		CHECK(rc == t->rc && !strcmp(err, t->err), "%s: `t %s`", t->name, t->line);
		values(&c, k);
	}
	return CHECK_DONE();
}
