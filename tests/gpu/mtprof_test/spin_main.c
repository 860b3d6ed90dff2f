#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
double spin_lib(long n);
static double spin_main(long n)
{
	volatile double x = 0;
	for (long i = 0; i < n; i++)
		x += i * 0.5;
	return x;
}
int main(int argc, char **argv)
{
	int (*start)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "mtprof_start");
	int (*write)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "mtprof_write");
	if (!start || !write) {
		fprintf(stderr, "no mtprof\n");
		return 2;
	}
	long n = atol(argv[2]);
	start();
	for (int r = 0; r < 10; r++) {
		spin_lib(3 * n);
		spin_main(n);
	}
	return write(argv[1]) ? 1 : 0;
}
