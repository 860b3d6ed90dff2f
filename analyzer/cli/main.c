/* main.c: the nvlprof command line: dispatches to the subcommands declared in commands.h. */
#include <stdio.h>  /* fprintf */
#include <string.h> /* strcmp */

#include "cli/commands.h"
#include "nvlp_version.h"
#include "util/diag.h" /* an_diag_set_sink */

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *args;
	const char *help;
} commands[] = {
	{"run", nvlp_cmd_run, "[-o DIR] -- CMD [ARGS...]", "run CMD with libnvlprof.so preloaded"},
	{"info", nvlp_cmd_info, "FILE|DIR...", "summarize traces: header, record counts, status"},
	{"dump", nvlp_cmd_dump, "[--json] FILE|DIR...", "print every record (--json: one object per line)"},
	{"report", nvlp_cmd_report, "[options] FILE|DIR...", "explain where the communication time went"},
	{"merge", nvlp_cmd_merge, "[options] PARTIAL...", "the report from report --partial's files"},
	{"dask", nvlp_cmd_dask, "--scheduler S DIR...", "merge of report --partial per DIR on Dask (S: FILE or local:N)"},
	{"diff", nvlp_cmd_diff, "[options] BEFORE AFTER", "compare two runs"},
	{"export", nvlp_cmd_export, "-f FMT [-o OUT] FILE|DIR...", "timeline: perfetto, chrome (Kineto JSON), sqlite"},
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *f)
{
	fprintf(f, "usage: nvlprof <command> [args]\n\ncommands:\n");
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(f, "  %-7s %-27s %s\n", commands[i].name, commands[i].args, commands[i].help);
	fprintf(f, "\n  nvlprof --help | --version\n"
		   "Each command takes --help. Traces are written to $NVLPROF_DIR (default "
		   "./nvlprof-traces).\n");
}

/* The layers below cli/ say their warnings through util/diag.h: printed here, as they come. */
static void diag_to_stderr(const char *msg)
{
	fputs(msg, stderr);
}

int main(int argc, char **argv)
{
	an_diag_set_sink(diag_to_stderr);
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[1];
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V") || !strcmp(cmd, "version")) {
		printf("nvlprof %s\n", NVLP_VERSION);
		return 0;
	}
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (!strcmp(cmd, commands[i].name))
			return commands[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "nvlprof: unknown command '%s' (", cmd);
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(stderr, "%s%s", commands[i].name,
		        i + 2 < NCOMMANDS   ? ", "
		        : i + 1 < NCOMMANDS ? " or "
		                            : ")\n");
	usage(stderr);
	return 2;
}
