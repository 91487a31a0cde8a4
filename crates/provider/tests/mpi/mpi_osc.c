/*
 * MPI one-sided communication over the nostd provider's RMA and atomics (Open MPI's
 * osc/rdma on btl/ofi; MPICH's and Intel MPI's ch4:ofi RMA, fi_write, fi_read,
 * fi_fetch_atomic, fi_compare_atomic, fi_atomic). A passive-target epoch: MPI_Put to
 * the right neighbour, MPI_Fetch_and_op on every rank, MPI_Accumulate on rank 0,
 * MPI_Compare_and_swap on rank 0 (each rank swaps in its rank + 1 when it finds
 * 0, else keeps what it found), MPI_Get back. Then fence epochs: MPI_Put to the
 * left neighbour, MPI_Accumulate to every rank, MPI_Get of the right neighbour. Every
 * value checked.
 *
 * With the argument "no-cas" MPI_Compare_and_swap is left out: Open MPI 4.1.4's
 * btl/ofi dereferences a NULL registration handle in mca_btl_ofi_acswap before it
 * reaches the provider.
 *
 * Run with: FI_PROVIDER=nostd mpirun --mca btl self,ofi --mca osc rdma
 *           -x FI_PROVIDER -x FI_PROVIDER_PATH -n 4 ./mpi_osc no-cas
 * Exits 0 when every check passed on every rank, 1 otherwise.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define N 100

int main(int argc, char **argv)
{
	int rank, size, fails = 0, all = 0, i, r;
	int64_t *base, v[N], got[N], one = 1, old = -1;
	MPI_Win win;
	int cas = !(argc > 1 && strcmp(argv[1], "no-cas") == 0);

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Win_allocate(1024 * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL,
			 MPI_COMM_WORLD, &base, &win);
	for (i = 0; i < 1024; i++)
		base[i] = 0;
	MPI_Barrier(MPI_COMM_WORLD);

	int right = (rank + 1) % size, left = (rank + size - 1) % size;
	for (i = 0; i < N; i++)
		v[i] = rank * 1000 + i;
	MPI_Win_lock_all(0, win);
	MPI_Put(v, N, MPI_INT64_T, right, 0, N, MPI_INT64_T, win);
	MPI_Win_flush_all(win);
	for (r = 0; r < size; r++) {
		MPI_Fetch_and_op(&one, &old, MPI_INT64_T, r, 500, MPI_SUM, win);
		MPI_Win_flush(r, win);
		if (old < 0 || old >= size)
			fails++;
	}
	MPI_Accumulate(&one, 1, MPI_INT64_T, 0, 501, 1, MPI_INT64_T, MPI_SUM, win);
	MPI_Win_flush_all(win);
	/* Exactly one rank finds 0 at rank 0's slot 502 and swaps in its rank + 1. */
	int64_t mine = rank + 1, zero = 0, found = -1;
	if (cas) {
		MPI_Compare_and_swap(&mine, &zero, &found, MPI_INT64_T, 0, 502, win);
		MPI_Win_flush(0, win);
		if (found < 0 || found > size)
			fails++;
	}
	MPI_Win_unlock_all(win);
	MPI_Barrier(MPI_COMM_WORLD);
	if (cas) {
		int64_t winner = found == 0 ? mine : 0, w = 0, zeros = found == 0, nz = 0;
		MPI_Allreduce(&winner, &w, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
		MPI_Allreduce(&zeros, &nz, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
		if (nz != 1 || (rank == 0 && base[502] != w))
			fails++;
		if (found != 0 && found != w)
			fails++;
	}

	for (i = 0; i < N; i++)
		if (base[i] != left * 1000 + i)
			fails++;
	if (base[500] != size)
		fails++;
	if (rank == 0 && base[501] != size)
		fails++;

	MPI_Win_lock_all(0, win);
	MPI_Get(got, N, MPI_INT64_T, right, 0, N, MPI_INT64_T, win);
	MPI_Win_flush_all(win);
	MPI_Win_unlock_all(win);
	for (i = 0; i < N; i++)
		if (got[i] != rank * 1000 + i)
			fails++;

	/* Active target: fence epochs. */
	MPI_Win_fence(0, win);
	for (i = 0; i < N; i++)
		v[i] = rank * 7000 + i;
	MPI_Put(v, N, MPI_INT64_T, left, 600, N, MPI_INT64_T, win);
	for (r = 0; r < size; r++)
		MPI_Accumulate(&one, 1, MPI_INT64_T, r, 900, 1, MPI_INT64_T, MPI_SUM, win);
	MPI_Win_fence(0, win);
	for (i = 0; i < N; i++)
		if (base[600 + i] != right * 7000 + i)
			fails++;
	if (base[900] != size)
		fails++;
	MPI_Get(got, N, MPI_INT64_T, right, 600, N, MPI_INT64_T, win);
	MPI_Win_fence(0, win);
	for (i = 0; i < N; i++)
		if (got[i] != ((right + 1) % size) * 7000 + i)
			fails++;

	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Reduce(&fails, &all, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("mpi_osc: %d ranks, %d failures\n", size, all);
	MPI_Win_free(&win);
	MPI_Finalize();
	return all != 0;
}
