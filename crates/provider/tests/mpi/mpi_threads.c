/*
 * MPI_THREAD_MULTIPLE over the nostd provider: two threads per rank, each with its own
 * communicator (a dup of MPI_COMM_WORLD), exchange at the same time: a ring of
 * messages of growing size, messages from every rank received with MPI_ANY_SOURCE,
 * and an MPI_Allreduce, all on the same tags in both threads, every value checked
 * (a message that reached the other thread's communicator carries the wrong thread
 * number). An MPI with several contexts (Open MPI's mtl_ofi_enable_sep with
 * mtl_ofi_thread_grouping, MPICH's MPIR_CVAR_CH4_NUM_VCIS=2) maps each communicator
 * to its own context of a scalable endpoint.
 *
 * Exits 0 when every check passed on every rank, 1 otherwise; prints
 * "mpi_threads: N ranks, 0 failures".
 */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { THREADS = 2, ROUNDS = 40, MAX_LEN = 16384, ANY_PER_RANK = 8 };

static int rank, size;

struct worker {
	int id;
	MPI_Comm comm;
	int failures;
};

#define CHECK(w, cond, ...)                                                     \
	do {                                                                    \
		if (!(cond)) {                                                  \
			(w)->failures++;                                        \
			if ((w)->failures < 20) {                               \
				fprintf(stderr, "rank %d thread %d: FAIL %s:%d: ", \
					rank, (w)->id, __FILE__, __LINE__);     \
				fprintf(stderr, __VA_ARGS__);                   \
				fprintf(stderr, "\n");                          \
			}                                                       \
		}                                                               \
	} while (0)

/* The k-th value of round `round` sent by `from` on thread `id`'s communicator. */
static int32_t value(int id, int from, int round, int k)
{
	return (int32_t)((id + 1) * 100000000 + from * 1000000 + round * 10000 + k % 9973);
}

/* Message length (in int32) of a round: 1 to MAX_LEN, different in every round. */
static int length(int round)
{
	return 1 + (int)(((unsigned)round * 2654435761u) % MAX_LEN);
}

static void ring(struct worker *w, int32_t *out, int32_t *in)
{
	int next = (rank + 1) % size, prev = (rank + size - 1) % size, r, k;

	for (r = 0; r < ROUNDS; r++) {
		int n = length(r), count = -1;
		MPI_Request req[2];
		MPI_Status st[2];

		for (k = 0; k < n; k++)
			out[k] = value(w->id, rank, r, k);
		memset(in, 0xa5, sizeof(int32_t) * MAX_LEN);
		MPI_Irecv(in, MAX_LEN, MPI_INT32_T, prev, 5, w->comm, &req[0]);
		MPI_Isend(out, n, MPI_INT32_T, next, 5, w->comm, &req[1]);
		MPI_Waitall(2, req, st);
		MPI_Get_count(&st[0], MPI_INT32_T, &count);
		CHECK(w, st[0].MPI_SOURCE == prev, "ring round %d source %d", r, st[0].MPI_SOURCE);
		CHECK(w, count == n, "ring round %d count %d, want %d", r, count, n);
		for (k = 0; k < n && k < count; k++)
			if (in[k] != value(w->id, prev, r, k)) {
				CHECK(w, 0, "ring round %d [%d] = %d, want %d", r, k, in[k],
				      value(w->id, prev, r, k));
				break;
			}
	}
}

/* Every rank sends ANY_PER_RANK tagged messages to every other; each receives them
 * with MPI_ANY_SOURCE / MPI_ANY_TAG and checks each arrived once, in order per
 * sender, on its own thread's communicator. */
static void any_source(struct worker *w)
{
	int seen[256], i, k, n = (size - 1) * ANY_PER_RANK;
	int32_t *out = malloc(sizeof(int32_t) * 4 * (size_t)size * ANY_PER_RANK);
	MPI_Request *reqs = malloc(sizeof(MPI_Request) * (size_t)size * ANY_PER_RANK);
	int nreq = 0;

	memset(seen, 0, sizeof seen);
	for (i = 0; i < size; i++) {
		if (i == rank)
			continue;
		for (k = 0; k < ANY_PER_RANK; k++) {
			int32_t *m = out + 4 * nreq;

			m[0] = w->id;
			m[1] = rank;
			m[2] = k;
			m[3] = value(w->id, rank, k, i);
			MPI_Isend(m, 4, MPI_INT32_T, i, 100 + k, w->comm, &reqs[nreq++]);
		}
	}
	for (i = 0; i < n; i++) {
		int32_t m[4] = { -1, -1, -1, -1 };
		MPI_Status st;
		int src;

		MPI_Recv(m, 4, MPI_INT32_T, MPI_ANY_SOURCE, MPI_ANY_TAG, w->comm, &st);
		src = st.MPI_SOURCE;
		CHECK(w, m[0] == w->id, "any-source message of thread %d on thread %d", m[0], w->id);
		CHECK(w, src >= 0 && src < size && src != rank && src < 256, "source %d", src);
		if (src < 0 || src >= size || src >= 256)
			continue;
		CHECK(w, m[1] == src, "sender %d, source %d", m[1], src);
		CHECK(w, m[2] == seen[src], "from %d: message %d, want %d (order)", src, m[2],
		      seen[src]);
		CHECK(w, st.MPI_TAG == 100 + m[2], "tag %d for message %d", st.MPI_TAG, m[2]);
		CHECK(w, m[3] == value(w->id, src, m[2], rank), "payload from %d", src);
		seen[src]++;
	}
	for (i = 0; i < size && i < 256; i++)
		CHECK(w, i == rank || seen[i] == ANY_PER_RANK, "from %d: %d messages", i, seen[i]);
	MPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE);
	free(reqs);
	free(out);
}

static void *work(void *arg)
{
	struct worker *w = arg;
	int32_t *out = malloc(sizeof(int32_t) * MAX_LEN), *in = malloc(sizeof(int32_t) * MAX_LEN);
	long mine = (long)(w->id + 1) * (rank + 1), sum = 0, want = 0;
	int i;

	ring(w, out, in);
	any_source(w);
	MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, w->comm);
	for (i = 0; i < size; i++)
		want += (long)(w->id + 1) * (i + 1);
	CHECK(w, sum == want, "allreduce %ld, want %ld", sum, want);
	ring(w, out, in);
	free(out);
	free(in);
	return NULL;
}

int main(int argc, char **argv)
{
	struct worker w[THREADS];
	pthread_t t[THREADS];
	int provided = 0, failures = 0, all = 0, i;

	MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (provided != MPI_THREAD_MULTIPLE) {
		fprintf(stderr, "rank %d: FAIL thread level %d, want MPI_THREAD_MULTIPLE\n", rank,
			provided);
		failures++;
	}
	for (i = 0; i < THREADS; i++) {
		w[i].id = i;
		w[i].failures = 0;
		MPI_Comm_dup(MPI_COMM_WORLD, &w[i].comm);
	}
	for (i = 0; i < THREADS; i++)
		if (pthread_create(&t[i], NULL, work, &w[i]) != 0) {
			fprintf(stderr, "rank %d: FAIL pthread_create\n", rank);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
	for (i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		failures += w[i].failures;
	}
	/* The communicators are not freed: Open MPI 4.1's mtl ofi (thread grouping) closes
	 * a freed communicator's context, CQ included, and goes on reading that CQ in its
	 * progress loop (libfabric then sees a closed fid). MPI_Finalize frees them after
	 * the last communication. */
	MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("mpi_threads: %d ranks, %d failures\n", size, all);
	MPI_Finalize();
	return all == 0 ? 0 : 1;
}
