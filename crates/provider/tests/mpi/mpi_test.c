/*
 * Open MPI over the nostd provider: point-to-point with MPI_ANY_SOURCE / MPI_ANY_TAG,
 * matched probes (MPI_Improbe / MPI_Mrecv), a ring, MPI_Allreduce and a 16 MiB message,
 * every result checked.
 *
 * Run with: mpirun --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include nostd
 *           -x FI_PROVIDER_PATH -n 4 ./mpi_test
 * Exits 0 when every check passed on every rank, 1 otherwise.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, failures;

#define CHECK(cond, ...)                                                        \
	do {                                                                    \
		if (!(cond)) {                                                  \
			failures++;                                             \
			fprintf(stderr, "rank %d: FAIL %s:%d: ", rank,          \
				__FILE__, __LINE__);                            \
			fprintf(stderr, __VA_ARGS__);                           \
			fprintf(stderr, "\n");                                  \
		}                                                               \
	} while (0)

/* Every rank but 0 sends 3 messages to rank 0 with different tags; rank 0 receives
 * them all with MPI_ANY_SOURCE / MPI_ANY_TAG and checks source, tag, length, data. */
static void any_source_any_tag(void)
{
	enum { PER_RANK = 3, LEN = 100 };
	int buf[LEN], i, k;

	if (rank == 0) {
		int seen[64][PER_RANK];

		memset(seen, 0, sizeof seen);
		for (i = 0; i < (size - 1) * PER_RANK; i++) {
			MPI_Status st;
			int count, src, tag;

			MPI_Recv(buf, LEN, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
			MPI_Get_count(&st, MPI_INT, &count);
			src = st.MPI_SOURCE;
			tag = st.MPI_TAG;
			CHECK(src > 0 && src < size, "source %d", src);
			CHECK(tag >= 1000 && tag < 1000 + PER_RANK, "tag %d", tag);
			if (src <= 0 || src >= size || tag < 1000 || tag >= 1000 + PER_RANK)
				continue;
			CHECK(count == LEN - (tag - 1000), "count %d from %d tag %d", count, src, tag);
			for (k = 0; k < count; k++)
				CHECK(buf[k] == src * 100000 + tag * 10 + k % 7, "data from %d", src);
			seen[src][tag - 1000]++;
		}
		for (i = 1; i < size && i < 64; i++)
			for (k = 0; k < PER_RANK; k++)
				CHECK(seen[i][k] == 1, "rank %d tag %d seen %d times", i, k + 1000, seen[i][k]);
	} else {
		for (i = PER_RANK - 1; i >= 0; i--) {
			int tag = 1000 + i, n = LEN - i;

			for (k = 0; k < n; k++)
				buf[k] = rank * 100000 + tag * 10 + k % 7;
			MPI_Send(buf, n, MPI_INT, 0, tag, MPI_COMM_WORLD);
		}
	}
	/* A probe for a message that is there, then a matched receive. */
	MPI_Barrier(MPI_COMM_WORLD);
	if (size > 1) {
		int peer = (rank + 1) % size, from = (rank + size - 1) % size, v = rank, got = -1, flag = 0;
		MPI_Request req;
		MPI_Status st;

		MPI_Isend(&v, 1, MPI_INT, peer, 7, MPI_COMM_WORLD, &req);
		while (!flag)
			MPI_Iprobe(MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &flag, &st);
		CHECK(st.MPI_SOURCE == from, "probe source %d", st.MPI_SOURCE);
		MPI_Recv(&got, 1, MPI_INT, st.MPI_SOURCE, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		CHECK(got == from, "probed message %d", got);
		MPI_Wait(&req, MPI_STATUS_IGNORE);
	}
}

/* Every rank but 0 sends 20 messages (eager and rendezvous) to rank 0, which takes
 * them with MPI_Improbe (FI_PEEK | FI_CLAIM) and MPI_Mrecv (FI_CLAIM): per source in
 * send order, sizes and data as sent. (MPI_Ssend is left out: Open MPI 4.1's
 * MPI_Mrecv never acknowledges a synchronous send, over any provider.) */
static void matched_probe(void)
{
	enum { N = 20 };
	int i, k;

	if (rank == 0) {
		int next[64] = { 0 }, got = 0;

		while (got < N * (size - 1)) {
			MPI_Message msg;
			MPI_Status st;
			unsigned char *b;
			int flag = 0, count, src;

			MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &msg, &st);
			if (!flag)
				continue;
			MPI_Get_count(&st, MPI_BYTE, &count);
			b = malloc(count + 1);
			if (!b) {
				CHECK(0, "malloc");
				return;
			}
			MPI_Mrecv(b, count, MPI_BYTE, &msg, &st);
			src = st.MPI_SOURCE;
			CHECK(src > 0 && src < size && src < 64, "matched probe source %d", src);
			if (src > 0 && src < size && src < 64) {
				CHECK(st.MPI_TAG == next[src], "from %d tag %d, want %d", src,
				      st.MPI_TAG, next[src]);
				next[src] = st.MPI_TAG + 1;
				CHECK(count == (st.MPI_TAG * 7919 + src * 104729) % 40000,
				      "from %d tag %d: %d bytes", src, st.MPI_TAG, count);
				for (k = 0; k < count; k++)
					if (b[k] != (unsigned char)(src + st.MPI_TAG * 3 + k)) {
						CHECK(0, "from %d tag %d: byte %d", src, st.MPI_TAG, k);
						break;
					}
			}
			free(b);
			got++;
		}
	} else {
		for (i = 0; i < N; i++) {
			int len = (i * 7919 + rank * 104729) % 40000;
			unsigned char *b = malloc(len + 1);

			if (!b) {
				CHECK(0, "malloc");
				return;
			}
			for (k = 0; k < len; k++)
				b[k] = (unsigned char)(rank + i * 3 + k);
			MPI_Send(b, len, MPI_BYTE, 0, i, MPI_COMM_WORLD);
			free(b);
		}
	}
}

/* A token goes round the ring twice; every rank adds its rank + 1. */
static void ring(void)
{
	long token = 0;
	int next = (rank + 1) % size, prev = (rank + size - 1) % size, lap;
	long want = 0;

	for (lap = 0; lap < 2; lap++) {
		if (rank == 0) {
			token += 1;
			MPI_Send(&token, 1, MPI_LONG, next, 5, MPI_COMM_WORLD);
			MPI_Recv(&token, 1, MPI_LONG, prev, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else {
			MPI_Recv(&token, 1, MPI_LONG, prev, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			token += rank + 1;
			MPI_Send(&token, 1, MPI_LONG, next, 5, MPI_COMM_WORLD);
		}
	}
	want = 2L * size * (size + 1) / 2;
	if (rank == 0)
		CHECK(token == want, "ring token %ld, want %ld", token, want);
}

static void allreduce(void)
{
	enum { N = 1000 };
	static double in[N], out[N];
	long s = rank + 1, total = 0, mx = 0;
	int i;

	MPI_Allreduce(&s, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	CHECK(total == (long)size * (size + 1) / 2, "sum %ld", total);
	MPI_Allreduce(&s, &mx, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
	CHECK(mx == size, "max %ld", mx);
	for (i = 0; i < N; i++)
		in[i] = rank * 0.5 + i;
	MPI_Allreduce(in, out, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	for (i = 0; i < N; i++) {
		double want = 0.5 * size * (size - 1) / 2 + (double)i * size;

		if (out[i] != want) {
			CHECK(0, "allreduce[%d] = %f, want %f", i, out[i], want);
			break;
		}
	}
}

/* 16 MiB from rank 0 to the last rank and back, with a checked pattern. */
static void big_message(void)
{
	const size_t n = 16u << 20;
	int last = size - 1;
	unsigned char *buf;
	size_t i;

	if (size < 2 || (rank != 0 && rank != last))
		return;
	buf = malloc(n);
	if (!buf) {
		CHECK(0, "malloc");
		return;
	}
	if (rank == 0) {
		for (i = 0; i < n; i++)
			buf[i] = (unsigned char)(i * 7 + (i >> 16));
		MPI_Send(buf, (int)n, MPI_BYTE, last, 9, MPI_COMM_WORLD);
		memset(buf, 0, n);
		MPI_Recv(buf, (int)n, MPI_BYTE, last, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		for (i = 0; i < n; i++)
			if (buf[i] != (unsigned char)(i * 7 + (i >> 16) + 1)) {
				CHECK(0, "16 MiB echo byte %zu", i);
				break;
			}
	} else {
		MPI_Status st;
		int count;

		MPI_Recv(buf, (int)n, MPI_BYTE, 0, 9, MPI_COMM_WORLD, &st);
		MPI_Get_count(&st, MPI_BYTE, &count);
		CHECK((size_t)count == n, "16 MiB count %d", count);
		for (i = 0; i < n; i++) {
			if (buf[i] != (unsigned char)(i * 7 + (i >> 16))) {
				CHECK(0, "16 MiB byte %zu", i);
				break;
			}
			buf[i]++;
		}
		MPI_Send(buf, (int)n, MPI_BYTE, 0, 10, MPI_COMM_WORLD);
	}
	free(buf);
}

int main(int argc, char **argv)
{
	int all = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);

	any_source_any_tag();
	MPI_Barrier(MPI_COMM_WORLD);
	matched_probe();
	MPI_Barrier(MPI_COMM_WORLD);
	ring();
	MPI_Barrier(MPI_COMM_WORLD);
	allreduce();
	MPI_Barrier(MPI_COMM_WORLD);
	big_message();

	MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("mpi_test: %d ranks, %d failures\n", size, all);
	MPI_Finalize();
	return all ? 1 : 0;
}
