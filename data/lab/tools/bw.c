// simple memory read bandwidth: sum a large array with N threads (OpenMP), best of R runs
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <omp.h>
#include <immintrin.h>
int main(int argc, char **argv) {
    size_t bytes = (size_t)(argc > 1 ? atof(argv[1]) : 2.0) * (1ull << 30);
    int reps = argc > 2 ? atoi(argv[2]) : 10;
    size_t n = bytes / 64;
    __m512i *a = aligned_alloc(64, n * 64);
    #pragma omp parallel for
    for (size_t i = 0; i < n; i++) a[i] = _mm512_set1_epi64(i);
    double best = 0; long long chk = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = omp_get_wtime();
        __m512i tot = _mm512_setzero_si512();
        #pragma omp parallel
        {
            __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
            #pragma omp for nowait
            for (size_t i = 0; i < n; i += 4) {
                s0 = _mm512_add_epi64(s0, a[i]); s1 = _mm512_add_epi64(s1, a[i+1]);
                s2 = _mm512_add_epi64(s2, a[i+2]); s3 = _mm512_add_epi64(s3, a[i+3]);
            }
            s0 = _mm512_add_epi64(_mm512_add_epi64(s0, s1), _mm512_add_epi64(s2, s3));
            #pragma omp critical
            tot = _mm512_add_epi64(tot, s0);
        }
        double dt = omp_get_wtime() - t0;
        chk += _mm512_reduce_add_epi64(tot);
        double gbs = bytes / dt / 1e9;
        if (gbs > best) best = gbs;
        printf("rep %d: %.2f GB/s\n", r, gbs);
    }
    printf("threads=%d bytes=%zu best=%.2f GB/s (chk %lld)\n", omp_get_max_threads(), bytes, best, chk & 1);
    return 0;
}
