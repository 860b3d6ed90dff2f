double spin_lib(long n)
{
	volatile double x = 0;
	for (long i = 0; i < n; i++)
		x += i * 0.5;
	return x;
}
