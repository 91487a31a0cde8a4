/*
 * MPI one-sided communication over the nostd provider's RMA and atomics: Open MPI's
 * osc/rdma component on btl/ofi (fi_write, fi_read, fi_fetch_atomic, fi_atomic) in a
 * passive-target epoch. MPI_Put to the right neighbour, MPI_Fetch_and_op on every
 * rank, MPI_Accumulate on rank 0, MPI_Get back; every value checked.
 *
 * (MPI_Compare_and_swap is left out: Open MPI 4.1.4's btl/ofi dereferences a NULL
 * registration handle in mca_btl_ofi_acswap before it reaches the provider.)
 *
 * Run with: FI_PROVIDER=nostd mpirun --mca btl self,ofi --mca osc rdma
 *           -x FI_PROVIDER -x FI_PROVIDER_PATH -n 4 ./mpi_osc
 * Exits 0 when every check passed on every rank, 1 otherwise.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>

#define N 100

int main(int argc, char **argv)
{
	int rank, size, fails = 0, all = 0, i, r;
	int64_t *base, v[N], got[N], one = 1, old = -1;
	MPI_Win win;

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
	MPI_Win_unlock_all(win);
	MPI_Barrier(MPI_COMM_WORLD);

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

	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Reduce(&fails, &all, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("mpi_osc: %d ranks, %d failures\n", size, all);
	MPI_Win_free(&win);
	MPI_Finalize();
	return all != 0;
}
