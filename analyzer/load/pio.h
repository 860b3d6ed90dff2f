/* pio.h: the partial file's field codec: one walk over a structure writes it or reads it back. */
#ifndef NVLP_AN_PIO_H
#define NVLP_AN_PIO_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint8_t */

/* One walk over a process's state serves both ways: writing (rd = 0) appends what each field
 * holds to the buffer, reading (rd = 1) takes the same bytes back in the same order. A read past
 * the end or a count that does not fit sets err; every later field then reads as empty (NULL, 0),
 * so whatever was read stays safe to free. */
struct an_pio {
	int rd, err;
	uint8_t *p;
	size_t n, cap, off;
};
/*! n bytes at p: appended, or read into p (zeroed on error) */
void an_pio_bytes(struct an_pio *io, void *p, size_t n);
/*! An array of *n elements of elem bytes at *p: count then elements; read: malloc'ed (NULL if 0) */
void an_pio_arr(struct an_pio *io, void **p, size_t *n, size_t elem);
/*! A NUL-terminated string or NULL; read: malloc'ed */
void an_pio_str(struct an_pio *io, char **s);

/* PIO_ARR(io, ptr, count): an array field and its count field (any unsigned type) together */
#define PIO_ARR(io, ptr, count)                                                                    \
	do {                                                                                       \
		void *pio_p_ = (ptr);                                                              \
		size_t pio_n_ = (size_t)(count);                                                   \
		an_pio_arr((io), &pio_p_, &pio_n_, sizeof *(ptr));                                 \
		(ptr) = pio_p_;                                                                    \
		(count) = pio_n_;                                                                  \
		if ((size_t)(count) != pio_n_)                                                     \
			(io)->err = 1;                                                             \
	} while (0)
/* ... and its capacity field, which a read sets to the count */
#define PIO_ARRC(io, ptr, count, capf)                                                             \
	do {                                                                                       \
		PIO_ARR(io, ptr, count);                                                           \
		(capf) = (count);                                                                  \
	} while (0)

#endif
