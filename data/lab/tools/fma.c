// Peak FP32 FMA throughput of one core: 12 independent AVX-512 FMA chains (enough to cover latency x pipes)
#include <immintrin.h>
#include <stdio.h>
#include <time.h>
#include <omp.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(){
  long iters=200000000L/ 4;
  double best=0;
  for(int rep=0;rep<5;rep++){
    double t0=now(); float sink=0;
    #pragma omp parallel reduction(+:sink)
    {
      __m512 a[12]; __m512 b=_mm512_set1_ps(1.0000001f), c=_mm512_set1_ps(1e-7f);
      for(int i=0;i<12;i++) a[i]=_mm512_set1_ps((float)i);
      for(long n=0;n<iters;n++){
        #pragma GCC unroll 12
        for(int i=0;i<12;i++) a[i]=_mm512_fmadd_ps(a[i],b,c);
      }
      __m512 s=a[0]; for(int i=1;i<12;i++) s=_mm512_add_ps(s,a[i]);
      sink+=_mm512_reduce_add_ps(s);
    }
    double dt=now()-t0; int th=omp_get_max_threads();
    double gf=(double)iters*12*16*2*th/dt/1e9;
    if(gf>best)best=gf;
    printf("rep %d: %.1f GFLOP/s (%d threads) sink=%g\n",rep,gf,th,sink);
  }
  printf("best %.1f GFLOP/s\n",best);
}
