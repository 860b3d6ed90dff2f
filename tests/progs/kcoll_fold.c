/* kcoll_fold.c: copies a trace with its per-channel KCH records folded into one KCOLL record per collective, as the shim writes them since format 2.1 (tests/kcoll_fold.h). */
#include <stdio.h>  /* fprintf */
#include <stdlib.h> /* free */

#include "kcoll_fold.h"

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: kcoll_fold IN OUT\n");
		return 2;
	}
	char err[512];
	struct kf_state st = {NULL, 0, 0};
	size_t *of = NULL, nof = 0;
	if (kf_fold_file(argv[1], &st, &of, &nof, err, sizeof err) != 0 ||
	    !kf_copy(argv[1], argv[2], 0, &st, of, nof, NULL, err, sizeof err)) {
		fprintf(stderr, "kcoll_fold: %s\n", err);
		return 1;
	}
	free(st.c);
	free(of);
	return 0;
}
