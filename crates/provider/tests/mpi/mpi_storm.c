/*
 * Open MPI over the nostd provider, under load: every rank posts a storm of MPI_Isend
 * (random peers, itself included; 0 B to 20 KB, so both eager and rendezvous) before
 * it receives anything, then drains them with MPI_ANY_SOURCE / MPI_ANY_TAG receives,
 * a window of 64 at a time; then rounds of MPI_Alltoallv. Checks every byte, that each
 * message arrives once, and MPI's non-overtaking rule (per source, the receive posted
 * first gets the message sent first).
 *
 * Open MPI's `pml cm` retries a send the provider refuses with -FI_EAGAIN inside
 * MPI_Isend, so a storm larger than what the provider lets wait makes every rank wait
 * there while no rank receives. This found two bugs: the provider's CQ was as small as
 * the 100 entries the MTL asks for (every rank stopped after 100 sends), and sessions
 * whose packets in flight were all held by a receiver out of resources failed with
 * -FI_ETIMEDOUT instead of probing. It also found a limit: with 1,024-entry transmit
 * queues and 512 segments of unexpected-message buffer, 2,000 sends per rank stalled
 * every rank for good; the default of 4,000 needs the larger host sizes.
 *
 * Usage: mpi_storm [sends per rank] [alltoallv rounds]
 * Exits 0 when every check passed on every rank, 1 otherwise.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WINDOW = 64, MAX_LEN = 20000 };

static int rank, size, failures;

#define CHECK(cond, ...)                                                        \
	do {                                                                    \
		if (!(cond)) {                                                  \
			failures++;                                             \
			if (failures < 20) {                                    \
				fprintf(stderr, "rank %d: FAIL %s:%d: ", rank,  \
					__FILE__, __LINE__);                    \
				fprintf(stderr, __VA_ARGS__);                   \
				fprintf(stderr, "\n");                          \
			}                                                       \
		}                                                               \
	} while (0)

static uint32_t rng;

static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 17;
	rng ^= rng << 5;
	return rng;
}

static unsigned char pat(int src, int seq, size_t i)
{
	return (unsigned char)(src * 31 + seq * 7 + i * 13 + (i >> 9));
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p) {
		fprintf(stderr, "rank %d: out of memory\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	return p;
}

static int pick_len(void)
{
	uint32_t r = rnd() % 10;

	if (r < 5)
		return (int)(rnd() % 64);
	if (r < 8)
		return (int)(rnd() % 8192);
	return (int)(8192 + rnd() % (MAX_LEN - 8192));
}

static void storm(int per_rank)
{
	int *count = calloc(size, sizeof(int)), *incoming = calloc(size, sizeof(int));
	int *dst = xmalloc(per_rank * sizeof(int)), *len = xmalloc(per_rank * sizeof(int));
	unsigned char **sb = xmalloc(per_rank * sizeof(void *)), *rb[WINDOW];
	MPI_Request *sr = xmalloc(per_rank * sizeof(MPI_Request)), rr[WINDOW];
	int post_no[WINDOW], *next_seq = calloc(size, sizeof(int));
	int *rec_src, *rec_seq, total_in = 0, posted = 0, done = 0, i, k;
	double last;

	if (!count || !incoming || !next_seq)
		MPI_Abort(MPI_COMM_WORLD, 2);
	for (i = 0; i < per_rank; i++) {
		dst[i] = (int)(rnd() % (uint32_t)size);
		len[i] = pick_len();
		count[dst[i]]++;
		sb[i] = xmalloc(len[i]);
		for (k = 0; k < len[i]; k++)
			sb[i][k] = pat(rank, i, k);
	}
	MPI_Alltoall(count, 1, MPI_INT, incoming, 1, MPI_INT, MPI_COMM_WORLD);
	for (i = 0; i < size; i++)
		total_in += incoming[i];
	rec_src = xmalloc(total_in * sizeof(int));
	rec_seq = xmalloc(total_in * sizeof(int));
	for (i = 0; i < total_in; i++)
		rec_src[i] = -1;
	/* The storm: every send before any receive. */
	for (i = 0; i < per_rank; i++)
		MPI_Isend(sb[i], len[i], MPI_BYTE, dst[i], i, MPI_COMM_WORLD, &sr[i]);
	for (i = 0; i < WINDOW; i++) {
		rb[i] = xmalloc(MAX_LEN);
		rr[i] = MPI_REQUEST_NULL;
	}
	last = MPI_Wtime();
	while (done < total_in) {
		int idx, flag, n;
		MPI_Status st;

		for (i = 0; i < WINDOW && posted < total_in; i++) {
			if (rr[i] != MPI_REQUEST_NULL)
				continue;
			MPI_Irecv(rb[i], MAX_LEN, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG,
				  MPI_COMM_WORLD, &rr[i]);
			post_no[i] = posted++;
		}
		MPI_Testany(WINDOW, rr, &idx, &flag, &st);
		if (!flag || idx == MPI_UNDEFINED) {
			if (MPI_Wtime() - last > 10) {
				fprintf(stderr, "rank %d: no message for 10 s: received %d of %d\n",
					rank, done, total_in);
				last = MPI_Wtime();
			}
			continue;
		}
		last = MPI_Wtime();
		MPI_Get_count(&st, MPI_BYTE, &n);
		CHECK(st.MPI_SOURCE >= 0 && st.MPI_SOURCE < size, "source %d", st.MPI_SOURCE);
		if (st.MPI_SOURCE >= 0 && st.MPI_SOURCE < size) {
			rec_src[post_no[idx]] = st.MPI_SOURCE;
			rec_seq[post_no[idx]] = st.MPI_TAG;
			for (k = 0; k < n; k++) {
				if (rb[idx][k] != pat(st.MPI_SOURCE, st.MPI_TAG, k)) {
					CHECK(0, "message %d from %d: byte %d of %d", st.MPI_TAG,
					      st.MPI_SOURCE, k, n);
					break;
				}
			}
		}
		done++;
	}
	/* Non-overtaking: in posting order, each source's messages in send order. */
	for (i = 0; i < total_in; i++) {
		int src = rec_src[i];

		if (src < 0)
			continue;
		CHECK(rec_seq[i] >= next_seq[src], "receive %d: message %d from %d after %d", i,
		      rec_seq[i], src, next_seq[src]);
		next_seq[src] = rec_seq[i] + 1;
	}
	MPI_Waitall(per_rank, sr, MPI_STATUSES_IGNORE);
	for (i = 0; i < WINDOW; i++)
		free(rb[i]);
	for (i = 0; i < per_rank; i++)
		free(sb[i]);
	free(sb), free(sr), free(dst), free(len), free(count), free(incoming);
	free(next_seq), free(rec_src), free(rec_seq);
}

static void alltoallv(int rounds)
{
	int *sc = xmalloc(size * sizeof(int)), *rc = xmalloc(size * sizeof(int));
	int *sd = xmalloc(size * sizeof(int)), *rd = xmalloc(size * sizeof(int));
	int r, i, k;

	for (r = 0; r < rounds; r++) {
		int st = 0, rt = 0;
		unsigned char *s, *d;

		for (i = 0; i < size; i++)
			sc[i] = ((rank + 1) * (i + 3) * (r + 1) * 977) % 50000;
		MPI_Alltoall(sc, 1, MPI_INT, rc, 1, MPI_INT, MPI_COMM_WORLD);
		for (i = 0; i < size; i++) {
			sd[i] = st;
			st += sc[i];
			rd[i] = rt;
			rt += rc[i];
		}
		s = xmalloc(st);
		d = xmalloc(rt);
		for (i = 0; i < size; i++)
			for (k = 0; k < sc[i]; k++)
				s[sd[i] + k] = pat(rank, i + r, k);
		MPI_Alltoallv(s, sc, sd, MPI_BYTE, d, rc, rd, MPI_BYTE, MPI_COMM_WORLD);
		for (i = 0; i < size; i++) {
			for (k = 0; k < rc[i]; k++) {
				if (d[rd[i] + k] != pat(i, rank + r, k)) {
					CHECK(0, "alltoallv round %d from %d: byte %d", r, i, k);
					break;
				}
			}
		}
		free(s);
		free(d);
	}
	free(sc), free(rc), free(sd), free(rd);
}

int main(int argc, char **argv)
{
	int all, n, rounds;
	double t;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	n = argc > 1 ? atoi(argv[1]) : 4000;
	rounds = argc > 2 ? atoi(argv[2]) : 20;
	rng = 12345u + (uint32_t)rank * 7919u;
	t = MPI_Wtime();
	storm(n);
	MPI_Barrier(MPI_COMM_WORLD);
	alltoallv(rounds);
	MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("mpi_storm: %d ranks, %d failures, %d sends per rank, %.2f s\n", size, all,
		       n, MPI_Wtime() - t);
	MPI_Finalize();
	return all != 0;
}
