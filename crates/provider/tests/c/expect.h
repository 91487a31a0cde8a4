/*
 * The provider C tests' checks: EXPECT counts a check and prints a failure (with the
 * libfabric error text for a negative result) without stopping the test, so one run
 * reports every broken expectation; main() returns nonzero when `failures` is.
 */
#ifndef NOSTD_EXPECT_H
#define NOSTD_EXPECT_H

#include <stdio.h>
#include <rdma/fi_errno.h>

static int failures;
static int checks;

#define EXPECT(expr, want)                                                      \
	do {                                                                    \
		long long got_ = (long long)(expr);                             \
		long long want_ = (long long)(want);                            \
		checks++;                                                       \
		if (got_ != want_) {                                            \
			failures++;                                             \
			printf("FAIL %s:%d: %s = %lld, want %lld (%s)\n",       \
			       __FILE__, __LINE__, #expr, got_, want_,          \
			       got_ < 0 ? fi_strerror((int)-got_) : "");        \
		}                                                               \
	} while (0)

#define EXPECT_TRUE(cond) EXPECT(!!(cond), 1)

#endif
