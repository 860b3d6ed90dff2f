/* html.c: stub */
#include "export.h"
int xh_wanted(int argc, char **argv) { (void)argc; (void)argv; return 0; }
int xh_cmd(int argc, char **argv, int diff) { (void)argc; (void)argv; (void)diff; return 2; }
